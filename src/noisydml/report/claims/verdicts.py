"""The papers' qualitative claims as rules over the aggregated runs: the records, and how a claim's
comparisons become its verdict.

A claim is checked in every group (experiment x data set) that holds at least one of its methods; a group
that lacks the other runs it needs says which ones are missing or failed. Its methods are found and set
side by side as :mod:`noisydml.report.pairing` does it. The claims themselves, their checks and how far the
paper states them are the papers' (:mod:`noisydml.report.papers`).

Every comparison is paired by seed (both methods trained on the same noisy labels and sampler): the mean
difference in the paper's direction, its 95% t-interval and a paired t-test's p-value, or with
``interval="bootstrap"`` the percentile bootstrap over seeds (``noisydml.report.statistics``). A claim
over several comparisons ("at every noise rate") is decided in three steps:

1. **Multiplicity.** It holds when each interval lies above zero: an intersection-union test, at 5%
   without adjustment. It is contradicted when one comparison's interval lies below zero *after Holm's
   step-down adjustment* over the claim's comparisons in that group (one family: the paper's and the
   extensions together, stand-ins aside, which decide nothing), so that k comparisons with no true
   difference contradict it by chance at most 5% of the time (1 - 0.975^k unadjusted). Else inconclusive.
2. **Scope.** A comparison against a stand-in (BDML's BLMNN through the Bayes-linear stand-in) is
   ``not evaluated (stand-in)``: it never holds or contradicts a claim, and a claim it would complete is
   not held. A comparison beyond what the paper states (another data set, another backbone: the paper's
   ``Claim.extension``) is an extension: judged on its own (``Verdict.extension``), never the paper's
   verdict.
3. **Replication.** The claim is judged again on each of two disjoint halves of the seeds (the 1st, 3rd,
   ... and the 2nd, 4th, ... in seed order), each as if it were the only run. A verdict held or
   contradicted on all the seeds stands only when each half reaches it too. Where a half does not, it is
   ``underpowered`` when a half's seeds could not be expected to reach it (fewer seeds than replicate it at
   the observed effect and spread: ``Verdict.seeds_needed`` says how many would) and no half reaches the
   opposite verdict; otherwise it is ``unstable``: another machine, which draws the chaotic small runs
   afresh, or another set of seeds, could give another.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from noisydml.report import papers
from noisydml.report.pairing import by_seed, difference, fmt, gap, interval_text, mean, p_text, pairs
from noisydml.report.records import Claim, Comparison, Outcome
from noisydml.report.statistics import (
    ALPHA,
    CONTRADICTED,
    HALF_POWER,
    HELD,
    INCONCLUSIVE,
    Paired,
    T,
    combine,
    halves,
    holm,
    interval_kind,
    paired,
    seed_order,
    seeds_for,
    step_down_bar,
)
from noisydml.report.tables import Group, Row, Table

NOT_EVALUATED = "not evaluated"
UNSTABLE = "unstable"
UNDERPOWERED = "underpowered"
STAND_IN = "not evaluated (stand-in)"
EXTENSION_ONLY = "not evaluated (extension)"
STATUSES = (HELD, CONTRADICTED, INCONCLUSIVE, UNSTABLE, UNDERPOWERED, NOT_EVALUATED, STAND_IN, EXTENSION_ONLY)


@dataclass(frozen=True)
class Assessed:
    """One comparison as the claim's verdict used it: its Holm-adjusted p within its family (the claim's
    comparisons in the experiment, the paper's and the extensions together), the family's size, and its
    verdict on all seeds and on each half after that adjustment; ``STAND_IN`` for a comparison against a
    stand-in. ``halves_rejected``: how many of the family each half's Holm adjustment rejects, which sets
    the bar a half's contradiction must clear (``statistics.step_down_bar``)."""

    comparison: Comparison
    extension: str
    p_holm: float
    family: int
    verdict: str
    half_verdicts: tuple[str, str]
    halves_rejected: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Verdict:
    """A claim in one group. ``status``: the verdict reported; ``pooled``: the verdict on all the seeds
    (after Holm, before the replication check); ``halves``: the verdict on each half of the seeds;
    ``extension``: the verdict of the comparisons beyond the paper's statement, judged alike (``""`` when
    there are none)."""

    claim: Claim
    where: str
    status: str
    detail: str
    comparisons: tuple[Comparison, ...] = field(default=())
    pooled: str = ""
    halves: tuple[str, str] = ("", "")
    extension: str = ""
    assessed: tuple[Assessed, ...] = ()

    @property
    def halves_agree(self) -> bool | None:
        """Whether each half of the seeds, judged alone, reaches the verdict of all of them (None without
        comparisons)."""
        if not self.assessed or not self.pooled:
            return None
        return self.halves[0] == self.halves[1] == self.pooled

    def _in_scope(self) -> list[Assessed]:
        return [a for a in self.assessed if not a.extension and a.verdict != STAND_IN]

    @property
    def deciding(self) -> Comparison | None:
        """The comparison the verdict rests on: a contradicting one (after Holm), else the one nearest to
        failing; among the paper's own comparisons where it has any."""
        scope = self._in_scope() or self.assessed
        against = [a.comparison for a in scope if a.verdict == CONTRADICTED]
        if against:
            return against[0]
        return min((a.comparison for a in scope), key=lambda c: c.result.ci_low, default=None)

    @property
    def seeds_needed(self) -> int | None:
        """For an inconclusive claim, the seeds at which each open comparison would be decided with 80%
        power at its observed effect; for an underpowered or unstable one, twice the seeds at which one half
        would reach the verdict with 90% power (both halves then with about 81%). None when one is out of
        reach."""
        scope = self._in_scope()
        if self.status == INCONCLUSIVE:
            needed = [a.comparison.result.seeds_needed() for a in scope if a.verdict == INCONCLUSIVE]
        elif self.status in (UNSTABLE, UNDERPOWERED):
            needed = [_seeds_to_replicate(a) for a in scope]
        else:
            return None
        if not needed or None in needed:
            return None
        return max(n for n in needed if n is not None)


