"""One random column per row of a weight matrix: the draw behind the random negatives of the miners."""

from __future__ import annotations

import torch


def draw_one(weights: torch.Tensor) -> torch.Tensor:
    """For each row of ``weights``, one column index drawn with probability proportional to its weight:
    uniform among the True entries of a boolean mask, or proportional to non-negative float weights.
    A row without a candidate (all False, or all 0) gets the index ``weights.shape[1]``, past its end,
    so ``index < weights.shape[1]`` says which rows have one.

    The inverse of each row's cumulative distribution at one uniform number, found by binary search:
    ``torch.multinomial`` draws an exponential number for every entry instead, about ten times the
    cost on the (pairs x batch) matrix of a P x K batch. The draw uses torch's global generator.
    """
    columns = weights.shape[1]
    if weights.dtype == torch.bool:
        # Integer counts: exact, and half the cost of a float cumulative sum.
        cumulative = weights.cumsum(dim=1, dtype=torch.int32)
        total = cumulative[:, -1:]
        rank = (torch.rand(total.shape, device=weights.device) * total).to(torch.int32)
        # The rank-th True entry (from 0): the first column whose count exceeds the rank.
        index = torch.searchsorted(cumulative, torch.minimum(rank, total - 1), right=True)
        return torch.where(total > 0, index, columns).squeeze(1)
    cumulative = weights.cumsum(dim=1)
    total = cumulative[:, -1:]
    # Strictly below the total even when rounding would reach it, so the search stops on a column of
    # positive weight, the first whose cumulative weight exceeds the target (a zero row: past the end).
    target = torch.minimum(torch.rand_like(total) * total, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cumulative, target, right=True).squeeze(1)
