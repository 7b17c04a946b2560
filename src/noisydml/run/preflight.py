"""Pre-flight: everything a run needs is checked and built here, in one place, before the first training
step; bad input is refused with the key, the value and the fix (:class:`noisydml.utils.errors.BadInput`).

:func:`prepare` runs, cheapest first:

1. :func:`check_config`, on the composed config before anything is built: every key a user types that
   no constructor checks, against its type and range (:data:`RULES`, :data:`CHOICES`), and every key of a
   ``_target_`` node against the parameters of the class it builds (a typo such as ``+noise.rat=0.2``).
   Keys their constructors check (``noise.rate``, ``data.val_fraction``) are checked there, once.
2. The checkpoint to resume from. Before any of this, :mod:`noisydml.run.train` checks the run directory
   (:func:`check_run_directory`: it holds no other run; :func:`check_output_dir`: it can be written).
3. The data module, with its noisy labels drawn (:func:`check_noise`), and the model.
4. :func:`check_one_batch`: one batch through the backbone and the training step's hook sequence
   (shape mismatches, NaN inputs, a loss that cannot take its miner's tuples), without changing what
   training then draws or learns.
"""

from __future__ import annotations

import difflib
import inspect
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf
from torch.utils.data import default_collate

from noisydml.callbacks.checkpointing import resume_checkpoint
from noisydml.core.embedding_module import EmbeddingModule
from noisydml.loggers.run_fields import method_groups
from noisydml.loggers.wandb_mode import choose_wandb_mode, logs_to_wandb
from noisydml.run.consumers import (
    check_consumer_keys,
    check_metric_sizes,
    check_optimization,
    check_precision,
    check_trainer,
    check_types,
)
from noisydml.run.identity import check_identity
from noisydml.run.ranges import check_ranges
from noisydml.run.real_result import check_selection, check_trains
from noisydml.run.results import config_differences
from noisydml.run.run_folders import check_output_folders
from noisydml.utils.checks import Rule, check_value, check_writable
from noisydml.utils.errors import BadInput
from noisydml.utils.quiet import quiet_wandb
from noisydml.utils.run_directory import RunDir


@dataclass(frozen=True)
class Prepared:
    """What training starts from: the checkpoint to resume (None: from the start), the data module with
    its noisy labels drawn, and the model, which has passed one batch."""

    checkpoint: Path | None
    datamodule: Any
    model: EmbeddingModule


def prepare(cfg: DictConfig, run: RunDir, choices: dict[str, str]) -> Prepared:
    """Check and build everything training needs, refusing bad input before the first step."""
    check_config(cfg)
    check_ranges(cfg)
    check_consumer_keys(cfg)
    check_types(cfg)
    check_method(choices)
    check_identity(cfg, choices)
    check_hardware(cfg)
    trainer = check_trainer(cfg)
    for key, path in _checkpoint_dirs(cfg):
        check_output_dir(Path(path), key)
    check_output_folders(OmegaConf.to_container(cfg, resolve=True), run.path)
    checkpoint = resume_checkpoint(run.path, cfg.resume_from) if cfg.resume == "auto" else None
    if logs_to_wandb(cfg.logger):
        choose_wandb_mode()
        quiet_wandb()
    threads = cfg.cpu_threads
    if threads is None and cfg.get("numerics") == "portable":
        # A sum split over threads rounds differently with their number, which differs between machines.
        threads = 1
    if threads is not None:
        torch.set_num_threads(threads)
    pl.seed_everything(cfg.seed, workers=True)

    # Built objects are passed after instantiation: Hydra would turn a dataclass argument back into config.
    datamodule = instantiate(cfg.data, _partial_=True)(
        dataset=instantiate(cfg.dataset), noise=instantiate(cfg.noise)
    )
    # Reads the data and draws the noisy labels now, so bad input fails before any training.
    datamodule.setup("fit")
    check_noise(cfg, datamodule.num_train_classes)
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
    check_selection(cfg, datamodule, model.metrics)
    check_trains(cfg, model.has_parameters_to_train())
    check_metric_sizes(datamodule, model.metrics)
    check_one_batch(model, datamodule, choices)
    check_precision(cfg, trainer, model, datamodule)
    return Prepared(checkpoint, datamodule, model)


INF = math.inf


