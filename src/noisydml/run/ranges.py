"""The ranges inside which a loss's, miner's, distance's or scheduler's parameter keeps its objective
meaningful. Outside them the libraries train without a word and the run learns nothing, or the opposite
of what it should: a negative margin no pair ever violates (the loss is 0), a negative alpha that weighs
the easiest pairs most, an L0 "distance" with no gradient, a negative learning-rate floor.

The ranges are declared per class (:data:`RANGES`, by the class path a config's ``_target_`` names) and
found along a target's bases, so a subclass (noisydml's ``ContrastiveLoss`` of PML's) is held to its
base's. :func:`check_ranges` applies them to every ``_target_`` node of the config, before anything is
built. A margin's range depends on what the loss compares: a distance (``LpDistance``, from 0 up) or a
similarity (``CosineSimilarity``, in [-1, 1]).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hydra.utils import get_object
from omegaconf import DictConfig

from noisydml.utils.errors import BadInput

INF = math.inf


@dataclass(frozen=True)
class Range:
    """``[low, high]`` (each end open where said), and what a value outside it does to the objective."""

    low: float = -INF
    high: float = INF
    open_low: bool = False
    open_high: bool = False
    why: str = ""

    def holds(self, value: float) -> bool:
        above = value > self.low if self.open_low else value >= self.low
        below = value < self.high if self.open_high else value <= self.high
        return above and below

    def describe(self) -> str:
        if self.high == INF:
            return f"must be {'>' if self.open_low else '>='} {_number(self.low)}"
        return (
            f"is outside {'(' if self.open_low else '['}{_number(self.low)}, {_number(self.high)}"
            f"{')' if self.open_high else ']'}"
        )


@dataclass(frozen=True)
class ByMetric:
    """A range that depends on what the node compares: distances (from 0 up) or similarities."""

    distance: Range
    similarity: Range


NONNEGATIVE_MARGIN = Range(0, why="a negative margin is met by every pair, so no pair is ever penalised")
SIMILARITY_MARGIN = Range(-1, 1, why="a cosine similarity lies in [-1, 1]: a margin outside it is never met")
MARGIN = ByMetric(NONNEGATIVE_MARGIN, SIMILARITY_MARGIN)
POSITIVE_SCALE = Range(0, open_low=True, why="0 or a negative scale flattens or inverts the pair weights")

# class path -> {parameter: its range}; a class inherits its bases' entries.
RANGES: dict[str, dict[str, Range | ByMetric]] = {
    "pytorch_metric_learning.losses.TripletMarginLoss": {"margin": NONNEGATIVE_MARGIN},
    "pytorch_metric_learning.losses.ContrastiveLoss": {"pos_margin": MARGIN, "neg_margin": MARGIN},
    "pytorch_metric_learning.losses.MultiSimilarityLoss": {"alpha": POSITIVE_SCALE, "beta": POSITIVE_SCALE},
    "pytorch_metric_learning.losses.MarginLoss": {
        "margin": NONNEGATIVE_MARGIN,
        "beta": Range(0, why="distances are >= 0: a negative boundary makes every negative pair easy"),
        "nu": Range(0, why="a negative nu rewards a large boundary beta, which the loss then pushes up"),
    },
    "pytorch_metric_learning.losses.ProxyAnchorLoss": {"alpha": POSITIVE_SCALE, "margin": NONNEGATIVE_MARGIN},
    "pytorch_metric_learning.losses.NCALoss": {"softmax_scale": POSITIVE_SCALE},
    "pytorch_metric_learning.losses.FastAPLoss": {
        "num_bins": Range(1, why="the average precision is estimated over a histogram of at least one bin")
    },
    "noisydml.losses.MarginalLoss": {
        "alpha": NONNEGATIVE_MARGIN,
        "beta": Range(0, why="distances are >= 0: a negative boundary makes every negative pair easy"),
    },
    "noisydml.losses.prism.MemoryContrastiveLoss": {
        "margin": SIMILARITY_MARGIN,
        "memory_weight": Range(0, why="a negative weight pushes the memory's positives away"),
    },
    "pytorch_metric_learning.miners.TripletMarginMiner": {"margin": NONNEGATIVE_MARGIN},
    "pytorch_metric_learning.miners.MultiSimilarityMiner": {
        "epsilon": Range(0, why="a negative epsilon keeps no pair, and the loss of no pair is 0")
    },
    "pytorch_metric_learning.miners.DistanceWeightedMiner": {
        "cutoff": Range(0, why="distances are >= 0: a negative cutoff clamps nothing"),
        "nonzero_loss_cutoff": Range(
            0, open_low=True, why="no negative is nearer than 0: none would be drawn"
        ),
    },
    "noisydml.miners.RandomSemihardMiner": {"margin": NONNEGATIVE_MARGIN},
    "noisydml.miners.SemihardPerPairMiner": {"margin": NONNEGATIVE_MARGIN},
    "noisydml.miners.EasyPositiveMiner": {
        "margin": NONNEGATIVE_MARGIN,
        "epsilon": Range(0, why="a negative epsilon keeps no negative"),
    },
    "pytorch_metric_learning.distances.BaseDistance": {
        "p": Range(1, why="an Lp norm needs p >= 1: p=0 counts nonzero coordinates and has no gradient"),
        "power": Range(
            0, open_low=True, why="a distance raised to 0 or a negative power is flat or inverted"
        ),
    },
    "torch.optim.lr_scheduler.CosineAnnealingLR": {
        "eta_min": Range(0, why="the learning rate would turn negative and training climb the loss")
    },
}

SIMILARITY = "pytorch_metric_learning.distances.DotProductSimilarity"


def check_ranges(cfg: DictConfig) -> None:
    """Refuse the first parameter of a ``_target_`` node outside its class's declared range."""
    for path, node in _target_nodes(cfg, ""):
        target = _import(node["_target_"])
        if target is None:
            continue
        for name, declared in _declared(target).items():
            if name not in node or node[name] is None:
                continue
            value, key = node[name], f"{path}.{name}"
            if isinstance(declared, ByMetric):
                similarity = _compares_similarities(node, target)
                if similarity is None:
                    continue
                declared = declared.similarity if similarity else declared.distance
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BadInput(f"{key}={value} is not a number; give one, e.g. {_example(target, name, key)}")
            if math.isnan(value) or not declared.holds(value):
                example = _example(target, name, key)
                raise BadInput(f"{key}={value} {declared.describe()} ({declared.why}); e.g. {example}")


