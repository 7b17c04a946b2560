"""Nearest-class label noise, the deep-metric-learning variant of instance-dependent noise of Galanakis,
Zabulis and Argyros, "Nearest neighbor-based data denoising for deep metric learning" (VISAPP 2024; the
generator in their released code, which names its output ``instance_dependent_noise``).

Their rule: in every class a random share of the samples is chosen to change; each chosen sample takes the
label of its nearest neighbour of another class among the samples not chosen, in a feature space (theirs:
a trained network's features). A wrong label is then always that of a look-alike sample, with no
classifier to train. Here the feature space is the config's (``features``): the flattened inputs, or a
frozen ``backbone``'s features as ``small_cluster_kmeans`` embeds them; distances are Euclidean (faiss).

Departures: they change ``max(1, int(rate * n_c))`` samples of class c and skip a class that would change
entirely; here ``round(rate * n_c)`` (half to even, as every count of this package, so rate 0 is clean),
at most ``n_c - 1``, so every class keeps a sample to be the neighbour of others.
"""

from __future__ import annotations

import logging

import faiss
import numpy as np
from torch import nn
from torch.utils.data import DataLoader

from noisydml.noise.models import (
    NoisyLabels,
    _check_labels,
    _check_rate,
    _check_seed,
    _flippable_classes,
    _random_ranks,
    _round_half_even,
    warn_high_rate,
)
from noisydml.noise.protocols import TrainingSplit
from noisydml.noise.small_cluster import embed_frozen
from noisydml.utils.unread import Parts

log = logging.getLogger(__name__)

FEATURES = ("inputs", "backbone")


class NearestClassNoise:
    """Relabel ``round(rate * n_c)`` random samples of every class c (at most ``n_c - 1``) to the label of
    their nearest neighbour of another class among the unchosen samples, in the ``features`` space (see
    the module docstring): ``inputs`` (flattened, with the test transform) or ``backbone`` (a frozen
    network, as initialised)."""

    def __init__(
        self,
        rate: float,
        seed: int,
        features: str = "inputs",
        backbone: nn.Module | None = None,
        batch_size: int = 256,
    ):
        self.rate = _check_rate("noise.rate", rate)
        # Flips go to one chosen class each, so the rate has no uniform bound; past one half it is said.
        warn_high_rate("noise.rate", self.rate)
        _check_seed(seed)
        self.seed = seed
        if features not in FEATURES:
            raise ValueError(f"noise.features={features!r} is not one of {FEATURES}")
        if features == "backbone" and backbone is None:
            raise ValueError(
                "noise.features=backbone embeds the samples with noise.backbone, but it is null; set "
                "noise.backbone=${backbone} (the run's, as initialised) or noise.features=inputs"
            )
        self.features = features
        self.backbone = backbone
        self.batch_size = batch_size
        self.report: dict = {}

    def unread_keys(self, parts: Parts) -> dict[str, str]:
        """``backbone`` where the samples are compared by their inputs (``noisydml.utils.unread``)."""
        if self.features == "backbone" or self.backbone is None:
            return {}
        return {
            "backbone": "embeds the samples for their nearest classes, but {node}.features=inputs compares "
            "their inputs, so nothing reads it; drop {key}, or compare embeddings: {node}.features=backbone"
        }

    def apply(self, labels: np.ndarray, features: np.ndarray) -> NoisyLabels:
        """The noisy labels, given one feature row per sample."""
        labels = _check_labels(labels)
        _flippable_classes(labels, type(self).__name__)
        features = np.ascontiguousarray(np.asarray(features, dtype=np.float32).reshape(len(labels), -1))
        classes, class_index = np.unique(labels, return_inverse=True)
        counts = np.bincount(class_index)
        change = np.minimum(_round_half_even(self.rate * counts), counts - 1)
        rng = np.random.default_rng(self.seed)
        chosen = _random_ranks(class_index, counts, rng) < change[class_index]
        observed = labels.copy()
        for c in range(len(classes)):
            queries = np.flatnonzero(chosen & (class_index == c))
            if not len(queries):
                continue
            neighbours = np.flatnonzero(~chosen & (class_index != c))
            index = faiss.IndexFlatL2(features.shape[1])
            index.add(features[neighbours])
            _, nearest = index.search(features[queries], 1)
            observed[queries] = labels[neighbours[nearest[:, 0]]]
        self.report = {"features": self.features, "flips": int(chosen.sum())}
        log.info(
            "nearest-class noise: %d of %d labels moved to a neighbour's class", chosen.sum(), len(labels)
        )
        return NoisyLabels(np.arange(len(labels)), labels.copy(), observed)

    def apply_to(self, train: TrainingSplit) -> NoisyLabels:
        """The noisy labels of a training split, in the configured feature space."""
        if self.features == "backbone":
            features = embed_frozen(self.backbone, train, self.batch_size)
        else:
            loader = DataLoader(train.eval_view(), batch_size=self.batch_size, shuffle=False)
            features = np.concatenate([x.float().reshape(len(x), -1).numpy() for x, _, _ in loader])
        return self.apply(train.labels, features)