RULES = (
    # numpy's seeds are below 2**32.
    Rule("seed", int, 0, 2**32, example="seed=0"),
    Rule("cpu_threads", int, 1, optional=True, example="cpu_threads=1"),
    # 0: evaluate the backbone as it is (BDML's PCA baseline).
    Rule("trainer.max_epochs", int, 0, example="trainer.max_epochs=20"),
    Rule(
        "trainer.check_val_every_n_epoch", int, 1, optional=True, example="trainer.check_val_every_n_epoch=5"
    ),
    Rule("trainer.log_every_n_steps", int, 1, example="trainer.log_every_n_steps=10"),
    Rule("trainer.num_nodes", int, 1, example="trainer.num_nodes=1"),
    Rule("optimizer.lr", float, 0, open_low=True, example="optimizer.lr=1e-3"),
    Rule("optimizer.weight_decay", float, 0, optional=True, example="optimizer.weight_decay=0"),
    Rule("optimizer.momentum", float, 0, 1, optional=True, example="optimizer.momentum=0.9"),
    Rule(
        "optimizer.betas",
        float,
        0,
        1,
        optional=True,
        each=True,
        length=2,
        example="optimizer.betas=[0.9,0.999]",
    ),
    Rule("scheduler.milestones", int, 1, each=True, example="scheduler.milestones=[30]"),
    Rule("scheduler.gamma", float, 0, open_low=True, example="scheduler.gamma=0.5"),
    Rule("scheduler.T_max", int, 1, example="scheduler.T_max=20"),
    Rule("data.P", int, 2, example="data.P=10"),
    Rule("data.K", int, 2, example="data.K=6"),
    Rule("data.batches_per_epoch", int, 1, optional=True, example="data.batches_per_epoch=100"),
    Rule("data.eval_batch_size", int, 1, example="data.eval_batch_size=512"),
    Rule("data.num_workers", int, 0, example="data.num_workers=4"),
    Rule("backbone.embedding_size", int, 1, example="backbone.embedding_size=128"),
    Rule("module.train_samples", int, 1, example="module.train_samples=1"),
    Rule("module.loss_lr", float, 0, open_low=True, optional=True, example="module.loss_lr=1e-2"),
    Rule("metrics.knn_accuracy_k", int, 1, optional=True, example="metrics.knn_accuracy_k=5"),
    Rule("metrics.nmi_seeds", int, 1, example="metrics.nmi_seeds=5"),
    Rule("metrics.kmeans_niter", int, 1, example="metrics.kmeans_niter=20"),
    Rule("metrics.kmeans_restarts", int, 1, example="metrics.kmeans_restarts=5"),
    Rule("loss.margin", float, 0, optional=True, example="loss.margin=0.2"),
    Rule("miner.margin", float, 0, optional=True, example="miner.margin=0.2"),
    Rule(
        "dataset.test_fraction",
        float,
        0,
        1,
        open_low=True,
        optional=True,
        example="dataset.test_fraction=0.3",
    ),
    Rule("callbacks.checkpoint.every_n_epochs", int, 1, optional=True, example="every_n_epochs=1"),
    Rule(
        "callbacks.checkpoint.every_n_train_steps", int, 1, optional=True, example="every_n_train_steps=500"
    ),
)