def _declared(target: type) -> dict[str, Range | ByMetric]:
    declared: dict[str, Range | ByMetric] = {}
    for klass in reversed(inspect.getmro(target) if inspect.isclass(target) else ()):
        for path, ranges in _ranges().items():
            if klass is path:
                declared.update(ranges)
    return declared


@functools.cache
def _ranges() -> dict[Any, dict[str, Range | ByMetric]]:
    """:data:`RANGES` by class object (a path that does not import in this environment is skipped)."""
    found = {}
    for path, ranges in RANGES.items():
        klass = _import(path)
        if klass is not None:
            found[klass] = ranges
    return found


def _compares_similarities(node: DictConfig, target: type) -> bool | None:
    """Whether the node's distance is a similarity (its ``distance`` node, else the class's default);
    None when it cannot be told."""
    similarity = _import(SIMILARITY)
    distance = node.get("distance") if "distance" in node else None
    if isinstance(distance, DictConfig) and "_target_" in distance:
        klass = _import(distance["_target_"])
        return None if klass is None or similarity is None else issubclass(klass, similarity)
    try:
        return isinstance(target.get_default_distance(None), similarity)
    except Exception:
        return None


def _example(target: type, name: str, key: str) -> str:
    """``key=<the class's default>``, the value the class takes when the key is not given."""
    for klass in inspect.getmro(target):
        parameter = (
            inspect.signature(klass.__init__).parameters.get(name) if "__init__" in vars(klass) else None
        )
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            return f"{key}={parameter.default}"
    return f"{key}=..."


def _import(path: str) -> Any:
    try:
        return get_object(path)
    except Exception:
        return None


def _target_nodes(node: Any, path: str) -> Iterator[tuple[str, DictConfig]]:
    if isinstance(node, DictConfig) and not node._is_none() and path != "hydra":
        if isinstance(node.get("_target_", None), str):
            yield path, node
        for key in node:
            yield from _target_nodes(node._get_node(key), f"{path}.{key}" if path else str(key))


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"
