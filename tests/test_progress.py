"""Training reads logged values back only at logging steps: on a GPU, each read waits for the whole step."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
from torch.overrides import TorchFunctionMode

from noisydml import progress
from noisydml.train import train


class _Reads(TorchFunctionMode):
    """Counts reads of a tensor's value into Python (``.item()``, ``float()``)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.item or getattr(func, "__name__", "") == "__float__":
            self.count += 1
        return func(*args, **(kwargs or {}))


class ReadsPerStep(pl.Callback):
    """The reads from each training step's start to the next one's (its logging and the bar included),
    by step number (1-based), and what the progress bar shows once training is over."""

    reads: dict[int, int] = {}
    shown: dict = {}

    def __init__(self) -> None:
        self._step, self._mode = 0, None

    def on_train_batch_start(self, trainer: pl.Trainer, *args) -> None:
        self._close()
        self._step, self._mode = trainer.global_step + 1, _Reads()
        self._mode.__enter__()

    def on_train_epoch_end(self, trainer: pl.Trainer, *args) -> None:
        self._close()

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.progress_bar_callback is not None:
            ReadsPerStep.shown = trainer.progress_bar_callback.get_metrics(trainer, pl_module)

    def _close(self) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            ReadsPerStep.reads[self._step] = self._mode.count
            self._mode = None


@pytest.mark.parametrize(
    "bar, rich, read_at",
    [("true", True, [1, 3, 6]), ("true", False, [1, 3, 6]), ("false", False, [3, 6])],
    ids=["rich bar", "tqdm bar", "a line per epoch"],
)
def test_logged_values_are_read_only_at_logging_steps_and_the_bar_shows_the_loss(
    compose_config, monkeypatch, bar, rich, read_at
):
    monkeypatch.setattr(progress, "_RICH_AVAILABLE", rich)
    ReadsPerStep.reads, ReadsPerStep.shown = {}, {}
    # SGD: Adam's step counts are tensors kept on the CPU, read at every step without waiting for a GPU.
    cfg = compose_config(
        f"trainer.enable_progress_bar={bar}",
        "data.batches_per_epoch=7",
        "trainer.log_every_n_steps=3",
        "optimizer=sgd",
        "+callbacks.reads._target_=test_progress.ReadsPerStep",
    )
    train(cfg)
    # The loggers write at steps 3 and 6; a bar also reads once at step 1, when it has nothing to show.
    # Lightning reads train/loss back after every step when it is logged with prog_bar=True.
    assert sorted(ReadsPerStep.reads) == list(range(1, 8))
    assert [step for step, count in sorted(ReadsPerStep.reads.items()) if count] == read_at
    if bar == "true":
        assert isinstance(ReadsPerStep.shown["train/loss"], float)