CHOICES = {
    "resume": ("auto", "never"),
    "resume_from": ("last", "previous"),
    "numerics": ("native", "portable"),
    "data.small_classes": ("error", "replace", "drop"),
    "metrics.nmi_average": ("arithmetic", "geometric"),
    "metrics.kmeans_init": ("random", "k-means++"),
    "trainer.accelerator": ("auto", "cpu", "gpu", "cuda", "mps", "tpu"),
    "trainer.precision": ("32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "16-true", "64-true"),
}

# Packages whose classes pass **kwargs on to their base class, so the bases' parameters are the options.
FORWARDS_KWARGS = ("pytorch_metric_learning", "noisydml")

# A noise rate at which most observed labels are wrong: allowed, and said.
HIGH_NOISE = 0.5


def check_config(cfg: DictConfig) -> None:
    """Refuse the first bad key of the composed config, before anything is built."""
    for rule in RULES:
        found, value = _select(cfg, rule.key)
        if found:
            check_value(rule, value)
    for key, options in CHOICES.items():
        found, value = _select(cfg, key)
        if found and str(value) not in options:
            raise BadInput(f"{key}={value} is not an option; use one of: {', '.join(options)}")
    max_steps = OmegaConf.select(cfg, "trainer.max_steps", default=-1)
    if max_steps is not None and not (isinstance(max_steps, int) and (max_steps == -1 or max_steps >= 1)):
        raise BadInput(
            f"trainer.max_steps={max_steps} must be -1 (no limit) or >= 1; e.g. trainer.max_steps=1000"
        )
    _check_targets(cfg)
    _check_options(cfg)


def _check_targets(cfg: DictConfig) -> None:
    """Each callback, logger and trainer plugin names the class it builds: without ``_target_`` it would
    reach Lightning as a plain dict."""
    lists = {"callbacks": cfg.get("callbacks"), "logger": cfg.get("logger")}
    lists["trainer.plugins"] = dict(enumerate(OmegaConf.select(cfg, "trainer.plugins", default=None) or []))
    for section, nodes in lists.items():
        for name, node in (nodes or {}).items():
            if node is not None and not (isinstance(node, DictConfig) and "_target_" in node):
                key = f"{section}.{name}" if section != "trainer.plugins" else f"{section}[{name}]"
                raise BadInput(
                    f"{key}={_show(node)} has no _target_, the class it builds; give it, e.g. "
                    f"'{key}={{_target_: pytorch_lightning.callbacks.EarlyStopping, monitor: val/recall@1, "
                    "mode: max}'"
                )


def _show(node: Any) -> str:
    if isinstance(node, DictConfig):
        return "{" + ", ".join(f"{key}: {node._get_node(key)._value()}" for key in node) + "}"
    return str(node)


def check_hardware(cfg: DictConfig) -> None:
    """The devices and precision asked for exist here: Lightning would otherwise start a process per
    device on a CPU's cores, fail deep in CUDA, or run bf16 on a CPU while the run records 16-mixed."""
    accelerator = str(OmegaConf.select(cfg, "trainer.accelerator", default="auto"))
    devices = OmegaConf.select(cfg, "trainer.devices", default=1)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if accelerator in ("gpu", "cuda") and not gpus:
        raise BadInput(
            f"trainer.accelerator={accelerator} but torch finds no GPU on this machine; use "
            "trainer.accelerator=cpu (or auto), or run on a GPU node"
        )
    on_gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and gpus > 0)
    if isinstance(devices, bool) or not (devices == "auto" or isinstance(devices, (int, ListConfig))):
        raise BadInput(
            f"trainer.devices={devices} is not a number of devices; e.g. trainer.devices=1 (or auto)"
        )
    if isinstance(devices, int) and devices != -1:
        have = gpus if on_gpu else os.cpu_count() or 1
        what = f"{gpus} GPU(s)" if on_gpu else f"{have} CPU cores (a process per device)"
        if not 1 <= devices <= have:
            raise BadInput(
                f"trainer.devices={devices}: this machine has {what}; use trainer.devices=1, up to {have}"
            )
    precision = str(OmegaConf.select(cfg, "trainer.precision", default="32-true"))
    if not on_gpu and precision in ("16-mixed", "16"):
        raise BadInput(
            f"trainer.precision={precision} needs a GPU: on the CPU Lightning would run bf16-mixed instead; "
            "use trainer.precision=32-true, or bf16-mixed"
        )


def check_method(choices: dict[str, str]) -> None:
    """A published method (``method=``) is its groups' options (``override /loss: bspml``): one of them
    replaced on the command line would record another method's run under the method's name, so it is
    refused."""
    method = choices.get("method")
    if not method:
        return
    for group, option in method_groups(method).items():
        given = str(choices.get(group, option))
        if given != option:
            raise BadInput(
                f"method={method} is {group}={option}, but {group}={given} was given, which would record "
                f"a {given} run as {method}; drop {group}={given} to run the method, or drop method= to "
                f"run {group}={given} on its own"
            )


def _select(cfg: DictConfig, key: str) -> tuple[bool, Any]:
    missing = object()
    value = OmegaConf.select(cfg, key, default=missing)
    return value is not missing, value


def _check_options(cfg: DictConfig) -> None:
    """Every key of a node that builds an object is a parameter of its class (a typo is named with the
    key it is closest to). The module's keys are checked against the LightningModule."""
    _check_keys(
        "module", cfg.get("module") or {}, EmbeddingModule, "noisydml.core.embedding_module.EmbeddingModule"
    )
    for path, node in _target_nodes(cfg, ""):
        try:
            target = get_object(node["_target_"])
        except Exception as error:
            raise BadInput(
                f"{path}._target_={node['_target_']} cannot be imported ({error}); check the class path"
            ) from error
        _check_keys(path, node, target, node["_target_"])


