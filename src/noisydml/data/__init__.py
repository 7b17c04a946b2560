"""Data sets in their published layouts, the P x K sampler and the data module."""

from noisydml.data.base import DatasetLayoutError, LabeledDataset, Splits, TensorDataset
from noisydml.data.datamodule import MetricDataModule
from noisydml.data.digits import Digits
from noisydml.data.mnist5k import MNIST5k
from noisydml.data.sampler import PKSampler

__all__ = [
    "DatasetLayoutError",
    "Digits",
    "LabeledDataset",
    "MNIST5k",
    "MetricDataModule",
    "PKSampler",
    "Splits",
    "TensorDataset",
]
