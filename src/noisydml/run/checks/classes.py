"""Every node that builds an object (a ``_target_``), against the class it builds, before anything is
built: its keys are the class's parameters (a typo such as ``+noise.rat=0.2`` is named with the key it is
closest to), a parameter that takes only a boolean or only a list gets one, and a library class's
parameters keep the ranges and orders where its objective keeps its meaning (:data:`RANGES`,
:data:`ORDERS`): outside them the libraries train without a word and the run learns nothing, or the
opposite of what it should (a negative margin no pair violates, an L0 "distance" with no gradient).
Declared by the path a ``_target_`` names and inherited, so a subclass is held to its base's; this
package's own classes check theirs in their constructors (:func:`noisydml.run.checks.library.check_built`).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from hydra.utils import get_object
from omegaconf import DictConfig, ListConfig, OmegaConf

from noisydml import CONFIG_DIR
from noisydml.run.checks.walk import builds, given_keys, given_nodes, import_target, raw, shown, target_nodes
from noisydml.utils.checks import (
    NONNEGATIVE_BOUNDARY,
    NONNEGATIVE_MARGIN,
    POSITIVE_SCALE,
    SIMILARITY_MARGIN,
    Rule,
    check_value,
    parameter_range,
)
from noisydml.utils.errors import BadInput


@dataclass(frozen=True)
class ByMetric:
    """A range that depends on what the node compares: distances (from 0 up) or similarities."""

    distance: Rule
    similarity: Rule


MARGIN = ByMetric(NONNEGATIVE_MARGIN, SIMILARITY_MARGIN)
# pytorch-metric-learning's count of the triplets a loss draws per anchor when no miner gives them.
TRIPLETS_PER_ANCHOR = Rule(
    "", int, 1, options=("all",), why="each anchor draws that many of its triplets; all: every one"
)

# Library class path -> {parameter: its range}; a class inherits its bases' entries.
RANGES: dict[str, dict[str, Rule | ByMetric]] = {
    "pytorch_metric_learning.losses.TripletMarginLoss": {
        "margin": NONNEGATIVE_MARGIN,
        "triplets_per_anchor": TRIPLETS_PER_ANCHOR,
    },
    "pytorch_metric_learning.losses.ContrastiveLoss": {"pos_margin": MARGIN, "neg_margin": MARGIN},
    "pytorch_metric_learning.losses.MultiSimilarityLoss": {"alpha": POSITIVE_SCALE, "beta": POSITIVE_SCALE},
    "pytorch_metric_learning.losses.MarginLoss": {
        "margin": NONNEGATIVE_MARGIN,
        "triplets_per_anchor": TRIPLETS_PER_ANCHOR,
        "beta": NONNEGATIVE_BOUNDARY,
        "nu": parameter_range(
            0, why="a negative nu rewards a large boundary beta, which the loss then pushes up"
        ),
    },
    "pytorch_metric_learning.losses.ProxyAnchorLoss": {"alpha": POSITIVE_SCALE, "margin": NONNEGATIVE_MARGIN},
    "pytorch_metric_learning.losses.NCALoss": {"softmax_scale": POSITIVE_SCALE},
    "pytorch_metric_learning.losses.FastAPLoss": {
        "num_bins": Rule(
            "", int, 1, why="the average precision is estimated over a histogram of at least one bin"
        )
    },
    "pytorch_metric_learning.miners.TripletMarginMiner": {"margin": NONNEGATIVE_MARGIN},
    "pytorch_metric_learning.miners.MultiSimilarityMiner": {
        "epsilon": parameter_range(0, why="a negative epsilon keeps no pair, and the loss of no pair is 0")
    },
    "pytorch_metric_learning.miners.DistanceWeightedMiner": {
        "cutoff": parameter_range(0, why="distances are >= 0: a negative cutoff clamps nothing"),
        "nonzero_loss_cutoff": parameter_range(
            0, open_low=True, why="no negative is nearer than 0: none would be drawn"
        ),
    },
    "pytorch_metric_learning.distances.BaseDistance": {
        "p": parameter_range(
            1, why="an Lp norm needs p >= 1: p=0 counts nonzero coordinates and has no gradient"
        ),
        "power": parameter_range(
            0, open_low=True, why="a distance raised to 0 or a negative power is flat or inverted"
        ),
    },
    "pytorch_lightning.callbacks.EarlyStopping": {
        "patience": Rule(
            "",
            int,
            0,
            why="a negative patience stops at the first validation that does not improve, as 0 does",
        )
    },
    "pytorch_lightning.callbacks.ModelSummary": {
        "max_depth": Rule("", int, -1, why="-1 shows every layer, 0 none")
    },
    "torch.optim.lr_scheduler.CosineAnnealingLR": {
        "eta_min": parameter_range(0, why="the learning rate would turn negative and training climb the loss")
    },
}


@dataclass(frozen=True)
class Ordered:
    """Two parameters of one class whose order the objective needs: ``low`` below ``high`` (or equal,
    unless ``strict``), the other way round where the node compares similarities."""

    low: str
    high: str
    why: str
    strict: bool = False


PULLED_AND_PUSHED = Ordered(
    "pos_margin",
    "neg_margin",
    "a pair between the margins would be pulled in as a positive and pushed out as a negative at once",
)
# Library class path -> the orders its parameters keep; a class inherits its bases' entries.
ORDERS: dict[str, tuple[Ordered, ...]] = {
    "pytorch_metric_learning.losses.ContrastiveLoss": (PULLED_AND_PUSHED,),
    "pytorch_metric_learning.losses.SignalToNoiseRatioContrastiveLoss": (PULLED_AND_PUSHED,),
    "pytorch_metric_learning.miners.DistanceWeightedMiner": (
        Ordered("cutoff", "nonzero_loss_cutoff", "no negative lies between them, so none is drawn", True),
    ),
}

# Library class path -> the parameters a loss reads only when it draws its own tuples: given a miner's
# (``indices_tuple``), pytorch-metric-learning uses those and ignores them. A class inherits its bases'.
OWN_TUPLES: dict[str, tuple[str, ...]] = {
    "pytorch_metric_learning.losses.TripletMarginLoss": ("triplets_per_anchor",),
    "pytorch_metric_learning.losses.MarginLoss": ("triplets_per_anchor",),
}


@dataclass(frozen=True)
class ReadWith:
    """A parameter its class reads only where another is not ``off``: set there, it is ignored."""

    name: str
    other: str
    off: Any
    why: str


# Library class path -> its parameters read only with another's value; a class inherits its bases'.
READ_WITH: dict[str, tuple[ReadWith, ...]] = {
    "torch.optim.SGD": (ReadWith("dampening", "momentum", 0, "it damps the momentum buffer"),),
    "noisydml.metrics.evaluator.Evaluator": tuple(
        ReadWith(name, "nmi", False, "it sets how NMI is computed")
        for name in (
            "nmi_plus_factor",
            "nmi_average",
            "nmi_seeds",
            "kmeans_init",
            "kmeans_niter",
            "kmeans_restarts",
        )
    ),
}

SIMILARITY = "pytorch_metric_learning.distances.DotProductSimilarity"
# Packages whose classes pass **kwargs on to their base class, so the bases' parameters are the options.
FORWARDS_KWARGS = ("pytorch_metric_learning", "noisydml")


def check_classes(cfg: DictConfig) -> None:
    """Refuse the first node whose class cannot be imported, or that is given a key its class does not
    take, a value of the wrong type, or a value outside its declared range."""
    from noisydml.core.embedding_module import EmbeddingModule

    module = cfg.get("module") or {}
    _check_keys("module", module, EmbeddingModule, "noisydml.core.embedding_module.EmbeddingModule")
    kinds = _parameter_kinds(EmbeddingModule)
    for name in module:
        if name in kinds:
            _check_type(f"module.{name}", raw(cfg, f"module.{name}"), kinds[name])
    defaults = _top_level_defaults()
    for key in defaults:
        if key in ("defaults", "hydra") or key not in cfg or isinstance(defaults[key], DictConfig):
            continue
        _check_type(str(key), raw(cfg, str(key)), _kind_of_annotation(type(raw(defaults, str(key)))))
    whole, typed = given_nodes(), given_keys()
    for path, node in target_nodes(cfg):
        try:
            target = get_object(node["_target_"])
        except Exception as error:
            raise BadInput(
                f"{path}._target_={node['_target_']} cannot be imported ({error}); check the class path"
            ) from error
        if path in whole:
            _check_replaced(path, node, whole[path], typed)
        _check_keys(path, node, target, node["_target_"])
        kinds = _parameter_kinds(target)
        for name in node:
            if not str(name).startswith("_") and name in kinds:
                _check_type(f"{path}.{name}", raw(node, str(name)), kinds[name])
        _check_ranges(path, node, target)
        _check_orders(path, node, target)
        _check_read_with(path, node, target)
        if path.split(".")[0] == "loss" and isinstance(cfg.get("miner"), DictConfig):
            _check_own_tuples(path, node, target, cfg.miner)


def top_level_keys() -> set[str]:
    """The top-level keys of conf/config.yaml."""
    return {str(key) for key in _top_level_defaults()}


@functools.cache
def _top_level_defaults() -> DictConfig:
    """conf/config.yaml as written, read once a process."""
    defaults = OmegaConf.load(CONFIG_DIR / "config.yaml")
    OmegaConf.set_readonly(defaults, True)
    return defaults


def _check_ranges(path: str, node: DictConfig, target: Any) -> None:
    for name, declared in _declared(target).items():
        if name not in node or node[name] is None:
            continue
        if isinstance(declared, ByMetric):
            similarity = _compares_similarities(node, target)
            if similarity is None:
                continue
            declared = declared.similarity if similarity else declared.distance
        # The fix: the value the class takes when the key is not given.
        key, default = f"{path}.{name}", parameter_default(target, name)
        check_value(declared.at(key, f"{key}={shown(default) if default is not None else '...'}"), node[name])


def _check_orders(path: str, node: DictConfig, target: Any) -> None:
    for _, orders in _along_bases(ORDERS, target):
        for order in orders:
            low, high = (
                node[n] if n in node else parameter_default(target, n) for n in (order.low, order.high)
            )
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
                continue
            if _compares_similarities(node, target):
                low, high = high, low
                first, second = order.high, order.low
            else:
                first, second = order.low, order.high
            if low > high or (order.strict and low == high):
                raise BadInput(
                    f"{path}.{first}={low} is {'at or above' if order.strict else 'above'} "
                    f"{path}.{second}={high} ({order.why}); lower {path}.{first} or raise {path}.{second}"
                )


def _check_read_with(path: str, node: DictConfig, target: Any) -> None:
    """A parameter set to other than its default where its class does not read it, so that it would be
    recorded as the run's without having been used."""
    for _, entries in _along_bases(READ_WITH, target):
        for entry in entries:
            other = node[entry.other] if entry.other in node else parameter_default(target, entry.other)
            if (
                entry.name in node
                and node[entry.name] != parameter_default(target, entry.name)
                and other == entry.off
            ):
                off = shown(entry.off)
                raise BadInput(
                    f"{path}.{entry.name}={shown(node[entry.name])} is read only when {path}.{entry.other} "
                    f"is not {off} ({entry.why}), but {path}.{entry.other}={shown(other)}, so it is ignored; "
                    f"drop {path}.{entry.name}, or give {path}.{entry.other} a value other than {off}"
                )


