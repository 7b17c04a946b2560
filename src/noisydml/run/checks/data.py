"""What only the built data and model can say, asked before the first step: a value given that nothing
built reads, the Trainer's counts against the data's real length, the metrics against the splits, one batch
through the backbone and the training step, the precision on that batch, and the callbacks that read the
data."""

from __future__ import annotations

import copy
import difflib
import math
from typing import Any

import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint, Timer

from noisydml.callbacks.checkpointing import SelectedCheckpoint
from noisydml.core.embedding_module import EmbeddingModule
from noisydml.core.hooks import hooks_of
from noisydml.run.checks.library import build, check_optimization
from noisydml.run.checks.walk import (
    builds,
    entries,
    given_keys,
    import_target,
    leaves,
    raw,
    shown,
)
from noisydml.utils.errors import BadInput
from noisydml.utils.metric_names import VALIDATION, better
from noisydml.utils.unread import Parts, ReadsItsKeys

# A backbone's parameters that size its input.
INPUT_SIZES = ("in_features", "in_channels", "input_length", "input_size")
# A callback's flag to act at the training epoch's end instead of after each validation (early stopping,
# a checkpoint); Lightning's default, null, chooses by when validation runs.
AT_TRAIN_EPOCH_END = ("check_on_train_epoch_end", "save_on_train_epoch_end")


def check_precision(cfg: DictConfig, trainer: Any, model: Any, datamodule: Any) -> None:
    """The first batch, a training step and the loss after it in the run's precision (``16-true`` casts
    the weights and the optimizer's state to float16), on a copy of the model."""
    precision = str(cfg.trainer.get("precision", "32-true"))
    if precision in ("32", "32-true"):
        return
    batch, training_set = datamodule.first_batch(), datamodule.training_set()
    plugin = trainer.precision_plugin
    trial = plugin.convert_module(copy.deepcopy(model))
    hooks_of(trial.loss).setup(training_set)
    x, labels, indices = plugin.convert_input(batch)
    params = [p for p in trial.parameters() if p.requires_grad]
    values = []
    with torch.random.fork_rng():
        try:
            optimizer = instantiate(cfg.optimizer)(params) if params else None
            for _ in range(2):
                with plugin.forward_context():
                    loss = trial._step_loss(x, labels, indices, trial.loss, trial.miner)
                values.append(float(loss.detach().float()))
                if optimizer is None or not loss.requires_grad or not math.isfinite(values[-1]):
                    break
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        except Exception as error:
            raise BadInput(
                f"trainer.precision={precision} fails on the first batch ({str(error).splitlines()[0]}); "
                "use trainer.precision=32-true (or bf16-mixed)"
            ) from error
    if not math.isfinite(values[-1]):
        raise BadInput(
            f"trainer.precision={precision}: the loss is {values[-1]} "
            f"{'on the first batch' if len(values) == 1 else 'after the first step'} in this precision "
            "(float16's range and resolution are too small for this model and optimizer); use "
            "trainer.precision=32-true, or bf16-mixed"
        )


def check_unread(cfg: DictConfig, model: Any, datamodule: Any, processes: int = 1) -> None:
    """A value given for this run (on the command line, a sweep job's own values too) that nothing reads
    in the parts built: it would be recorded as the run's without having been used. Each built object of
    this package says which of its keys go unread (``unread_keys``, :mod:`noisydml.utils.unread`); the
    table below is the libraries' (the Trainer, torch's schedulers, Lightning's callbacks). A protocol's or
    an experiment's value, shared by every method it runs, is a default, not the run's choice (the yu2018
    protocol freezes BatchNorm for its LeNet runs too)."""
    keys = given_keys()
    steps, most = _steps(cfg, datamodule), OmegaConf.select(cfg, "trainer.max_steps", default=-1)
    if isinstance(most, int) and most > 0:
        steps = most if steps is None else min(steps, most)
    parts = Parts(model, datamodule, _on_cpu(cfg), steps)
    for path, built in _built_objects(cfg, model, datamodule, keys):
        for name, why in built.unread_keys(parts).items():
            key = f"{path}.{name}" if name else path
            if key in keys or (not name and path.split(".")[0] in keys):
                value = f"={shown(raw(cfg, key, None))}" if name else ""
                raise BadInput(f"{key}{value} {why.format(key=key, node=path)}")
    for key, why in _unread_by_libraries(cfg, datamodule, processes).items():
        # A callback chosen for the run is given with its keys.
        given = key in keys or any(k.startswith(f"{key}.") for k in keys)
        if given or (key.startswith("callbacks.") and "callbacks" in keys):
            value = raw(cfg, key, None)
            shown_value = "" if isinstance(value, dict) else f"={shown(value)}"
            raise BadInput(f"{key}{shown_value} {why}")
    # An experiment's studies: scripts/reproduce.py reads them, and runs each trial with its own values.
    if tuned := sorted(k for k in keys if k == "tune" or k.startswith("tune.")):
        key = tuned[0]
        raise BadInput(
            f"{key}={shown(OmegaConf.select(cfg, key, default=None))} sets the studies scripts/reproduce.py "
            "runs for an experiment's tuned methods, which a run does not read; drop it, or give it to "
            f"scripts/reproduce.py <experiment> {key}=..."
        )


