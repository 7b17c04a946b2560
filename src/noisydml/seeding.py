"""Randomness as a function of (run seed, what, when): the same after a resume and on every rank."""

from __future__ import annotations

import numpy as np

# Streams of the training loop, kept apart so one never shifts another.
EPOCH, STEP, MINING = 1, 2, 3


def derived_seed(seed: int, stream: int, *counters: int) -> int:
    """A 63-bit seed drawn from (seed, stream, counters) by numpy's SeedSequence hashing."""
    return int(np.random.SeedSequence([seed, stream, *counters]).generate_state(2, np.uint64)[0] >> 1)
