"""Work that leaves the process's random streams as it found them."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch


@contextmanager
def streams_kept() -> Iterator[None]:
    """Run the block, then put back the states of torch's generators (the CPU's and every GPU's), numpy's
    global generator and Python's ``random``: what the block drew, and whether it drew at all (a cache hit
    draws nothing), leaves the numbers drawn after it unchanged.

    The GPUs' generators are saved only where CUDA has started: saving them would start it, which a run
    that never uses its GPU here (or forks workers later) must not pay for. Where the block itself starts
    CUDA, each GPU's generator goes back to the state starting it gave (its seed, nothing drawn), which
    is the state the first draw after the block would have found had the block not run."""
    state, numpy_state = random.getstate(), np.random.get_state()  # noqa: NPY002
    started = torch.cuda.is_initialized()
    devices = list(range(torch.cuda.device_count())) if started else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(state)
        np.random.set_state(numpy_state)  # noqa: NPY002
        if not started and torch.cuda.is_initialized():
            for generator in torch.cuda.default_generators:
                generator.manual_seed(generator.initial_seed())
