"""Randomness as a function of (run seed, what, when): the same after a resume and on every rank."""

from __future__ import annotations

import numpy as np
import torch

# Streams of the training loop, kept apart so one never shifts another.
EPOCH, STEP, MINING = 1, 2, 3


def derived_seed(seed: int, stream: int, *counters: int) -> int:
    """A 63-bit seed drawn from (seed, stream, counters) by numpy's SeedSequence hashing."""
    return int(np.random.SeedSequence([seed, stream, *counters]).generate_state(2, np.uint64)[0] >> 1)


def reseed(seed: int) -> None:
    """Seed torch's CPU generator and, once CUDA is up, every GPU's: ``torch.manual_seed`` without its
    cost. Before CUDA is initialised that function queues the seed for later and formats the Python
    stack each time to say where (three times over, for CUDA, XPU and MTIA): milliseconds, at every
    step (scripts/bench/README.md)."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)
