"""Exact distance ties: Recall@K and MAP@R as their expected value over the orders of the tied items.

Items at exactly the same distance from a query (duplicate embeddings; a collapsed model maps whole
classes, or everything, to one point) have no order of their own. A search returns them in some order
(faiss: by index), so a metric that took that order would depend on the order of the test set: a
constant embedding of 50 classes of 10 would score R@1 = R@8 = MAP@R = .020 with the labels sorted, and
R@1 = .018, R@8 = .128, MAP@R = .006 shuffled.

The rule here: every order of a group of tied items is equally likely, and a metric is its expectation
over those orders, in closed form (hypergeometric for Recall@K, pair counts for MAP@R). Why this rule:
it is the plain metric wherever nothing ties, so untied results do not change; it is what a random
tie-break gives on average, so it favours neither a model nor the data's order; and unlike counting
ties pessimistically (irrelevant items first), it does not mark down a good model for duplicate images
in a test set, while it still scores a collapsed model at chance (constant embedding: R@1 = (n_c - 1) /
(N - 1), the rate of drawing a same-class item at random).

A group straddling the last rank the search returned may reach beyond it: ``ranked_chunks`` then
searches those queries again, deeper, until the group closes, so every group's size and its number of
relevant items are whole. Ties are exact float32 equality of the distances the search computed; a
deeper search re-ranks its queries from its own distances, so a ranking is always one search's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

import numpy as np
from scipy.special import gammaln

from noisydml.metrics.engine import Backend
from noisydml.metrics.recall import drop_self, neighbour_chunks

# Neighbour indices held at once by a deeper search (x 16 bytes with distances): about 270 MB.
_DEEP_ENTRIES = 1 << 24


@dataclass(frozen=True)
class Ranking:
    """The first ``width`` ranks of a chunk of queries (rows), with the tie group of every rank.

    ``matches``: the item at that rank shares the query's class. ``start``: the first rank of its tie
    group (0-based). ``size`` and ``relevant``: how many items the group holds and how many of them share
    the query's class, items past ``width`` included. ``before``: relevant items ranked before the group.
    """

    matches: np.ndarray
    start: np.ndarray
    size: np.ndarray
    relevant: np.ndarray
    before: np.ndarray

    def rows(self, mask: np.ndarray) -> Ranking:
        """The rows where ``mask`` is True."""
        return Ranking(*(getattr(self, f.name)[mask] for f in fields(self)))


def tie_groups(
    distances: np.ndarray,
    matches: np.ndarray,
    extra_size: np.ndarray | None = None,
    extra_relevant: np.ndarray | None = None,
) -> Ranking:
    """The :class:`Ranking` of rows of ``distances`` (ascending) and ``matches``, both ``n x width``.

    ``extra_size`` and ``extra_relevant`` count, per row, the items past ``width`` tied with the last
    rank, and the relevant ones among them (0 when not given).
    """
    n, width = distances.shape
    ranks = np.broadcast_to(np.arange(width), (n, width))
    first = np.ones((n, width), dtype=bool)
    first[:, 1:] = distances[:, 1:] != distances[:, :-1]
    if first.all() and (extra_size is None or not extra_size.any()):
        # No ties (the usual case): every item is its own group.
        hits = np.cumsum(matches, axis=1)
        return Ranking(
            matches, ranks, np.ones((n, width), dtype=np.int64), matches.astype(np.int64), hits - matches
        )
    last = np.ones((n, width), dtype=bool)
    last[:, :-1] = first[:, 1:]
    start = np.maximum.accumulate(np.where(first, ranks, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, ranks, width - 1)[:, ::-1], axis=1)[:, ::-1]
    hits = np.concatenate([np.zeros((n, 1), dtype=np.int64), np.cumsum(matches, axis=1)], axis=1)
    before = np.take_along_axis(hits, start, axis=1)
    size = end - start + 1
    relevant = np.take_along_axis(hits, end + 1, axis=1) - before
    if extra_size is not None:
        open_group = end == width - 1
        size = size + open_group * extra_size[:, None]
        relevant = relevant + open_group * extra_relevant[:, None]
    return Ranking(matches, start, size, relevant, before)


def _log_choose(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def expected_recall_hits(ranking: Ranking, ks: Sequence[int]) -> np.ndarray:
    """For each K, the expected number of rows with a relevant item among their first K ranks."""
    hits = np.zeros(len(ks))
    for i, k in enumerate(ks):
        start, size = ranking.start[:, k - 1], ranking.size[:, k - 1]
        relevant, before = ranking.relevant[:, k - 1], ranking.before[:, k - 1]
        # The group at rank K puts `slots` of its items within K, a uniform draw without replacement:
        # none of them is relevant with probability C(size - relevant, slots) / C(size, slots).
        slots = k - start
        irrelevant = size - relevant
        possible = irrelevant >= slots
        safe = np.where(possible, irrelevant, slots)
        miss = np.where(possible, np.exp(_log_choose(safe, slots) - _log_choose(size, slots)), 0.0)
        hits[i] = np.where(before > 0, 1.0, 1.0 - miss).sum()
    return hits


def expected_average_precision(ranking: Ranking, r: np.ndarray, *, full: bool = False) -> np.ndarray:
    """Every row's expected ``(1/R) sum_{i <= R} P(i) rel(i)``, ``R = r`` of the row (>= 1, its
    relevant items): AP@R. With ``full``, the sum runs over every rank of the ranking, which must hold
    every candidate: the full-ranking AP.

    At rank i, j-th of a group of g items holding q relevant ones with h relevant before it,
    ``E[P(i) rel(i)] = (q / g) (h + 1 + (j - 1)(q - 1) / (g - 1)) / i``: the item is relevant with
    probability q / g, and then each of the j - 1 group items ahead of it is with probability
    (q - 1) / (g - 1). With g = 1 it is the plain ``P(i) rel(i)``.
    """
    width = ranking.matches.shape[1] if full else int(r.max())
    rank = np.arange(1, width + 1)
    size = ranking.size[:, :width].astype(np.float64)
    relevant = ranking.relevant[:, :width].astype(np.float64)
    ahead = rank - 1 - ranking.start[:, :width]
    others = np.divide(relevant - 1, size - 1, out=np.zeros_like(size), where=size > 1)
    expected = relevant / size * (ranking.before[:, :width] + 1 + ahead * others) / rank
    counted = expected if full else expected * (rank <= r[:, None])
    return counted.sum(axis=1) / r


def ranked_chunks(
    gallery: np.ndarray,
    gallery_labels: np.ndarray,
    k: int,
    *,
    queries: np.ndarray | None = None,
    query_labels: np.ndarray | None = None,
    chunk_size: int,
    use_gpu: bool | None = None,
    backend: Backend = "auto",
) -> Iterator[tuple[int, Ranking]]:
    """``(start, ranking)``: the :class:`Ranking` of the first ``k`` ranks of queries ``start ..``,
    as ``recall.neighbour_chunks`` searches them (``queries=None``: every gallery item, itself
    excluded), with whole tie groups at rank ``k``."""
    leave_one_out = queries is None
    if leave_one_out:
        query_labels = gallery_labels
    candidates = len(gallery) - leave_one_out
    # One rank more than asked shows whether the group at rank k goes on.
    probe = min(k + 1, candidates)
    search = dict(use_gpu=use_gpu, backend=backend)
    for start, neighbours, distances in neighbour_chunks(
        gallery, probe, queries=queries, chunk_size=chunk_size, with_distances=True, **search
    ):
        rows = np.arange(start, start + len(neighbours))
        matches = gallery_labels[neighbours] == query_labels[rows, None]
        extra_size = np.zeros(len(rows), dtype=np.int64)
        extra_relevant = np.zeros(len(rows), dtype=np.int64)
        open_rows = np.flatnonzero(distances[:, probe - 1] == distances[:, k - 1]) if probe > k else []
        depth = probe
        while len(open_rows):
            depth = min(2 * depth, candidates)
            own = gallery[rows[open_rows]] if leave_one_out else queries[rows[open_rows]]
            deep, deep_distances = _search(
                gallery, own, depth, rows[open_rows] if leave_one_out else None, **search
            )
            deep_matches = gallery_labels[deep] == query_labels[rows[open_rows], None]
            closed = (deep_distances[:, -1] != deep_distances[:, k - 1]) | (depth == candidates)
            done = open_rows[closed]
            # The deeper search ranks these queries now: its first k ranks and the group's rest.
            matches[done, :probe] = deep_matches[closed, :probe]
            distances[done, :probe] = deep_distances[closed, :probe]
            tied = deep_distances[closed, k:] == deep_distances[closed, k - 1 : k]
            extra_size[done] = tied.sum(axis=1)
            extra_relevant[done] = (tied & deep_matches[closed, k:]).sum(axis=1)
            open_rows = open_rows[~closed]
        yield start, tie_groups(distances[:, :k], matches[:, :k], extra_size, extra_relevant)


def _search(
    gallery: np.ndarray,
    queries: np.ndarray,
    k: int,
    self_ids: np.ndarray | None,
    *,
    use_gpu: bool | None,
    backend: Backend,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest gallery items of ``queries`` and their distances; ``self_ids``: each query's own
    gallery index, excluded (searched as one more neighbour, then dropped)."""
    extra = self_ids is not None
    chunk = max(1, _DEEP_ENTRIES // (k + extra))
    parts = list(
        neighbour_chunks(
            gallery,
            k + extra,
            queries=queries,
            chunk_size=chunk,
            with_distances=True,
            use_gpu=use_gpu,
            backend=backend,
        )
    )
    neighbours = np.concatenate([p[1] for p in parts])
    distances = np.concatenate([p[2] for p in parts])
    if extra:
        neighbours, distances = drop_self(neighbours, self_ids, distances)
    return neighbours, distances
