"""One rule for a number a user types: its type and range, refused with the key, the value and the fix.

Preflight checks the config keys that no constructor checks (``noisydml.run.preflight.RULES``); a
constructor checks its own arguments with the same rule (``noise.rate`` in the noise models,
``data.val_fraction`` in the data module), so each key is checked once, in one wording, whether it comes
from the command line or from Python.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from noisydml.utils.errors import BadInput

INF = math.inf


@dataclass(frozen=True)
class Rule:
    """``key`` must be a ``kind`` (int, or float which takes ints too) in ``[low, high)`` (``low`` open
    when ``open_low``); ``optional``: null is allowed; ``example`` completes the fix. ``each``: the value
    is a list whose every item obeys the rule, of ``length`` items when given."""

    key: str
    kind: type
    low: float = -INF
    high: float = INF
    open_low: bool = False
    optional: bool = False
    example: str = ""
    each: bool = False
    length: int | None = None


def check_value(rule: Rule, value: Any) -> None:
    """Refuse ``value`` for ``rule.key`` unless it is of the rule's kind and in its range."""
    if value is None:
        if rule.optional:
            return
        raise BadInput(f"{rule.key}=null needs a value, e.g. {rule.example}")
    if rule.each:
        _check_list(rule, value)
        return
    if problem := _problem(rule, value):
        forever = " (-1 would train forever)" if rule.key == "trainer.max_epochs" and value == -1 else ""
        raise BadInput(f"{rule.key}={value} {problem}{forever}; {_fix(rule, problem)}")


def _check_list(rule: Rule, value: Any) -> None:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise BadInput(f"{rule.key}={value} is not a list; give one, e.g. {rule.example}")
    shown = f"[{','.join(str(item) for item in value)}]"
    if rule.length is not None and len(value) != rule.length:
        raise BadInput(f"{rule.key}={shown} needs {rule.length} values; e.g. {rule.example}")
    for item in value:
        if problem := _problem(rule, item):
            raise BadInput(f"{rule.key}={shown}: {item} {problem}; {_fix(rule, problem)}")


def _problem(rule: Rule, value: Any) -> str | None:
    """What is wrong with one value for the rule, or None."""
    kinds = (int,) if rule.kind is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        return f"is not {'an integer' if rule.kind is int else 'a number'}"
    below = value <= rule.low if rule.open_low else value < rule.low
    if below or value >= rule.high or math.isnan(value):
        if rule.high == INF:
            return f"must be {'>' if rule.open_low else '>='} {_number(rule.low)}"
        return f"is outside {'(' if rule.open_low else '['}{_number(rule.low)}, {_number(rule.high)})"
    return None


def _fix(rule: Rule, problem: str) -> str:
    return f"{'give one, ' if problem.startswith('is not') else ''}e.g. {rule.example}"


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
