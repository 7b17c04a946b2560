"""Labelled batches for the miner and loss tests, the tuples a miner returns as lists, repeated draws, and
distances on the unit sphere as loops compute them."""

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


def unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm()


def sphere_distance(x: torch.Tensor, a: int, b: int) -> float:
    return float((unit(x[a]) - unit(x[b])).norm())


# Four points on the unit circle, classes [0, 0, 1, 1]: e0 (1, 0), e1 (.8, .6), e2 (0, 1), e3 (.6, .8).
# Cosines S01 .8, S02 0, S03 .6, S12 .6, S13 .96, S23 .8; distances d^2 = 2 - 2S:
#   d01 = sqrt(.4) = 0.632456   d02 = sqrt(2) = 1.414214   d03 = sqrt(.8) = 0.894427
#   d12 = sqrt(.8) = 0.894427   d13 = sqrt(.08) = 0.282843 d23 = sqrt(.4) = 0.632456
CIRCLE = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [0.6, 0.8]])
CIRCLE_LABELS = torch.tensor([0, 0, 1, 1])
CIRCLE_TRIPLETS = (torch.tensor([0, 0, 2, 3]), torch.tensor([1, 1, 3, 2]), torch.tensor([2, 3, 1, 0]))
