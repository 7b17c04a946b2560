"""Progress a log file can hold: a line per epoch where no one watches a progress bar (a SLURM job's
output, a redirected run), instead of a bar's redraws at every step."""

from __future__ import annotations

import sys
import time

import pytorch_lightning as pl


def wants_progress_bar(enabled: bool | None) -> bool:
    """``trainer.enable_progress_bar``: true or false as given; null (the default) means a bar only when
    the output is a terminal."""
    return sys.stderr.isatty() if enabled is None else bool(enabled)


class EpochLine(pl.Callback):
    """Prints ``epoch 3/20: train/loss=0.1234 val/recall@1=0.9012 (1.8 s)`` after each training epoch."""

    def __init__(self) -> None:
        self._started = time.perf_counter()

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._started = time.perf_counter()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        values = " ".join(
            f"{name}={float(value):.4f}"
            for name, value in sorted(trainer.callback_metrics.items())
            if name.startswith(("train/loss", "val/"))
        )
        total = f"/{trainer.max_epochs}" if trainer.max_epochs and trainer.max_epochs > 0 else ""
        seconds = time.perf_counter() - self._started
        print(f"epoch {trainer.current_epoch + 1}{total}: {values} ({seconds:.1f} s)", flush=True)
