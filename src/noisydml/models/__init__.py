"""Backbones: trunks (torchvision ImageNet nets, small MNIST nets, an MLP) under one embedding head."""

from noisydml.models.embedding import EmbeddingNet
from noisydml.models.small import MLP, LeNet, SmallCNN
from noisydml.models.torchvision_trunks import torchvision_trunk

__all__ = ["EmbeddingNet", "LeNet", "MLP", "SmallCNN", "torchvision_trunk"]
