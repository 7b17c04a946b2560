"""Only a real result is ``finished``.

Refused before training (:func:`check_metrics`): a selection metric that is not a validation metric the
run produces (``optimized_metric=test/recall@1`` would select on the test split, ``train/loss`` on the
noisy labels), and a callback that reads a metric where it is not logged. A run that would train no step
or select on nothing is refused with the Trainer's other lengths (:mod:`~noisydml.run.checks.library`).

Recorded with another status, which the report leaves out, saying why (:func:`result_status`): a run in a
debug mode (``debug=``, Lightning's ``fast_dev_run``, ``overfit_batches``, ``limit_*_batches``), whose
metrics are not the config's result, is ``debug``; a run whose selection metric was never produced (it
stopped before any validation) is ``unselected``.
"""

from __future__ import annotations

import difflib
from typing import Any

from omegaconf import DictConfig, OmegaConf

from noisydml.run.checks.walk import entries
from noisydml.utils.errors import BadInput
from noisydml.utils.metric_names import better
from noisydml.utils.run_directory import DEBUG, EVALUATED, FINISHED, STOPPED, UNSELECTED

# The validation stage the selection reads; test/, test_epoch/ and train/ are never selected on.
VALIDATION = "val"
# Lightning's flags that run part of the data: their metrics are not a run's result.
LIMITS = ("limit_train_batches", "limit_val_batches", "limit_test_batches")
# A callback's flag to act at the training epoch's end instead of after each validation (early stopping,
# a checkpoint); Lightning's default, null, chooses by when validation runs.
AT_TRAIN_EPOCH_END = ("check_on_train_epoch_end", "save_on_train_epoch_end")


def _validation_not_at_epoch_end(cfg: DictConfig) -> str | None:
    """When validation runs, where that is not once at each training epoch's end; None where it is."""
    every = OmegaConf.select(cfg, "trainer.check_val_every_n_epoch", default=1)
    interval = OmegaConf.select(cfg, "trainer.val_check_interval", default=None)
    if every != 1:
        return f"every {every} epochs (trainer.check_val_every_n_epoch={every})" if every else "by steps"
    if interval is not None and not (isinstance(interval, float) and interval == 1.0):
        return f"at trainer.val_check_interval={interval}"
    return None


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
) -> tuple[str, str | None]:
    """The status a run that ran to its end records, and why it is not ``finished`` (None when it is).
    ``trained``: it fitted (an evaluation of given weights, or a backbone with nothing to train, selects
    nothing by design); ``epochs_trained``: where ``trainer.max_time`` stopped it, the epochs it trained."""
    if mode := debug_mode(cfg, choices):
        return DEBUG, f"{mode} is a debug mode: its metrics are not a result; run without it for one"
    if cfg.get("ckpt_path"):
        return EVALUATED, (
            f"ckpt_path={cfg.ckpt_path} was scored as it is, not trained: these are that checkpoint's scores "
            "under this config, not a run of it; the run that trained it holds its result"
        )
    if epochs_trained is not None:
        return STOPPED, (
            f"trainer.max_time={cfg.trainer.max_time} stopped training after {epochs_trained} of "
            f"trainer.max_epochs={cfg.trainer.max_epochs} epochs: the weights are a shorter run's, not "
            "this config's result; raise trainer.max_time or drop it, and continue with noisydml resume=..."
        )
    selects = (cfg.get("callbacks") or {}).get("select") is not None
    if trained and datamodule.val_set is not None and selects and not (selection or {}).get("metric"):
        return UNSELECTED, (
            f"optimized_metric={cfg.optimized_metric} was never logged (the run stopped before any "
            "validation, e.g. at trainer.max_steps), so nothing was selected and test/ holds the last "
            "epoch's scores; run to the end of an epoch that validates"
        )
    return FINISHED, None


def check_metrics(cfg: DictConfig, datamodule: Any, evaluator: Any) -> None:
    """The metrics can be scored on the data (:meth:`Evaluator.check_sizes`), and every metric the selection
    or a callback watches is one the run logs when it is read: ``optimized_metric`` a validation metric the
    run computes, no callback on the test split or on a validation metric at a training epoch's end where
    validation runs otherwise, a callback's ``mode`` the way its metric improves."""
    mask = datamodule.query_mask
    # A query's candidates: the gallery, or every other item (leave-one-out).
    candidates = {"test": int((~mask).sum()) if mask is not None else len(datamodule.splits.test) - 1}
    if datamodule.val_set is not None:
        candidates["validation"] = len(datamodule.val_set) - 1
    evaluator.check_sizes(len(datamodule.train_set), candidates)
    stages, metric = datamodule.validation_stages, str(cfg.get("optimized_metric") or "")
    logged = [f"{stage}/{name}" for stage in stages for name in evaluator.names()]
    callbacks = [
        (key, node, str(node.get("monitor") or ""))
        for key, node in entries(cfg, "callbacks")
        if isinstance(node, DictConfig)
    ]
    for key, watched in [("optimized_metric", metric), *((f"{k}.monitor", m) for k, _, m in callbacks)]:
        if watched and watched.split("/", 1)[0] in stages and watched not in logged:
            close = difflib.get_close_matches(watched, logged, n=1)
            hint = f"; did you mean {key}={close[0]}?" if close else ""
            raise BadInput(
                f"{key}={watched} is not a metric this run logs (it logs: {', '.join(logged) or 'none'}); "
                f"choose one of them{hint}"
            )
    names = [f"{VALIDATION}/{name}" for name in evaluator.names()]
    stage = metric.split("/", 1)[0]
    if stage != VALIDATION or metric not in names:
        what = {
            "test": (
                "a test-split metric: selecting on it, or a sweeper optimising it, tunes on the test split"
            ),
            "train": "a training metric, of the noisy training labels, not a validation one",
        }
        reason = what.get(stage.split("_")[0], "not a validation metric this run computes")
        close = difflib.get_close_matches(f"{VALIDATION}/{metric.split('/', 1)[-1]}", names, n=1)
        hint = f"; e.g. optimized_metric={close[0] if close else names[0] if names else 'val/recall@1'}"
        raise BadInput(f"optimized_metric={metric} is {reason}; choose one of: {', '.join(names)}{hint}")
    for key, node, monitor in callbacks:
        if monitor.split("/", 1)[0].startswith("test"):
            raise BadInput(
                f"{key}.monitor={monitor} watches the test split, which would then choose the result; watch "
                f"a validation metric, e.g. {key}.monitor={metric}"
            )
        for flag in AT_TRAIN_EPOCH_END if monitor.startswith(f"{VALIDATION}/") else ():
            if node.get(flag) is True and (when := _validation_not_at_epoch_end(cfg)):
                raise BadInput(
                    f"{key}.{flag}=true reads {monitor} at each training epoch's end, but validation runs "
                    f"{when}, so it would read a metric not yet logged, or a stale one; drop {key}.{flag} "
                    "(it then acts after each validation)"
                )
        mode = node.get("mode") if monitor else None
        if mode is not None and mode != better(monitor):
            way = "falls" if better(monitor) == "min" else "rises"
            raise BadInput(
                f"{key}.mode={mode} on {monitor}, which improves as it {way}, reads the worst epoch as the "
                f"best; use {key}.mode={better(monitor)}"
            )