def _check_own_tuples(path: str, node: DictConfig, target: Any, miner: DictConfig) -> None:
    """A loss given a miner's tuples reads none of its parameters for drawing its own: one set to other
    than its default would be recorded as the run's without having been used."""
    for klass, names in _along_bases(OWN_TUPLES, target):
        for name in names:
            if name in node and node[name] != parameter_default(target, name):
                raise BadInput(
                    f"{path}.{name}={node[name]} is read only when the loss draws its own tuples, but "
                    f"the miner ({str(miner['_target_']).rsplit('.', 1)[-1]}) supplies them and "
                    f"{klass.__name__} then ignores it; drop {path}.{name}, or use miner=none to let the "
                    "loss draw them"
                )


def parameter_default(target: Any, name: str) -> Any:
    """The value ``target`` (a class, up its bases, or a function) takes for ``name`` when the key is not
    given, or None."""
    for function in _initializers(target):
        try:
            parameter = inspect.signature(function).parameters.get(name)
        except (TypeError, ValueError):
            continue
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            return parameter.default
    return None


def _initializers(target: Any) -> list[Any]:
    """What takes a node's keys: a class's ``__init__`` up its bases, or a function itself."""
    if inspect.isclass(target):
        return [
            k.__dict__["__init__"]
            for k in target.__mro__
            if k.__dict__.get("__init__", object.__init__) is not object.__init__
        ]
    return [target] if callable(target) else []


