"""Label-noise models (``conf/noise``), what they did to a run's labels, and the paper's noise theory."""

from noisydml.noise.instance_dependent import InstanceDependentNoise
from noisydml.noise.label_list import LabelListNoise
from noisydml.noise.models import (
    ClassConditionalNoise,
    ExactNoise,
    NoisyLabels,
    NoNoise,
    ToplineNoise,
    UniformNoise,
)
from noisydml.noise.nearest_class import NearestClassNoise
from noisydml.noise.small_cluster import SmallClusterNoise
from noisydml.noise.summary import summarize
from noisydml.noise.theory import (
    finite_k_conditions,
    finite_k_triplet_bound,
    pair_flip_rates,
    triplet_noise_bound,
)

__all__ = [
    "ClassConditionalNoise",
    "ExactNoise",
    "InstanceDependentNoise",
    "LabelListNoise",
    "NearestClassNoise",
    "NoNoise",
    "NoisyLabels",
    "SmallClusterNoise",
    "ToplineNoise",
    "UniformNoise",
    "finite_k_conditions",
    "finite_k_triplet_bound",
    "pair_flip_rates",
    "summarize",
    "triplet_noise_bound",
]
