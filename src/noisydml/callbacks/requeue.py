"""A job that submitit requeues stops at the end of a step, with a checkpoint of that step.

Under hydra-submitit-launcher (``hydra/launcher=slurm``), submitit answers its signal (SIGUSR2: SLURM's
warning ``signal_delay_s`` before a time limit, or a preemption) by requeueing the job and exiting at once,
in the middle of a training step: the requeued job then continued from the last periodic checkpoint and
trained the steps since it again. Here submitit still requeues the job the moment its signal arrives, and
training then stops as it does on SIGTERM: after the batch in progress, writing ``checkpoints/last.ckpt``.
The process then exits as submitit has it exit after a requeue (its local executor runs a job again only
when it exits with status 144; SLURM has requeued the job already).
"""

from __future__ import annotations

import functools
import signal
import sys
import threading
from collections.abc import Callable

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback


class RequeueAtStepEnd(Callback):
    """While training, submitit's requeue signal requeues the job and stops training after the batch in
    progress; outside training (building, testing) submitit's own handler exits at once. Does nothing in a
    process submitit did not start."""

    def __init__(self) -> None:
        # submitit's exit after requeueing the job: the process's own, so that the requeued job runs.
        self.exit: SystemExit | None = None
        # Why submitit did not requeue (e.g. timed out more than hydra.launcher.max_num_timeout times).
        self.refused: str | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        found = _submitit_handler()
        if found is not None and threading.current_thread() is threading.main_thread():
            signum, handler = found
            # Lightning restores the handlers it found (submitit's) when the fit ends.
            signal.signal(signum, functools.partial(self._requeue, handler))

    def _requeue(self, handler: Callable, signum: int, frame: object) -> None:
        from submitit.core.utils import UncompletedJobError

        try:
            handler(signum, frame)
        except SystemExit as requeued:
            self.exit = requeued
        except UncompletedJobError as error:
            self.refused = str(error)
        # Lightning's stop after the batch in progress, with last.ckpt (noisydml.callbacks.checkpointing).
        signal.raise_signal(signal.SIGTERM)

    def message(self) -> str | None:
        """What stopped the run, for its ``results.json``; None when submitit's signal did not."""
        if self.exit is not None:
            return f"{_signal_name()}: requeued by submitit (a time limit or a preemption)"
        if self.refused is not None:
            return f"{_signal_name()}: a time limit or a preemption, not requeued ({self.refused})"
        return None


def _submitit_handler() -> tuple[int, Callable] | None:
    """The signal submitit requeues on and its handler, when submitit started this process."""
    if "submitit" not in sys.modules:
        return None
    from submitit.core.job_environment import JobEnvironment, SignalHandler

    signum = JobEnvironment._usr_sig()
    handler = signal.getsignal(signum)
    return (signum, handler) if isinstance(getattr(handler, "__self__", None), SignalHandler) else None


def _signal_name() -> str:
    from submitit.core.job_environment import JobEnvironment

    return JobEnvironment._usr_sig().name
