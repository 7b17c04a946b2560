"""Model selection on the validation split, the test split scored once with what was selected, and whether
that is the run's result.

With a validation split (``data.val_fraction`` > 0),
:class:`~noisydml.callbacks.checkpointing.SelectedCheckpoint` keeps the weights of the epoch with the best
``optimized_metric`` (a ``val/`` metric). After training the test split is scored with those weights
(``test/...``, the run's result) and with the last epoch's (``test_last/...``), so a reader sees what
selection changed. With ``data.test_at_validation`` the epoch a paper selecting on the test split would have
reported is also recorded (``test_best_epoch/...``), to show what test selection inflates. Only a real
result is ``finished`` (:func:`result_status`): a debug mode's metrics end ``debug``, a run whose selection
metric was never logged ``unselected``, and the report leaves them out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from omegaconf import DictConfig
from pytorch_lightning.callbacks import Callback, ModelCheckpoint

from noisydml.callbacks.checkpointing import SelectedCheckpoint
from noisydml.run.checks.walk import shown
from noisydml.utils.metric_names import VALIDATION, selected
from noisydml.utils.run_directory import (
    DEBUG,
    DIVERGED,
    EVALUATED,
    FINISHED,
    STOPPED,
    UNSELECTED,
    checkpoint_run,
)

# Lightning's flags that run part of the data: their metrics are not a run's result.
LIMITS = ("limit_train_batches", "limit_val_batches", "limit_test_batches")


def watched_callbacks(callbacks: list[Callback], stages: list[str]) -> list[Callback]:
    """The callbacks less a checkpoint selection on a metric no validation loader logs: without a validation
    split there is nothing to select on, and the last epoch is tested, as before validation splits existed
    (another callback on such a metric is refused before training, by ``check_metrics``)."""
    return [
        callback
        for callback in callbacks
        if not isinstance(callback, ModelCheckpoint)
        or callback.monitor is None
        or callback.monitor.split("/", 1)[0] in stages
    ]


def test_selected(
    trainer: pl.Trainer, model: pl.LightningModule, datamodule: pl.LightningDataModule, metric: str
) -> tuple[dict[str, float], dict[str, Any] | None]:
    """Score the test split with the selected checkpoint (and the last epoch); return the metrics and
    what was selected (None when nothing was: no validation split, or no validation ran).

    ``metric`` is the selection metric (``optimized_metric``); its name picks the best test epoch."""
    history = list(model.validation_history)  # testing from a checkpoint reloads the history it holds
    last_epoch = trainer.current_epoch - 1
    select = next((c for c in trainer.callbacks if isinstance(c, SelectedCheckpoint)), None)
    if select is None or not select.best_model_path:
        trainer.test(model, datamodule=datamodule, verbose=False)
        metrics = dict(model.test_metrics)
        if history:  # validated without selecting (callbacks.select=null): the last validation's scores
            metrics.update(_log_selected(trainer, history[-1]))
        return _with_best_test_epoch(metrics, None, history, metric, "max")
    if select.best_epoch == last_epoch:
        # The selected weights are the last epoch's: one test scores both.
        trainer.test(model, datamodule=datamodule, verbose=False)
        metrics = dict(model.test_metrics)
        # test/ -> test_last/, test_train/ -> test_last_train/ (data.score_train).
        last = {"test_last" + name.removeprefix("test"): value for name, value in model.test_metrics.items()}
        metrics.update(last)
        # Logged as a second test would have logged them, so the loggers hold every metric of the run.
        _log(trainer, last)
    else:
        model.test_stage = "test_last"
        trainer.test(model, datamodule=datamodule, verbose=False)
        last = dict(model.test_metrics)
        model.test_stage = "test"
        trainer.test(
            model, datamodule=datamodule, ckpt_path=select.best_model_path, weights_only=True, verbose=False
        )
        metrics = {**model.test_metrics, **last}
    chosen = next(r for r in history if r["epoch"] == select.best_epoch)
    metrics.update(_log_selected(trainer, chosen))
    selection = {
        "metric": select.monitor,
        "mode": select.mode,
        "epoch": select.best_epoch,
        "last_epoch": last_epoch,
        "checkpoint": select.best_model_path,
    }
    return _with_best_test_epoch(metrics, selection, history, metric, select.mode)


def _log_selected(trainer: pl.Trainer, record: dict) -> dict[str, float]:
    """The validation scores of the tested epoch's ``record`` as ``selected_val/...``, logged to every
    logger (``val/...`` stays each epoch's, its latest the last epoch's); returns them."""
    values = {selected(k): v for k, v in record.items() if k.startswith(VALIDATION)}
    _log(trainer, values)
    return values


def _log(trainer: pl.Trainer, metrics: dict[str, float]) -> None:
    """``metrics``, scored after training, to every logger at the last step, written out now (a logger
    writes its buffer only as training and testing end)."""
    for logger in trainer.loggers:
        logger.log_metrics(metrics, step=trainer.global_step)
        logger.save()


def _with_best_test_epoch(
    metrics: dict[str, float], selection: dict | None, history: list[dict], metric: str, mode: str
) -> tuple[dict[str, float], dict | None]:
    """Add the epoch that selecting on the test split would have reported, when it was scored."""
    best_test = _best_test_epoch(history, f"test_epoch/{metric.split('/', 1)[-1]}", mode)
    if best_test is not None:
        metrics.update(
            {
                f"test_best_epoch/{k.split('/', 1)[1]}": v
                for k, v in best_test.items()
                if k.startswith("test_epoch/")
            }
        )
        selection = {**(selection or {}), "test_best_epoch": best_test["epoch"]}
    return metrics, selection


def _best_test_epoch(history: list[dict], name: str, mode: str) -> dict | None:
    """The validation record with the best test-split score ``name``, if the test split was scored at
    validations."""
    scored = [record for record in history if name in record]
    if not scored:
        return None
    sign = -1 if mode == "min" else 1
    # max() keeps the first of equal scores: the earliest epoch, as SelectedCheckpoint does.
    return max(scored, key=lambda record: sign * record[name])


def debug_mode(cfg: DictConfig, choices: dict[str, str]) -> str | None:
    """Why the run is a debug run and not a result (``debug=``, or a Lightning flag that runs part of the
    data), None for a real run."""
    if choices.get("debug"):
        return f"debug={choices['debug']}"
    trainer = cfg.get("trainer") or {}
    if trainer.get("fast_dev_run"):
        return f"trainer.fast_dev_run={trainer.fast_dev_run}"
    if trainer.get("overfit_batches"):
        return f"trainer.overfit_batches={trainer.overfit_batches}"
    for key in LIMITS:
        value = trainer.get(key)
        # 1.0 (a float) is every batch; an int is a number of batches.
        if value is not None and not (isinstance(value, float) and value == 1.0):
            return f"trainer.{key}={value}"
    return None


def result_status(
    cfg: DictConfig,
    choices: dict[str, str],
    datamodule: Any,
    selection: dict | None,
    trained: bool,
    epochs_trained: int | None = None,
    diverged: str | None = None,
) -> tuple[str, str | None]:
    """The status a run that ran to its end records, and why it is not ``finished`` (None when it is).
    ``trained``: it fitted (an evaluation of given weights, or a backbone with nothing to train, selects
    nothing by design); ``epochs_trained``: where ``trainer.max_time`` stopped it, the epochs it trained;
    ``diverged``: what the divergence watch saw, where the weights blew up while training."""
    if mode := debug_mode(cfg, choices):
        return DEBUG, f"{mode} is a debug mode: its metrics are not a result; run without it for one"
    if cfg.get("ckpt_path"):
        unknown = (
            ""
            if checkpoint_run(Path(str(cfg.ckpt_path))) is not None
            else "; it lies in no run folder, so the config it trained with is unknown: the training keys "
            "recorded here (noise, optimizer, trainer) are this evaluation's, not the checkpoint's"
        )
        return EVALUATED, (
            f"ckpt_path={cfg.ckpt_path} was scored as it is, not trained: these are that checkpoint's scores "
            f"under this config, not a run of it; the run that trained it holds its result{unknown}"
        )
    if epochs_trained is not None:
        return STOPPED, (
            f"trainer.max_time={shown(cfg.trainer.max_time)} stopped training after {epochs_trained} of "
            f"trainer.max_epochs={cfg.trainer.max_epochs} epochs: the weights are a shorter run's, not "
            "this config's result; raise trainer.max_time or drop it, and continue with noisydml resume=..."
        )
    if diverged is not None:
        return DIVERGED, f"{diverged}: its scores are no result (the embedding may have collapsed)"
    selects = (cfg.get("callbacks") or {}).get("select") is not None
    if trained and datamodule.val_set is not None and selects and not (selection or {}).get("metric"):
        return UNSELECTED, (
            f"optimized_metric={cfg.optimized_metric} was never logged (the run stopped before any "
            "validation, e.g. at trainer.max_steps), so nothing was selected and test/ holds the last "
            "epoch's scores; run to the end of an epoch that validates"
        )
    return FINISHED, None