def _seeds_to_replicate(assessed: Assessed) -> int | None:
    """Seeds at which each half reaches the comparison's verdict with ``HALF_POWER``: a hold at the
    interval's level, a contradiction at the bar Holm set in the half that rejected fewer of the family
    (``step_down_bar``; alpha / family is only its first rejection's bar)."""
    result = assessed.comparison.result
    confidence = 1 - ALPHA
    if assessed.verdict == CONTRADICTED:
        confidence = 1 - step_down_bar(min(assessed.halves_rejected), assessed.family)
    per_half = seeds_for(result.effect - assessed.comparison.against, result.sd, HALF_POWER, confidence)
    return None if per_half is None else 2 * per_half


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


def judged_on(claim: Claim, group: Group) -> bool:
    """Whether ``claim`` is judged on ``group``: an experiment its passage is about, or no paper's."""
    if not claim.about or group.figure in claim.about:
        return True
    return papers.paper(group.paper) is None


def _evaluate(groups: list[Group], claims: Iterable[Claim]) -> list[Verdict]:
    verdicts = []
    for claim in claims:
        found = False
        for group in (g for g in groups if judged_on(claim, g)):
            outcome = claim.check(group)
            if outcome is not None:
                found = True
                verdicts.append(judge(claim, group, outcome))
        if not found:
            verdicts.append(Verdict(claim, "", NOT_EVALUATED, f"no runs of {claim.needs}"))
    return verdicts


