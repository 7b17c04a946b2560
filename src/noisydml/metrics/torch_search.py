"""Exact kNN and k-means in torch: the evaluation path on a GPU that needs no faiss GPU build.

The arithmetic is faiss's: squared L2 distances as ``|q|^2 + |g|^2 - 2<q, g>`` from one float32
matrix product per chunk of queries (TF32 is switched off for it, so the ranking is that of fp32
distances), then ``torch.topk``. Exact ties go to the lower index, as in faiss's CPU search, also where a
tie straddles rank k (``topk`` alone picks among tied items arbitrarily). Rankings equal faiss's except
where two distances differ only by float32 rounding (near-ties), whose order depends on the order of
summation inside the matrix product.

k-means is Lloyd's algorithm with faiss's conventions: initial centroids are distinct random points
(or k-means++), a cluster that empties is refilled by splitting a large one (faiss's
``split_clusters``), and it stops early once an iteration changes no assignment and splits nothing,
since every later iteration would repeat the last. Random draws come from a CPU generator seeded by
``seed``, so a clustering is the same on every run and device; it is not faiss's clustering (faiss
draws its own way), so NMI agrees with faiss's within the spread that k-means initialisation gives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import torch

# Perturbation of a split centroid, as faiss's Clustering uses.
_SPLIT_EPS = 1.0 / 1024.0
# Points x centroids distances held at once while assigning: 64 M floats, 256 MB.
_ASSIGN_ENTRIES = 1 << 26


@contextlib.contextmanager
def _fp32_matmul() -> Iterator[None]:
    """Exact float32 matrix products inside: a caller may have allowed TF32 for training."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def _squared_distances(
    queries: torch.Tensor, gallery: torch.Tensor, gallery_sq: torch.Tensor
) -> torch.Tensor:
    query_sq = (queries * queries).sum(dim=1, keepdim=True)
    return torch.addmm(query_sq + gallery_sq, queries, gallery.T, alpha=-2.0)


def knn_chunks(
    gallery: np.ndarray,
    k: int,
    *,
    queries: np.ndarray | None,
    chunk_size: int,
    device: str,
) -> Iterator[tuple[int, np.ndarray]]:
    """``recall.neighbour_chunks`` in torch: ``(start, neighbours, distances)`` per chunk of queries,
    nearest first.

    With ``queries=None`` every gallery item queries the others: its own index is excluded (set to an
    infinite distance), its duplicates are not.
    """
    with _fp32_matmul(), torch.no_grad():
        gallery_t = torch.from_numpy(gallery).to(device)
        gallery_sq = (gallery_t * gallery_t).sum(dim=1)
        queries_t = gallery_t if queries is None else torch.from_numpy(queries).to(device)
        for start in range(0, len(queries_t), chunk_size):
            chunk = queries_t[start : start + chunk_size]
            distances = _squared_distances(chunk, gallery_t, gallery_sq)
            if queries is None:
                rows = torch.arange(len(chunk), device=device)
                distances[rows, rows + start] = float("inf")
            columns = _nearest_by_index(distances, k)
            yield start, columns.cpu().numpy(), torch.gather(distances, 1, columns).cpu().numpy()


def _nearest_by_index(distances: torch.Tensor, k: int) -> torch.Tensor:
    """Per row, the columns of the ``k`` smallest distances, nearest first, exact ties in index order."""
    values, columns = torch.topk(distances, k, dim=1, largest=False, sorted=True)
    kth = values[:, -1:]
    tied = distances == kth
    # Rows where more items tie with the k-th distance than fit: keep the lowest-indexed ones.
    straddling = (tied.sum(dim=1) > (values == kth).sum(dim=1)).nonzero().flatten()
    if len(straddling):
        rows, row_tied = distances[straddling], tied[straddling]
        room = k - (rows < kth[straddling]).sum(dim=1, keepdim=True)
        keep = (rows < kth[straddling]) | (row_tied & (row_tied.cumsum(dim=1) <= room))
        columns = columns.clone()
        columns[straddling] = keep.nonzero()[:, 1].view(len(straddling), k)
    # Index order first, then a stable sort by distance: ties keep index order.
    columns = columns.sort(dim=1).values
    order = torch.sort(torch.gather(distances, 1, columns), dim=1, stable=True).indices
    return torch.gather(columns, 1, order)


