"""Recall@K, and the chunked exact nearest-neighbour search it shares with MAP@R.

Distances are exact squared L2 (faiss ``IndexFlatL2``, or the same arithmetic in torch: see
``engine``), so the ranking is right for embeddings that are
not on the unit sphere (BDML's are not). Two caveats come with any float32 kNN:

- Ties: items at exactly the same distance (duplicate embeddings) come back in an order faiss does not
  specify; ``ties`` scores Recall@K and MAP@R as their expectation over the orders of tied items, so
  the order of the test set does not matter. Duplicates of a query are kept as neighbours: only the
  query's own index is removed.
- faiss computes ``|x|^2 + |y|^2 - 2<x, y>`` in float32 for batches of queries, so the query's distance
  to itself need not come out as exactly 0 and a near-duplicate may rank ahead of it. Removing the query
  by index rather than by rank makes that harmless.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence

import faiss
import numpy as np

from noisydml.metrics import torch_search
from noisydml.metrics.engine import Backend, resolve_engine

DEFAULT_CHUNK_SIZE = 4096
# faiss's GPU k-selection handles at most this many neighbours per query.
GPU_MAX_K = 2048


def flat_l2_index(dim: int, device: str = "cpu") -> faiss.Index:
    """An empty exact L2 index of ``dim``-dimensional vectors on ``device``: ``"cpu"``, or ``"cuda:N"`` for
    faiss's GPU index on GPU N (the numbering torch uses)."""
    if device == "cpu":
        return faiss.IndexFlatL2(dim)
    resources = faiss.StandardGpuResources()
    config = faiss.GpuIndexFlatConfig()
    config.device = int(device.split(":")[1])
    index = faiss.GpuIndexFlatL2(resources, dim, config)
    # The Python wrapper of GpuIndexFlatL2 does not keep its resources alive; the index must.
    index.referenced_objects = [resources]
    return index


def drop_self(
    neighbours: np.ndarray, query_ids: np.ndarray, distances: np.ndarray | None = None
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Remove each query's own index from its row of ``k + 1`` neighbours, leaving ``k`` (and the same
    column of ``distances``, when given: then both are returned).

    A row without the query (more than ``k`` duplicates tied with it at distance 0, so it was cut) drops
    its last, farthest neighbour instead, which keeps every row at ``k`` true non-self neighbours.
    """
    is_self = neighbours == query_ids[:, None]
    is_self[~is_self.any(axis=1), -1] = True
    shape = (len(neighbours), neighbours.shape[1] - 1)
    if distances is None:
        return neighbours[~is_self].reshape(shape)
    return neighbours[~is_self].reshape(shape), distances[~is_self].reshape(shape)


def neighbour_chunks(
    gallery: np.ndarray,
    k: int,
    *,
    queries: np.ndarray | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    use_gpu: bool | None = None,
    backend: Backend = "auto",
    with_distances: bool = False,
) -> Iterator[tuple[int, np.ndarray]] | Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Yield ``(start, neighbours)``: gallery indices of the ``k`` nearest neighbours of queries
    ``start .. start + len(neighbours)``, nearest first; ``with_distances``: ``(start, neighbours,
    distances)``, the squared L2 distances the search ranked by.

    With ``queries=None`` every gallery item is a query and its own index is excluded (leave-one-out);
    otherwise the queries search the gallery and nothing is excluded. Only one chunk of results lives in
    memory at a time: ``chunk_size * (k + 1) * 12`` bytes (indices and faiss's distances); the torch
    engine also holds a chunk's distances to the whole gallery, ``chunk_size * len(gallery) * 4`` bytes.
    """
    leave_one_out = queries is None
    if leave_one_out:
        queries = gallery
    search_k = k + 1 if leave_one_out else k
    if not 1 <= k <= len(gallery) - leave_one_out:
        excluded = " (each query excluded)" if leave_one_out else ""
        raise ValueError(
            f"k={k} neighbours asked of a gallery of {len(gallery)} items{excluded}; "
            f"ask for 1 <= k <= {len(gallery) - leave_one_out}"
        )
    if chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size} must be a positive number of queries")
    engine = resolve_engine(backend, use_gpu)
    if engine.library == "torch":
        own_queries = None if leave_one_out else queries
        for start, neighbours, distances in torch_search.knn_chunks(
            gallery, k, queries=own_queries, chunk_size=chunk_size, device=engine.device
        ):
            yield (start, neighbours, distances) if with_distances else (start, neighbours)
        return
    device = engine.device
    if engine.gpu and search_k > GPU_MAX_K:
        warnings.warn(
            f"k={search_k} exceeds faiss's GPU limit of {GPU_MAX_K} neighbours; searching on the CPU instead",
            stacklevel=2,
        )
        device = "cpu"
    index = flat_l2_index(gallery.shape[1], device)
    index.add(gallery)
    for start in range(0, len(queries), chunk_size):
        chunk = queries[start : start + chunk_size]
        distances, neighbours = index.search(chunk, search_k)
        if leave_one_out:
            neighbours, distances = drop_self(neighbours, np.arange(start, start + len(chunk)), distances)
        yield (start, neighbours, distances) if with_distances else (start, neighbours)


def recall_hits(matches: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """For each K, how many rows of ``matches`` (query x neighbour rank, True where the neighbour shares
    the query's class) have a True among their first K columns."""
    any_match = matches.any(axis=1)
    first_match = np.where(any_match, matches.argmax(axis=1), matches.shape[1])
    return np.array([np.count_nonzero(first_match < k) for k in ks], dtype=np.int64)