def _target_nodes(node: Any, path: str):
    if isinstance(node, DictConfig):
        if isinstance(node.get("_target_", None), str):
            yield path, node
        for key in node:
            yield from _target_nodes(node[key], f"{path}.{key}" if path else str(key))


def _check_keys(path: str, node: Any, target: Any, name: str) -> None:
    accepted = _parameters(target)
    if accepted is None:
        return
    for key in node:
        if str(key).startswith("_") or key in accepted:
            continue
        close = difflib.get_close_matches(str(key), sorted(accepted), n=1)
        hint = f"; did you mean {path}.{close[0]}?" if close else ""
        raise BadInput(
            f"{path}.{key}={node[key]} is not an option of {name} (its options: "
            f"{', '.join(sorted(accepted))}){hint}"
        )


def _parameters(target: Any) -> set[str] | None:
    """The keyword arguments ``target`` takes, following ``**kwargs`` up a class's bases where they are
    passed on (:data:`FORWARDS_KWARGS`); None when it takes any."""
    if not inspect.isclass(target):
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            return None
        if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
            return None
        return {p.name for p in signature.parameters.values() if p.kind is not p.VAR_POSITIONAL}
    names: set[str] = set()
    for klass in target.__mro__:
        if klass in (object, torch.nn.Module):
            return names
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            parameters = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            return None
        names |= {p.name for p in parameters if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)} - {"self"}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            return names
        if klass.__module__.split(".")[0] not in FORWARDS_KWARGS:
            # Its **kwargs may go anywhere (WandbLogger's to wandb.init): any key may be right.
            return None
    return names


def check_run_directory(run: RunDir, resolved: dict, resume: str) -> dict | None:
    """The run directory holds no other run: return the results of a finished run of this very config
    (to skip), None when the run may start here. Refused, before anything is written into it: a finished
    run of another config, and a checkpoint of another config that ``resume=auto`` would continue."""
    recorded = run.read_results()
    if recorded is None or not isinstance(recorded.get("config"), dict):
        return None
    differences = config_differences(recorded["config"], resolved)
    finished = run.finished_results() is not None
    if not differences:
        return recorded if finished else None
    changed = ", ".join(_change(recorded["config"], resolved, key) for key in differences[:6])
    more = f" and {len(differences) - 6} more" if len(differences) > 6 else ""
    if finished:
        raise BadInput(
            f"{run.path} holds a finished run of another config ({changed}{more}), which is left as it is; "
            "run without resume= for a new directory, or choose another with hydra.run.dir=..."
        )
    if resume == "auto" and run.has_checkpoint():
        raise BadInput(
            f"{run.path} holds a checkpoint of another config ({changed}{more}), which would continue as if "
            f"it were this one; continue that run unchanged with: noisydml resume={run.path}, start it over "
            "with resume=never, or choose another directory with hydra.run.dir=..."
        )
    return None


def _change(old: dict, new: dict, key: str) -> str:
    def value(config: dict) -> Any:
        for part in key.split("."):
            config = config.get(part) if isinstance(config, dict) else None
        return config

    return f"{key}: {value(old)} there, {value(new)} here"


def check_output_dir(path: Path, key: str = "paths.output_dir") -> None:
    """The run directory (or another folder a run writes, named by its ``key``, which is left as it was
    found) can be created and written."""
    run_dir = key == "paths.output_dir"
    fix = "hydra.run.dir=... (or hydra.sweep.dir=...)" if run_dir else f"{key}=..."
    check_writable(path, key, fix, keep=run_dir)


def _checkpoint_dirs(cfg: DictConfig) -> list[tuple[str, str]]:
    callbacks = cfg.get("callbacks") or {}
    return [
        (f"callbacks.{name}.dirpath", node.dirpath)
        for name, node in callbacks.items()
        if isinstance(node, DictConfig) and node.get("dirpath")
    ]


