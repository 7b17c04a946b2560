"""Checkpoints that survive crashes and preemption, and the resume rule of a run directory.

One mechanism owns checkpoints: :class:`ResumableCheckpoint` writes ``checkpoints/last.ckpt`` at a
configurable interval and once more when Lightning stops on SIGTERM (preemption, ``scancel``, a
time limit); ``noisydml resume=<run dir>`` (or the same command again, ``resume=auto``) continues from
that file. Files are written atomically, so a kill during the write leaves the previous checkpoint
intact (not fsynced: a checkpoint a machine crash damaged is refused at resume, naming the fixes), and
loaded with ``weights_only=True``. The checkpoint a new one replaces is kept as
``previous.ckpt``: a run whose last checkpoint was damaged after it was written (a full disk, a copy cut
short) can fall back to it (``resume_from=previous``). A finished run is never resumed, so it drops
``previous.ckpt`` (``noisydml.run.train``); ``last.ckpt`` and ``best.ckpt`` stay.
:class:`SelectedCheckpoint` keeps ``checkpoints/best.ckpt``, the weights of the epoch with the best
validation metric, which the test split is scored with (``noisydml.run.selection``);
:class:`ValidateLastEpoch` validates the last epoch whatever the schedule, so that there is one to select.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from pytorch_lightning.callbacks import Callback, ModelCheckpoint
from pytorch_lightning.utilities.exceptions import SIGTERMException

from noisydml.utils.atomic import atomic_write
from noisydml.utils.checks import BadValue, Rule, check_value
from noisydml.utils.errors import NO_SPACE, BadInput
from noisydml.utils.run_directory import BEST, LAST, PREVIOUS, RunDir
from noisydml.utils.unread import Parts


class AtomicCheckpointIO(TorchCheckpointIO):
    """torch.save to a temporary file renamed over the target (the one it replaces kept as
    ``previous.ckpt``); torch.load with weights_only=True."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any = None
    ) -> None:
        path = Path(path)
        keep = path.with_name(PREVIOUS) if path.name == LAST else None
        try:
            with atomic_write(path, "wb", keep_previous=keep, durable=False) as f:
                torch.save(checkpoint, f)
        except (OSError, RuntimeError) as error:
            # A short write surfaces from torch as "unexpected pos ..." and names neither file nor cause.
            short = isinstance(error, RuntimeError) and "unexpected pos" in str(error)
            if not (short or getattr(error, "errno", None) in NO_SPACE):
                raise
            raise OSError(
                errno.ENOSPC,
                f"no space left to write {path} (the disk is full, or a quota or file-size limit is reached)",
            ) from error

    def load_checkpoint(self, path: str | Path, map_location: Any = None, weights_only: bool | None = None):
        return torch.load(path, map_location=map_location or "cpu", weights_only=True)


class ResumableCheckpoint(ModelCheckpoint):
    """``last.ckpt`` every ``every_n_epochs`` epochs, every ``every_n_train_steps`` steps as well when
    given (a long epoch's resume points), and on SIGTERM. Null turns either off; both null is refused, a
    run with no resume point.

    Only the last checkpoint is kept: a run's results are its test metrics, not a model zoo.
    """

    def __init__(
        self, dirpath: str | Path, every_n_epochs: int | None = 1, every_n_train_steps: int | None = None
    ):
        # Lightning takes 0 for "never", which would leave a run nothing to resume from.
        check_value(Rule("every_n_epochs", int, 1, optional=True, example="every_n_epochs=1"), every_n_epochs)
        steps = Rule("every_n_train_steps", int, 1, optional=True, example="every_n_train_steps=500")
        check_value(steps, every_n_train_steps)
        if every_n_epochs is None and every_n_train_steps is None:
            raise BadValue(
                "every_n_epochs",
                "=null with every_n_train_steps=null writes no checkpoint to resume from; "
                "e.g. every_n_epochs=1",
            )
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
        # Lightning's constructor takes one trigger; its epoch-end save reads this attribute whatever the
        # step trigger, and skips a step already saved, so both triggers hold.
        self._every_n_epochs = every_n_epochs or 0
        self.every_n_train_steps = every_n_train_steps

    def unread_keys(self, parts: Parts) -> dict[str, str]:
        """``every_n_train_steps`` beyond the run's steps (``noisydml.utils.unread``)."""
        steps, every = parts.steps, self.every_n_train_steps
        if steps is None or not every or every <= steps:
            return {}
        return {
            "every_n_train_steps": f"saves every that many steps, but the run trains {steps}, so it saves "
            "none and nothing reads it; drop {key} (a checkpoint is saved each epoch), or give fewer steps"
        }

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        # Lightning raises SIGTERMException after finishing the batch in progress, so the loops'
        # state is consistent here and the resumed run continues with the next batch.
        if isinstance(exception, SIGTERMException):
            trainer.save_checkpoint(Path(self.dirpath) / LAST, weights_only=False)


