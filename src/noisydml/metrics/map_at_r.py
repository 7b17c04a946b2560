"""MAP@R (Musgrave et al. 2020, "A Metric Learning Reality Check", Sec. 3.2).

For a query with R relevant items (the other items of its class, or in query/gallery mode the gallery
items of its class), ``AP@R = (1/R) * sum_{i <= R} P(i) * rel(i)``, where ``rel(i)`` says whether the i-th
nearest neighbour shares the query's class and ``P(i)`` is the precision of the first i neighbours. MAP@R
is the mean over queries that have R >= 1; a query with nothing relevant has no AP and is left out, as in
pytorch-metric-learning's ``mean_average_precision_at_r``. The ranking comes from
``ties.ranked_chunks``, the same search Recall@K uses, and exactly tied items count as the expectation
over their orders (``ties.expected_average_precision``).
"""

from __future__ import annotations

import numpy as np


def relevant_counts(
    query_labels: np.ndarray, gallery_labels: np.ndarray, *, leave_one_out: bool
) -> np.ndarray:
    """R for every query: how many gallery items share its class, itself not counted when the queries are
    the gallery (``leave_one_out``)."""
    classes, sizes = np.unique(gallery_labels, return_counts=True)
    position = np.searchsorted(classes, query_labels).clip(max=len(classes) - 1)
    counts = np.where(classes[position] == query_labels, sizes[position], 0)
    return counts - 1 if leave_one_out else counts