def check_metrics(cfg: DictConfig, datamodule: Any, evaluator: Any) -> None:
    """Recall@K can be scored on the splits the run scores, and every metric a callback or the checkpoint
    selection watches (``optimized_metric``, an early stop's ``monitor``) is one the run logs."""
    ks = evaluator.options["recall_ks"]
    mask = datamodule.query_mask
    # A query's candidates: the gallery, or every other item (leave-one-out).
    candidates = {"test": int((~mask).sum()) if mask is not None else len(datamodule.splits.test) - 1}
    if datamodule.val_set is not None:
        candidates["validation"] = len(datamodule.val_set) - 1
    for split, count in candidates.items():
        if ks and max(ks) > count:
            raise BadInput(
                f"metrics.recall_ks=[{','.join(map(str, ks))}]: Recall@{max(ks)} needs more than the {count} "
                f"neighbours each {split} query has; use K up to {count}, e.g. metrics.recall_ks=[1,2,4,8]"
            )
    stages = datamodule.validation_stages
    logged = [f"{stage}/{name}" for stage in stages for name in evaluator.names()]
    watched = {"optimized_metric": cfg.get("optimized_metric")}
    for name, node in (cfg.get("callbacks") or {}).items():
        if isinstance(node, DictConfig) and node.get("monitor"):
            watched[f"callbacks.{name}.monitor"] = node.monitor
    for key, metric in watched.items():
        if metric and str(metric).split("/", 1)[0] in stages and metric not in logged:
            close = difflib.get_close_matches(str(metric), logged, n=1)
            hint = f"; did you mean {key}={close[0]}?" if close else ""
            raise BadInput(
                f"{key}={metric} is not a metric this run logs (it logs: {', '.join(logged) or 'none'}); "
                f"choose one of them{hint}"
            )


def check_noise(cfg: DictConfig, num_classes: int) -> None:
    """A uniform noise rate at which the true class is no longer the most frequent label of its samples
    (each other class gets rate / (C - 1)) teaches the wrong classes: refused. Above one half it is allowed,
    and said."""
    rate = OmegaConf.select(cfg, "noise.rate", default=None)
    if not isinstance(rate, (int, float)) or num_classes < 2:
        return
    limit = (num_classes - 1) / num_classes
    if rate >= limit:
        raise BadInput(
            f"noise.rate={rate}: with {num_classes} training classes a flipped label lands on each other "
            f"class with probability {rate / (num_classes - 1):.3f} > {1 - rate:.3f}, the true class's, so "
            f"the labels teach the wrong classes; use noise.rate < {limit:.3f}"
        )
    if rate > HIGH_NOISE:
        warnings.warn(f"noise.rate={rate}: most training labels are wrong", stacklevel=2)


def check_one_batch(model: EmbeddingModule, datamodule: Any, choices: dict[str, str]) -> None:
    """One batch of K samples of P classes through the backbone, then through the training step's hook
    sequence (:meth:`EmbeddingModule.dry_run_step`), without changing what training then draws or learns."""
    labels = datamodule.train_set.labels
    positions = [
        p
        for c in sorted(set(labels.tolist()))[: datamodule.P]
        for p in (labels == c).nonzero()[0][: datamodule.K]
    ]
    x, y, indices = default_collate([datamodule.train_set[int(p)] for p in positions])
    if torch.is_floating_point(x) and not torch.isfinite(x).all():
        bad = indices[~torch.isfinite(x.flatten(1)).all(1)].tolist()
        raise BadInput(
            f"dataset={choices.get('dataset', '?')}: training samples {bad[:5]} hold NaN or infinite values; "
            "fix or drop them in the data (a NaN input makes the loss NaN)"
        )
    backbone, loss, miner = (choices.get(k, "?") for k in ("backbone", "loss", "miner"))
    _check_backbone(model, x, backbone)
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


def _check_backbone(model: EmbeddingModule, x: torch.Tensor, backbone: str) -> None:
    """The backbone takes the data's inputs and gives finite embeddings (eval mode, no gradient)."""
    try:
        with model.unchanged():
            embeddings = model(x)
    except RuntimeError as error:
        raise BadInput(
            f"backbone={backbone} cannot take the data's inputs of shape {tuple(x.shape[1:])} "
            f"({str(error).splitlines()[0]}); choose a backbone for this data set or set its input "
            "size (e.g. backbone.trunk.in_features)"
        ) from error
    if not torch.isfinite(embeddings).all():
        raise BadInput(
            f"backbone={backbone} gives NaN or infinite embeddings on the first batch; check the data"
        )
