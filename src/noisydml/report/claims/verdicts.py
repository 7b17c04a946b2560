"""The papers' qualitative claims as rules over the aggregated runs: the records, and how a claim's
comparisons become its verdict (held, contradicted, inconclusive, or not evaluated).

A claim is checked in every group (experiment x data set) that holds at least one of its methods; a group
that lacks the other runs it needs says which ones are missing or failed. Its methods are found and set
side by side as :mod:`noisydml.report.pairing` does it. The claims themselves, and their checks, are the
papers' (:mod:`noisydml.report.papers`).

Every comparison is paired by seed (both methods trained on the same noisy labels and sampler): the mean
difference in the paper's direction, its 95% t-interval and a paired t-test's p-value, or with
``interval="bootstrap"`` the percentile bootstrap over seeds (``noisydml.report.statistics``). A claim
over several comparisons ("at every noise rate") holds when each interval lies above zero, is
contradicted when one lies below, and is inconclusive otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from noisydml.report import papers
from noisydml.report.pairing import by_seed, difference, fmt, gap, interval_text, mean, p_text, pairs
from noisydml.report.statistics import (
    CONTRADICTED,
    HELD,
    INCONCLUSIVE,
    Paired,
    T,
    combine,
    interval_kind,
    paired,
)
from noisydml.report.tables import Group, Row, Table

NOT_EVALUATED = "not evaluated"
STATUSES = (HELD, CONTRADICTED, INCONCLUSIVE, NOT_EVALUATED)


@dataclass(frozen=True)
class Claim:
    """A claim as the paper states it (``text``), the rule that checks it, and what runs it needs."""

    id: str
    paper: str
    text: str
    rule: str
    needs: str
    check: Callable[[Group], Outcome | None]


@dataclass(frozen=True)
class Comparison:
    """One paired comparison a claim makes: ``a - b`` by seed, ``a`` the side the paper says is larger
    (for a claim of equality, the verdict is ``equivalence``'s)."""

    what: str
    metric: str
    result: Paired
    verdict: str
    text: str


@dataclass(frozen=True)
class Outcome:
    status: str
    detail: str
    comparisons: tuple[Comparison, ...] = ()


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    where: str
    status: str
    detail: str
    comparisons: tuple[Comparison, ...] = field(default=())

    @property
    def deciding(self) -> Comparison | None:
        """The comparison the verdict rests on: a contradicting one, else the one nearest to failing."""
        against = [c for c in self.comparisons if c.verdict == CONTRADICTED]
        if against:
            return against[0]
        return min(self.comparisons, key=lambda c: c.result.ci_low, default=None)

    @property
    def seeds_needed(self) -> int | None:
        """For an inconclusive claim, the seeds at which each open comparison would be decided with 80%
        power at its observed effect; None when one of them is out of reach."""
        open_ = [c.result.seeds_needed() for c in self.comparisons if c.verdict == INCONCLUSIVE]
        if self.status != INCONCLUSIVE or not open_ or None in open_:
            return None
        return max(n for n in open_ if n is not None)


def evaluate(groups: list[Group], claims: Iterable[Claim] | None = None, interval: str = T) -> list[Verdict]:
    """Every claim (every paper's, unless ``claims`` are given) in every group that runs one of its
    methods, its comparisons with ``interval`` intervals (``t`` or ``bootstrap``); a claim no group
    touches is reported once, as not evaluated, naming the runs it needs. Groups of an experiment no claim
    is about (``papers.unclaimed``) are left out; a report of only those has no verdict at all."""
    unclaimed = papers.unclaimed()
    groups = [group for group in groups if group.paper not in unclaimed]
    if not groups:
        return []
    with interval_kind(interval):
        return _evaluate(groups, claims if claims is not None else papers.claims())


def _evaluate(groups: list[Group], claims: Iterable[Claim]) -> list[Verdict]:
    verdicts = []
    for claim in claims:
        found = False
        for group in groups:
            outcome = claim.check(group)
            if outcome is not None:
                found = True
                verdicts.append(
                    Verdict(claim, group.title, outcome.status, outcome.detail, outcome.comparisons)
                )
        if not found:
            verdicts.append(Verdict(claim, "", NOT_EVALUATED, f"no runs of {claim.needs}"))
    return verdicts


def compare(
    what: str,
    metric: str,
    a: dict[str, float],
    b: dict[str, float],
    labels: tuple[str, str],
    judge: Callable[[Paired], str] | None = None,
) -> Comparison:
    """``a`` against ``b`` (values by seed) on their shared seeds: the claim that ``a`` is larger, or
    ``judge``'s verdict on the difference (``equivalence``, ``at_most``)."""
    result = paired(a, b)
    status = result.verdict if judge is None else judge(result)
    stats_text = (
        f"Δ {interval_text(result, metric)}, p={p_text(result)}, "
        f"{result.n_seeds} paired seed{'s' if result.n_seeds != 1 else ''}"
    )
    text = (
        f"{what}: {labels[0]} {fmt(mean(a), metric)} vs {labels[1]} {fmt(mean(b), metric)} "
        f"({stats_text}: {status})"
    )
    return Comparison(what, metric, result, status, text)


def compare_columns(
    table: Table,
    pairs_: list[tuple[Row, Row]],
    metric: str,
    columns: list[Any] | None = None,
) -> tuple[list[Comparison], list[str]]:
    """a > b at every column both have, paired by seed: ``(comparisons, gaps)``."""
    done, gaps = [], []
    for a, b in pairs_:
        for column in columns if columns is not None else table.columns:
            va, vb = by_seed(a, column, metric), by_seed(b, column, metric)
            if not va or not vb:
                gaps += [gap(r, column, table.column_key) for r, v in ((a, va), (b, vb)) if not v]
                continue
            where = f"{table.column_key}={column}"
            if not set(va) & set(vb):
                gaps.append(f"{a.label} and {b.label} at {where}: no seed in common")
                continue
            done.append(compare(where, metric, va, vb, (a.label, b.label)))
    return done, gaps


def outcome(done: list[Comparison], gaps: list[str]) -> Outcome:
    if not done:
        return Outcome(NOT_EVALUATED, f"missing: {summarize(gaps)}" if gaps else "nothing to compare")
    detail = "; ".join(c.text for c in done)
    if gaps:
        detail += f" (not evaluated: {summarize(gaps)})"
    return Outcome(combine([c.verdict for c in done]), detail, tuple(done))


def summarize(gaps: list[str], shown: int = 3) -> str:
    """The first few cells a claim lacks; the rest counted (runs.csv lists every run)."""
    unique = list(dict.fromkeys(gaps))
    text = "; ".join(unique[:shown])
    if len(unique) > shown:
        text += f"; and {len(unique) - shown} more cells (see runs.csv)"
    return text


def gap_grows(
    table: Table, a_rows: list[Row], b_rows: list[Row], metric: str, low: float, high: float
) -> Outcome:
    """(a - b) at noise rate ``high`` > (a - b) at ``low``: the gap per seed at each rate, then the
    noisy gap against the cleaner one, seed by seed."""
    done, gaps = [], []
    for a, b in pairs(a_rows, b_rows):
        if any(not by_seed(r, p, metric) for p in (low, high) for r in (a, b)):
            gaps += [
                gap(r, p, "noise.rate") for p in (low, high) for r in (a, b) if not by_seed(r, p, metric)
            ]
            continue
        clean = difference(by_seed(a, low, metric), by_seed(b, low, metric))
        noisy = difference(by_seed(a, high, metric), by_seed(b, high, metric))
        if not set(clean) & set(noisy):
            gaps.append(f"{a.label} - {b.label} at p={low} and p={high}: no seed in common")
            continue
        what = f"{a.label} - {b.label} at p={high} vs at p={low} ({metric})"
        done.append(compare(what, metric, noisy, clean, (f"p={high}", f"p={low}")))
    return outcome(done, gaps)