def _assign(points: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """The nearest centroid of every point (squared L2), in chunks of points."""
    centroid_sq = (centroids * centroids).sum(dim=1)
    chunk = max(1, _ASSIGN_ENTRIES // len(centroids))
    parts = []
    for start in range(0, len(points), chunk):
        block = points[start : start + chunk]
        # |p|^2 is the same for every centroid of a row, so it does not change the argmin.
        scores = torch.addmm(centroid_sq, block, centroids.T, alpha=-2.0)
        parts.append(scores.argmin(dim=1))
    return torch.cat(parts)


def _kmeans_plus_plus(points: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
    """k-means++ seeding (Arthur & Vassilvitskii 2007): each next centroid a point drawn with
    probability proportional to its squared distance to the nearest centroid so far."""
    n = len(points)
    uniforms = torch.rand(k, generator=generator, dtype=torch.float64).to(points.device)
    first = int(torch.randint(n, (1,), generator=generator))
    chosen = torch.empty(k, dtype=torch.long, device=points.device)
    chosen[0] = first
    point_sq = (points * points).sum(dim=1)
    nearest = (point_sq + point_sq[first] - 2.0 * points @ points[first]).clamp_(min=0).double()
    for i in range(1, k):
        cumulative = torch.cumsum(nearest, dim=0)
        # Inverse CDF on the device: no host round trip per centroid.
        pick = torch.searchsorted(cumulative, uniforms[i] * cumulative[-1]).clamp_(max=n - 1)
        chosen[i] = pick
        candidate = points[pick]
        distance = (point_sq + (candidate * candidate).sum() - 2.0 * points @ candidate).clamp_(min=0)
        nearest = torch.minimum(nearest, distance.double())
    return points[chosen].clone()


def _split_empty(centroids: torch.Tensor, counts: torch.Tensor, n: int, generator: torch.Generator) -> None:
    """Refill every empty cluster by splitting a populated one in two, as faiss's ``split_clusters``:
    the donor is drawn with probability (size - 1) / (n - k), and both halves move apart by eps
    along alternating signs of every dimension."""
    sizes = counts.cpu().numpy().astype(np.float64)
    k = len(sizes)
    signs = torch.ones(centroids.shape[1], device=centroids.device)
    signs[1::2] = -1.0
    for empty in np.flatnonzero(sizes == 0):
        while True:
            donor = int(torch.randint(k, (1,), generator=generator))
            if sizes[donor] > 1 and float(torch.rand(1, generator=generator)) < (sizes[donor] - 1) / (n - k):
                break
        centroids[empty] = centroids[donor] * (1 + _SPLIT_EPS * signs)
        centroids[donor] = centroids[donor] * (1 - _SPLIT_EPS * signs)
        sizes[empty] = sizes[donor] // 2
        sizes[donor] -= sizes[empty]


def kmeans(
    embeddings: np.ndarray,
    n_clusters: int,
    *,
    niter: int,
    seed: int,
    init: str,
    device: str,
) -> np.ndarray:
    """The cluster of every row of ``embeddings`` after at most ``niter`` Lloyd iterations."""
    generator = torch.Generator().manual_seed(seed)
    with _fp32_matmul(), torch.no_grad():
        points = torch.from_numpy(embeddings).to(device)
        n = len(points)
        if init == "k-means++":
            centroids = _kmeans_plus_plus(points, n_clusters, generator)
        else:
            centroids = points[torch.randperm(n, generator=generator)[:n_clusters].to(device)].clone()
        assignments = _assign(points, centroids)
        for _ in range(niter):
            counts = torch.bincount(assignments, minlength=n_clusters)
            sums = torch.zeros_like(centroids).index_add_(0, assignments, points)
            centroids = sums / counts.clamp(min=1).unsqueeze(1).to(points.dtype)
            split = n_clusters < n and bool((counts == 0).any())
            if split:
                _split_empty(centroids, counts, n, generator)
            updated = _assign(points, centroids)
            # After a split the same assignments can still move on: the next split draws another donor.
            if not split and torch.equal(updated, assignments):
                break
            assignments = updated
        return assignments.cpu().numpy()
