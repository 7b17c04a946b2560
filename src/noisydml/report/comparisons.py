"""Each method against its own paper's baseline, in experiments that run the papers' methods under protocols
no paper ran (``papers.unclaimed``: conf/experiment/noisy_dml/, PRISM's noise models and rates), where no
published claim applies and the question is whether a method still beats what its paper beat.

A method's baselines are the ``method=`` options its config declares in ``report.baselines``
(``collect.declared_baselines``). At every setting (data set, noise model, noise rate) the method's test
Recall@1 (checkpoint selected on the validation split) is set against each baseline's, paired by seed: one
seed draws the same noisy labels for both. A comparison is better when the 95%
interval of the difference lies above zero, worse below, and in either case only when its p-value survives
Benjamini and Hochberg's adjustment over every comparison of the report (``FAMILY``): some 100 comparisons
with no true difference would otherwise give about 5 verdicts by chance; with it, the expected share of
false verdicts among those given stays at 5% (false discovery rate). Else inconclusive (with fewer than two
seeds, or equal differences on fewer than three, no interval can be told: inconclusive). A setting where
either side has no complete run is missing, and says which runs it lacks.

A verdict must also replicate, as a claim's must (:mod:`noisydml.report.claims.verdicts`): each comparison
is judged again on each of two disjoint halves of the seeds (``statistics.halves``), each half with its own
Benjamini-Hochberg adjustment over the report's comparisons. Better or worse stands only when each half
reaches it too. Where a half does not, the comparison is underpowered when a half's seeds could not be
expected to reach the verdict (at the observed effect and spread, at the bar the stricter half's
Benjamini-Hochberg adjustment reached: ``statistics.step_up_bar``), and says how many seeds would;
otherwise it is unstable: the halves disagree with seeds enough, and another machine, or another set of
seeds, could give another.

Where the experiment registers its seeds (``report.seeds``, :mod:`noisydml.report.registry`), a comparison
is confirmatory only on exactly those seeds; one on other seeds (a method its sweep runs at fewer seeds, the
pilot's) is exploratory: marked so, and adjusted in a family of its own, so that its many undecided
comparisons neither count as confirmatory verdicts nor raise the confirmatory comparisons' bar.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from noisydml.report import papers, registry
from noisydml.report.collect import declared_baselines, method_config
from noisydml.report.pairing import RECALL, by_seed, gap, interval_text, peer_key
from noisydml.report.plots import save_figure
from noisydml.report.records import slug
from noisydml.report.statistics import (
    ALPHA,
    CONTRADICTED,
    HALF_POWER,
    HELD,
    MAX_SEEDS,
    Paired,
    T,
    benjamini_hochberg,
    halves,
    paired,
    seed_order,
    seeds_for,
    step_up_bar,
)
from noisydml.report.tables import Group, Row, csv_number, format_number, md_cell, pivot

BETTER, WORSE, INCONCLUSIVE, UNSTABLE, MISSING = "better", "worse", "inconclusive", "unstable", "missing"
UNDERPOWERED = "underpowered"
VERDICT_ORDER = (BETTER, WORSE, UNSTABLE, UNDERPOWERED, INCONCLUSIVE, MISSING)
VERDICTS = {HELD: BETTER, CONTRADICTED: WORSE}
# How the report's comparisons are adjusted for their number, as the report states it.
FAMILY = "Benjamini-Hochberg over every comparison of this report with a p-value (false discovery rate 5%)"


@dataclass(frozen=True)
class Comparison:
    """A method against one baseline at one setting: ``result`` is method - baseline by seed (None when
    either side has no complete run there, ``missing`` then says which)."""

    group: Group
    noise: str
    rate: Any
    method: str
    baseline: str
    method_mean: float
    baseline_mean: float
    result: Paired | None
    missing: str = ""
    # The p-value after Benjamini-Hochberg over the report's comparisons (``compare_baselines``).
    p_adjusted: float = math.nan
    # The comparison on each half of the seeds (``statistics.halves``; None where ``result`` is), and each
    # half's Benjamini-Hochberg p over the halves of the report's comparisons.
    halves: tuple[Paired, Paired] | None = None
    halves_p_adjusted: tuple[float, float] = (math.nan, math.nan)
    # How many comparisons the adjustment was over (``adjust``), and how many each half's adjustment
    # rejected: a half's bar depends on both (``statistics.step_up_bar``).
    family: int = 0
    halves_rejected: tuple[int, int] = (0, 0)
    # On other seeds than the experiment registers (``registry.exploratory``): its own family, never read
    # as a confirmatory verdict.
    exploratory: bool = False

    @property
    def pooled(self) -> str:
        """The verdict on all the seeds: better or worse when the interval excludes zero and the adjusted p
        is below ``ALPHA``."""
        return _judge(self.result, self.p_adjusted)

    def half_verdict(self, half: int) -> str:
        """The verdict on one half of the seeds alone, judged as ``pooled``."""
        if self.halves is None:
            return MISSING
        return _judge(self.halves[half], self.halves_p_adjusted[half])

    @property
    def halves_agree(self) -> bool | None:
        """Whether each half of the seeds reaches the verdict of all of them (None when missing)."""
        if self.result is None:
            return None
        return self.half_verdict(0) == self.half_verdict(1) == self.pooled

    @property
    def verdict(self) -> str:
        """The verdict on all the seeds where it is inconclusive or missing, or where each half reaches it
        too. Where a half does not: underpowered when a half's seeds could not be expected to reach it (at
        the observed effect and spread, fewer than ``seeds_to_replicate``) and no half points the other
        way; else unstable, the halves disagreeing with as many seeds as replication needs."""
        pooled = self.pooled
        if pooled not in (BETTER, WORSE) or self.halves_agree:
            return pooled
        opposite = WORSE if pooled == BETTER else BETTER
        needed = self.seeds_to_replicate()
        if opposite not in (self.half_verdict(0), self.half_verdict(1)) and (
            needed is None or needed > self.result.n_seeds
        ):
            return UNDERPOWERED
        return UNSTABLE

    def seeds_to_replicate(self, family: int | None = None) -> int | None:
        """For a verdict on all the seeds that the halves do not both reach, twice the seeds at which one
        half would reach it with ``HALF_POWER`` at the observed effect and spread (so about 81% that both
        halves do), tested at the bar Benjamini-Hochberg set over the ``family`` of comparisons (the family
        adjusted over when not given) in the half that rejected fewer of them, as both halves must reach it
        (``step_up_bar``; ALPHA / family is only the first rejection's bar, and a half that rejects most of
        its family clears a bar many times looser). Still an upper estimate, as a half's bar rises with
        every other comparison more seeds would let it reject. None otherwise or out of reach."""
        if self.pooled not in (BETTER, WORSE) or self.halves_agree:
            return None
        bar = step_up_bar(min(self.halves_rejected), family or self.family or 1)
        per_half = seeds_for(self.result.effect, self.result.sd, HALF_POWER, 1 - bar)
        return None if per_half is None else 2 * per_half

    @property
    def pair(self) -> tuple[str, str]:
        return self.method, self.baseline


def is_comparison(group: Group) -> bool:
    """Whether a group belongs to an experiment that compares methods rather than reproduces a paper."""
    return group.paper in papers.unclaimed()


def compare_baselines(groups: list[Group], metric: str = RECALL) -> list[Comparison]:
    """Every method with declared baselines against each of them, at every noise rate of every comparison
    group; a baseline that no run of the group ran is reported as missing at each rate."""
    found = []
    for group in filter(is_comparison, groups):
        table = pivot(group, "noise.rate")
        by_option: dict[str, list[Row]] = defaultdict(list)
        for row in table.rows:
            by_option[str(row.choice("method"))].append(row)
        for row in table.rows:
            first = next((r for r in row.runs if r.has_config), row.runs[0])
            for option in declared_baselines(first):
                # The baseline under the same noise model and every other override: only the method differs.
                twins = [b for b in by_option.get(option, []) if peer_key(b) == peer_key(row)]
                for column in table.columns:
                    found.append(compare_rows(group, row, twins, option, column, metric))
    return adjust(found)


def _judge(result: Paired | None, p_adjusted: float) -> str:
    if result is None:
        return MISSING
    if not p_adjusted < ALPHA:
        return INCONCLUSIVE
    return VERDICTS.get(result.verdict, INCONCLUSIVE)


def adjust(comparisons: list[Comparison]) -> list[Comparison]:
    """Each comparison with its Benjamini-Hochberg p over those of the list that have a result, on all the
    seeds and on each half (each half a family of its own), and how many each half rejects; the
    confirmatory comparisons and the exploratory ones (``Comparison.exploratory``) each a family apart."""
    found = list(comparisons)
    for exploratory in (False, True):
        for i, c in _adjusted([(i, c) for i, c in enumerate(found) if c.exploratory is exploratory]):
            found[i] = c
    return found


def _adjusted(indexed: list[tuple[int, Comparison]]) -> list[tuple[int, Comparison]]:
    comparisons = [c for _, c in indexed]
    tested = [i for i, c in enumerate(comparisons) if c.result is not None]
    adjusted = benjamini_hochberg([comparisons[i].result.p_value for i in tested])
    by_half = [benjamini_hochberg([comparisons[i].halves[half].p_value for i in tested]) for half in (0, 1)]
    rejected = (sum(p < ALPHA for p in by_half[0]), sum(p < ALPHA for p in by_half[1]))
    found = []
    for position, (i, p) in enumerate(zip(tested, adjusted, strict=True)):
        halves_p = (by_half[0][position], by_half[1][position])
        done = replace(
            comparisons[i],
            p_adjusted=p,
            halves_p_adjusted=halves_p,
            family=len(tested),
            halves_rejected=rejected,
        )
        found.append((indexed[i][0], done))
    return found


def compare_rows(group: Group, row: Row, twins: list[Row], option: str, rate: Any, metric: str) -> Comparison:
    """``row``'s method against the first of ``twins`` at one noise rate, paired by seed, on all the seeds and
    on each half; missing (naming ``option``, the baseline's ``method=``) where there is no twin or no seed
    both ran."""
    noise = str(row.choice("noise") or "")
    mine = by_seed(row, rate, metric)
    if not twins:
        label = method_config(option)[1] or option
        return Comparison(
            group, noise, rate, row.method, label, _mean(mine), math.nan, None, f"no run of method={option}"
        )
    baseline = twins[0]
    theirs = by_seed(baseline, rate, metric)
    shared = seed_order(s for s in mine if s in theirs)
    if not shared:
        lacking = [gap(r, rate, "noise.rate") for r, v in ((row, mine), (baseline, theirs)) if not v]
        why = "; ".join(lacking) or "no seed in common"
        return Comparison(
            group, noise, rate, row.method, baseline.method, _mean(mine), _mean(theirs), None, why
        )
    # The means of the seeds both ran, so that the difference of the means is the paired one.
    mine, theirs = {s: mine[s] for s in shared}, {s: theirs[s] for s in shared}
    split = tuple(paired({s: mine[s] for s in half}, {s: theirs[s] for s in half}) for half in halves(shared))
    return Comparison(
        group,
        noise,
        rate,
        row.method,
        baseline.method,
        _mean(mine),
        _mean(theirs),
        paired(mine, theirs),
        halves=split,
        exploratory=registry.exploratory(group.figure, shared),
    )


def _mean(values: dict[str, float]) -> float:
    return float(np.mean(list(values.values()))) if values else math.nan


def summary_lines(comparisons: list[Comparison]) -> list[str]:
    """A line per data set, method and baseline: at how many settings (noise model x rate) the method is
    better, worse, inconclusive, missing."""
    by_pair: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for c in sorted(comparisons, key=lambda c: (c.group.dataset, c.method.casefold(), c.baseline.casefold())):
        by_pair[(c.group.dataset, *c.pair)].append(c.verdict)
    lines = []
    for (dataset, method, baseline), verdicts in by_pair.items():
        counts = {v: verdicts.count(v) for v in VERDICT_ORDER}
        text = (
            f"{dataset}: **{method}** vs {baseline}: better at {counts[BETTER]} of {len(verdicts)} settings, "
            f"worse at {counts[WORSE]}, inconclusive at {counts[INCONCLUSIVE]}"
        )
        for verdict in (UNSTABLE, UNDERPOWERED, MISSING):
            if counts[verdict]:
                text += f", {verdict} at {counts[verdict]}"
        lines.append(text)
    return lines


def verdict_text(comparison: Comparison) -> str:
    """The verdict as the report's table shows it: with the halves' when they do not reach the verdict of
    all the seeds, the seeds it needs when it is underpowered, and ``exploratory`` after it off the
    experiment's registered seeds."""
    text = _verdict_text(comparison)
    return f"{text}, exploratory" if comparison.exploratory else text


def _verdict_text(comparison: Comparison) -> str:
    verdict = comparison.verdict
    if verdict == UNDERPOWERED:
        needed = comparison.seeds_to_replicate()
        needs = f"needs {needed} seeds" if needed is not None else f"needs over {2 * MAX_SEEDS} seeds"
        return f"underpowered ({needs}; all seeds {comparison.pooled}; halves {_halves_text(comparison)})"
    if verdict != UNSTABLE:
        return verdict
    return f"unstable (all seeds {comparison.pooled}; halves {_halves_text(comparison)})"


def _halves_text(comparison: Comparison) -> str:
    return " / ".join(comparison.half_verdict(half) for half in (0, 1))


def markdown(comparisons: list[Comparison], interval: str) -> str:
    """The section: the summary line of each pair, then a table per data set and noise model."""
    if not comparisons:
        return ""
    kind = "t-interval" if interval == T else "percentile bootstrap interval over seeds"
    out = [
        "## Each method against its own paper's baseline\n",
        "No paper's claim is about these runs (the papers' methods under PRISM's noise protocols), so none "
        "is checked. Instead each method is set against the baseline its own paper compares it with "
        "(`report.baselines` in conf/method/), on the same noisy labels: Δ = method − baseline test "
        "Recall@1 (checkpoint selected on the validation split), in points, paired by seed, with its 95% "
        f"{kind}. better / worse: the interval excludes zero and the comparison survives {FAMILY}: "
        f"{sum(c.result is not None for c in comparisons)} comparisons, p_bh in comparisons.csv; "
        "inconclusive: it does not, or cannot be told (fewer than 2 seeds, or equal differences on fewer "
        "than 3); missing: a side has no complete run. Each comparison is judged again on each of two "
        "disjoint halves of the seeds (the 1st, 3rd, ... and the 2nd, 4th, ..., each half with its own "
        "adjustment): better or worse stands only when both halves reach it too. Where a half does not, "
        "the comparison is underpowered when a half's seeds could not be expected to reach the verdict at "
        "its observed effect and spread (it says how many seeds would), else unstable (the halves disagree "
        "with seeds enough: another machine or another set of seeds could give another verdict). "
        "exploratory: where the experiment registers its seeds (report.seeds), a comparison on other seeds "
        "(a method its sweep runs at fewer), adjusted in a family of its own and never a confirmatory "
        "verdict. comparisons.csv has every number.\n",
        *(f"- {line}" for line in summary_lines(comparisons)),
        "",
    ]
    by_setting: dict[tuple[str, str], list[Comparison]] = defaultdict(list)
    for c in comparisons:
        by_setting[(c.group.dataset, c.noise)].append(c)
    for (dataset, noise), rows in by_setting.items():
        out += [
            f"### {dataset}, {noise} noise\n",
            "| method | baseline | noise.rate | method R@1 | baseline R@1 | Δ [95% CI] | p | seeds "
            "| verdict |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c in sorted(rows, key=lambda c: (c.method.casefold(), c.baseline.casefold(), c.rate)):
            result = c.result
            cells = (
                c.method,
                c.baseline,
                c.rate,
                format_number(c.method_mean, RECALL),
                format_number(c.baseline_mean, RECALL),
                interval_text(result),
                "-"
                if result is None or math.isnan(result.p_value)
                else f"{result.p_value:.3g} (BH {c.p_adjusted:.3g})",
                result.n_seeds if result else 0,
                f"**{verdict_text(c)}**" + (f": {c.missing}" if c.missing else ""),
            )
            out.append("| " + " | ".join(md_cell(str(text)) for text in cells) + " |")
        out.append("")
    return "\n".join(out) + "\n"


# A row's setting, the first columns of every per-setting CSV of a report (comparisons.csv,
# test_selection.csv, detection.csv), which noisydml.report.claims.readme reads by name.
SETTING_FIELDS = ("figure", "dataset", "noise", "noise_rate")
FIELDS = (
    *SETTING_FIELDS,
    "method",
    "baseline",
    "metric",
    "method_mean",
    "baseline_mean",
    "effect",
    "ci_low",
    "ci_high",
    "p_value",
    "p_bh",
    "n_comparisons",
    "n_seeds",
    "verdict",
    # The verdict on all the seeds, on each half (each half adjusted over its own family), and whether
    # both halves reach the verdict of all seeds; ``verdict`` is underpowered or unstable where they do not.
    "verdict_all_seeds",
    "verdict_half_a",
    "verdict_half_b",
    "halves_agree",
    "p_bh_half_a",
    "p_bh_half_b",
    # Where the halves do not both reach it: the seeds at which both would (about 81%).
    "seeds_to_replicate",
    "interval",
    "missing",
    # "yes" where the experiment registers seeds and the comparison is not on them (its own family).
    "exploratory",
)


def write_csv(comparisons: list[Comparison], path: Path) -> Path:
    """One line per method, baseline and setting; numbers as fractions, as the runs log them; ``p_bh``
    the Benjamini-Hochberg p over the ``n_comparisons`` of its family (the report's confirmatory
    comparisons, or its exploratory ones)."""
    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for c in comparisons:
            r = c.result
            writer.writerow(
                {
                    "figure": c.group.figure,
                    "dataset": c.group.dataset,
                    "noise": c.noise,
                    "noise_rate": c.rate,
                    "method": c.method,
                    "baseline": c.baseline,
                    "metric": RECALL,
                    "method_mean": csv_number(c.method_mean),
                    "baseline_mean": csv_number(c.baseline_mean),
                    "effect": csv_number(r.effect) if r else "",
                    "ci_low": csv_number(r.ci_low) if r else "",
                    "ci_high": csv_number(r.ci_high) if r else "",
                    "p_value": csv_number(r.p_value) if r else "",
                    "p_bh": csv_number(c.p_adjusted) if r else "",
                    "n_comparisons": c.family if r else "",
                    "n_seeds": r.n_seeds if r else 0,
                    "verdict": c.verdict,
                    "verdict_all_seeds": c.pooled,
                    "verdict_half_a": c.half_verdict(0),
                    "verdict_half_b": c.half_verdict(1),
                    "halves_agree": "" if c.halves_agree is None else ("yes" if c.halves_agree else "no"),
                    "p_bh_half_a": csv_number(c.halves_p_adjusted[0]) if r else "",
                    "p_bh_half_b": csv_number(c.halves_p_adjusted[1]) if r else "",
                    "seeds_to_replicate": c.seeds_to_replicate() or "",
                    "interval": r.interval if r else "",
                    "missing": c.missing,
                    "exploratory": "yes" if c.exploratory else "",
                }
            )
    return Path(path)


def draw_forest(comparisons: list[Comparison], out: Path) -> list[tuple[Path, str]]:
    """A forest plot per data set and noise model: a row per method and baseline, a panel per noise rate,
    Δ Recall@1 with its 95% interval; an interval that cannot be told is drawn as a hollow point."""
    by_setting: dict[tuple[str, str, str], list[Comparison]] = defaultdict(list)
    for c in comparisons:
        by_setting[(c.group.paper, c.group.dataset, c.noise)].append(c)
    figures = []
    for (paper, dataset, noise), found in by_setting.items():
        path = out / f"{slug(f'{paper}_{dataset}_{noise}')}_baselines_forest.png"
        _forest(found, path, f"{dataset}, {noise} noise")
        caption = (
            f"{dataset}, {noise} noise: each method's test Recall@1 minus its own paper's baseline's "
            "(points), mean over seeds with its 95% paired interval, a panel per noise rate; filled: better "
            "(green) or worse (red) on all seeds and on each half of them; hollow orange: so on all seeds "
            "but not on both halves (underpowered or unstable); hollow grey: inconclusive; absent: a side "
            "has no run"
        )
        figures.append((path, caption))
    return figures


def _forest(comparisons: list[Comparison], path: Path, title: str) -> None:
    pairs = sorted({c.pair for c in comparisons}, key=lambda p: (p[0].casefold(), p[1].casefold()))
    rates = sorted({c.rate for c in comparisons}, key=lambda r: (str(type(r)), r))
    figure = Figure(figsize=(3.2 * len(rates) + 3.0, 0.3 * len(pairs) + 1.2))
    FigureCanvasAgg(figure)
    axes_row = figure.subplots(1, len(rates), sharey=True, squeeze=False)[0]
    position = {pair: len(pairs) - 1 - i for i, pair in enumerate(pairs)}
    colours = {BETTER: "C2", WORSE: "C3", UNSTABLE: "C1", UNDERPOWERED: "C1", INCONCLUSIVE: "0.3"}
    for axes, rate in zip(axes_row, rates, strict=True):
        for c in (c for c in comparisons if c.rate == rate and c.result is not None):
            r, y, colour = c.result, position[c.pair], colours[c.verdict]
            if math.isfinite(r.ci_low) and math.isfinite(r.ci_high):
                axes.plot([100 * r.ci_low, 100 * r.ci_high], [y, y], color=colour, linewidth=1.5)
            filled = c.verdict in (BETTER, WORSE)
            axes.plot(
                100 * r.effect,
                y,
                "o",
                color=colour,
                markerfacecolor=colour if filled else "white",
                markersize=5,
            )
        axes.axvline(0, color="0.5", linewidth=0.8)
        axes.set_title(f"noise.rate={rate}", fontsize=8)
        axes.set_xlabel("Δ Recall@1 (points)", fontsize=8)
        axes.tick_params(labelsize=7)
        axes.grid(True, axis="x", alpha=0.3)
    axes_row[0].set_yticks(
        [position[p] for p in pairs], [f"{method} vs {baseline}" for method, baseline in pairs], fontsize=7
    )
    axes_row[0].set_ylim(-0.7, len(pairs) - 0.3)
    figure.suptitle(title, fontsize=9)
    figure.set_layout_engine("constrained")
    save_figure(figure, path)
