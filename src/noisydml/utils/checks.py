"""One rule for a number a user types: its type and range, refused with the key, the value and the fix.

Preflight checks the config keys that no constructor checks (``noisydml.run.preflight.RULES``); a
constructor checks its own arguments with the same rule (``noise.rate`` in the noise models,
``data.val_fraction`` in the data module), so each key is checked once, in one wording, whether it comes
from the command line or from Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from noisydml.utils.errors import BadInput

INF = math.inf


@dataclass(frozen=True)
class Rule:
    """``key`` must be a ``kind`` (int, or float which takes ints too) in ``[low, high)`` (``low`` open
    when ``open_low``); ``optional``: null is allowed; ``example`` completes the fix."""

    key: str
    kind: type
    low: float = -INF
    high: float = INF
    open_low: bool = False
    optional: bool = False
    example: str = ""


def check_value(rule: Rule, value: Any) -> None:
    """Refuse ``value`` for ``rule.key`` unless it is of the rule's kind and in its range."""
    if value is None:
        if rule.optional:
            return
        raise BadInput(f"{rule.key}=null needs a value, e.g. {rule.example}")
    kinds = (int,) if rule.kind is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "an integer" if rule.kind is int else "a number"
        raise BadInput(f"{rule.key}={value} is not {what}; give one, e.g. {rule.example}")
    below = value <= rule.low if rule.open_low else value < rule.low
    if below or value >= rule.high or math.isnan(value):
        if rule.high == INF:
            bound = f"must be {'>' if rule.open_low else '>='} {rule.low:g}"
        else:
            bound = f"is outside {'(' if rule.open_low else '['}{rule.low:g}, {rule.high:g})"
        forever = " (-1 would train forever)" if rule.key == "trainer.max_epochs" and value == -1 else ""
        raise BadInput(f"{rule.key}={value} {bound}{forever}; e.g. {rule.example}")


def check_fraction(key: str, value: Any, example: float = 0.2) -> float:
    """A fraction in ``[0, 1)``: a noise rate, a share of samples held out or hidden."""
    check_value(Rule(key, float, 0, 1, example=f"{key.split('[')[0]}={example}"), value)
    return float(value)
