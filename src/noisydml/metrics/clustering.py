"""NMI of a k-means clustering of the embeddings against the true labels, and NMI+ (Levi et al.).

NMI clusters into as many groups as there are classes; NMI+ into a multiple of that (e.g. 30x for
Omniglot), which rewards embeddings whose classes are made of several tight modes rather than one blob.
k-means is ``niter`` Lloyd iterations by faiss, or by torch on a GPU without a faiss GPU build (see
``engine``), and NMI is scikit-learn's (arithmetic normalisation).

Initial centroids are random data points by default, as in pytorch-metric-learning and most DML code.
That init cannot undo a bad draw: two centroids drawn in one class and none in another stay that way, so
even perfectly separated classes can score NMI < 1 (3 separated blobs: 6 of 20 seeds; 10 blobs: all 20).
``init="k-means++"`` spreads the initial centroids and recovers separated classes, at a cost of roughly
a dozen Lloyd iterations on CPU at SOP scale (k = 11,316), which is why it is not the default.
"""

from __future__ import annotations

from typing import Literal

import faiss
import numpy as np
from sklearn.metrics import normalized_mutual_info_score

from noisydml.metrics import torch_search
from noisydml.metrics.engine import Backend, resolve_engine

DEFAULT_NITER = 20
KMeansInit = Literal["random", "k-means++"]
_INIT_METHODS = {
    "random": faiss.ClusteringInitMethod_RANDOM,
    "k-means++": faiss.ClusteringInitMethod_KMEANS_PLUS_PLUS,
}


def kmeans_assignments(
    embeddings: np.ndarray,
    n_clusters: int,
    *,
    niter: int = DEFAULT_NITER,
    seed: int = 0,
    init: KMeansInit = "random",
    use_gpu: bool | None = None,
    backend: Backend = "auto",
) -> np.ndarray:
    """The k-means cluster of every row of ``embeddings`` (float32, C-contiguous)."""
    n, dim = embeddings.shape
    if not 1 <= n_clusters <= n:
        raise ValueError(f"n_clusters={n_clusters} for {n} embeddings; k-means needs 1 <= n_clusters <= {n}")
    if init not in _INIT_METHODS:
        raise ValueError(f"k-means init={init!r} is not one of {sorted(_INIT_METHODS)}")
    engine = resolve_engine(backend, use_gpu)
    if engine.library == "torch":
        return torch_search.kmeans(
            embeddings, n_clusters, niter=niter, seed=seed, init=init, device=engine.device
        )
    kmeans = faiss.Kmeans(
        dim,
        n_clusters,
        niter=niter,
        seed=seed,
        init_method=_INIT_METHODS[init],
        gpu=engine.gpu,
        # faiss would otherwise train on a random subset of 256 * k points whenever N/k is large (MNIST:
        # 10,000 points, 10 classes); every point must shape the clusters it is scored on.
        max_points_per_centroid=n,
        # Few points per cluster is the protocol, not a data shortage (SOP: ~5 per class, NMI+ fewer
        # still), so faiss's "please provide at least 39*k points" warning would only be noise.
        min_points_per_centroid=1,
    )
    kmeans.train(embeddings)
    _, assignments = kmeans.assign(embeddings)
    return assignments


def cluster_nmi(
    embeddings: np.ndarray,
    labels: np.ndarray,
    n_clusters: int,
    *,
    niter: int = DEFAULT_NITER,
    seed: int = 0,
    init: KMeansInit = "random",
    use_gpu: bool | None = None,
    backend: Backend = "auto",
) -> float:
    """NMI between a k-means clustering into ``n_clusters`` groups and ``labels``."""
    assignments = kmeans_assignments(
        embeddings, n_clusters, niter=niter, seed=seed, init=init, use_gpu=use_gpu, backend=backend
    )
    return float(normalized_mutual_info_score(labels, assignments))