def judge(claim: Claim, group: Group, found: Outcome) -> Verdict:
    """The claim's verdict in ``group`` from what its check found: Holm within the claim's comparisons,
    stand-ins and extensions set apart, then the replication check on the two halves of the seeds."""
    if not found.comparisons:
        return Verdict(claim, group.title, found.status, found.detail)
    assessed: list[Assessed] = []
    scoped = []
    for c in found.comparisons:
        reason = claim.extension(group, c) if claim.extension is not None else ""
        scoped.append((c, reason))
    stand_ins = [c for c, _ in scoped if c.stand_in]
    for c in stand_ins:
        assessed.append(Assessed(c, "", math.nan, 0, STAND_IN, (STAND_IN, STAND_IN)))
    # One Holm family: the claim's comparisons in this experiment, the paper's and the extensions alike
    # (a family per extension reason would adjust, say, BDML's 10% and 20% extensions as two of one).
    judged = [(c, reason) for c, reason in scoped if not c.stand_in]
    assessed += _family([c for c, _ in judged], [reason for _, reason in judged])
    # Back in the check's order.
    position = {id(c): i for i, c in enumerate(found.comparisons)}
    assessed.sort(key=lambda a: position[id(a.comparison)])
    mine = [a for a in assessed if not a.extension and a.verdict != STAND_IN]
    extra = [a for a in assessed if a.extension]
    notes = []
    if mine:
        pooled, halves_, status = _decide(mine, found.rule)
        if status == HELD and stand_ins:
            status = STAND_IN
            notes.append(f"held on the rest, but {_stand_in_text(stand_ins)}: not held on a stand-in")
    elif stand_ins and not extra:
        pooled, halves_, status = STAND_IN, (STAND_IN, STAND_IN), STAND_IN
    else:
        pooled, halves_, status = "", ("", ""), EXTENSION_ONLY if extra else STAND_IN
    extension = ""
    if extra:
        extension = _decide(extra, found.rule)[2]
        reasons = "; ".join(dict.fromkeys(a.extension for a in extra))
        notes.append(f"extension ({reasons}): {extension}, not the paper's verdict")
    if stand_ins and mine:
        notes.append(f"{_stand_in_text(stand_ins)}: not evaluated")
    notes.append(_judgement_text(mine or extra, pooled or extension, halves_ if mine else None))
    detail = found.detail + " || " + "; ".join(n for n in notes if n)
    return Verdict(
        claim, group.title, status, detail, found.comparisons, pooled, halves_, extension, tuple(assessed)
    )


def _family(comparisons: list[Comparison], extensions: list[str]) -> list[Assessed]:
    """Holm within one family, on all seeds and on each half: a comparison contradicts only when its
    interval says so and its adjusted p is below ``ALPHA``. ``extensions``: each comparison's reason for
    lying beyond the paper's statement, or ``""``."""
    if not comparisons:
        return []
    views = (None, 0, 1)
    adjusted = {view: holm([c.p_contradicts(view) for c in comparisons]) for view in views}
    rejected = (sum(p < ALPHA for p in adjusted[0]), sum(p < ALPHA for p in adjusted[1]))
    found = []
    for i, c in enumerate(comparisons):
        verdicts = []
        for view in views:
            raw = c.raw(view)
            p = adjusted[view][i]
            verdicts.append(INCONCLUSIVE if raw == CONTRADICTED and not p < ALPHA else raw)
        found.append(
            Assessed(
                c,
                extensions[i],
                adjusted[None][i],
                len(comparisons),
                verdicts[0],
                (verdicts[1], verdicts[2]),
                rejected,
            )
        )
    return found


def _decide(family: list[Assessed], rule: Callable[[list[str]], str]) -> tuple[str, tuple[str, str], str]:
    """(verdict on all seeds, on each half, the verdict that stands): held or contradicted stands only
    when each half reaches it too. Where a half does not, the claim is underpowered when no half reaches
    the opposite verdict and a half's seeds could not be expected to reach it (the seeds of a comparison
    that reaches the verdict on all seeds but not on a half fewer than those that replicate it at its
    observed effect and spread), else unstable. A comparison both halves reach says nothing of why a half
    missed: counting its seeds would call a miss for want of seeds where the comparisons that missed had
    seeds enough."""
    pooled = rule([a.verdict for a in family])
    halves_ = (rule([a.half_verdicts[0] for a in family]), rule([a.half_verdicts[1] for a in family]))
    if pooled not in (HELD, CONTRADICTED) or halves_ == (pooled, pooled):
        return pooled, halves_, pooled
    opposite = CONTRADICTED if pooled == HELD else HELD
    missed = [a for a in family if a.verdict == pooled and a.half_verdicts != (pooled, pooled)]
    short = any(
        (needed := _seeds_to_replicate(a)) is None or needed > a.comparison.result.n_seeds for a in missed
    )
    return pooled, halves_, UNDERPOWERED if opposite not in halves_ and short else UNSTABLE


def _stand_in_text(stand_ins: list[Comparison]) -> str:
    names = ", ".join(dict.fromkeys(c.stand_in for c in stand_ins))
    return f"{len(stand_ins)} comparison{'s' if len(stand_ins) != 1 else ''} against the stand-in for {names}"


