"""Pre-flight: everything a run needs is checked (:mod:`noisydml.run.checks`) and built here, cheapest first,
before the first training step: the config, the machine and the Trainer, the folders the run writes, the
checkpoint to resume from, the data module with its noisy labels drawn and the model, then one batch
through the training step's hook sequence, in the run's precision, on copies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from pytorch_lightning.loggers import WandbLogger

from noisydml.callbacks.checkpointing import resume_checkpoint
from noisydml.core.embedding_module import EmbeddingModule
from noisydml.loggers.wandb_mode import choose_wandb_mode
from noisydml.numerics import PINNED
from noisydml.run.checks.config import check_config
from noisydml.run.checks.data import (
    check_lengths,
    check_metrics,
    check_one_batch,
    check_precision,
    check_unread,
    check_untrained,
)
from noisydml.run.checks.folders import check_paths
from noisydml.run.checks.library import check_optimization, check_trainer
from noisydml.run.checks.walk import builds, entries, import_target
from noisydml.utils.errors import BadInput
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


def build_checked(cfg: DictConfig, choices: dict[str, str], trainer: Any) -> tuple[Any, EmbeddingModule]:
    """The data module with its noisy labels drawn and the model, with the checks that need them: what
    a run builds after its folder is known, and what a local sweep checks of each job before the first
    runs (:func:`check_job_data`)."""
    # Built objects are passed after instantiation: Hydra would turn a dataclass argument back into config.
    datamodule = instantiate(cfg.data, _partial_=True)(
        dataset=instantiate(cfg.dataset), noise=instantiate(cfg.noise)
    )
    # Reads the data and draws the noisy labels now, so bad input fails before any training.
    datamodule.setup("fit")
    datamodule.check_processes(trainer.world_size)
    model = EmbeddingModule(
        backbone=instantiate(cfg.backbone),
        loss=instantiate(cfg.loss),
        miner=instantiate(cfg.miner),
        optimizer=instantiate(cfg.optimizer),
        metrics=instantiate(cfg.metrics),
        scheduler=instantiate(cfg.scheduler),
        query_mask=datamodule.query_mask,
        seed=cfg.seed,
        **cfg.module,
    )
    check_optimization(cfg, model)
    check_unread(cfg, model, datamodule, choices)
    check_metrics(cfg, datamodule, model.metrics)
    trainable = model.has_parameters_to_train()
    check_untrained(cfg, choices, trainable)
    check_lengths(cfg, datamodule, trainable)
    check_one_batch(model, datamodule, cfg, choices)
    check_precision(cfg, trainer, model, datamodule)
    return datamodule, model


def check_job_data(cfg: DictConfig, choices: dict[str, str]) -> None:
    """A sweep's job checked against its data before any job of the sweep runs (the basic launcher's, on
    this machine): what its run's pre-flight checks once the data and the model are built, in a copy of
    torch's random state, so that the jobs then draw what they would have."""
    from noisydml.run.train import failure_message

    with torch.random.fork_rng(devices=[]):
        try:
            build_checked(cfg, choices, check_trainer(cfg))
        except BadInput:
            raise
        except Exception as error:
            # As the run refuses it: anything that stops a run before its first step is the input's.
            raise BadInput(failure_message(error)) from error
