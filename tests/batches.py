"""Labelled batches for the miner tests, the tuples a miner returns as lists, and repeated draws."""

from __future__ import annotations

from collections import Counter

import torch

# 3 classes x 4 samples, as the brief's P x K batches, and an uneven batch with singleton classes
# (anchors without a positive).
LABEL_SETS = {
    "3x4": torch.arange(3).repeat_interleave(4),
    "uneven": torch.tensor([0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 4]),
}


def random_batch(
    seed: int, labels: torch.Tensor, dim: int = 2, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    # Few dimensions crowd the sphere, so pairs and anchors without a valid negative do occur.
    return torch.randn(len(labels), dim, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def as_list(indices: tuple[torch.Tensor, ...]) -> list[tuple[int, ...]]:
    return list(zip(*(t.tolist() for t in indices), strict=True))


def draw_counts(miner, embeddings: torch.Tensor, labels: torch.Tensor, draws: int) -> Counter:
    """How often each tuple comes out of ``draws`` calls of a random miner, from torch seed 0."""
    counts = Counter()
    torch.manual_seed(0)
    for _ in range(draws):
        counts.update(as_list(miner(embeddings, labels)))
    return counts