def checkpoint_step(checkpoint: Path | None) -> int:
    """The global step a run resumed from ``checkpoint`` continues after; 0 from the start (None)."""
    if checkpoint is None:
        return 0
    return int(torch.load(checkpoint, map_location="cpu", weights_only=True)["global_step"])


def resume_checkpoint(run_dir: Path, which: str = "last") -> Path | None:
    """The checkpoint a run in ``run_dir`` resumes from (``which``: ``last`` or ``previous``), None when
    there is none; refuses one that cannot be read, naming the fix."""
    run = RunDir(run_dir)
    path = run.last_checkpoint if which == "last" else run.previous_checkpoint
    if not path.is_file():
        if which == "previous":
            raise BadInput(f"resume_from=previous: {path} does not exist; resume from the last checkpoint")
        # A kill between keeping the previous checkpoint and renaming the new one over last.ckpt.
        return run.previous_checkpoint if run.previous_checkpoint.is_file() else None
    try:
        torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        fixes = [f"start this run over: {run.resume_command('resume=never')}"]
        if which == "last" and run.previous_checkpoint.is_file():
            before = f"continue from the checkpoint before it: {run.resume_command('resume_from=previous')}"
            fixes.insert(0, before)
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise BadInput(
            f"{path} cannot be read, it is truncated or corrupt ({reason}); {'; or '.join(fixes)}"
        ) from error
    return path


class SelectedCheckpoint(ModelCheckpoint):
    """The weights of the epoch whose ``monitor`` (a ``val/`` metric) is best, as ``best.ckpt``, and
    which epoch that was (``best_epoch``, Lightning's 0-based epoch as in ``csv/metrics.csv``).

    A later epoch replaces it only when strictly better, so on ties the earliest epoch is kept.
    """

    def __init__(self, dirpath: str | Path, monitor: str, mode: str = "max"):
        super().__init__(
            dirpath=dirpath,
            filename=Path(BEST).stem,
            monitor=monitor,
            mode=mode,
            save_top_k=1,
            save_weights_only=True,
            enable_version_counter=False,
            auto_insert_metric_name=False,
        )
        self.best_epoch: int | None = None

    def _save_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        # Called only when the monitored metric improved (save_top_k=1, no save_last).
        self.best_epoch = trainer.current_epoch
        super()._save_checkpoint(trainer, filepath)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "best_epoch": self.best_epoch}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self.best_epoch = state_dict.get("best_epoch")


class ValidateLastEpoch(Callback):
    """Validation at the last epoch whatever ``trainer.check_val_every_n_epoch`` says: ``max_epochs=3``
    with validation every 5 epochs would otherwise hold the validation split out for nothing and select
    no checkpoint."""

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        last = trainer.max_epochs is not None and trainer.current_epoch + 1 == trainer.max_epochs
        if last and trainer.check_val_every_n_epoch is not None:
            trainer.check_val_every_n_epoch = 1
