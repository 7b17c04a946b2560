"""Label-noise models (``conf/noise``), what they did to a run's labels, and the paper's noise theory."""

from noisydml.noise.label_list import LabelListNoise
from noisydml.noise.models import (
    ClassConditionalNoise,
    ExactNoise,
    NoisyLabels,
    NoNoise,
    ToplineNoise,
    UniformNoise,
)
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
    "LabelListNoise",
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