def _steps(cfg: DictConfig, datamodule: Any) -> int | None:
    """The training steps the run's epochs take; None where no count of epochs bounds them."""
    epochs = OmegaConf.select(cfg, "trainer.max_epochs", default=None)
    return epochs * datamodule.sampler.batches_per_epoch if isinstance(epochs, int) and epochs > 0 else None


def _on_cpu(cfg: DictConfig) -> bool:
    return not torch.cuda.is_available() or str(cfg.trainer.get("accelerator")) == "cpu"


def _built_objects(
    cfg: DictConfig, model: Any, datamodule: Any, keys: set[str]
) -> list[tuple[str, ReadsItsKeys]]:
    """Each built object that says which of its keys go unread, by its node's path: the parts the run holds
    and the objects they hold as an attribute named for the key that builds them (``noise.backbone``), and
    the callbacks given for this run, built for the question (the run builds its own)."""
    roots = {
        "module": model,
        "backbone": model.backbone,
        "loss": model.loss,
        "miner": model.miner,
        "data": datamodule,
        "noise": datamodule.noise,
        "dataset": datamodule.dataset,
    }
    found = [(path, part) for path, part in roots.items() if isinstance(part, ReadsItsKeys)]
    for path, part in list(roots.items())[1:]:
        inner = {**vars(part), **getattr(part, "_modules", {})} if hasattr(part, "__dict__") else {}
        found += [(f"{path}.{name}", item) for name, item in inner.items() if isinstance(item, ReadsItsKeys)]
    for path, node in entries(cfg, "callbacks"):
        given = "callbacks" in keys or any(k == path or k.startswith(f"{path}.") for k in keys)
        if given and builds(node) and hasattr(import_target(str(node["_target_"])), "unread_keys"):
            found.append((path, build(path, node)))
    return found


def _unread_by_libraries(cfg: DictConfig, datamodule: Any, processes: int) -> dict[str, str]:
    """The keys of library classes that the run's other values leave unread, with why and the fix."""
    trainer = cfg.trainer
    epochs, steps = trainer.get("max_epochs"), _steps(cfg, datamodule)
    max_steps = trainer.get("max_steps", -1)
    milestones = OmegaConf.select(cfg, "scheduler.milestones", default=None)
    unread = {}
    if steps is not None and isinstance(max_steps, int) and max_steps > steps:
        unread["trainer.max_steps"] = (
            f"stops training at that step, but trainer.max_epochs={epochs} ends the run after {steps} steps "
            "first, so nothing reads it; drop trainer.max_steps, or train by steps: trainer.max_epochs=-1"
        )
    if isinstance(epochs, int) and epochs > 0 and min(milestones or [epochs]) >= epochs:
        unread["scheduler.milestones"] = (
            f"drops the learning rate at those epochs, but the run trains trainer.max_epochs={epochs}, so it "
            f"reaches none and nothing reads them; give a milestone below {epochs}, or drop "
            "scheduler.milestones"
        )
    if not trainer.get("gradient_clip_val"):
        unread["trainer.gradient_clip_algorithm"] = (
            "says how gradients are clipped, but trainer.gradient_clip_val is not set, so none is and "
            "nothing reads it; give the bound, e.g. trainer.gradient_clip_val=1.0, or drop "
            "trainer.gradient_clip_algorithm"
        )
    if trainer.get("benchmark") and _on_cpu(cfg):
        unread["trainer.benchmark"] = (
            "lets cuDNN choose its convolution algorithms, but this run trains on the CPU, so nothing reads "
            "it; drop trainer.benchmark"
        )
    if not datamodule.validation_stages:
        for name in (
            "check_val_every_n_epoch",
            "val_check_interval",
            "num_sanity_val_steps",
            "limit_val_batches",
        ):
            unread[f"trainer.{name}"] = (
                "says when or how much the run validates, but it holds out no validation split "
                "(data.val_fraction=0) and scores none at validation, so nothing reads it; drop "
                f"trainer.{name}, or hold one out, e.g. data.val_fraction=0.1"
            )
    if trainer.get("sync_batchnorm") and processes == 1:
        unread["trainer.sync_batchnorm"] = (
            "shares BatchNorm's statistics between the processes of a multi-GPU run, but this run is one "
            "process, so nothing reads it; drop trainer.sync_batchnorm"
        )
    validations = _validations(cfg, datamodule)
    for key, node in entries(cfg, "callbacks"):
        if not builds(node) or not _is_subclass(node, EarlyStopping) or validations is None:
            continue
        patience = node.get("patience", 3)
        thresholds = (
            node.get("stopping_threshold") is not None or node.get("divergence_threshold") is not None
        )
        if isinstance(patience, int) and patience >= validations - 1 and not thresholds:
            fix = (
                f"give {key}.patience below {validations - 1}"
                if validations > 2
                else "validate more often (trainer.max_epochs, trainer.check_val_every_n_epoch)"
            )
            unread[key] = (
                f"stops the run after patience={patience} validations without improvement, but the run "
                f"validates {validations} time{'s' * (validations != 1)}, so it can never stop it early and "
                f"nothing reads it; {fix}, or drop {key}"
            )
    return unread


