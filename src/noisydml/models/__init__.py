"""Backbones: trunks (torchvision ImageNet nets, small MNIST nets, MNIST-1D's 1-D CNN, an MLP) under one
embedding head, and the Bayes-by-Backprop MLP of BDML."""

from noisydml.models.bayesian import BayesianLinear, BayesianMLP
from noisydml.models.embedding import EmbeddingNet
from noisydml.models.small import CNN1D, MLP, LeNet, SmallCNN
from noisydml.models.torchvision_trunks import torchvision_trunk

__all__ = [
    "BayesianLinear",
    "BayesianMLP",
    "CNN1D",
    "EmbeddingNet",
    "LeNet",
    "MLP",
    "SmallCNN",
    "torchvision_trunk",
]
