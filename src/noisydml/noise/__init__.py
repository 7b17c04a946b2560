"""Label-noise models (``conf/noise``), what they did to a run's labels, and the paper's noise theory."""

from noisydml.noise.models import (
    ClassConditionalNoise,
    ExactNoise,
    NoisyLabels,
    NoNoise,
    ToplineNoise,
    UniformNoise,
)
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
    "NoNoise",
    "NoisyLabels",
    "ToplineNoise",
    "UniformNoise",
    "finite_k_conditions",
    "finite_k_triplet_bound",
    "pair_flip_rates",
    "summarize",
    "triplet_noise_bound",
]
