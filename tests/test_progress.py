"""Training reads logged values back only at logging steps: on a GPU, each read waits for the whole step."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from torch.overrides import TorchFunctionMode

from noisydml.callbacks import progress
from noisydml.run.train import train


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
    "bar, rich", [("true", True), ("true", False), ("false", False)], ids=["rich bar", "tqdm bar", "a line"]
)
def test_logged_values_are_read_only_at_logging_steps_and_the_bar_shows_the_loss(
    compose_config, monkeypatch, bar, rich
):
    monkeypatch.setattr(progress, "_RICH_AVAILABLE", rich)
    ReadsPerStep.reads, ReadsPerStep.shown = {}, {}
    # SGD: Adam's step counts are tensors kept on the CPU, read at every step without waiting for a GPU.
    cfg = compose_config(
        f"trainer.enable_progress_bar={bar}",
        "data.batches_per_epoch=7",
        "trainer.log_every_n_steps=3",
        "optimizer=sgd",
        # Training steps only: the last epoch is always validated, and validating reads its scores.
        "data.val_fraction=0",
        "+callbacks.reads._target_=test_progress.ReadsPerStep",
    )
    train(cfg)
    # The loggers write at steps 3 and 6, and the bar reads there. Lightning reads train/loss back after
    # every step when it is logged with prog_bar=True.
    assert sorted(ReadsPerStep.reads) == list(range(1, 8))
    assert [step for step, count in sorted(ReadsPerStep.reads.items()) if count] == [3, 6]
    if bar == "true":
        assert isinstance(ReadsPerStep.shown["train/loss"], float)


def _losses(run_dir: Path) -> dict[int, str]:
    """train/loss by the number of steps done, as metrics.csv has it."""
    with (run_dir / "csv" / "metrics.csv").open(newline="") as f:
        return {int(row["step"]) + 1: row["train/loss"] for row in csv.DictReader(f) if row.get("train/loss")}


def test_a_step_wise_value_logged_only_where_read_is_the_same_there_as_logged_every_step(
    compose_config, capsys
):
    every = compose_config("data.batches_per_epoch=7", "trainer.log_every_n_steps=1", run="every")
    train(every)
    capsys.readouterr()
    third = compose_config("data.batches_per_epoch=7", "trainer.log_every_n_steps=3", run="third")
    train(third)
    out = capsys.readouterr().out
    every_step = _losses(Path(every.paths.output_dir))
    assert sorted(every_step) == list(range(1, 8))
    # The loggers' steps get what logging every step gives them; the epoch line gets the last step's.
    assert _losses(Path(third.paths.output_dir)) == {3: every_step[3], 6: every_step[6]}
    assert f"epoch 1/1: train/loss={float(every_step[7]):.4f}" in out
