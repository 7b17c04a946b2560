"""NMI of a k-means clustering of the embeddings against the true labels, and NMI+ (Levi et al.).

NMI clusters into as many groups as there are classes; NMI+ into a multiple of that (e.g. 30x for
Omniglot), which rewards embeddings whose classes are made of several tight modes rather than one blob.
k-means is ``niter`` Lloyd iterations by faiss, or by torch on a GPU without a faiss GPU build (see
``engine``), ``restarts`` times from different initial centroids keeping the clustering of lowest
inertia (faiss's ``nredo``). NMI is scikit-learn's, normalised by the ``average`` of the two entropies:
``"arithmetic"`` (Manning et al.'s NMI, scikit-learn's default, used by Levi et al. and the
pytorch-metric-learning papers) or ``"geometric"`` (Le & Odobez's definition, ``I / sqrt(H(Y) H(C))``).

Initial centroids are random data points by default, as in pytorch-metric-learning and most DML code.
That init cannot undo a bad draw: two centroids drawn in one class and none in another stay that way, so
even perfectly separated classes can score NMI < 1 (3 separated blobs: 6 of 20 seeds; 10 blobs: all 20).
``init="k-means++"`` spreads the initial centroids and recovers separated classes, at a cost of roughly
a dozen Lloyd iterations on CPU at SOP scale (k = 11,316), which is why it is not the default; more
``restarts`` are the other remedy. ``nmi_over_seeds`` measures what is left: NMI's spread over k-means
seeds.
"""

from __future__ import annotations

from typing import Literal

import faiss
import numpy as np
from sklearn.metrics import normalized_mutual_info_score

from noisydml.metrics import torch_search
from noisydml.metrics.engine import Backend, resolve_engine
from noisydml.metrics.recall import flat_l2_index

DEFAULT_NITER = 20
KMeansInit = Literal["random", "k-means++"]
NMIAverage = Literal["arithmetic", "geometric"]
NMI_AVERAGES = ("arithmetic", "geometric")
_INIT_METHODS = {
    "random": faiss.ClusteringInitMethod_RANDOM,
    "k-means++": faiss.ClusteringInitMethod_KMEANS_PLUS_PLUS,
}
# faiss's seeds: a C int.
FAISS_SEEDS = 2**31


def kmeans_assignments(
    embeddings: np.ndarray,
    n_clusters: int,
    *,
    niter: int = DEFAULT_NITER,
    seed: int = 0,
    init: KMeansInit = "random",
    restarts: int = 1,
    use_gpu: bool | None = None,
    backend: Backend = "auto",
) -> np.ndarray:
    """The k-means cluster of every row of ``embeddings`` (float32, C-contiguous), the clustering of
    lowest inertia of ``restarts`` runs."""
    n, dim = embeddings.shape
    if not 1 <= n_clusters <= n:
        raise ValueError(f"n_clusters={n_clusters} for {n} embeddings; k-means needs 1 <= n_clusters <= {n}")
    if init not in _INIT_METHODS:
        raise ValueError(f"k-means init={init!r} is not one of {sorted(_INIT_METHODS)}")
    if not (isinstance(restarts, int) and restarts >= 1):
        raise ValueError(f"k-means restarts={restarts!r} must be an integer >= 1")
    engine = resolve_engine(backend, use_gpu)
    if engine.library == "torch":
        runs = [
            torch_search.kmeans(
                embeddings, n_clusters, niter=niter, seed=seed + r, init=init, device=engine.device
            )
            for r in range(restarts)
        ]
        return min(runs, key=lambda assignments: _inertia(embeddings, assignments, n_clusters))
    kmeans = faiss.Kmeans(
        dim,
        n_clusters,
        niter=niter,
        nredo=restarts,
        # faiss takes a signed 32-bit seed; a run's seed goes up to numpy's 2**32 - 1, and the seeds an NMI
        # over seeds derives above it. Below 2**31 the seed is unchanged.
        seed=seed % FAISS_SEEDS,
        init_method=_INIT_METHODS[init],
        # faiss would otherwise train on a random subset of 256 * k points whenever N/k is large (MNIST:
        # 10,000 points, 10 classes); every point must shape the clusters it is scored on.
        max_points_per_centroid=n,
        # Few points per cluster is the protocol, not a data shortage (SOP: ~5 per class, NMI+ fewer
        # still), so faiss's "please provide at least 39*k points" warning would only be noise.
        min_points_per_centroid=1,
    )
    if engine.gpu:
        # The engine's GPU alone (under DDP, this rank's): faiss.Kmeans(gpu=True) would spread over every GPU.
        kmeans.index = flat_l2_index(dim, engine.device)
    kmeans.train(embeddings)
    _, assignments = kmeans.assign(embeddings)
    return assignments


def _inertia(embeddings: np.ndarray, assignments: np.ndarray, n_clusters: int) -> float:
    """Sum of squared distances of the points to the mean of their cluster."""
    counts = np.bincount(assignments, minlength=n_clusters).astype(np.float64)
    sums = np.zeros((n_clusters, embeddings.shape[1]))
    np.add.at(sums, assignments, embeddings)
    means = sums / np.maximum(counts, 1)[:, None]
    return float(((embeddings - means[assignments]) ** 2).sum())


def cluster_nmi(
    embeddings: np.ndarray,
    labels: np.ndarray,
    n_clusters: int,
    *,
    niter: int = DEFAULT_NITER,
    seed: int = 0,
    init: KMeansInit = "random",
    restarts: int = 1,
    average: NMIAverage = "arithmetic",
    use_gpu: bool | None = None,
    backend: Backend = "auto",
) -> float:
    """NMI between a k-means clustering into ``n_clusters`` groups and ``labels``."""
    if average not in NMI_AVERAGES:
        raise ValueError(f"NMI average={average!r} is not one of {list(NMI_AVERAGES)}")
    assignments = kmeans_assignments(
        embeddings,
        n_clusters,
        niter=niter,
        seed=seed,
        init=init,
        restarts=restarts,
        use_gpu=use_gpu,
        backend=backend,
    )
    return float(normalized_mutual_info_score(labels, assignments, average_method=average))


def nmi_over_seeds(
    embeddings: np.ndarray, labels: np.ndarray, n_clusters: int, *, seeds: int, seed: int = 0, **options
) -> tuple[float, float]:
    """``(mean, std)`` of :func:`cluster_nmi` over the k-means seeds ``seed .. seed + seeds - 1`` (the
    sample standard deviation; 0 for one seed): how much of an NMI difference k-means alone can make."""
    if not (isinstance(seeds, int) and seeds >= 1):
        raise ValueError(f"nmi_seeds={seeds!r} must be an integer >= 1")
    # Restarts draw seeds seed + r; seeds spaced by the restarts keep the runs of different seeds apart.
    step = options.get("restarts", 1)
    values = [
        cluster_nmi(embeddings, labels, n_clusters, seed=seed + i * step, **options) for i in range(seeds)
    ]
    return float(np.mean(values)), float(np.std(values, ddof=1)) if seeds > 1 else 0.0
