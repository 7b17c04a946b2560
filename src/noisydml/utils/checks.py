"""One rule for a value a user types: its type and range (or its options), and why, refused with the key,
the value and the fix in one wording.

The run's checks (:mod:`noisydml.run.checks`) hold the table of keys no constructor checks and the ranges
of library classes; a constructor of this package checks its own arguments with the same rule
(``noise.rate`` in the noise models, ``data.val_fraction`` in the data module, a margin in a miner), so
each key is checked once, in one wording, whether it comes from the command line or from Python.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from noisydml.utils.errors import BadInput

INF = math.inf
# A parameter named in a constructor's message, ``name=``, not already a config path.
PARAMETER = re.compile(r"(?<![\w.\[])([A-Za-z_]\w*)=")


class BadValue(BadInput):
    """A value refused by a :class:`Rule`: ``key``, and the message after ``key=``. A constructor names
    its parameters as ``name=`` (``margin=-1``); whoever built it from a config names where they sit
    (:meth:`under`: ``miner.margin=-1``)."""

    def __init__(self, key: str, rest: str):
        super().__init__(f"{key}{rest}")
        self.key, self.rest = key, rest

    def under(self, path: str) -> BadValue:
        """The same refusal with every parameter it names below ``path``, unless its key is already a
        config path (``noise.rate``)."""
        if "." in self.key or not path:
            return self
        return BadValue(f"{path}.{self.key}", PARAMETER.sub(rf"{path}.\1=", self.rest))


@dataclass(frozen=True)
class Rule:
    """``key`` must be a ``kind`` (int, float which takes ints too, or str) in ``[low, high)`` (``low``
    open when ``open_low``, ``high`` closed unless ``open_high``) or, for a str, one of ``options``;
    ``optional``: null is allowed; ``example`` completes the fix; ``why``: what a value outside the range
    does. ``each``: the value is a list whose every item obeys the rule, of ``length`` items when given."""

    key: str
    kind: type
    low: float = -INF
    high: float = INF
    open_low: bool = False
    open_high: bool = True
    optional: bool = False
    example: str = ""
    each: bool = False
    length: int | None = None
    why: str = ""
    options: tuple[str, ...] = ()

    def at(self, key: str, example: str | None = None) -> Rule:
        """The rule for the same kind of value at another key (a class's parameter at its config path)."""
        return replace(self, key=key, example=example if example is not None else self.example)


def parameter_range(low: float, high: float = INF, open_low: bool = False, why: str = "") -> Rule:
    """A class parameter's range, closed at ``high``, keyed by the parameter's name (its place in a config
    is given where it is checked: :meth:`Rule.at`, :meth:`BadValue.under`)."""
    return Rule("", float, low, high, open_low=open_low, open_high=False, why=why)


NONNEGATIVE_MARGIN = parameter_range(
    0, why="a negative margin is met by every pair, so no pair is ever penalised"
)
SIMILARITY_MARGIN = parameter_range(
    -1, 1, why="a cosine similarity lies in [-1, 1]: a margin outside it is never met"
)
POSITIVE_SCALE = parameter_range(
    0, open_low=True, why="0 or a negative scale flattens or inverts the pair weights"
)
NONNEGATIVE_BOUNDARY = parameter_range(
    0, why="distances are >= 0: a negative boundary makes every negative pair easy"
)


def check_value(rule: Rule, value: Any) -> None:
    """Refuse ``value`` for ``rule.key`` unless it is of the rule's kind and in its range."""
    if value is None:
        if rule.optional:
            return
        raise BadValue(rule.key, f"=null needs a value, e.g. {rule.example}")
    if rule.each:
        _check_list(rule, value)
        return
    if problem := _problem(rule, value):
        raise BadValue(rule.key, f"={value} {problem}{_why(rule, problem)}{_fix(rule, problem)}")


def _check_list(rule: Rule, value: Any) -> None:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise BadValue(rule.key, f"={value} is not a list; give one, e.g. {rule.example}")
    shown = f"[{','.join(str(item) for item in value)}]"
    if rule.length is not None and len(value) != rule.length:
        raise BadValue(rule.key, f"={shown} needs {rule.length} values; e.g. {rule.example}")
    for item in value:
        if problem := _problem(rule, item):
            raise BadValue(rule.key, f"={shown}: {item} {problem}{_why(rule, problem)}{_fix(rule, problem)}")


def _problem(rule: Rule, value: Any) -> str | None:
    """What is wrong with one value for the rule, or None."""
    if rule.options and (rule.kind in (str, bool) or isinstance(value, str)):
        # A number's rule may take words too (triplets_per_anchor: all, or a count).
        options = ", ".join(rule.options) + ("" if rule.kind in (str, bool) else f", or {_kind(rule)}")
        return None if str(value) in rule.options else f"is not an option; use one of: {options}"
    kinds = (int,) if rule.kind is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        return f"is not {'an integer' if rule.kind is int else 'a number'}"
    if math.isnan(value):
        return "is not a number"
    below = value <= rule.low if rule.open_low else value < rule.low
    above = value >= rule.high if rule.open_high else value > rule.high
    if below or above:
        if rule.high == INF:
            return f"must be {'>' if rule.open_low else '>='} {_number(rule.low)}"
        return (
            f"is outside {'(' if rule.open_low else '['}{_number(rule.low)}, {_number(rule.high)}"
            f"{')' if rule.open_high else ']'}"
        )
    return None


def _kind(rule: Rule) -> str:
    low = f" {'>' if rule.open_low else '>='} {_number(rule.low)}" if rule.low > -INF else ""
    return f"{'an integer' if rule.kind is int else 'a number'}{low}"


def _why(rule: Rule, problem: str) -> str:
    shown = rule.why and (rule.options or not problem.startswith("is not"))
    return f" ({rule.why})" if shown else ""


def _fix(rule: Rule, problem: str) -> str:
    if rule.options:
        return ""
    return f"; {'give one, ' if problem.startswith('is not') else ''}e.g. {rule.example}"


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def check_fraction(key: str, value: Any, example: float = 0.2) -> float:
    """A fraction in ``[0, 1)``: a noise rate, a share of samples held out or hidden."""
    check_value(Rule(key, float, 0, 1, example=f"{key.split('[')[0]}={example}"), value)
    return float(value)


def check_writable(path: Path, key: str, fix: str, keep: bool = True) -> None:
    """The folder ``path`` (the value of ``key``) can be created and written (a read-only mount, a full
    disk, ``/proc``). ``keep=True`` creates it; ``keep=False`` leaves the disk as it was found, probing the
    nearest folder that exists, so that processes checking the same path at once (DDP ranks) never remove
    a folder another is probing."""
    probe = path if keep else next((p for p in (path, *path.parents) if p.exists()), path)
    try:
        if keep:
            path.mkdir(parents=True, exist_ok=True)
        elif not probe.is_dir():
            raise NotADirectoryError(20, "Not a directory")
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as error:
        raise BadInput(
            f"{key}={path} cannot be written ({error.strerror}); choose a writable folder with {fix}"
        ) from None
