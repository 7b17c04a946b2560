"""Work that leaves the process's random streams as it found them."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch


@contextmanager
def streams_kept() -> Iterator[None]:
    """Run the block, then put back the states of torch's generators (the CPU's and every initialised
    GPU's), numpy's global generator and Python's ``random``: what the block drew, and whether it drew at
    all (a cache hit draws nothing), leaves the numbers drawn after it unchanged."""
    state, numpy_state = random.getstate(), np.random.get_state()  # noqa: NPY002
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(state)
        np.random.set_state(numpy_state)  # noqa: NPY002
