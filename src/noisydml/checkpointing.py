"""Checkpoints that survive crashes and preemption, and the resume rule of a run directory.

One mechanism owns checkpoints: :class:`ResumableCheckpoint` writes ``checkpoints/last.ckpt`` at a
configurable interval and once more when Lightning stops on SIGTERM (preemption, ``scancel``, a
time limit); ``noisydml ... resume=auto`` continues from that file. Files are written atomically, so
a kill during the write leaves the previous checkpoint intact, and loaded with ``weights_only=True``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.utilities.exceptions import SIGTERMException

from noisydml.atomic import atomic_write

CHECKPOINT_DIR = "checkpoints"
LAST = "last.ckpt"


class AtomicCheckpointIO(TorchCheckpointIO):
    """torch.save to a temporary file renamed over the target; torch.load with weights_only=True."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any = None
    ) -> None:
        with atomic_write(path, "wb") as f:
            torch.save(checkpoint, f)

    def load_checkpoint(self, path: str | Path, map_location: Any = None, weights_only: bool | None = None):
        return torch.load(path, map_location=map_location or "cpu", weights_only=True)


class ResumableCheckpoint(ModelCheckpoint):
    """``last.ckpt`` every ``every_n_epochs`` epochs (or ``every_n_train_steps`` steps) and on SIGTERM.

    Only the last checkpoint is kept: a run's results are its test metrics, not a model zoo.
    """

    def __init__(
        self, dirpath: str | Path, every_n_epochs: int | None = 1, every_n_train_steps: int | None = None
    ):
        # The latest checkpoint under one fixed name, replaced each time (no monitored metric).
        super().__init__(
            dirpath=dirpath,
            filename=Path(LAST).stem,
            save_top_k=1,
            monitor=None,
            enable_version_counter=False,
            every_n_epochs=None if every_n_train_steps else every_n_epochs,
            every_n_train_steps=every_n_train_steps,
            save_on_train_epoch_end=True,
        )

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        # Lightning raises SIGTERMException after finishing the batch in progress, so the loops'
        # state is consistent here and the resumed run continues with the next batch.
        if isinstance(exception, SIGTERMException):
            trainer.save_checkpoint(Path(self.dirpath) / LAST, weights_only=False)


def resume_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint a run in ``run_dir`` would resume from, if any."""
    path = Path(run_dir) / CHECKPOINT_DIR / LAST
    return path if path.is_file() else None
