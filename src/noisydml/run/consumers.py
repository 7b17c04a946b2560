"""Every key checked by its consumer before the first step (issue 37, rule 4), as part of pre-flight
(:mod:`noisydml.run.preflight`):

- :func:`check_types`: a key whose consumer takes a boolean accepts only a boolean, one that takes a list
  only a list. The type is the consumer's: the parameter's annotation or default in the class a
  ``_target_`` node builds, or the default in ``conf/config.yaml`` for the project's own top-level keys
  (``tags: []``). YAML reads ``maybe`` as a string that Python would take as true.
- :func:`check_optimization`: the optimizer and the scheduler built on the model's parameters, as
  Lightning will build them.
- :func:`check_trainer`: the Trainer built as the run will build it, so that Lightning resolves devices,
  accelerator, strategy, precision and its other flags against this machine now; a ``num_nodes`` no
  cluster will start is refused (it would wait for the other nodes forever); and the first batch passes
  through the model in the run's precision.
- :func:`check_consumer_keys`: keys whose consumer is a library that fails late or names nothing
  (``dataset.split_seed``, ``metrics.nmi_plus_factor``, ``data.filter`` without ``_target_``).

A library's refusal is translated into one line naming the key, the value and a fix
(:func:`library_error`): the key is found by building the object again without each key in turn.
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
import os
import types
import typing
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from hydra.errors import InstantiationException
from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from torch.utils.data import default_collate

from noisydml import CONFIG_DIR
from noisydml.core.hooks import hooks_of
from noisydml.utils.checks import Rule, check_value, check_writable
from noisydml.utils.errors import BadInput

CONSUMER_RULES = (
    # numpy's and scikit-learn's seeds are below 2**32.
    Rule("dataset.split_seed", int, 0, 2**32, optional=True, example="dataset.split_seed=0"),
    Rule("metrics.nmi_plus_factor", int, 1, optional=True, example="metrics.nmi_plus_factor=2"),
)

# Nodes that name a class and are not `_target_` nodes when null.
TARGET_KEYS = ("data.filter",)


def check_consumer_keys(cfg: DictConfig) -> None:
    """The keys whose consumer is a library that would fail late, or with a message naming nothing."""
    absent = object()
    for rule in CONSUMER_RULES:
        value = OmegaConf.select(cfg, rule.key, default=absent)
        if value is not absent:
            check_value(rule, value)
    for name, node in (cfg.get("logger") or {}).items():
        folder = node.get("save_dir") if isinstance(node, DictConfig) else None
        if folder:
            key = f"logger.{name}.save_dir"
            check_writable(Path(str(folder)).expanduser(), key, f"{key}=...", keep=False)
    for key in TARGET_KEYS:
        node = OmegaConf.select(cfg, key, default=None)
        if node is not None and not (isinstance(node, DictConfig) and "_target_" in node):
            raise BadInput(
                f"{key}={_shown(node)} has no _target_, the class it builds; give it, e.g. "
                f"'{key}={{_target_: noisydml.data.knn_filter.KnnLabelFilter}}' (conf/method/reference/), or "
                f"{key}=null"
            )


# --- Types --------------------------------------------------------------------------------------------


def check_types(cfg: DictConfig) -> None:
    """Booleans only where the consumer takes a boolean, lists only where it takes a list."""
    defaults = OmegaConf.load(CONFIG_DIR / "config.yaml")
    for key in defaults:
        if key in ("defaults", "hydra") or key not in cfg or isinstance(defaults[key], DictConfig):
            continue
        _check_type(str(key), _raw(cfg, key), _kind_of_default(_raw(defaults, key)))
    for path, node in _target_nodes(cfg, ""):
        try:
            target = get_object(node["_target_"])
        except Exception:
            # An import that fails is named by the options check.
            continue
        kinds = _parameter_kinds(target)
        for name in node:
            if str(name).startswith("_") or name not in kinds:
                continue
            _check_type(f"{path}.{name}", _raw(node, name), kinds[name])


def _check_type(key: str, value: Any, kind: tuple | None) -> None:
    """``kind``: ("bool" or "list", whether null is allowed[, the strings allowed beside booleans]), None
    when anything goes."""
    if kind is None or value is None and kind[1]:
        return
    expected, words = kind[0], kind[2] if len(kind) > 2 else ()
    if isinstance(value, str) and (value.startswith("${") or value in words):
        return
    if expected == "bool" and not isinstance(value, bool):
        also = f" (or {', '.join(words)})" if words else ""
        raise BadInput(f"{key}={_shown(value)} is not a boolean; give true or false{also}, e.g. {key}=true")
    if expected == "list" and not isinstance(value, (ListConfig, list)):
        raise BadInput(
            f"{key}={_shown(value)} is not a list; give one, e.g. {key}=[{_shown(value)}] (unbracketed, a "
            "string would be read as a list of its letters)"
        )


def _kind_of_default(default: Any) -> tuple | None:
    if isinstance(default, bool):
        return ("bool", False)
    if isinstance(default, (ListConfig, list)):
        return ("list", False)
    return None


def _parameter_kinds(target: Any) -> dict[str, tuple | None]:
    """Each keyword parameter of ``target`` (a class's ``__init__`` up its bases, or a function) that
    takes only a boolean or only a list, from its annotation or else its default."""
    functions = []
    if inspect.isclass(target):
        functions = [k.__dict__["__init__"] for k in target.__mro__ if "__init__" in k.__dict__]
        functions = [f for f in functions if f is not object.__init__]
    elif callable(target):
        functions = [target]
    kinds: dict[str, tuple | None] = {}
    for function in functions:
        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):
            continue
        try:
            hints = typing.get_type_hints(function)
        except Exception:
            hints = {}
        for name, parameter in parameters.items():
            if name in kinds or parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
                continue
            kind = _kind_of_annotation(hints[name]) if name in hints else "unknown"
            if kind == "unknown":
                default = parameter.default
                kind = None if default is inspect.Parameter.empty else _kind_of_default(default)
            kinds[name] = kind
    return kinds


def _kind_of_annotation(annotation: Any) -> tuple | None | str:
    """("bool" | "list", null allowed) for ``bool``, ``list[...]``, ``Sequence[...]`` and their Optional;
    None for any other type; "unknown" when there is no annotation to read."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return "unknown"
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(members) < len(typing.get_args(annotation))
        if len(members) == 1:
            kind = _kind_of_annotation(members[0])
            return (kind[0], optional) if isinstance(kind, tuple) else kind
        literals = [a for a in members if typing.get_origin(a) is typing.Literal]
        if bool in members and len(literals) + 1 == len(members):
            # Lightning's deterministic: bool or "warn".
            return ("bool", optional, tuple(str(w) for a in literals for w in typing.get_args(a)))
        return None
    if annotation is bool:
        return ("bool", False)
    if annotation is list or origin in (list, Sequence):
        return ("list", False)
    return None


# --- Library errors -----------------------------------------------------------------------------------


def library_error(
    key: str, node: DictConfig, build: Callable[[DictConfig], Any], error: Exception
) -> BadInput:
    """One line for a library's refusal to build ``node`` (the config at ``key``): the key it refused,
    found by building again without each key in turn, its value, and a fix."""
    target = node.get("_target_", key)
    while isinstance(error, InstantiationException) and error.__cause__ is not None:
        # Hydra's wrapper says only where the error came from.
        error = error.__cause__
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    for name in [n for n in node if not str(n).startswith("_")]:
        trial = copy.deepcopy(node)
        with open_dict(trial):
            del trial[name]
        try:
            with _quiet():
                build(trial)
        except Exception:
            continue
        default = _default(target, str(name))
        fix = f"e.g. its default, {key}.{name}={default}" if default is not None else f"or drop {key}.{name}"
        return BadInput(
            f"{key}.{name}={_shown(_raw(node, name))} is refused by {target} ({reason}); give a "
            f"value it takes, {fix}"
        )
    return BadInput(f"{key} ({target}) cannot be built with its keys: {reason}; change the key it names")


def _default(target: str, name: str) -> Any:
    try:
        parameters = inspect.signature(get_object(target)).parameters
    except Exception:
        return None
    default = parameters[name].default if name in parameters else inspect.Parameter.empty
    return None if default is inspect.Parameter.empty else default


# --- Optimizer, scheduler, trainer --------------------------------------------------------------------


def check_optimization(cfg: DictConfig, model: Any) -> None:
    """The optimizer and scheduler, built on the model's parameters as Lightning will build them."""
    params = [p for p in model.parameters() if p.requires_grad] or [torch.nn.Parameter(torch.zeros(1))]
    try:
        optimizer = instantiate(cfg.optimizer)(params)
    except Exception as error:
        raise library_error("optimizer", cfg.optimizer, lambda n: instantiate(n)(params), error) from error
    if cfg.get("scheduler") is None:
        return
    try:
        instantiate(cfg.scheduler)(optimizer)
    except Exception as error:
        build = lambda n: instantiate(n)(instantiate(cfg.optimizer)(params))  # noqa: E731
        raise library_error("scheduler", cfg.scheduler, build, error) from error


def check_trainer(cfg: DictConfig) -> Any:
    """The Trainer as the run builds it (without loggers and callbacks), refused in one line naming the
    key where Lightning refuses it here; return it, for its precision."""

    def build(node: DictConfig) -> Any:
        plugins = [instantiate(plugin) for plugin in node.get("plugins") or []]
        return instantiate(node, logger=False, callbacks=[], plugins=plugins, enable_checkpointing=False)

    try:
        with _quiet():
            trainer = build(cfg.trainer)
    except BadInput:
        raise
    except Exception as error:
        raise library_error("trainer", cfg.trainer, build, error) from error
    from lightning_fabric.plugins.environments import LightningEnvironment

    nodes = trainer.num_nodes
    alone = type(getattr(trainer.strategy, "cluster_environment", None)) is LightningEnvironment
    if nodes > 1 and alone and "NODE_RANK" not in os.environ:
        raise BadInput(
            f"trainer.num_nodes={nodes}, but no cluster is there to start the other nodes (no SLURM, "
            "torchrun or MPI environment): the run would wait for them forever; run it with "
            "hydra/launcher=slurm (or torchrun on each node), or use trainer.num_nodes=1"
        )
    return trainer


def check_precision(cfg: DictConfig, trainer: Any, model: Any, datamodule: Any) -> None:
    """The first batch, a training step and the loss after it in the run's precision (``16-true`` casts
    the weights and the optimizer's state to float16), on a copy of the model."""
    precision = str(cfg.trainer.get("precision", "32-true"))
    if precision in ("32", "32-true"):
        return
    batch, training_set = first_batch(datamodule), datamodule.training_set()
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


def first_batch(datamodule: Any) -> tuple:
    """K samples of each of the first P classes of the training set, as the sampler draws a batch."""
    labels = datamodule.train_set.labels
    positions = [
        p
        for c in sorted(set(labels.tolist()))[: datamodule.P]
        for p in (labels == c).nonzero()[0][: datamodule.K]
    ]
    return default_collate([datamodule.train_set[int(p)] for p in positions])


def check_metric_sizes(datamodule: Any, evaluator: Any) -> None:
    """The k-NN vote's k is at most the training samples it votes with."""
    k = getattr(evaluator, "knn_accuracy_k", None)
    reference = len(datamodule.train_set)
    if k and k > reference:
        raise BadInput(
            f"metrics.knn_accuracy_k={k}: the k-NN vote classifies a test item by its k nearest of the "
            f"{reference} training samples; use k up to {reference}, e.g. metrics.knn_accuracy_k=5"
        )


@contextmanager
def _quiet():
    """Lightning's lines about the devices it found, said once by the run's own Trainer."""
    loggers = [logging.getLogger(n) for n in ("pytorch_lightning", "lightning.pytorch", "lightning_fabric")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _target_nodes(node: Any, path: str):
    if isinstance(node, DictConfig):
        if isinstance(node.get("_target_", None), str):
            yield path, node
        for key in node:
            yield from _target_nodes(node._get_node(key), f"{path}.{key}" if path else str(key))


def _raw(node: DictConfig, key: Any) -> Any:
    """The value at ``key`` as typed: an interpolation unresolved, a node as a node."""
    child = node._get_node(key)
    return child if isinstance(child, (DictConfig, ListConfig)) else child._value()


def _shown(value: Any) -> str:
    if isinstance(value, (DictConfig, ListConfig)):
        return str(OmegaConf.to_container(value, resolve=False)).replace("'", "").replace(" ", "")
    return str(value)
