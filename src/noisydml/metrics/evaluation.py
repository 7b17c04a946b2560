"""Recall@K, NMI, NMI+, MAP@R and full-ranking mAP of one embedded split in one call, :func:`evaluate`.

Nothing here holds an N x N matrix: one exact kNN search, run in chunks of queries, feeds both Recall@K
and MAP@R, and k-means keeps only its k centroids.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from noisydml.metrics.clustering import DEFAULT_NITER, KMeansInit, NMIAverage, nmi_over_seeds
from noisydml.metrics.engine import Backend
from noisydml.metrics.map import mean_average_precision
from noisydml.metrics.map_at_r import relevant_counts
from noisydml.metrics.recall import DEFAULT_CHUNK_SIZE
from noisydml.metrics.ties import expected_average_precision, expected_recall_hits, ranked_chunks

__all__ = ["evaluate"]


def _to_numpy(x: torch.Tensor | np.ndarray) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def evaluate(
    embeddings: torch.Tensor | np.ndarray,
    labels: torch.Tensor | np.ndarray,
    *,
    recall_ks: Sequence[int] = (1, 2, 4, 8),
    nmi: bool = True,
    nmi_plus_factor: int | None = None,
    map_at_r: bool = True,
    map_full: bool = False,
    query_mask: torch.Tensor | np.ndarray | None = None,
    seed: int = 0,
    use_gpu: bool | None = None,
    backend: Backend = "auto",
    kmeans_niter: int = DEFAULT_NITER,
    kmeans_init: KMeansInit = "random",
    kmeans_restarts: int = 1,
    nmi_average: NMIAverage = "arithmetic",
    nmi_seeds: int = 1,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    timings: dict[str, float] | None = None,
) -> dict[str, float]:
    """Retrieval and clustering metrics of test embeddings, keyed ``"recall@K"``, ``"nmi"``, ``"nmi+"``,
    ``"map@r"``, ``"map"`` (each only when asked for).

    By default every item is a query and searches all the others (CUB, Cars, SOP). With ``query_mask``
    (In-Shop), the items where it is True are queries and search only the items where it is False; NMI
    then clusters all items together. Distances are exact L2, right for unnormalised embeddings too.
    Recall@K counts every query (one with no other item of its class is a miss); MAP@R averages over the
    queries that have at least one. Items at exactly equal distance count as the expectation over their
    orders (``ties``), so no metric depends on the order of the test set.

    ``map_full`` asks for the mean average precision over the whole ranking (BDML's mAP, see ``map``).
    ``nmi_plus_factor`` asks for NMI+ with ``factor x classes`` clusters (capped at the number of items).
    ``seed``, ``kmeans_niter``, ``kmeans_init`` and ``kmeans_restarts`` drive k-means (see
    ``clustering`` for why the init matters) and ``nmi_average`` normalises NMI (``"arithmetic"`` or
    ``"geometric"`` mean of the entropies). With ``nmi_seeds`` > 1, NMI and NMI+ are the means over that
    many k-means seeds from ``seed``, and ``"nmi_std"``, ``"nmi+_std"`` their spread. ``use_gpu=None``
    uses a GPU when there is one, and ``backend`` picks faiss or torch for the search and k-means
    (``engine``: by default faiss, except on a GPU that faiss cannot use).
    ``chunk_size`` bounds how many queries are searched at once. ``timings``, when given, is filled with
    the wall seconds of each part: ``"search"``, ``"map"``, ``"nmi"``, ``"nmi+"``.
    """
    if isinstance(embeddings, torch.Tensor):
        # numpy has no bfloat16, which a mixed-precision model may hand over.
        embeddings = embeddings.detach().float()
    embeddings = np.ascontiguousarray(_to_numpy(embeddings), dtype=np.float32)
    labels = _to_numpy(labels)
    if embeddings.ndim != 2 or labels.shape != (len(embeddings),):
        raise ValueError(
            f"embeddings of shape {embeddings.shape} and labels of shape {labels.shape}: "
            "pass embeddings as (N, dim) and labels as (N,)"
        )
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels have dtype {labels.dtype}; pass integer class ids")
    if not np.isfinite(embeddings).all():
        raise ValueError("embeddings contain NaN or inf; check the model's output before evaluating")
    if nmi_plus_factor is not None and not (isinstance(nmi_plus_factor, int) and nmi_plus_factor >= 1):
        raise ValueError(f"nmi_plus_factor={nmi_plus_factor} must be an integer >= 1, or None to skip NMI+")
    timings = {} if timings is None else timings

    if query_mask is None:
        queries, query_labels = None, labels
        gallery, gallery_labels = embeddings, labels
    else:
        query_mask = _to_numpy(query_mask)
        if query_mask.dtype != np.bool_ or query_mask.shape != labels.shape:
            raise ValueError(
                f"query_mask of dtype {query_mask.dtype} and shape {query_mask.shape}: "
                f"pass a boolean array of shape {labels.shape}, True for queries"
            )
        if query_mask.all() or not query_mask.any():
            raise ValueError(
                f"query_mask marks {int(query_mask.sum())} of {len(query_mask)} items as queries; "
                "query/gallery mode needs both queries (True) and gallery items (False)"
            )
        queries, query_labels = embeddings[query_mask], labels[query_mask]
        gallery, gallery_labels = embeddings[~query_mask], labels[~query_mask]
    leave_one_out = queries is None
    # In leave-one-out mode a query's own slot in the gallery is not a candidate.
    n_candidates = len(gallery) - leave_one_out

    results: dict[str, float] = {}
    recall_ks = tuple(recall_ks)
    for k in recall_ks:
        if not 1 <= k <= n_candidates:
            raise ValueError(
                f"recall_ks contains K={k} but each query has {n_candidates} candidate neighbours; "
                f"drop K={k} from recall_ks or evaluate on more items"
            )
    search_k = max(recall_ks, default=0)
    if map_at_r:
        r = relevant_counts(query_labels, gallery_labels, leave_one_out=leave_one_out)
        has_relevant = r > 0
        if not has_relevant.any():
            raise ValueError(
                "map_at_r=True but no query has another item of its class in the gallery; "
                "pass map_at_r=False for this data"
            )
        search_k = max(search_k, int(r.max()))

    if search_k > 0:
        started = time.perf_counter()
        hits = np.zeros(len(recall_ks))
        ap_sum = 0.0
        for start, ranking in ranked_chunks(
            gallery,
            gallery_labels,
            search_k,
            queries=queries,
            query_labels=query_labels,
            chunk_size=chunk_size,
            use_gpu=use_gpu,
            backend=backend,
        ):
            stop = start + len(ranking.matches)
            if recall_ks:
                hits += expected_recall_hits(ranking, recall_ks)
            if map_at_r:
                keep = has_relevant[start:stop]
                ap_sum += expected_average_precision(ranking.rows(keep), r[start:stop][keep]).sum()
        for k, h in zip(recall_ks, hits, strict=True):
            results[f"recall@{k}"] = float(h / len(query_labels))
        if map_at_r:
            results["map@r"] = float(ap_sum) / int(has_relevant.sum())
        timings["search"] = time.perf_counter() - started

    if map_full:
        started = time.perf_counter()
        results["map"] = mean_average_precision(
            gallery,
            gallery_labels,
            queries=queries,
            query_labels=query_labels,
            use_gpu=use_gpu,
            backend=backend,
        )
        timings["map"] = time.perf_counter() - started

    n_classes = len(np.unique(labels))
    clusterings = {"nmi": n_classes} if nmi else {}
    if nmi_plus_factor is not None:
        clusterings["nmi+"] = min(nmi_plus_factor * n_classes, len(embeddings))
    for key, n_clusters in clusterings.items():
        started = time.perf_counter()
        results[key], spread = nmi_over_seeds(
            embeddings,
            labels,
            n_clusters,
            seeds=nmi_seeds,
            seed=seed,
            niter=kmeans_niter,
            init=kmeans_init,
            restarts=kmeans_restarts,
            average=nmi_average,
            use_gpu=use_gpu,
            backend=backend,
        )
        if nmi_seeds > 1:
            results[f"{key}_std"] = spread
        timings[key] = time.perf_counter() - started
    return results
