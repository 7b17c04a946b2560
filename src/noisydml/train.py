"""A run: build the parts of a composed config, fit, test, and write the run's results.

The command line is :mod:`noisydml.cli`, which imports this module only when a run starts."""

from __future__ import annotations

import time
from pathlib import Path

import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.plugins.environments import SLURMEnvironment

from noisydml.checkpointing import resume_checkpoint
from noisydml.module import EmbeddingModule
from noisydml.progress import EpochLine, wants_progress_bar
from noisydml.quiet import quiet_wandb, silence_known_noise
from noisydml.results import completed_results, config_differences, format_metrics, write_results
from noisydml.wandb_mode import choose_wandb_mode

silence_known_noise()


def train(cfg: DictConfig) -> dict[str, float]:
    """Run one experiment described by a composed config; return its test metrics."""
    started = time.perf_counter()
    run_dir = Path(cfg.paths.output_dir)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    if (done := completed_results(run_dir)) is not None:
        return _already_done(run_dir, done, resolved)
    checkpoint = resume_checkpoint(run_dir) if cfg.resume == "auto" else None
    choose_wandb_mode()
    quiet_wandb()
    if cfg.cpu_threads is not None:
        torch.set_num_threads(cfg.cpu_threads)
    pl.seed_everything(cfg.seed, workers=True)

    # Built objects are passed after instantiation: Hydra would turn a dataclass argument back into config.
    datamodule = instantiate(cfg.data, _partial_=True)(
        dataset=instantiate(cfg.dataset), noise=instantiate(cfg.noise)
    )
    # Reads the data and draws the noisy labels now, so bad input fails before any training.
    datamodule.setup("fit")
    model = EmbeddingModule(
        backbone=instantiate(cfg.backbone),
        loss=instantiate(cfg.loss),
        miner=instantiate(cfg.miner),
        optimizer=instantiate(cfg.optimizer),
        scheduler=instantiate(cfg.scheduler),
        query_mask=datamodule.query_mask,
        seed=cfg.seed,
        **cfg.module,
    )
    loggers = [instantiate(logger) for logger in cfg.logger.values()]
    for logger in loggers:
        logger.log_hyperparams(resolved)
    callbacks = [instantiate(callback) for callback in cfg.callbacks.values()]
    progress_bar = wants_progress_bar(cfg.trainer.enable_progress_bar)
    if not progress_bar:
        callbacks.append(EpochLine())
    plugins = [instantiate(plugin) for plugin in cfg.trainer.get("plugins") or []]
    if SLURMEnvironment.detect():
        # submitit owns requeueing on SLURM; Lightning's own would write a second, mid-step checkpoint
        # that trainer.test() then silently loads.
        plugins.append(SLURMEnvironment(auto_requeue=False))
    trainer = instantiate(
        cfg.trainer, logger=loggers, callbacks=callbacks, plugins=plugins, enable_progress_bar=progress_bar
    )
    try:
        if checkpoint is not None:
            print(f"resuming from {checkpoint}")
        if model.has_parameters_to_train():
            trainer.fit(model, datamodule=datamodule, ckpt_path=checkpoint, weights_only=True)
        else:
            # BDML's PCA baseline (backbone=identity): the inputs themselves are evaluated.
            print(f"nothing to train in backbone {type(model.backbone).__name__}: evaluating it as it is")
        trainer.test(model, datamodule=datamodule, verbose=False)
    finally:
        _finish_wandb()

    if not trainer.is_global_zero:
        return model.test_metrics
    datamodule.write_labels(run_dir / "labels.csv")
    model.hooks.save(run_dir)
    results = write_results(
        run_dir,
        metrics=model.test_metrics,
        noise=datamodule.noise_summary(),
        skipped_inputs=datamodule.skipped_inputs,
        config=resolved,
        seed=cfg.seed,
        wall_time_s=round(time.perf_counter() - started, 3),
    )
    print(f"\n{format_metrics(model.test_metrics)}\n")
    print(f"run directory: {run_dir.resolve()}\nresults: {results}")
    return model.test_metrics


def _already_done(run_dir: Path, done: dict, resolved: dict) -> dict[str, float]:
    """A re-run sweep skips finished jobs; a finished job of another config is never overwritten."""
    differences = config_differences(done["config"], resolved)
    if differences:
        raise FileExistsError(
            f"{run_dir} already holds the results of a different config (differs in: "
            f"{', '.join(differences[:8])}); choose another hydra.run.dir / hydra.sweep.dir"
        )
    print(f"{run_dir} is already complete; skipping (delete its results.json to run it again)")
    return done["metrics"]


def _finish_wandb() -> None:
    """Close the W&B run so the next job of a multirun starts its own."""
    import wandb

    wandb.finish()