def _validations(cfg: DictConfig, datamodule: Any) -> int | None:
    """How many times the run validates, where it validates at epochs' ends (the last epoch's always,
    :class:`noisydml.callbacks.checkpointing.ValidateLastEpoch`); None where that is not known."""
    epochs = OmegaConf.select(cfg, "trainer.max_epochs", default=None)
    every = OmegaConf.select(cfg, "trainer.check_val_every_n_epoch", default=1)
    if not datamodule.validation_stages or not isinstance(epochs, int) or epochs < 1 or not every:
        return None
    if _within_epoch(OmegaConf.select(cfg, "trainer.val_check_interval", default=None)):
        return None
    return -(-epochs // every)


def _is_subclass(node: Any, base: type) -> bool:
    """Whether ``node`` builds an object of a subclass of ``base``."""
    klass = import_target(str(node.get("_target_")))
    return isinstance(klass, type) and issubclass(klass, base)


def check_untrained(cfg: DictConfig, choices: dict[str, str], has_parameters_to_train: bool) -> None:
    """A run with nothing to train (``backbone=identity``) scores its inputs: its loss and miner never run,
    so it is named by what it is (``report.method``, as ``method=bdml/pca`` labels PCA), not by them; and
    what trains (the loss, the miner, the optimizer, the scheduler), given for it, is read by nothing."""
    training = ("loss", "miner", "optimizer", "scheduler")
    given = sorted(k for k in given_keys() if k.split(".")[0] in training and "." in k)
    if not has_parameters_to_train and not cfg.get("ckpt_path") and given:
        key = given[0]
        raise BadInput(
            f"{key}={shown(raw(cfg, key, None))} sets how the run trains, but "
            f"backbone={choices.get('backbone')} has nothing to train, so nothing reads it; drop {key}"
        )
    if (
        has_parameters_to_train
        or cfg.get("ckpt_path")
        or OmegaConf.select(cfg, "report.method", default=None)
    ):
        return
    named = f"loss={choices.get('loss')} and miner={choices.get('miner')}"
    raise BadInput(
        f"backbone={choices.get('backbone')} has nothing to train, so {named} never run: the run scores its "
        f"inputs, which a report would file under the method {named} names; label what it is, e.g. "
        "report.method=Inputs (method=bdml/pca labels BDML's PCA baseline), or choose a backbone with weights"
    )


def check_lengths(cfg: DictConfig, datamodule: Any, has_parameters_to_train: bool) -> None:
    """The Trainer's values that count epochs and batches, against the data's real number of batches: a
    run that would train no step (its untrained network recorded as the result) or select on nothing,
    and values Lightning checks only when it reaches them, after an epoch has trained, or rounds to none."""
    trainer = cfg.trainer
    limit = trainer.get("limit_train_batches")
    if limit is not None and not isinstance(limit, bool) and limit == 0:
        raise BadInput(
            f"trainer.limit_train_batches={limit} trains no step: the untrained network would be tested and "
            "recorded as the result; drop it (data.batches_per_epoch=N shortens an epoch)"
        )
    if trainer.get("max_epochs") == 0 and has_parameters_to_train and not cfg.get("ckpt_path"):
        raise BadInput(
            "trainer.max_epochs=0 trains no step, but the backbone has weights to train: the untrained "
            "network would be recorded as the result; give trainer.max_epochs >= 1 (0 is for a backbone "
            "with nothing to train, e.g. backbone=identity)"
        )
    train_batches = datamodule.sampler.batches_per_epoch
    epochs, min_steps = trainer.get("max_epochs"), trainer.get("min_steps")
    if min_steps and epochs not in (None, -1) and min_steps > epochs * train_batches:
        raise BadInput(
            f"trainer.min_steps={min_steps} is more than the {epochs * train_batches} steps of "
            f"trainer.max_epochs={epochs}, which ends the run first, so nothing reads it; lower "
            "trainer.min_steps, or raise trainer.max_epochs"
        )
    # Lightning's own reading of the duration (the Trainer built by check_trainer took it).
    if (max_time := raw(cfg, "trainer.max_time", None)) is not None and not Timer(max_time).time_remaining():
        raise BadInput(
            f"trainer.max_time={shown(trainer.get('max_time'))} stops the run before its first step: the "
            "untrained network would be tested as the result; give it time (DD:HH:MM:SS, e.g. "
            "trainer.max_time=00:12:00:00), or drop it"
        )
    val_batches = [
        math.ceil(len(dataset) / datamodule.eval_batch_size)
        for dataset in (datamodule.val_set,)
        if dataset is not None
    ]
    interval = trainer.get("val_check_interval")
    per_epoch = trainer.get("check_val_every_n_epoch", 1) is not None
    # A whole number is a count of batches; a float, a fraction of the epoch.
    batches = interval if isinstance(interval, int) and not isinstance(interval, bool) else None
    if batches is not None and per_epoch and batches > train_batches:
        raise BadInput(
            f"trainer.val_check_interval={interval} is more batches than an epoch's {train_batches}, so no "
            "epoch would validate; drop it (validation runs at each epoch's end)"
        )
    if _within_epoch(interval) and per_epoch and datamodule.val_set is not None and batches != train_batches:
        # The selection keeps the best validation's weights and records them as an epoch's: weights of
        # a validation within an epoch would be recorded as that epoch's, and tested as if selected there.
        raise BadInput(
            f"trainer.val_check_interval={interval} validates within an epoch, but a run that holds out a "
            "validation split selects, records and tests whole epochs; drop it (validation runs at each "
            "epoch's end), or trainer.check_val_every_n_epoch=N to validate less often"
        )
    test_batches = [math.ceil(len(datamodule.splits.test) / datamodule.eval_batch_size)]
    limits = ("limit_train_batches", [train_batches]), ("limit_val_batches", val_batches)
    for key, counts in (*limits, ("limit_test_batches", test_batches)):
        limit = trainer.get(key)
        if isinstance(limit, float) and 0 < limit < 1 and any(int(n * limit) == 0 for n in counts):
            raise BadInput(
                f"trainer.{key}={limit} of {min(counts)} batch{'es' * (min(counts) != 1)} rounds to none; "
                f"use at least {1 / min(counts):.3g}, or a number of batches, e.g. trainer.{key}=1"
            )
    limit, metric = trainer.get("limit_val_batches"), cfg.get("optimized_metric") or ""
    selects = (cfg.get("callbacks") or {}).get("select") is not None
    if datamodule.val_set is not None and selects and limit is not None and limit == 0:
        raise BadInput(
            f"trainer.limit_val_batches={limit} runs no validation, so optimized_metric={metric} would "
            "select nothing and the last epoch be tested as if selected; drop it, or train without a "
            "validation split: data.val_fraction=0"
        )


def check_metrics(cfg: DictConfig, datamodule: Any, evaluator: Any) -> None:
    """The metrics can be scored on the data (:meth:`Evaluator.check_sizes` and ``check_classes``), and every
    metric the selection or a callback watches is one the run logs when it is read: ``optimized_metric`` a
    validation metric the run computes, no callback on the test split or on a validation metric at a training
    epoch's end where validation runs otherwise, a callback's ``mode`` the way its metric improves."""
    mask = datamodule.query_mask
    # A query's candidates: the gallery, or every other item (leave-one-out).
    candidates = {"test": int((~mask).sum()) if mask is not None else len(datamodule.splits.test) - 1}
    if datamodule.val_set is not None:
        candidates["validation"] = len(datamodule.val_set) - 1
    evaluator.check_sizes(len(datamodule.train_set), candidates)
    scored = {"test": datamodule.splits.test.labels}
    if datamodule.val_set is not None:
        scored["validation"] = datamodule.val_set.labels
    evaluator.check_classes(datamodule.train_set.labels, scored)
    # An evaluation (ckpt_path) fits nothing: what selects and watches the training is its run's, as recorded.
    metric = "" if cfg.get("ckpt_path") else str(cfg.get("optimized_metric") or "")
    stages = datamodule.validation_stages
    logged = [f"{stage}/{name}" for stage in stages for name in evaluator.names()]
    callbacks = [
        (key, node, str(node.get("monitor") or ""))
        for key, node in entries(cfg, "callbacks")
        if isinstance(node, DictConfig) and not cfg.get("ckpt_path")
    ]
    for key, watched in [("optimized_metric", metric), *((f"{k}.monitor", m) for k, _, m in callbacks)]:
        if watched and watched.split("/", 1)[0] in stages and watched not in logged:
            close = difflib.get_close_matches(watched, logged, n=1)
            hint = f"; did you mean {key}={close[0]}?" if close else ""
            raise BadInput(
                f"{key}={watched} is not a metric this run logs (it logs: {', '.join(logged) or 'none'}); "
                f"choose one of them{hint}"
            )
    # The validation metrics the selection reads; test/, test_epoch/ and train/ are never selected on.
    names = [f"{VALIDATION}{name}" for name in evaluator.names()]
    if metric not in names and not cfg.get("ckpt_path"):
        stage = metric.split("/", 1)[0]
        what = {
            "test": (
                "a test-split metric: selecting on it, or a sweeper optimising it, tunes on the test split"
            ),
            "train": "a training metric, of the noisy training labels, not a validation one",
        }
        reason = what.get(stage.split("_")[0], "not a validation metric this run computes")
        close = difflib.get_close_matches(f"{VALIDATION}{metric.split('/', 1)[-1]}", names, n=1)
        hint = f"; e.g. optimized_metric={close[0] if close else names[0] if names else 'val/recall@1'}"
        raise BadInput(f"optimized_metric={metric} is {reason}; choose one of: {', '.join(names)}{hint}")
    for key, node, monitor in callbacks:
        if monitor.split("/", 1)[0].startswith("test"):
            raise BadInput(
                f"{key}.monitor={monitor} watches the test split, which would then choose the result; watch "
                f"a validation metric, e.g. {key}.monitor={metric}"
            )
        for flag in AT_TRAIN_EPOCH_END if monitor.startswith(VALIDATION) else ():
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
        # A checkpoint selection on a split no loader logs is dropped (selection.watched_callbacks).
        selection = _is_subclass(node, ModelCheckpoint)
        if _is_subclass(node, SelectedCheckpoint) and monitor and monitor != metric:
            raise BadInput(
                f"{key}.monitor={monitor} would select the tested epoch, but the run records, and a sweeper "
                f"optimises, optimized_metric={metric} as what selected it; set optimized_metric={monitor} "
                f"instead (the selection follows it)"
            )
        if monitor and monitor.split("/", 1)[0] not in stages and not selection:
            raise BadInput(
                f"{str(node.get('_target_')).rsplit('.', 1)[-1]} monitors {monitor}, which no validation "
                f"loader logs (they log: {', '.join(stages) or 'nothing, data.val_fraction=0'}); set "
                "data.val_fraction > 0 for val/ metrics, or remove the callback"
            )


def _validation_not_at_epoch_end(cfg: DictConfig) -> str | None:
    """When validation runs, where that is not once at each training epoch's end; None where it is."""
    every = OmegaConf.select(cfg, "trainer.check_val_every_n_epoch", default=1)
    interval = OmegaConf.select(cfg, "trainer.val_check_interval", default=None)
    if every != 1:
        return f"every {every} epochs (trainer.check_val_every_n_epoch={every})" if every else "by steps"
    if _within_epoch(interval):
        return f"at trainer.val_check_interval={interval}"
    return None


def _within_epoch(interval: Any) -> bool:
    """Whether ``trainer.val_check_interval`` asks for validation other than at each epoch's end."""
    return interval is not None and not (isinstance(interval, float) and interval == 1.0)


def check_one_batch(model: Any, datamodule: Any, cfg: DictConfig, choices: dict[str, str]) -> None:
    """One batch of K samples of P classes through the backbone, then through the training step's hook
    sequence (:meth:`EmbeddingModule.dry_run_step`), without changing what training then draws or learns."""
    x, y, indices = datamodule.first_batch()
    if torch.is_floating_point(x) and not torch.isfinite(x).all():
        bad = indices[~torch.isfinite(x.flatten(1)).all(1)].tolist()
        raise BadInput(
            f"dataset={choices.get('dataset', '?')}: training samples {bad[:5]} hold NaN or infinite values; "
            "fix or drop them in the data (a NaN input makes the loss NaN)"
        )
    backbone, loss, miner = (choices.get(k, "?") for k in ("backbone", "loss", "miner"))
    # The backbone's keys that size its input, for the fix.
    sizes = [f"backbone.{k}" for k, _ in leaves(raw(cfg, "backbone")) if k.rsplit(".", 1)[-1] in INPUT_SIZES]
    _check_backbone(model, x, backbone, sizes)
    try:
        value = model.dry_run_step((x, y, indices), datamodule.training_set())
    except Exception as error:
        raise BadInput(
            f"loss={loss} with miner={miner} fails on the first batch: {str(error).splitlines()[0]}"
        ) from error
    if not torch.isfinite(value):
        raise BadInput(
            f"loss={loss} is {value.item()} on the first batch; check the data and the loss's keys"
        )


def _check_backbone(model: Any, x: torch.Tensor, backbone: str, sizes: list[str]) -> None:
    """The backbone takes the data's inputs and gives finite embeddings (eval mode, no gradient)."""
    try:
        with model.unchanged():
            embeddings = model(x)
    except RuntimeError as error:
        # A convolution of another dimension than the inputs' (LeNet's 2-d on MNIST-1D's 1-d signals):
        # no input size fits, only another backbone.
        conv = next(
            (m for m in model.backbone.modules() if isinstance(m, torch.nn.modules.conv._ConvNd)), None
        )
        dims = len(conv.kernel_size) if conv is not None else x.dim() - 2
        fix = (
            f"its first convolution is {dims}-d, the inputs {x.dim() - 2}-d; choose a backbone for "
            f"{x.dim() - 2}-d inputs"
            if dims != x.dim() - 2
            else "choose a backbone for this data set"
            + (f" or set its input size ({', '.join(sizes)})" if sizes else "")
        )
        raise BadInput(
            f"backbone={backbone} cannot take the data's inputs of shape {tuple(x.shape[1:])} "
            f"({str(error).splitlines()[0]}); {fix}"
        ) from error
    if not torch.isfinite(embeddings).all():
        raise BadInput(
            f"backbone={backbone} gives NaN or infinite embeddings on the first batch; check the data"
        )


def check_callbacks(callbacks: dict[str, Any], datamodule: Any) -> None:
    """A built callback that reads the data checks what it reads against it before the first step (its
    ``check_data(key, datamodule)``, given its config key): a value the data cannot serve would otherwise be
    skipped without a word, or fail after an epoch has trained. A node that builds no Lightning callback is
    refused by its key (Lightning fails on it after the Trainer is built, naming a list index)."""
    for key, callback in callbacks.items():
        if not isinstance(callback, pl.Callback):
            raise BadInput(
                f"{key} builds a {type(callback).__module__}.{type(callback).__qualname__}, which is no "
                f"Lightning callback; give a pytorch_lightning.callbacks.Callback's class as {key}._target_, "
                f"or drop {key}"
            )
        if callable(check := getattr(callback, "check_data", None)):
            check(key, datamodule)


def build_checked(cfg: DictConfig, choices: dict[str, str], trainer: Any) -> tuple[Any, EmbeddingModule]:
    """The data module with its noisy labels drawn and the model, with the checks that need them: what
    a run builds after its folder is known (:func:`noisydml.run.preflight.prepare`), and what a local sweep
    checks of each job before the first runs (:func:`noisydml.run.checks.config.check_job`)."""
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
    check_metrics(cfg, datamodule, model.metrics)
    check_unread(cfg, model, datamodule, trainer.world_size)
    trainable = model.has_parameters_to_train()
    check_untrained(cfg, choices, trainable)
    check_lengths(cfg, datamodule, trainable)
    check_one_batch(model, datamodule, cfg, choices)
    check_precision(cfg, trainer, model, datamodule)
    return datamodule, model
