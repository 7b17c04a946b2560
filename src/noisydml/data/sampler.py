"""The P x K class-balanced batch sampler of metric learning."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from torch.utils.data import Sampler

SMALL_CLASS_POLICIES = ("error", "replace", "drop")


class PKSampler(Sampler[list[int]]):
    """Batches of ``P`` classes x ``K`` samples, seeded, with a fixed number of batches per epoch.

    Each batch draws ``P`` distinct classes uniformly, then ``K`` distinct samples of each. An epoch is
    ``batches_per_epoch`` batches (default: ``len(labels) // (P * K)``, one pass worth of samples).
    Batch ``b`` of epoch ``e`` depends only on ``(seed, e, b)``, so a resumed run draws the batches an
    uninterrupted one would.

    Classes with fewer than ``K`` samples follow ``small_classes``:

    - ``"error"`` (default): refuse before training, naming the classes;
    - ``"replace"``: draw their ``K`` samples with replacement (pytorch-metric-learning's
      ``MPerClassSampler`` rule; repeated samples make zero-distance positive pairs);
    - ``"drop"``: never draw those classes.

    A class with a single sample can form no positive pair, so under ``replace`` and ``drop`` it is
    never drawn; under ``replace`` every other sample can be.

    Distributed training: every rank builds the same generator and draws ``P * num_replicas`` classes
    per step, and rank ``r`` takes the ``r``-th block of ``P``. The ranks' batches are disjoint in
    classes and together form exactly the batch one process would draw with ``P * num_replicas``.
    """

    def __init__(
        self,
        labels: np.ndarray,
        P: int,
        K: int,
        batches_per_epoch: int | None = None,
        seed: int = 0,
        small_classes: str = "error",
        num_replicas: int = 1,
        rank: int = 0,
    ):
        if small_classes not in SMALL_CLASS_POLICIES:
            raise ValueError(f"data.small_classes={small_classes!r} is not one of {SMALL_CLASS_POLICIES}")
        if K < 2:
            raise ValueError(f"data.K={K} must be >= 2: a batch needs positive pairs")
        if P < 2:
            raise ValueError(f"data.P={P} must be >= 2: a batch needs negatives")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside [0, {num_replicas})")
        labels = np.asarray(labels)
        classes, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
        # Under "replace" every class of >= 2 samples can fill K slots, however small they all are (Le &
        # Odobez's SOP topline at p = 0.7 keeps at most 4 of a class, with K = 5).
        if counts.max() < K and small_classes != "replace":
            raise ValueError(
                f"data.K={K} is larger than every class of the training set (largest: {counts.max()} samples)"
            )
        small = counts < K
        if small.any() and small_classes == "error":
            shown = ", ".join(
                f"{c} ({n})" for c, n in zip(classes[small][:10], counts[small][:10], strict=True)
            )
            raise ValueError(
                f"data.K={K}: {small.sum()} training classes have fewer than {K} samples: {shown}"
                f"{' ...' if small.sum() > 10 else ''}. Set data.small_classes=replace to draw them with "
                f"replacement or data.small_classes=drop to skip them."
            )
        eligible = counts >= (K if small_classes == "drop" else 2)
        self.members = [np.flatnonzero(inverse == c) for c in np.flatnonzero(eligible)]
        # The classes never drawn (dropped, or of one sample, which has no positive) and their samples.
        self.left_out = (int((~eligible).sum()), int(counts[~eligible].sum()))
        if P * num_replicas > len(self.members):
            most = len(self.members) // num_replicas
            # A batch needs two classes: no P fits where fewer can be drawn per process.
            fix = f"use data.P={most} or fewer" if most >= 2 else "a batch needs 2 per process"
            raise ValueError(
                f"data.P={P} x {num_replicas} process(es) is larger than the {len(self.members)} training "
                f"classes that can be drawn; {fix}"
            )
        self.P, self.K = P, K
        self.seed = seed
        self.num_replicas, self.rank = num_replicas, rank
        self.batches_per_epoch = batches_per_epoch or max(1, len(labels) // (P * K * num_replicas))
        self.epoch = 0
        self.start_batch = 0

    def resume_at(self, batch: int) -> None:
        """Make the next pass start at batch ``batch`` of the current epoch (a run resumed mid-epoch)."""
        self.start_batch = batch

    def set_epoch(self, epoch: int) -> None:
        """Called by Lightning at every epoch start so each epoch draws new batches."""
        self.epoch = epoch

    @property
    def sampler(self) -> PKSampler:
        # Lightning calls set_epoch on `dataloader.batch_sampler.sampler`, not on the batch sampler.
        return self

    def __len__(self) -> int:
        # The full epoch even when resuming: Lightning counts the batches already trained on.
        return self.batches_per_epoch

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        block = slice(self.rank * self.P, (self.rank + 1) * self.P)
        start, self.start_batch = self.start_batch, 0
        for b in range(self.batches_per_epoch):
            chosen = rng.choice(len(self.members), size=self.P * self.num_replicas, replace=False)
            batch = [self._draw(rng, self.members[c]) for c in chosen]
            # Skipped batches are still drawn, so the ones after them are those of an uninterrupted run.
            if b >= start:
                yield np.concatenate(batch[block]).tolist()

    def _draw(self, rng: np.random.Generator, members: np.ndarray) -> np.ndarray:
        return rng.choice(members, size=self.K, replace=len(members) < self.K)
