"""Pre-flight: everything a run needs is checked (:mod:`noisydml.run.checks`) and built here, cheapest first,
before the first training step: the config, the machine and the Trainer, the folders the run writes, the
checkpoint to resume from, the data module with its noisy labels drawn and the model, then one batch
through the training step's hook sequence, in the run's precision, on copies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig
from pytorch_lightning.loggers import WandbLogger

from noisydml.callbacks.checkpointing import resume_checkpoint
from noisydml.core.embedding_module import EmbeddingModule
from noisydml.loggers.wandb_mode import choose_wandb_mode
from noisydml.numerics import PINNED
from noisydml.run.checks.config import check_config
from noisydml.run.checks.data import build_checked
from noisydml.run.checks.folders import check_paths
from noisydml.run.checks.library import check_trainer
from noisydml.run.checks.walk import builds, entries, import_target
from noisydml.utils.quiet import quiet_wandb
from noisydml.utils.run_directory import RunDir


def prepare(
    cfg: DictConfig, run: RunDir, resolved: dict, choices: dict[str, str]
) -> tuple[Path | None, Any, EmbeddingModule]:
    """Check and build everything training needs, refusing bad input before the first step: return the
    checkpoint to resume (None: from the start), the data module with its noisy labels drawn, and the
    model, which has passed one batch."""
    check_config(cfg, choices)
    trainer = check_trainer(cfg)
    check_paths(resolved, run.path)
    checkpoint = resume_checkpoint(run.path, cfg.resume_from) if cfg.resume == "auto" else None
    # Only a run that logs to W&B sets it up (a process of its own, seconds a job) and closes its run.
    loggers = [import_target(str(node["_target_"])) for _, node in entries(cfg, "logger") if builds(node)]
    if any(isinstance(klass, type) and issubclass(klass, WandbLogger) for klass in loggers):
        choose_wandb_mode()
        quiet_wandb()
    # A sum split over threads rounds differently with their number, which differs between machines.
    threads = 1 if cfg.cpu_threads is None and cfg.get("numerics") in PINNED else cfg.cpu_threads
    if threads is not None:
        torch.set_num_threads(threads)
    pl.seed_everything(cfg.seed, workers=True)

    datamodule, model = build_checked(cfg, choices, trainer)
    return checkpoint, datamodule, model
