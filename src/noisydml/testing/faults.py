"""Fault injection for tests of preemption and crashes: a callback that signals its own process, and one
that raises while training (:class:`RaiseAt`).

Select it for one run, or one job of a sweep, like any callback:
``+callbacks.kill={_target_:noisydml.testing.faults.KillAt,step:1}`` dies hard (SIGKILL: no traceback, no
``results.json``, nothing Python can clean up) right after the first optimizer step. ``signal=SIGTERM``
stands in for a preemption or ``scancel``, ``SIGUSR2`` (submitit's) or ``SIGUSR1`` (Lightning's) for
SLURM's warning before a time limit; ``SIGURG`` and ``SIGWINCH`` are ignored unless handled.
"""

from __future__ import annotations

import os
from signal import Signals

import pytorch_lightning as pl
from hydra.core.hydra_config import HydraConfig


class KillAt(pl.Callback):
    """Send ``signal`` to this process once ``trainer.global_step`` reaches ``step``.

    The check runs after each training batch, so the signal arrives with the weights of ``step``
    optimizer steps. It fires once per process, and never in a run that resumed from a checkpoint: the
    fault is the one interruption, so the command that continues the run (with the fault still among its
    overrides) finishes it. ``job``: only in that job of a sweep (``hydra.job.num``). Under DDP every rank
    signals itself.
    """

    def __init__(self, step: int, signal: str = "SIGKILL", job: int | None = None) -> None:
        if step < 0:
            raise ValueError(f"KillAt step={step} is negative; give the global step to signal at (>= 0)")
        try:
            self.signal = Signals[signal]
        except KeyError:
            raise ValueError(
                f"KillAt signal={signal!r} is not a signal name; use SIGKILL, SIGTERM, SIGUSR1, ..."
            ) from None
        self.step = step
        self._fired = job is not None and _job_num() != job

    def on_train_start(self, trainer: pl.Trainer, *args: object) -> None:
        self._fired = self._fired or trainer.global_step > 0

    def on_train_batch_end(self, trainer: pl.Trainer, *args: object) -> None:
        if not self._fired and trainer.global_step == self.step:
            self._fired = True
            os.kill(os.getpid(), self.signal)


class RaiseAt(pl.Callback):
    """Raise a ``RuntimeError`` once ``trainer.global_step`` reaches ``step`` (``job``: only in that job of a
    sweep): a failure while training, which no check before the first step could have foreseen."""

    def __init__(self, step: int, job: int | None = None) -> None:
        self.step = step
        self._armed = job is None or _job_num() == job

    def on_train_batch_end(self, trainer: pl.Trainer, *args: object) -> None:
        if self._armed and trainer.global_step == self.step:
            raise RuntimeError(f"injected fault at step {self.step}")


def _job_num() -> int | None:
    return int(HydraConfig.get().job.num) if HydraConfig.initialized() else None
