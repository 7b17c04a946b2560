"""``noisydml``: compose the config, build the parts, fit, test, and write the run's results."""

from __future__ import annotations

import time
from pathlib import Path

import hydra
import pytorch_lightning as pl
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from noisydml.module import EmbeddingModule
from noisydml.results import format_metrics, write_results
from noisydml.wandb_mode import choose_wandb_mode

CONFIG_PATH = str(Path(__file__).resolve().parents[2] / "conf")


def train(cfg: DictConfig) -> dict[str, float]:
    """Run one experiment described by a composed config; return its test metrics."""
    started = time.perf_counter()
    run_dir = Path(cfg.paths.output_dir)
    choose_wandb_mode()
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
        eval_seed=cfg.seed,
        **cfg.module,
    )
    loggers = [instantiate(logger) for logger in cfg.logger.values()]
    resolved = OmegaConf.to_container(cfg, resolve=True)
    for logger in loggers:
        logger.log_hyperparams(resolved)
    callbacks = [instantiate(callback) for callback in cfg.callbacks.values()]
    trainer = instantiate(cfg.trainer, logger=loggers, callbacks=callbacks)
    try:
        trainer.fit(model, datamodule=datamodule)
        trainer.test(model, datamodule=datamodule, verbose=False)
    finally:
        _finish_wandb()

    datamodule.write_labels(run_dir / "labels.csv")
    results = write_results(
        run_dir,
        metrics=model.test_metrics,
        noise=datamodule.noise_summary(),
        skipped_inputs=datamodule.skipped_inputs,
        config=resolved,
        seed=cfg.seed,
        wall_time_s=round(time.perf_counter() - started, 3),
    )
    if trainer.is_global_zero:
        print(f"\n{format_metrics(model.test_metrics)}\n")
        print(f"run directory: {run_dir.resolve()}\nresults: {results}")
    return model.test_metrics


def _finish_wandb() -> None:
    """Close the W&B run so the next job of a multirun starts its own."""
    import wandb

    wandb.finish()


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="config")
def main(cfg: DictConfig) -> float | None:
    metrics = train(cfg)
    return metrics.get(cfg.get("optimized_metric") or "")


if __name__ == "__main__":
    main()