def _judgement_text(family: list[Assessed], pooled: str, halves_: tuple[str, str] | None) -> str:
    """Holm's adjustment where it changed a comparison, and the halves."""
    parts = []
    for a in family:
        if a.comparison.verdict == CONTRADICTED and a.verdict != CONTRADICTED:
            parts.append(
                f"{a.comparison.what}: p={a.comparison.p_contradicts():.3g}, Holm over {a.family}: "
                f"{a.p_holm:.3g}, not contradicted"
            )
    if halves_ is not None and family:
        seeds = [seed_order(_seeds_of(a.comparison, half)) for half in (0, 1)]
        names = [",".join(map(str, s)) or "none" for s in seeds]
        parts.append(
            f"all seeds: {pooled}; halves (seeds {names[0]} / {names[1]}): {halves_[0]} / {halves_[1]}"
        )
    return "; ".join(parts)


def _seeds_of(comparison: Comparison, half: int) -> list[str]:
    return list(comparison.halves[half][0].seeds) if comparison.halves else []


def compare(
    what: str,
    metric: str,
    a: dict[str, float],
    b: dict[str, float],
    labels: tuple[str, str],
    judge: Callable[[Paired], str] | None = None,
    against: float | Callable[[Paired], float] = 0.0,
    column: Any = None,
) -> Comparison:
    """``a`` against ``b`` (values by seed) on their shared seeds: the claim that ``a`` is larger, or
    ``judge``'s verdict on the difference (``equivalence``, ``at_most``), whose contradiction is tested
    against ``against`` (the margin the interval must clear, or a function of the result that gives it).
    Each half of the seeds is judged alike."""
    result = paired(a, b)
    status = result.verdict if judge is None else judge(result)
    split = []
    for half in halves(seed for seed in a if seed in b):
        part = paired({s: a[s] for s in half}, {s: b[s] for s in half})
        split.append((part, part.verdict if judge is None else judge(part)))
    value = against(result) if callable(against) else against
    stats_text = (
        f"Δ {interval_text(result, metric)}, p={p_text(result)}, "
        f"{result.n_seeds} paired seed{'s' if result.n_seeds != 1 else ''}"
    )
    text = (
        f"{what}: {labels[0]} {fmt(mean(a), metric)} vs {labels[1]} {fmt(mean(b), metric)} "
        f"({stats_text}: {status})"
    )
    return Comparison(what, metric, result, status, text, (split[0], split[1]), value, column)


def compare_columns(
    table: Table,
    pairs_: list[tuple[Row, Row]],
    metric: str,
    columns: list[Any] | None = None,
    stand_in: Callable[[Row], str] | None = None,
) -> tuple[list[Comparison], list[str]]:
    """a > b at every column both have, paired by seed: ``(comparisons, gaps)``; ``stand_in`` names what
    a row b stands in for (``""`` when it is the method itself)."""
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
            # Named for both methods: a claim compares one method with several baselines.
            found = compare(
                f"{a.label} vs {b.label}, {where}", metric, va, vb, (a.label, b.label), column=column
            )
            done.append(replace(found, stand_in=stand_in(b)) if stand_in is not None else found)
    return done, gaps


def outcome(done: list[Comparison], gaps: list[str]) -> Outcome:
    if not done:
        return Outcome(NOT_EVALUATED, f"missing: {summarize(gaps)}" if gaps else "nothing to compare")
    detail = "; ".join(c.text for c in done)
    if gaps:
        detail += f" (not evaluated: {summarize(gaps)})"
    return Outcome(combine([c.verdict for c in done]), detail, tuple(done))


def summarize(gaps: list[str], shown: int = 3) -> str:
    """The first few cells a claim lacks; the rest counted (jobs.csv lists every job)."""
    unique = list(dict.fromkeys(gaps))
    text = "; ".join(unique[:shown])
    if len(unique) > shown:
        text += f"; and {len(unique) - shown} more cells (see jobs.csv)"
    return text


def gap_grows(
    table: Table,
    a_rows: list[Row],
    b_rows: list[Row],
    metric: str,
    low: float,
    high: float,
    stand_in: Callable[[Row], str] | None = None,
) -> Outcome:
    """(a - b) at noise rate ``high`` > (a - b) at ``low``: the gap per seed at each rate, then the
    noisy gap against the cleaner one, seed by seed (``stand_in`` as for ``compare_columns``)."""
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
        found = compare(what, metric, noisy, clean, (f"p={high}", f"p={low}"), column=high)
        done.append(replace(found, stand_in=stand_in(b)) if stand_in is not None else found)
    return outcome(done, gaps)
