"""PRISM's small-cluster noise (Liu et al., CVPR 2021, Sec. 5.1): whole classes dissolve into small
clusters, and each cluster joins one surviving class.

What is known of PRISM's own lists (``datalist/*_smallclusternoised_train.csv`` of their release): in the
CUB list at 25%, 25 of the 100 training classes are dissolved (25.3% of the images) into 641 clusters,
mean size 2.3, 370 of them single images. The files cannot tell whether the clusters came from features
or at random; a later public re-implementation runs k-means with n/2 clusters on each dissolved class's
features. Both are here (``clusters``):

- ``random`` (the default): each dissolved class of n images is split at random into ceil(n/2) non-empty
  clusters. The default because the noisy labels are then a function of (labels, rate, seed) alone, as
  for every other noise model: every method and backbone of a comparison trains on the same labels, and
  a run needs no network to draw them.
- ``kmeans``: k-means (faiss) with ceil(n/2) clusters on the features a frozen ``backbone`` gives each
  dissolved class's images (the test transform, no gradient), so a cluster holds look-alike images, the
  harder and more web-like case. The labels then also depend on the backbone's initial weights.
"""

from __future__ import annotations

import logging

import faiss
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from noisydml.noise.models import NoisyLabels, _check_labels, _check_rate, _check_seed, _round_half_even
from noisydml.noise.protocols import TrainingSplit
from noisydml.utils.checks import BadValue

log = logging.getLogger(__name__)

CLUSTERINGS = ("random", "kmeans")


class SmallClusterNoise:
    """Dissolve ``round(rate * C)`` of the C training classes (half to even), chosen at random; split each
    into ceil(n/2) clusters (``clusters``: ``random`` or ``kmeans`` on ``backbone`` features, see the
    module docstring); relabel every cluster to one surviving class, chosen uniformly. Surviving classes
    keep their labels. ``labels.csv`` keeps each sample's true class beside the observed one.
    """

    def __init__(
        self,
        rate: float,
        seed: int,
        clusters: str = "random",
        backbone: nn.Module | None = None,
        batch_size: int = 256,
    ):
        self.rate = _check_rate("noise.rate", rate)
        _check_seed(seed)
        self.seed = seed
        if clusters not in CLUSTERINGS:
            raise ValueError(f"noise.clusters={clusters!r} is not one of {CLUSTERINGS}")
        if clusters == "kmeans" and backbone is None:
            raise BadValue(
                "backbone",
                "=null, but clusters=kmeans clusters a backbone's features; give a backbone (as the "
                "small_cluster_kmeans noise config does: backbone=${backbone}, the run's), or "
                "clusters=random",
            )
        self.clusters = clusters
        self.backbone = backbone
        self.batch_size = batch_size
        self.report: dict = {}

    def apply(self, labels: np.ndarray, features: np.ndarray | None = None) -> NoisyLabels:
        """The noisy labels; ``features`` (one row per sample) are needed for ``clusters=kmeans``."""
        labels = _check_labels(labels)
        if self.clusters == "kmeans" and features is None:
            raise ValueError("noise.clusters=kmeans needs the training images' features: use apply_to(train)")
        rng = np.random.default_rng(self.seed)
        classes = np.unique(labels)
        dissolve = int(_round_half_even(np.asarray(self.rate * len(classes))))
        if dissolve >= len(classes) - 1:
            # One class left would hold every label: no pair of another class, nothing to learn.
            left = (
                "none to merge them into" if dissolve >= len(classes) else "one, which every label would be"
            )
            raise ValueError(
                f"noise.rate={self.rate} dissolves {dissolve} of the {len(classes)} training classes and "
                f"leaves {left}; metric learning needs 2 classes: lower noise.rate"
            )
        dissolved = np.sort(rng.choice(classes, size=dissolve, replace=False))
        surviving = np.setdiff1d(classes, dissolved)
        observed = labels.copy()
        sizes = []
        for c in dissolved:
            members = np.flatnonzero(labels == c)
            count = (len(members) + 1) // 2
            if self.clusters == "kmeans":
                cluster = _kmeans(features[members], count, self.seed)
            else:
                cluster = _random_partition(len(members), count, rng)
            observed[members] = rng.choice(surviving, size=count)[cluster]
            sizes += np.bincount(cluster, minlength=count).tolist()
        sizes = np.asarray([s for s in sizes if s > 0])
        self.report = {
            "dissolved_classes": dissolved.tolist(),
            "num_clusters": len(sizes),
            "mean_cluster_size": float(sizes.mean()) if len(sizes) else None,
            "single_image_clusters": int((sizes == 1).sum()),
        }
        log.info(
            "small-cluster noise: %d of %d classes dissolved into %d clusters (%d single images)",
            dissolve,
            len(classes),
            len(sizes),
            self.report["single_image_clusters"],
        )
        return NoisyLabels(np.arange(len(labels)), labels.copy(), observed)

    def apply_to(self, train: TrainingSplit) -> NoisyLabels:
        """The noisy labels of a training split, embedding it first when ``clusters=kmeans``."""
        features = embed_frozen(self.backbone, train, self.batch_size) if self.clusters == "kmeans" else None
        return self.apply(train.labels, features)


def _random_partition(n: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """A cluster id in ``0..count-1`` for each of n items, every cluster non-empty: a random ``count`` of
    the items found one cluster each, the others join a cluster chosen uniformly."""
    cluster = np.empty(n, dtype=np.int64)
    order = rng.permutation(n)
    cluster[order[:count]] = np.arange(count)
    cluster[order[count:]] = rng.integers(0, count, size=n - count)
    return cluster


def _kmeans(features: np.ndarray, count: int, seed: int) -> np.ndarray:
    """Each row's k-means cluster, ``count`` centroids (a cluster may come out empty)."""
    features = np.ascontiguousarray(features, dtype=np.float32)
    if count == 1:
        return np.zeros(len(features), dtype=np.int64)
    # faiss warns below 39 points per centroid; n/2 centroids is the protocol, so the warning says nothing.
    # Best of 10 starts: with a centroid per two images one start often leaves a pair split.
    kmeans = faiss.Kmeans(features.shape[1], count, niter=20, nredo=10, seed=seed, verbose=False)
    kmeans.cp.min_points_per_centroid = 1
    kmeans.train(features)
    _, assigned = kmeans.index.search(features, 1)
    return assigned[:, 0].astype(np.int64)


def embed_frozen(backbone: nn.Module, train: TrainingSplit, batch_size: int) -> np.ndarray:
    """Every item of ``train`` (its test transform) through ``backbone`` in eval mode, without gradient."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    backbone = backbone.to(device).eval()
    loader = DataLoader(train.eval_view(), batch_size=batch_size, shuffle=False)
    with torch.no_grad():
        parts = [backbone(x.to(device)).float().cpu() for x, _, _ in loader]
    return torch.cat(parts).numpy()
