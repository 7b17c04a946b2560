"""Known-harmless library messages, silenced where they come from, so a run's log shows the run.

Each filter names the message it drops and why it is harmless here; anything else still shows.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


class _DropTips(logging.Filter):
    """Lightning's advertisements for its cloud products, printed at every Trainer start."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("💡 Tip")


def silence_known_noise() -> None:
    """Install the filters; idempotent."""
    # faiss reports, at INFO, each CPU build it tries before the one that loads.
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    rank_zero = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    if not any(isinstance(f, _DropTips) for f in rank_zero.filters):
        rank_zero.addFilter(_DropTips())
    # Lightning's own use of a torch API deprecated in a later torch; nothing a user can change.
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
    # A resumed run writes its checkpoints where the run wrote them before.
    warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
    # The P x K sampler resumes mid-epoch on its own (PKSampler.resume_at), which Lightning cannot see.
    warnings.filterwarnings("ignore", message=r".*resuming from a checkpoint that ended before the epoch")
    # Without a validation split (data.val_fraction=0) the validation loaders are an empty list, on purpose.
    warnings.filterwarnings("ignore", message=r"Total length of `list` across ranks is zero")
    # On a machine with SLURM, a run started outside it: noisydml's SLURM runs go through its launcher
    # (hydra/launcher=slurm), which starts them under srun.
    warnings.filterwarnings("ignore", message=r"The `srun` command is available on your system but is not")


def quiet_wandb() -> None:
    """W&B's banner, its per-run history table and a deprecation notice about a setting Lightning passes
    (``anonymous=None``) stay out of the log: the run directory printed at the end says where the W&B
    run is. ``WANDB_SILENT=false`` brings them back. Call after ``WANDB_MODE`` is chosen: W&B reads its
    settings from the environment when set up, which must come before Lightning's ``wandb.init``."""
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    wandb.setup()


@contextmanager
def quiet_lightning() -> Iterator[None]:
    """Lightning's lines about the devices it found, for a Trainer built only to be checked: the run's own
    Trainer says them once."""
    loggers = [logging.getLogger(n) for n in ("pytorch_lightning", "lightning.pytorch", "lightning_fabric")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