def _declared(target: Any) -> dict[str, Rule | ByMetric]:
    return {name: rule for _, ranges in _along_bases(RANGES, target) for name, rule in ranges.items()}


def _along_bases(table: dict[str, Any], target: Any) -> list[tuple[type, Any]]:
    """``(class, entry)`` of each class of ``table`` (keyed by class path) that ``target`` is or derives
    from, bases first: a subclass is held to its bases' entries (a path that does not import is skipped)."""
    bases = inspect.getmro(target) if inspect.isclass(target) else ()
    found = [(klass, entry) for path, entry in table.items() if (klass := import_target(path)) in bases]
    return sorted(found, key=lambda pair: -bases.index(pair[0]))


def _compares_similarities(node: DictConfig, target: type) -> bool | None:
    """Whether the node's distance is a similarity (its ``distance`` node, else the class's default);
    None when it cannot be told."""
    similarity = import_target(SIMILARITY)
    distance = node.get("distance") if "distance" in node else None
    if builds(distance):
        klass = import_target(distance["_target_"])
        return None if klass is None or similarity is None else issubclass(klass, similarity)
    try:
        return isinstance(target.get_default_distance(None), similarity)
    except Exception:
        return None


def _check_replaced(path: str, node: DictConfig, given: dict, typed: set[str]) -> None:
    """A node given whole with its class on the command line (``given``) is merged into the config's, which
    keeps the keys it did not give: a new class would be built with the old one's settings."""
    kept = [k for k in node if not str(k).startswith("_") and k not in given and f"{path}.{k}" not in typed]
    if kept:
        values = ", ".join(f"{k}={shown(raw(node, str(k)))}" for k in kept)
        raise BadInput(
            f"{path}={shown(given)} is merged into the config's {path} node, which keeps its {values}: "
            f"{given['_target_']} would be built with them; give them in the node to keep them, or replace "
            f"the node: ~{path} '+{path}={shown(given)}'"
        )


