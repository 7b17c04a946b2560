"""Mean average precision over the full ranking: BDML's face-retrieval metric (Table 4, MS-Celeb-1M).

BDML reports "the mean of average precision (mAP)" of retrieval on the clean test set, following
Wang & Tan (2018): every test item queries the others, which are ranked by distance, and

    AP = (1 / R) * sum_{k : rel(k)} P(k)

over the WHOLE ranking, R the number of relevant items (same class) and ``P(k)`` the precision of
the first k neighbours. This is the textbook AP of a ranking (``sklearn.metrics.average_precision_score``
with the negated distances as scores, when no two distances tie), not MAP@R, which stops at rank R.
Queries with nothing relevant have no AP and are left out, as in MAP@R.

The ranking comes from ``ties.ranked_chunks`` asked for every candidate, so memory is one chunk of
queries times the gallery size; the chunk is shrunk to keep that near ``MAX_CHUNK_ENTRIES``. Exactly tied
items count as the expectation over their orders (see ``ties``), as in Recall@K and MAP@R.
"""

from __future__ import annotations

import numpy as np

from noisydml.metrics.engine import Backend, resolve_engine
from noisydml.metrics.recall import GPU_MAX_K
from noisydml.metrics.ties import expected_average_precision, ranked_chunks

# Ranks held at once (x about 50 bytes with the distances and the tie groups): about 200 MB.
MAX_CHUNK_ENTRIES = 1 << 22


def mean_average_precision(
    gallery: np.ndarray,
    gallery_labels: np.ndarray,
    *,
    queries: np.ndarray | None = None,
    query_labels: np.ndarray | None = None,
    use_gpu: bool | None = None,
    backend: Backend = "auto",
) -> float:
    """mAP of ``queries`` ranking the whole ``gallery`` (float32, C-contiguous).

    With ``queries=None`` every gallery item is a query against all the others (itself excluded).
    """
    leave_one_out = queries is None
    if leave_one_out:
        query_labels = gallery_labels
    n_candidates = len(gallery) - leave_one_out
    if n_candidates < 1:
        raise ValueError(f"mAP needs at least one candidate per query; the gallery has {len(gallery)} items")
    # faiss's GPU search cannot return a full ranking longer than GPU_MAX_K; the CPU one can.
    if resolve_engine(backend, use_gpu).library == "faiss" and n_candidates + leave_one_out > GPU_MAX_K:
        use_gpu = False
    chunk_size = max(1, MAX_CHUNK_ENTRIES // (n_candidates + 1))
    ap_sum, counted = 0.0, 0
    for _, ranking in ranked_chunks(
        gallery,
        gallery_labels,
        n_candidates,
        queries=queries,
        query_labels=query_labels,
        chunk_size=chunk_size,
        use_gpu=use_gpu,
        backend=backend,
    ):
        relevant = ranking.matches.sum(axis=1)
        has_relevant = relevant > 0
        if has_relevant.any():
            ap_sum += float(
                expected_average_precision(
                    ranking.rows(has_relevant), relevant[has_relevant], full=True
                ).sum()
            )
        counted += int(has_relevant.sum())
    if counted == 0:
        raise ValueError(
            "map_full=True but no query has another item of its class in the gallery; "
            "pass map_full=False for this data"
        )
    return ap_sum / counted
