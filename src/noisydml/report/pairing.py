"""Finding the rows a comparison sets side by side, and their values by seed.

Methods are found by Hydra's group choices (``loss``, ``miner``, ``backbone``), not by label, and compared
row against row only where their other overrides agree (same noise model, embedding size, ...). Values are
taken by seed, so that two methods are compared on the runs that trained on the same noisy labels. The
papers' claims (:mod:`noisydml.report.claims`), the comparison of each method with its own paper's
baseline (:mod:`noisydml.report.comparisons`) and the test-set selection
(:mod:`noisydml.report.selection_bias`) share these helpers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from noisydml.report.collect import FAILED, MISSING, NO_RESULT, canonical
from noisydml.report.statistics import Paired
from noisydml.report.tables import Cell, Group, Row, Table, format_number

RECALL = "test/recall@1"
# Overrides that make a row a different method; rows that agree on everything else are compared.
METHOD_KEYS = ("method", "loss", "miner", "backbone")
# The suffix of a noisy/topline ratio's metric name: a ratio, printed as one, never as a percentage.
RATIO = " noisy/topline"


def rows_where(table: Table, topline: bool = False, **choices: Any) -> list[Row]:
    """Rows whose Hydra choices match; a value may be a predicate on the choice."""

    def match(row: Row) -> bool:
        for group, wanted in choices.items():
            got = row.choice(group)
            if not (wanted(got) if callable(wanted) else got == wanted):
                return False
        return row.topline == topline

    return [row for row in table.rows if match(row)]


def peer_key(row: Row) -> frozenset:
    """The row's overrides less those of its method: the groups and their keys (``miner.negatives``,
    ``loss@loss.loss``)."""
    return frozenset(item for item in row.signature if re.split(r"[.@]", item[0])[0] not in METHOD_KEYS)


def pairs(
    a_rows: list[Row], b_rows: list[Row], same: Callable[[Row, Row], bool] | None = None
) -> list[tuple[Row, Row]]:
    """Rows of method a beside rows of method b that agree on every other override (and ``same``).

    A lone row of a is also set beside each row of b that agrees with none: methods tuned apart (Adam's
    rate chosen per method) differ in an override that is not the method's, and each baseline must still
    be compared. A lone pair of rows is compared whatever ``same`` says.
    """
    matched = [
        (a, b) for a in a_rows for b in b_rows if peer_key(a) == peer_key(b) and (same is None or same(a, b))
    ]
    if len(a_rows) == 1:
        (lone,) = a_rows
        unmatched = [b for b in b_rows if all(b is not paired for _, paired in matched)]
        matched += [(lone, b) for b in unmatched if same is None or same(lone, b) or len(b_rows) == 1]
    return matched


def by_seed(row: Row, column: Any, metric: str) -> dict[str, float]:
    """The row's metric at one column value, by seed (empty when no run there logged it)."""
    cell = row.cells.get(canonical(column))
    return cell.per_seed(metric) if cell else {}


def mean_at(row: Row, column: Any, metric: str) -> float:
    cell = row.cells.get(canonical(column))
    return cell.mean(metric) if cell else math.nan


def gap(row: Row, column: Any, key: str) -> str:
    """Why a cell has no value: which of its runs failed, are no result or are missing."""
    cell: Cell | None = row.cells.get(canonical(column))
    where = f"{row.label} at {key}={column}"
    if cell is None:
        return f"{where}: no run"
    parts = [f"{s} {cell.count(s)}/{len(cell.runs)}" for s in (FAILED, NO_RESULT, MISSING) if cell.count(s)]
    return f"{where}: {', '.join(parts) or 'metric not logged'}"


def varies(group: Group, key: str) -> bool:
    """Whether the group's runs take more than one value of ``key``."""
    return len({canonical(r.value(key)) for r in group.runs}) > 1


def metric_for(table: Table, preferred: tuple[str, ...]) -> str:
    present = set(table.metrics)
    return next((m for m in preferred if m in present), preferred[-1])


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def mean(values: dict[str, float]) -> float:
    return sum(values.values()) / len(values) if values else math.nan


def difference(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """``a - b`` on the seeds both have."""
    return {seed: a[seed] - b[seed] for seed in a if seed in b}


def fmt(value: float, metric: str) -> str:
    return f"{value:.3f}" if metric.endswith(RATIO) else format_number(value, metric)


def fmt_signed(value: float, metric: str) -> str:
    return ("+" if value >= 0 else "−") + fmt(abs(value), metric)


def interval_text(result: Paired | None, metric: str = RECALL) -> str:
    """A paired difference with its interval, ``+1.20 [+0.40, +2.00]``; ``-`` when there is none."""
    if result is None or result.n_seeds == 0:
        return "-"
    low = "−∞" if math.isinf(result.ci_low) else fmt_signed(result.ci_low, metric)
    high = "+∞" if math.isinf(result.ci_high) else fmt_signed(result.ci_high, metric)
    return f"{fmt_signed(result.effect, metric)} [{low}, {high}]"


def p_text(result: Paired) -> str:
    return "-" if math.isnan(result.p_value) else f"{result.p_value:.3g}"
