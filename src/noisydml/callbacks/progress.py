"""Progress: a bar on a terminal that does not stall the GPU, and a line per epoch where no one watches a
bar (a SLURM job's output, a redirected run), instead of a bar's redraws at every step."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import RichProgressBar, TQDMProgressBar
from pytorch_lightning.utilities.imports import _RICH_AVAILABLE

from noisydml.core.logging_steps import is_logging_step


def wants_progress_bar(enabled: bool | None) -> bool:
    """``trainer.enable_progress_bar``: true or false as given; null (the default) means a bar only when
    the output is a terminal."""
    return sys.stderr.isatty() if enabled is None else bool(enabled)


class _ReadsAtLoggingSteps:
    """A Lightning progress bar that shows ``train/loss`` as read at the steps Lightning's loggers write
    (``trainer.log_every_n_steps``), keeping it in between; its step counter and speed move every step.

    Reading a value logged in a training step is ``.item()`` of a GPU tensor, which waits for the whole
    step, backward and optimizer included, so the GPU idles while the host fetches the next batch and
    launches its forward. Lightning reads every ``prog_bar=True`` value after every step (Lightning
    issue #20995), bar or no bar, so the module logs ``train/loss`` without ``prog_bar`` and this bar
    takes it from ``trainer.callback_metrics``, unread there, at logging steps only: the loggers wait
    at that step anyway, just after the bar, so reading there costs nothing more.
    """

    shown = ("train/loss",)
    _metrics: dict[str, Any] | None = None
    _between_logging_steps = False

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        self._between_logging_steps = not is_logging_step(trainer)
        try:
            super().on_train_batch_end(trainer, *args)
        finally:
            self._between_logging_steps = False

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        if self._metrics is None or not self._between_logging_steps:
            logged = trainer.callback_metrics
            self._metrics = {
                **super().get_metrics(trainer, pl_module),
                **{name: float(logged[name]) for name in self.shown if name in logged},
            }
        return self._metrics


class RichBar(_ReadsAtLoggingSteps, RichProgressBar):
    """Lightning's Rich progress bar, showing ``train/loss`` as read at logging steps."""


class TQDMBar(_ReadsAtLoggingSteps, TQDMProgressBar):
    """Lightning's tqdm progress bar, showing ``train/loss`` as read at logging steps."""


def progress_bar() -> pl.Callback:
    """The bar Lightning would choose (Rich where it is installed, else tqdm), showing ``train/loss`` as
    read at logging steps."""
    return RichBar() if _RICH_AVAILABLE else TQDMBar()


class EpochLine(pl.Callback):
    """Prints ``epoch 3/20: train/loss=0.1234 val/recall@1=0.9012 (1.8 s)`` after each training epoch; the
    validation's values only on the epochs that validated (Lightning keeps the last ones in between)."""

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self._validated = False

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._started = time.perf_counter()
        self._validated = False

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._validated = self._validated or not trainer.sanity_checking

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        values = " ".join(
            f"{name}={float(value):.4f}"
            for name, value in sorted(trainer.callback_metrics.items())
            if name.startswith("train/loss") or (self._validated and name.startswith("val/"))
        )
        total = f"/{trainer.max_epochs}" if trainer.max_epochs and trainer.max_epochs > 0 else ""
        seconds = time.perf_counter() - self._started
        print(f"epoch {trainer.current_epoch + 1}{total}: {values} ({seconds:.1f} s)", flush=True)
