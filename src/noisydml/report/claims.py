"""The papers' qualitative claims as rules over the aggregated runs: held, contradicted, inconclusive, or
not evaluated.

Each claim finds its methods by Hydra's group choices (``loss``, ``miner``, ``backbone``), not by
label, so it works on any experiment that runs them: the papers' data sets or the digits. It is
checked in every group (experiment x data set) that holds at least one of its methods; a group that lacks
the other runs it needs says which ones are missing or failed. Methods are compared row against row only
where their other overrides agree (same noise model, embedding size, ...), or, when each side has a
single row, against each other.

Every comparison is paired by seed (both methods trained on the same noisy labels and sampler): the mean
difference in the paper's direction, its 95% t-interval and a paired t-test's p-value, or with
``interval="bootstrap"`` the percentile bootstrap over seeds (``noisydml.report.statistics``). A claim
over several comparisons ("at every noise rate") holds when each interval lies above zero, is
contradicted when one lies below, and is inconclusive otherwise.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from noisydml.report.collect import canonical, lookup
from noisydml.report.pairing import (
    RATIO,
    RECALL,
    by_seed,
    difference,
    fmt,
    gap,
    interval_text,
    is_number,
    mean,
    mean_at,
    metric_for,
    p_text,
    pairs,
    rows_where,
    varies,
)
from noisydml.report.statistics import (
    CONTRADICTED,
    HELD,
    INCONCLUSIVE,
    MAX_SEEDS,
    Paired,
    T,
    at_most,
    combine,
    equivalence,
    interval_kind,
    paired,
)
from noisydml.report.tables import Group, Row, Table, csv_number, md_cell, pivot, topline_ratios

NOT_EVALUATED = "not evaluated"
STATUSES = (HELD, CONTRADICTED, INCONCLUSIVE, NOT_EVALUATED)
# Le & Odobez: "relatively as robust" read as noisy/topline Recall@1 ratios within this distance (our
# threshold, not the paper's).
SIMILAR_RATIO = 0.05
# Levi et al.: "no significant improvement" from the trimmed loss read as at most this much Recall@1
# gained (our threshold, not the paper's).
NO_GAIN = 0.01
# Le & Odobez: random semi-hard "still retains good relative performance after 50%" read as a
# noisy/topline Recall@1 ratio of at least this much (our threshold, not the paper's).
GOOD_RATIO = 0.9
# Experiments (``report.figure = <key>/...``) that compare the papers' methods under protocols none of
# the papers ran (PRISM's noise models and rates): no paper's claim is about them, so none is checked.
UNCLAIMED = ("noisy_dml",)


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
    """Every claim in every group that runs one of its methods, its comparisons with ``interval``
    intervals (``t`` or ``bootstrap``); a claim no group touches is reported once, as not evaluated,
    naming the runs it needs. Groups of an ``UNCLAIMED`` experiment are left out; a report of only
    those has no verdict at all."""
    groups = [group for group in groups if group.paper not in UNCLAIMED]
    if not groups:
        return []
    with interval_kind(interval):
        return _evaluate(groups, claims if claims is not None else CLAIMS)


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


def _seeds(verdict: Verdict) -> str:
    deciding = verdict.deciding
    if deciding is None:
        return "-"
    fewest = min(c.result.n_seeds for c in verdict.comparisons)
    if verdict.status != INCONCLUSIVE:
        return str(fewest)
    if fewest < 2:
        return f"{fewest}; 2 or more give an interval"
    needed = verdict.seeds_needed
    return f"{fewest}; {needed} to decide" if needed else f"{fewest}; more than {MAX_SEEDS} to decide"


def _interval_name(verdicts: list[Verdict]) -> str:
    kind = next((c.result.interval for v in verdicts for c in v.comparisons), T)
    if kind == T:
        return "t-interval (points for %-metrics) and a paired t-test's p"
    return "percentile bootstrap interval over seeds (points for %-metrics) and the bootstrap's two-sided p"


def markdown(verdicts: list[Verdict]) -> str:
    if not verdicts:
        return (
            "# Claims\n\nNo published claim applies: these runs compare the papers' methods under "
            "protocols no paper ran (PRISM's noise models and rates), so there is no claim to check.\n"
        )
    counts = {s: sum(v.status == s for v in verdicts) for s in STATUSES}
    out = [
        "# Claims\n",
        ", ".join(f"{counts[s]} {s}" for s in STATUSES) + ". "
        "Each comparison is paired by seed: the mean difference in the paper's direction with its 95% "
        f"{_interval_name(verdicts)}. held: every interval above zero; "
        "contradicted: one below zero; inconclusive: an interval across zero. `seeds`: the fewest seeds "
        "a comparison has, and for an inconclusive claim how many would decide it with 80% power at the "
        "observed effect. `effect` is the comparison the verdict rests on; `claims.csv` has every one.\n",
        "| id | paper | claim | rule | where | verdict | effect [95% CI] | p | seeds | detail |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        claim, deciding = v.claim, v.deciding
        interval = interval_text(deciding.result, deciding.metric) if deciding else "-"
        p = p_text(deciding.result) if deciding else "-"
        cells = (
            claim.id,
            claim.paper,
            claim.text,
            claim.rule,
            v.where or "-",
            f"**{v.status}**",
            interval,
            p,
            _seeds(v),
            v.detail,
        )
        out.append("| " + " | ".join(md_cell(text) for text in cells) + " |")
    return "\n".join(out) + "\n"


CLAIM_FIELDS = (
    "claim",
    "paper",
    "experiment",
    "comparison",
    "metric",
    "effect",
    "ci_low",
    "ci_high",
    "p_value",
    "n_seeds",
    "seeds_needed",
    "verdict",
    "claim_verdict",
    "interval",
)


def write_claims_csv(verdicts: list[Verdict], path: Path) -> Path:
    """One line per comparison (numbers as fractions, as the runs log them); a claim without one gets a
    line of its own with its verdict."""
    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CLAIM_FIELDS, lineterminator="\n")
        writer.writeheader()
        for v in verdicts:
            claim = {"claim": v.claim.id, "paper": v.claim.paper, "experiment": v.where}
            base = {**claim, "claim_verdict": v.status}
            if not v.comparisons:
                writer.writerow({**base, "verdict": v.status})
            for c in v.comparisons:
                r = c.result
                needed = r.seeds_needed() if c.verdict == INCONCLUSIVE else None
                writer.writerow(
                    {
                        **base,
                        "comparison": c.what,
                        "metric": c.metric,
                        "effect": csv_number(r.effect),
                        "ci_low": csv_number(r.ci_low),
                        "ci_high": csv_number(r.ci_high),
                        "p_value": csv_number(r.p_value),
                        "n_seeds": r.n_seeds,
                        "seeds_needed": needed or "",
                        "verdict": c.verdict,
                        "interval": r.interval,
                    }
                )
    return Path(path)


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


# --- Le & Odobez 2019 --------------------------------------------------------------------------------


def _le_rows(table: Table) -> dict[str, list[Row]]:
    return {
        "random": rows_where(table, loss="triplet", miner="random_semihard"),
        "fixed": rows_where(table, loss="triplet", miner="fixed_semihard"),
        "marginal": rows_where(table, loss="marginal"),
    }


def _ratio_check(
    group: Group,
    a_name: str,
    b_name: str,
    columns: Callable[[float], bool],
    relation: str,
    metric: str = RECALL,
) -> Outcome | None:
    """Noisy/topline ``metric`` of method a against method b, per seed, at the noise rates ``columns``
    keeps: ``relation`` is ``greater`` (a's ratio is higher), ``less`` or ``similar`` (within
    ``SIMILAR_RATIO``)."""
    label = metric.partition("/")[2] + RATIO
    table = pivot(group, "noise.rate")
    rows = _le_rows(table)
    if not rows[a_name] and not rows[b_name]:
        return None
    if not rows[a_name] or not rows[b_name]:
        absent = a_name if not rows[a_name] else b_name
        return Outcome(NOT_EVALUATED, f"no noisy runs of the {absent} method")
    done, gaps = [], []
    wanted = [c for c in table.columns if is_number(c) and columns(float(c))]
    if not wanted:
        return Outcome(NOT_EVALUATED, "the sweep has no noise rate in the range the claim is about")
    for a, b in pairs(rows[a_name], rows[b_name]):
        ta, tb = table.partner(a), table.partner(b)
        if ta is None or tb is None:
            gaps.append(f"no topline runs (noise=topline) for {a.label if ta is None else b.label}")
            continue
        for p in wanted:
            ra, rb = topline_ratios(a, ta, p, metric), topline_ratios(b, tb, p, metric)
            if not ra or not rb:
                for row, top, r in ((a, ta, ra), (b, tb, rb)):
                    if not r:
                        gaps += [
                            gap(x, p, "noise.rate") for x in (row, top) if math.isnan(mean_at(x, p, metric))
                        ] or [f"{row.label} and its topline at noise.rate={p}: no seed in common"]
                continue
            if not set(ra) & set(rb):
                gaps.append(f"{a.label} and {b.label} at noise.rate={p}: no seed in common")
                continue
            if relation == "less":
                done.append(compare(f"p={p}", label, rb, ra, (b.label, a.label)))
            else:
                judge = (lambda r: equivalence(r, SIMILAR_RATIO)) if relation == "similar" else None
                done.append(compare(f"p={p}", label, ra, rb, (a.label, b.label), judge))
    return outcome(done, gaps)


def _le_ratio_random_vs_fixed(group: Group) -> Outcome | None:
    return _ratio_check(group, "random", "fixed", lambda p: p > 0.3 + 1e-9, "greater")


def _le_nmi_ratio_random_vs_fixed(group: Group) -> Outcome | None:
    table = pivot(group, "noise.rate")
    if "test/nmi" not in table.metrics:
        return None
    return _ratio_check(group, "random", "fixed", lambda p: p > 0.3 + 1e-9, "greater", "test/nmi")


def _le_guarantee_50(group: Group) -> Outcome | None:
    """Random semi-hard's noisy/topline Recall@1 against ``GOOD_RATIO``, per seed, at every 0 < p <= 0.5:
    the interval of ``ratio - GOOD_RATIO`` (a one-sample t-interval) must lie above zero."""
    table = pivot(group, "noise.rate")
    rows = _le_rows(table)["random"]
    if not rows:
        return None
    wanted = [c for c in table.columns if is_number(c) and 0 < c <= 0.5 + 1e-9]
    if not wanted:
        return Outcome(NOT_EVALUATED, "the sweep has no noise rate in 0 < p <= 0.5")
    label = RECALL.partition("/")[2] + RATIO
    done, gaps = [], []
    for row in rows:
        top = table.partner(row)
        if top is None:
            gaps.append(f"no topline runs (noise=topline) for {row.label}")
            continue
        for p in wanted:
            ratios = topline_ratios(row, top, p, RECALL)
            if not ratios:
                gaps += [
                    gap(x, p, "noise.rate") for x in (row, top) if math.isnan(mean_at(x, p, RECALL))
                ] or [f"{row.label} and its topline at noise.rate={p}: no seed in common"]
                continue
            floor = {seed: GOOD_RATIO for seed in ratios}
            done.append(compare(f"p={p}", label, ratios, floor, (row.label, f"threshold {GOOD_RATIO}")))
    return outcome(done, gaps)


def _le_clean_fixed_vs_random(group: Group) -> Outcome | None:
    table = pivot(group, "noise.rate")
    rows = _le_rows(table)
    if not rows["random"] and not rows["fixed"]:
        return None
    if 0 not in [c for c in table.columns if is_number(c)]:
        return Outcome(NOT_EVALUATED, "the sweep has no p = 0")
    return outcome(*compare_columns(table, pairs(rows["fixed"], rows["random"]), RECALL, [0]))


def _pretrained(group: Group) -> bool:
    return any(bool(lookup(r.config, "backbone.trunk.pretrained")) for r in group.runs if r.has_config)


def _le_marginal_scratch(group: Group) -> Outcome | None:
    if _pretrained(group):
        return None
    table = pivot(group, "noise.rate")
    rows = _le_rows(table)
    if not rows["marginal"]:
        return None
    # From p = 0.2: at 10% noise Fig. 1d's three curves are still together.
    found = [
        _ratio_check(group, "marginal", other, lambda p: p >= 0.2 - 1e-9, "less")
        for other in ("random", "fixed")
    ]
    found = [o for o in found if o is not None]
    details = " | ".join(o.detail for o in found)
    comparisons = tuple(c for o in found for c in o.comparisons)
    statuses = [o.status for o in found]
    if CONTRADICTED in statuses:
        return Outcome(CONTRADICTED, details, comparisons)
    if len(statuses) == 2 and NOT_EVALUATED not in statuses:
        return Outcome(combine(statuses), details, comparisons)
    return Outcome(NOT_EVALUATED, details, comparisons)


def _le_marginal_pretrained(group: Group) -> Outcome | None:
    if not _pretrained(group):
        return None
    table = pivot(group, "noise.rate")
    if not _le_rows(table)["marginal"]:
        return None
    return _ratio_check(group, "marginal", "random", lambda p: 0 < p <= 0.4 + 1e-9, "similar")


# --- Yu et al. 2018 ----------------------------------------------------------------------------------


def _yu_lambda(group: Group) -> Outcome | None:
    table = pivot(group, "loss.match_weight")
    rows = rows_where(table, loss=lambda loss: loss in ("adapted_triplet", "semi_adapted_triplet"))
    if not rows:
        return None
    metric = metric_for(table, ("test/ncm_accuracy", RECALL))
    # Every K the runs scored: Table 1's "with all different K values".
    metrics = [metric, *(m for m in table.metrics if m.startswith("test/recall@") and m != metric)]
    # Lambda is a trade-off the paper tunes: chosen on the validation split when the runs scored one,
    # never on the test split the comparisons read.
    select = "val/" + metric.partition("/")[2]
    chosen_on = select if select in table.metrics else metric
    lambdas = [c for c in table.columns if is_number(c)]
    if 0 not in lambdas or not any(c > 0 for c in lambdas):
        return Outcome(NOT_EVALUATED, f"needs loss.match_weight=0 and > 0; the runs have {lambdas}")
    largest = max(lambdas)
    done, gaps, notes = [], [], []
    for row in rows:
        known = {c: mean_at(row, c, chosen_on) for c in lambdas if c > 0}
        known = {c: v for c, v in known.items() if not math.isnan(v)}
        if not known or not by_seed(row, 0, metric):
            gaps += [gap(row, c, table.column_key) for c in lambdas if not by_seed(row, c, metric)]
            continue
        at = max(known, key=known.get)
        notes.append(f"{row.label}: λ={at} chosen on {chosen_on}")
        for m in metrics:
            best, base = by_seed(row, at, m), by_seed(row, 0, m)
            if set(best) & set(base):
                done.append(compare(f"{row.label}: λ={at} vs λ=0 ({m})", m, best, base, (f"λ={at}", "λ=0")))
            else:
                gaps.append(f"{row.label} at λ={at} and λ=0: no {m} on a common seed")
        best, top = by_seed(row, at, metric), by_seed(row, largest, metric)
        if at == largest:
            notes.append(f"the chosen λ={at} is the largest run: no trade-off shown")
        elif set(best) & set(top):
            labels = (f"λ={at}", f"λ={largest}")
            done.append(
                compare(f"{row.label}: λ={at} vs largest λ={largest} ({metric})", metric, best, top, labels)
            )
    result = outcome(done, gaps)
    status = result.status
    if any("no trade-off" in n for n in notes) and status == HELD:
        status = INCONCLUSIVE
    return Outcome(status, "; ".join(notes) + (" | " if notes else "") + result.detail, result.comparisons)


# Fig. 5a's lambda; without a run at it, the lambda the validation split chose.
YU_FIG5_LAMBDA = 2


def _yu_overfit(group: Group) -> Outcome | None:
    table = pivot(group, "loss.match_weight")
    rows = rows_where(table, loss=lambda loss: loss in ("adapted_triplet", "semi_adapted_triplet"))
    lambdas = [c for c in table.columns if is_number(c)]
    if not rows or 0 not in lambdas or not any(c > 0 for c in lambdas):
        return None
    name = metric_for(table, ("test/ncm_accuracy", RECALL)).partition("/")[2]
    # test_best_epoch/ exists only when the test split was scored at every validation; test_last/ is the
    # last epoch when a checkpoint was selected, else test/ is.
    best = f"test_best_epoch/{name}"
    last = f"test_last/{name}" if f"test_last/{name}" in table.metrics else f"test/{name}"
    if best not in table.metrics:
        return Outcome(
            NOT_EVALUATED,
            f"no {best}: needs the test split scored at every validation (data.test_at_validation=true)",
        )
    select = f"val/{name}" if f"val/{name}" in table.metrics else f"test/{name}"
    done, gaps, notes = [], [], []
    for row in rows:
        if YU_FIG5_LAMBDA in lambdas:
            at = YU_FIG5_LAMBDA
        else:
            known = {c: mean_at(row, c, select) for c in lambdas if c > 0}
            known = {c: v for c, v in known.items() if not math.isnan(v)}
            if not known:
                gaps += [gap(row, c, table.column_key) for c in lambdas if c > 0]
                continue
            at = max(known, key=known.get)
            notes.append(f"{row.label}: λ={at} chosen on {select} (no λ={YU_FIG5_LAMBDA} run)")
        drops = {}
        for weight in (0, at):
            top, end = by_seed(row, weight, best), by_seed(row, weight, last)
            drops[weight] = difference(top, end)
            if not drops[weight]:
                gaps.append(gap(row, weight, table.column_key))
        if not drops[0] or not drops[at]:
            continue
        if not set(drops[0]) & set(drops[at]):
            gaps.append(f"{row.label} at λ=0 and λ={at}: no seed in common")
            continue
        what = f"{row.label}: drop from the best test epoch to the last ({name}), λ=0 vs λ={at}"
        done.append(compare(what, f"test/{name}", drops[0], drops[at], ("λ=0", f"λ={at}")))
    result = outcome(done, gaps)
    return Outcome(
        result.status, "; ".join(notes) + (" | " if notes else "") + result.detail, result.comparisons
    )


# --- BDML --------------------------------------------------------------------------------------------


# BDML's baselines: how to find their rows, and what to say when they did not run.
BDML_BASELINES = {
    # The PCA baseline (backbone=identity) keeps the default loss=triplet but never trains: not DML.
    "DML": (
        {"loss": "triplet", "backbone": lambda b: not str(b).startswith("bayesian") and b != "identity"},
        "loss=triplet on a non-Bayesian backbone",
    ),
    # Wang & Tan's BLMNN is not reproduced (conf/method/bdml/bayesian_linear.yaml): its claims are
    # checked against the stand-in, BDML's likelihood on a Bayesian linear metric.
    "Bayes-linear": (
        {"loss": "bayesian_triplet", "backbone": "bayesian_linear"},
        "method=bdml/bayesian_linear, the stand-in for BLMNN",
    ),
}


def _bdml_check(
    baselines: tuple[str, ...],
) -> Callable[[Callable[[Table, list[Row], list[Row], str], Outcome]], Callable[[Group], Outcome | None]]:
    """A BDML claim against ``baselines``: ``rule(table by noise rate, BDML rows, baseline rows, metric)``
    where BDML and every one of them ran."""

    def decorate(
        rule: Callable[[Table, list[Row], list[Row], str], Outcome],
    ) -> Callable[[Group], Outcome | None]:
        def check(group: Group) -> Outcome | None:
            # Table 3 sweeps class-conditional vectors (noise.rates): its columns, so that the methods
            # at one vector share a row key.
            swept = any("noise.rates" in r.overrides for r in group.runs)
            table = pivot(group, "noise.rates" if swept else "noise.rate")
            bdml = rows_where(table, loss="bayesian_triplet", backbone=lambda b: b != "bayesian_linear")
            if not bdml:
                return None
            rows = []
            for name in baselines:
                choices, needs = BDML_BASELINES[name]
                found = rows_where(table, **choices)
                if not found:
                    return Outcome(NOT_EVALUATED, f"no {name} runs ({needs})")
                rows += found
            # mAP (MS-Celeb-1M, Table 4: logged only where a protocol asks, metrics.map_full), 3-NN accuracy
            # (Tables 1-3), else Recall@1.
            metric = metric_for(table, ("test/map", "test/knn_accuracy@3", RECALL))
            return rule(table, bdml, rows, metric)

        return check

    return decorate


@_bdml_check(("DML", "Bayes-linear"))
def _bdml_at_50(table: Table, bdml: list[Row], dml: list[Row], metric: str) -> Outcome:
    if 0.5 not in [c for c in table.columns if is_number(c)]:
        return Outcome(NOT_EVALUATED, "the sweep has no noise.rate=0.5")
    return outcome(*compare_columns(table, pairs(bdml, dml), metric, [0.5]))


def _gap_grows(
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


def _bdml_gap_grows(table: Table, bdml: list[Row], dml: list[Row], metric: str) -> Outcome:
    rates = [c for c in table.columns if is_number(c)]
    if 0 not in rates or max(rates, default=0) <= 0:
        return Outcome(NOT_EVALUATED, f"needs p = 0 and a p > 0; the runs have {rates}")
    return _gap_grows(table, bdml, dml, metric, 0, max(rates))


@_bdml_check(("DML",))
def _bdml_every_rate(table: Table, bdml: list[Row], dml: list[Row], metric: str) -> Outcome:
    return outcome(*compare_columns(table, pairs(bdml, dml), metric))


@_bdml_check(("Bayes-linear",))
def _bdml_deep_beats_linear(table: Table, bdml: list[Row], blmnn: list[Row], metric: str) -> Outcome:
    choices, needs = BDML_BASELINES["DML"]
    dml = rows_where(table, **choices)
    if not dml:
        return Outcome(NOT_EVALUATED, f"no DML runs ({needs})")
    # Every noisy column: the uniform rates and Table 3's class-conditional vectors alike.
    noisy = [c for c in table.columns if not (is_number(c) and c == 0) and c is not None]
    if not noisy:
        return Outcome(NOT_EVALUATED, "the sweep has no noise rate above 0")
    done, gaps = [], []
    for deep in (bdml, dml):
        found, missing = compare_columns(table, pairs(deep, blmnn), metric, noisy)
        done += found
        gaps += missing
    return outcome(done, gaps)


_bdml_gap_over_dml = _bdml_check(("DML",))(_bdml_gap_grows)
_bdml_gap_over_blmnn = _bdml_check(("Bayes-linear",))(_bdml_gap_grows)


# --- Levi et al. 2021 --------------------------------------------------------------------------------


# miner.negatives of easy_positive -> the miners that draw negatives by the same rule, besides
# miner=random_positive with the same miner.negatives (the paper's baseline, Roth et al.'s samplers).
EPS_BASELINES = {
    # Random negatives (Levi et al.'s "Triplet" of Table 1); every triplet of the batch, miner=all, was
    # the project's earlier reading.
    "random": ("all",),
    "semihard": ("facenet_semihard", "random_semihard", "fixed_semihard"),
    "distance_weighted": ("distance_weighted",),
    "multi_similarity": ("multi_similarity",),
}


def _is_eps_baseline(eps: Row, base: Row) -> bool:
    """Whether ``base`` draws its negatives by the rule of the EPS row ``eps``."""
    if base.choice("miner") == "random_positive":
        return _negatives(base) == _negatives(eps)
    return base.choice("miner") in EPS_BASELINES.get(_negatives(eps), ())


def _negatives(row: Row) -> str | None:
    return next((r.value("miner.negatives") for r in row.runs if r.has_config), None)


def _levi_eps(group: Group) -> Outcome | None:
    table = pivot(group)
    eps = rows_where(table, miner="easy_positive")
    if not eps:
        return None
    base = rows_where(table, miner=lambda m: m != "easy_positive")
    same_loss = pairs(eps, base, same=lambda a, b: a.choice("loss") == b.choice("loss"))
    # The paper's baseline keeps the negative rule and changes only the positive (Sec. 4.3): EPS is
    # compared with that miner only, never with every other miner of the loss.
    matched = [(a, b) for a, b in same_loss if _is_eps_baseline(a, b)]
    if not matched:
        wanted = sorted(
            f"{r.choice('loss')} + {' or '.join(('random_positive', *EPS_BASELINES.get(_negatives(r), ())))}"
            for r in eps
        )
        return Outcome(NOT_EVALUATED, f"no runs of the paired baseline: {'; '.join(wanted)}")
    return outcome(*compare_columns(table, matched, RECALL))


def _levi_trimmed(group: Group) -> Outcome | None:
    key = "loss.keep_fraction"
    if not any(key in r.overrides for r in group.runs) or not varies(group, key):
        return None
    table = pivot(group, key)
    # Trimming random triplets; the distance-margin case is the paper's exception ("small improvement").
    rows = rows_where(table, loss="trimmed", miner=lambda m: m in ("random_triplets", "all"))
    if not rows:
        return None
    fractions = [c for c in table.columns if is_number(c)]
    untrimmed = next((c for c in fractions if c == 1), None)
    if untrimmed is None:
        return Outcome(NOT_EVALUATED, f"needs {key}=1 (no trimming); the runs have {fractions}")
    done, gaps = [], []
    for row in rows:
        base = by_seed(row, untrimmed, RECALL)
        for fraction in (c for c in fractions if c < 1):
            trimmed = by_seed(row, fraction, RECALL)
            if not trimmed or not base:
                gaps += [gap(row, c, key) for c, v in ((fraction, trimmed), (untrimmed, base)) if not v]
                continue
            if not set(trimmed) & set(base):
                gaps.append(f"{row.label} at {key}={fraction} and 1: no seed in common")
                continue
            labels = (f"keep {fraction}", "keep 1")
            what = f"{row.label}: {key}={fraction} vs 1"
            done.append(compare(what, RECALL, trimmed, base, labels, partial(at_most, margin=NO_GAIN)))
    return outcome(done, gaps)


# --- Zhang et al. 2023 (BSPML) -------------------------------------------------------------------------


# Table 2's baselines by loss (conf/method/zhang2023/); SPMS shares BSPML's loss and is told by its label.
ZHANG_BASELINES = (
    "multi_similarity",
    "contrastive",
    "contrastive_cosine",
    "triplet_smooth",
    "margin",
    "fastap",
    "rdml",
    "proxy_anchor",
    "snr",
)
SPMS = "SPMS"


def _bspml_vs(
    key: str, require_varied: bool, baselines: Callable[[Table], list[Row]], needs: str
) -> Callable[[Group], Outcome | None]:
    """BSPML against every row ``baselines`` finds, at every value of ``key``."""

    def check(group: Group) -> Outcome | None:
        if require_varied and not varies(group, key):
            return None
        table = pivot(group, key)
        bspml = [row for row in rows_where(table, loss="bspml") if row.method != SPMS]
        others = baselines(table)
        if not bspml and not others:
            return None
        # Other methods of the group may vary the key (a BLMNN's embedding size is its input's).
        if require_varied and len({canonical(r.value(key)) for row in bspml + others for r in row.runs}) < 2:
            return None
        if not bspml or not others:
            return Outcome(NOT_EVALUATED, "no runs of " + ("loss=bspml" if not bspml else needs))
        return outcome(*compare_columns(table, pairs(bspml, others), RECALL))

    return check


def _bspml_lead_over_proxy_anchor(group: Group) -> Outcome | None:
    table = pivot(group, "noise.rate")
    bspml = [row for row in rows_where(table, loss="bspml") if row.method != SPMS]
    proxy_anchor = rows_where(table, loss="proxy_anchor")
    if not bspml or not proxy_anchor:
        return None
    rates = [c for c in table.columns if is_number(c)]
    if len(rates) < 2:
        return Outcome(NOT_EVALUATED, f"needs two noise rates; the runs have {rates}")
    return _gap_grows(table, bspml, proxy_anchor, RECALL, min(rates), max(rates))


def _table2_baselines(table: Table) -> list[Row]:
    return rows_where(table, loss=lambda loss: loss in ZHANG_BASELINES)


def _ms_and_spms(table: Table) -> list[Row]:
    spms = [row for row in rows_where(table, loss="bspml") if row.method == SPMS]
    return rows_where(table, loss="multi_similarity") + spms


def _bspml_trend(key: str, metric: str, increasing: bool) -> Callable[[Group], Outcome | None]:
    def check(group: Group) -> Outcome | None:
        if not any(key in r.overrides for r in group.runs) or not varies(group, key):
            return None
        table = pivot(group, key)
        rows = rows_where(table, loss="bspml")
        if not rows:
            return None
        done, gaps = [], []
        for row in rows:
            values = [(c, by_seed(row, c, metric)) for c in table.columns if is_number(c)]
            known = [(c, v) for c, v in values if v]
            gaps += [gap(row, c, key) for c, v in values if not v]
            if len(known) < 2:
                continue
            (first, at_first), (last, at_last) = known[0], known[-1]
            if not set(at_first) & set(at_last):
                gaps.append(f"{row.label} at {key}={first} and {key}={last}: no seed in common")
                continue
            ends = ((last, at_last), (first, at_first))
            larger, smaller = ends if increasing else ends[::-1]
            trail = ", ".join(f"{c}: {mean(v):.3f}" for c, v in known)
            done.append(
                compare(
                    f"{row.label} ({trail})",
                    metric,
                    larger[1],
                    smaller[1],
                    (f"{key}={larger[0]}", f"{key}={smaller[0]}"),
                )
            )
        return outcome(done, gaps)

    return check


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "le2019-ratio",
        "Le & Odobez 2019",
        "Random semi-hard keeps a higher noisy/topline Recall@1 than fixed semi-hard after 30% noise "
        "(Figs. 1d-3d)",
        "ratio(triplet+random_semihard) > ratio(triplet+fixed_semihard) at every p > 0.3",
        "triplet + random_semihard and + fixed_semihard, each with noise=topline, at p > 0.3",
        _le_ratio_random_vs_fixed,
    ),
    Claim(
        "le2019-ratio-nmi",
        "Le & Odobez 2019",
        "The same reading of Fig. 4 in NMI: random semi-hard keeps a higher noisy/topline NMI than fixed "
        "semi-hard after 30% noise",
        "NMI ratio(triplet+random_semihard) > NMI ratio(triplet+fixed_semihard) at every p > 0.3",
        "triplet + random_semihard and + fixed_semihard with noise=topline and test/nmi, at p > 0.3",
        _le_nmi_ratio_random_vs_fixed,
    ),
    Claim(
        "le2019-guarantee-50",
        "Le & Odobez 2019",
        'The guarantee "can be as high as 50% noise rate for triplet loss with random semi-hard mining" '
        '(Sec. 7); random semi-hard "still retains good relative performance after 50%" (Sec. 6.2)',
        f"noisy/topline Recall@1 of triplet + random_semihard >= {GOOD_RATIO} (our threshold) at every "
        f"0 < p <= 0.5: the interval of (ratio - {GOOD_RATIO}) above zero",
        "triplet + random_semihard with noise=topline at a p in (0, 0.5]",
        _le_guarantee_50,
    ),
    Claim(
        "le2019-clean",
        "Le & Odobez 2019",
        "Without label noise, fixed semi-hard is slightly better than random semi-hard (Sec. 6.2)",
        "Recall@1(fixed) > Recall@1(random) at p = 0",
        "triplet + random_semihard and + fixed_semihard at p = 0",
        _le_clean_fixed_vs_random,
    ),
    Claim(
        "le2019-marginal-scratch",
        "Le & Odobez 2019",
        "From scratch (SOP), marginal loss degrades faster than both triplet variants (Fig. 1c-d)",
        "ratio(marginal) < ratio of each triplet variant at every p >= 0.2 (no pretrained backbone; from "
        "0.2 is ours: at 10% the curves are together)",
        "loss=marginal and both triplet miners with toplines, backbone not pretrained",
        _le_marginal_scratch,
    ),
    Claim(
        "le2019-marginal-pretrained",
        "Le & Odobez 2019",
        "With a pretrained backbone (CUB, Flowers), marginal loss is about as robust as triplet + random "
        "semi-hard up to its 50% breakpoint (Figs. 2-3 c-d)",
        f"|ratio(marginal) - ratio(triplet+random_semihard)| <= {SIMILAR_RATIO} (our threshold) at every "
        "0 < p <= 0.4",
        "loss=marginal and triplet + random_semihard with toplines, backbone.trunk.pretrained=true",
        _le_marginal_pretrained,
    ),
    Claim(
        "yu2018-lambda",
        "Yu et al. 2018",
        'The adapted triplet loss beats the original (lambda = 0) "with all different K values", and lambda '
        "is a trade-off: too large a lambda is worse (Table 1, Fig. 4)",
        "at the lambda > 0 chosen on the validation split (val/ metric; else test, said so): NCM accuracy "
        "(else Recall@1) and Recall@K at every K logged > lambda = 0; and > the largest lambda run",
        "loss=adapted_triplet at loss.match_weight=0 and several > 0",
        _yu_lambda,
    ),
    Claim(
        "yu2018-overfit",
        "Yu et al. 2018",
        'Fig. 5a (Fashion-MNIST, lambda = 2): "For the original triplet loss, the test accuracy is reduced '
        "after 40k iterations, while the adapted triplet loss does not suffer from the problem of "
        'overfitting"',
        f"the drop from the best test epoch to the last (NCM accuracy, else Recall@1) at lambda = 0 > at "
        f"lambda = {YU_FIG5_LAMBDA} (else the lambda chosen on validation), paired by seed",
        "loss=adapted_triplet at loss.match_weight=0 and 2 with data.test_at_validation=true",
        _yu_overfit,
    ),
    Claim(
        "bdml-50",
        "BDML",
        'At 50% noise BDML gives "better results than both BLMNN and DML" (Tables 1-2)',
        "3-NN accuracy (else Recall@1) of BDML > DML and > Bayes-linear (the stand-in for BLMNN, which is "
        "not reproduced) at p = 0.5",
        "BDML, DML (loss=triplet, non-Bayesian backbone) and Bayes-linear at noise.rate=0.5",
        _bdml_at_50,
    ),
    Claim(
        "bdml-gap",
        "BDML",
        "BDML's advantage over DML grows with the noise level (one reading of Sec. 4.1.1)",
        "(BDML - DML) at the highest p > (BDML - DML) at p = 0, paired by seed",
        "loss=bayesian_triplet and loss=triplet at p = 0 and a p > 0",
        _bdml_gap_over_dml,
    ),
    Claim(
        "bdml-gap-blmnn",
        "BDML",
        "BDML's advantage over BLMNN grows with the noise level (Sec. 4.1.1's gap: 2.67 -> 13.66 points on "
        "CIFAR-10)",
        "(BDML - Bayes-linear) at the highest p > at p = 0, paired by seed (Bayes-linear: the stand-in for "
        "BLMNN, which is not reproduced)",
        "BDML and Bayes-linear (method=bdml/bayesian_linear) at p = 0 and a p > 0",
        _bdml_gap_over_blmnn,
    ),
    Claim(
        "bdml-every-rate",
        "BDML",
        "BDML beats DML at every noise level (Tables 2-4: CIFAR-10 uniform and class-conditional noise, "
        "MS-Celeb-1M mAP)",
        "3-NN accuracy (mAP where logged, else Recall@1) of BDML > DML at every noise rate run",
        "loss=bayesian_triplet and loss=triplet (non-Bayesian backbone)",
        _bdml_every_rate,
    ),
    Claim(
        "bdml-deep-linear",
        "BDML",
        '"When the noise level increases, deep metric-based methods outperform linear model" (Table 1, '
        'MNIST); "especially when the noise level increases" (Table 2); Table 3\'s class-conditional noise',
        "3-NN accuracy (mAP where logged, else Recall@1) of BDML > Bayes-linear and DML > Bayes-linear at "
        "every noise rate above 0 (at 0 the linear one may win: Table 1); Bayes-linear is the stand-in for "
        "BLMNN, which is not reproduced",
        "BDML, DML and Bayes-linear (method=bdml/bayesian_linear) at a noise rate above 0",
        _bdml_deep_beats_linear,
    ),
    Claim(
        "levi2021-eps",
        "Levi et al. 2021",
        "Easy positive sampling improves Recall@1 over the same loss without it (Table 1 even/odd test "
        "digits, Tables 2-3)",
        "Recall@1(miner=easy_positive) > Recall@1(same loss, the miner of the same negative rule: "
        "random_positive with the same miner.negatives, the paper's) in every column; not evaluated without "
        "that miner",
        "miner=easy_positive and the same loss with the miner of its negative rule",
        _levi_eps,
    ),
    Claim(
        "levi2021-trimmed",
        "Levi et al. 2021",
        'Trimming the loss of random triplets brings "no significant improvement" (Fig. 4; the '
        "distance-margin case, a small improvement, is not this claim)",
        f"Recall@1 gain of trimmed triplet at every loss.keep_fraction < 1 over keep_fraction 1: the 95% "
        f"interval's upper end <= {NO_GAIN * 100:g} points (our threshold)",
        "loss=trimmed with miner=random_triplets (or all) swept over loss.keep_fraction, including 1",
        _levi_trimmed,
    ),
    Claim(
        "zhang2023-noise",
        "Zhang et al. 2023 (BSPML)",
        "BSPML beats every baseline of Table 2 at every noise rate (Tables 1-2)",
        "Recall@1(BSPML) > Recall@1 of each Table 2 baseline that ran (MS, Contrastive, Triplet, Margin, "
        "FastAP, RDML, Proxy-Anchor, SNR) at every noise rate",
        "loss=bspml and the Table 2 baselines (conf/method/zhang2023/)",
        _bspml_vs("noise.rate", False, _table2_baselines, "a Table 2 baseline"),
    ),
    Claim(
        "zhang2023-large-noise",
        "Zhang et al. 2023 (BSPML)",
        'Robust baselines are "still sensitive to large noise ratios": BSPML\'s lead over Proxy-Anchor grows '
        "from 10% to 30% noise on all three data sets (Table 2)",
        "(BSPML - Proxy-Anchor) Recall@1 at the highest noise rate > at the lowest, paired by seed",
        "loss=bspml and loss=proxy_anchor at two noise rates or more",
        _bspml_lead_over_proxy_anchor,
    ),
    Claim(
        "zhang2023-embedding",
        "Zhang et al. 2023 (BSPML)",
        "BSPML beats multi-similarity and SPMS at every embedding size (Fig. 5)",
        "Recall@1(BSPML) > Recall@1(MS) and > Recall@1(SPMS) at every backbone.embedding_size",
        "loss=bspml, loss=multi_similarity and SPMS over several backbone.embedding_size",
        _bspml_vs("backbone.embedding_size", True, _ms_and_spms, "loss=multi_similarity or SPMS"),
    ),
    Claim(
        "zhang2023-maw",
        "Zhang et al. 2023 (BSPML)",
        "A larger age lambda gives larger sample weights (Fig. 3)",
        "MAW (train/maw, last epoch) at the largest loss.age_max > at the smallest",
        "loss=bspml swept over loss.age_max",
        _bspml_trend("loss.age_max", "train/maw", increasing=True),
    ),
    Claim(
        "zhang2023-sdaw",
        "Zhang et al. 2023 (BSPML)",
        "A larger balance weight mu balances the class-average weights (Fig. 4)",
        "SDAW (train/sdaw, last epoch) at the largest loss.mu < at the smallest",
        "loss=bspml swept over loss.mu",
        _bspml_trend("loss.mu", "train/sdaw", increasing=False),
    ),
)