def _check_keys(path: str, node: Any, target: Any, name: str) -> None:
    accepted = accepted_parameters(target)
    if accepted is None:
        return
    for key in node:
        if str(key).startswith("_") or key in accepted:
            continue
        close = difflib.get_close_matches(str(key), sorted(accepted), n=1)
        hint = f"; did you mean {path}.{close[0]}?" if close else ""
        raise BadInput(
            f"{path}.{key}={shown(raw(node, str(key)))} is not an option of {name} (its options: "
            f"{', '.join(sorted(accepted))}){hint}"
        )


def accepted_parameters(target: Any) -> set[str] | None:
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


def _check_type(key: str, value: Any, kind: tuple | None) -> None:
    """A boolean only where the consumer takes a boolean, a list only where it takes a list. ``kind``: ("bool"
    or "list", whether null is allowed[, the strings allowed beside booleans]), None when anything goes. The
    type is the consumer's: the parameter's annotation or default in the class a node builds, or the default
    in ``conf/config.yaml`` for the project's own top-level keys (``tags: []``). YAML reads ``maybe`` as a
    string that Python would take as true."""
    if kind is None or value is None and kind[1]:
        return
    expected, words, typed = kind[0], kind[2] if len(kind) > 2 else (), shown(value).replace(" ", "")
    if isinstance(value, str) and (value.startswith("${") or value in words):
        return
    if expected == "bool" and not isinstance(value, bool):
        also = f" (or {', '.join(words)})" if words else ""
        raise BadInput(f"{key}={typed} is not a boolean; give true or false{also}, e.g. {key}=true")
    if expected == "list" and not isinstance(value, (ListConfig, list)):
        raise BadInput(
            f"{key}={typed} is not a list; give one, e.g. {key}=[{typed}] (unbracketed, a "
            "string would be read as a list of its letters)"
        )


@functools.cache
def _parameter_kinds(target: Any) -> dict[str, tuple | None]:
    """Each keyword parameter of ``target`` (a class's ``__init__`` up its bases, or a function) that
    takes only a boolean or only a list, from its annotation or else its default."""
    kinds: dict[str, tuple | None] = {}
    for function in _initializers(target):
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
                kind = None if default is inspect.Parameter.empty else _kind_of_annotation(type(default))
            kinds[name] = kind
    return kinds


def _kind_of_annotation(annotation: Any) -> tuple | None | str:
    """("bool" | "list", null allowed) for ``bool``, ``list[...]``, ``Sequence[...]`` and their Optional
    (a default's type too); None for any other type; "unknown" when there is no annotation to read."""
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
