"""The papers' qualitative claims as rules over the aggregated runs: held, did not hold, or not evaluated.

Each claim finds its methods by Hydra's group choices (``loss``, ``miner``, ``backbone``), not by
label, so it works on any experiment that runs them: the papers' data sets or the digits. It is
checked in every group (experiment x data set) that holds at least one of its methods, on the means
over seeds; a group that lacks the other runs it needs says which ones are missing or failed.
Methods are compared row against row only where their other overrides agree (same noise model,
embedding size, ...), or, when each side has a single row, against each other.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from noisydml.report.collect import FAILED, MISSING, canonical, lookup
from noisydml.report.tables import Cell, Group, Row, Table, format_number, md_cell, pivot, topline_ratio

HELD, NOT_HELD, NOT_EVALUATED = "held", "did not hold", "not evaluated"
RECALL = "test/recall@1"
# Overrides that make a row a different method; rows that agree on everything else are compared.
METHOD_KEYS = ("method", "loss", "miner", "backbone")
# Le & Odobez: "relatively as robust" read as noisy/topline Recall@1 ratios within this distance.
SIMILAR_RATIO = 0.05


@dataclass(frozen=True)
class Claim:
    """A claim as the paper states it (``text``), the rule that checks it, and what runs it needs."""

    id: str
    paper: str
    text: str
    rule: str
    needs: str
    check: Callable[[Group], tuple[str, str] | None]


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    where: str
    status: str
    detail: str


def evaluate(groups: list[Group], claims: Iterable[Claim] | None = None) -> list[Verdict]:
    """Every claim in every group that runs one of its methods; a claim no group touches is reported
    once, as not evaluated, naming the runs it needs."""
    verdicts = []
    for claim in claims if claims is not None else CLAIMS:
        found = False
        for group in groups:
            outcome = claim.check(group)
            if outcome is not None:
                found = True
                verdicts.append(Verdict(claim, group.title, *outcome))
        if not found:
            verdicts.append(Verdict(claim, "", NOT_EVALUATED, f"no runs of {claim.needs}"))
    return verdicts


def markdown(verdicts: list[Verdict]) -> str:
    counts = {s: sum(v.status == s for v in verdicts) for s in (HELD, NOT_HELD, NOT_EVALUATED)}
    out = [
        "# Claims\n",
        f"{counts[HELD]} held, {counts[NOT_HELD]} did not hold, {counts[NOT_EVALUATED]} not evaluated. "
        "Each rule compares means over seeds; see the tables for spreads.\n",
        "| id | paper | claim | rule | where | verdict | detail |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        claim = v.claim
        cells = (claim.id, claim.paper, claim.text, claim.rule, v.where or "-", f"**{v.status}**", v.detail)
        out.append("| " + " | ".join(md_cell(text) for text in cells) + " |")
    return "\n".join(out) + "\n"


# --- helpers over a table ---------------------------------------------------------------------------


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
    """Rows of method a beside rows of method b that agree on every other override (and ``same``)."""
    matched = [
        (a, b) for a in a_rows for b in b_rows if peer_key(a) == peer_key(b) and (same is None or same(a, b))
    ]
    if not matched and len(a_rows) == 1 and len(b_rows) == 1:
        return [(a_rows[0], b_rows[0])]
    return matched


def mean_at(row: Row, column: Any, metric: str) -> float:
    cell = row.cells.get(canonical(column))
    return cell.mean(metric) if cell else math.nan


def gap(row: Row, column: Any, key: str) -> str:
    """Why a cell has no value: which of its runs failed or are missing."""
    cell: Cell | None = row.cells.get(canonical(column))
    where = f"{row.label} at {key}={column}"
    if cell is None:
        return f"{where}: no run"
    parts = [f"{s} {cell.count(s)}/{len(cell.runs)}" for s in (FAILED, MISSING) if cell.count(s)]
    return f"{where}: {', '.join(parts) or 'metric not logged'}"


def metric_for(table: Table, preferred: tuple[str, ...]) -> str:
    present = set(table.metrics)
    return next((m for m in preferred if m in present), preferred[-1])


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fmt(value: float, metric: str) -> str:
    return format_number(value, metric)


def compare_columns(
    table: Table,
    pairs_: list[tuple[Row, Row]],
    metric: str,
    columns: list[Any] | None = None,
) -> tuple[list[str], list[str], bool]:
    """a > b at every column both have: ``(comparisons, gaps, all held)``."""
    done, gaps, held = [], [], True
    for a, b in pairs_:
        for column in columns if columns is not None else table.columns:
            ma, mb = mean_at(a, column, metric), mean_at(b, column, metric)
            if math.isnan(ma) or math.isnan(mb):
                gaps += [gap(r, column, table.column_key) for r, m in ((a, ma), (b, mb)) if math.isnan(m)]
                continue
            held &= ma > mb
            done.append(
                f"{table.column_key}={column}: {a.label} {fmt(ma, metric)} vs {b.label} {fmt(mb, metric)}"
            )
    return done, gaps, held


def verdict(done: list[str], gaps: list[str], held: bool) -> tuple[str, str]:
    if not done:
        return NOT_EVALUATED, f"missing: {summarize(gaps)}" if gaps else "nothing to compare"
    detail = "; ".join(done)
    if gaps:
        detail += f" (not evaluated: {summarize(gaps)})"
    return (HELD if held else NOT_HELD), detail


def summarize(gaps: list[str], shown: int = 3) -> str:
    """The first few cells a claim lacks; the rest counted (runs.csv lists every run)."""
    unique = list(dict.fromkeys(gaps))
    text = "; ".join(unique[:shown])
    if len(unique) > shown:
        text += f"; and {len(unique) - shown} more cells (see runs.csv)"
    return text


def _varies(group: Group, key: str) -> bool:
    return len({canonical(r.value(key)) for r in group.runs}) > 1


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
    rule: Callable[[float, float], bool],
) -> tuple[str, str] | None:
    table = pivot(group, "noise.rate")
    rows = _le_rows(table)
    if not rows[a_name] and not rows[b_name]:
        return None
    if not rows[a_name] or not rows[b_name]:
        absent = a_name if not rows[a_name] else b_name
        return NOT_EVALUATED, f"no noisy runs of the {absent} method"
    done, gaps, held = [], [], True
    wanted = [c for c in table.columns if is_number(c) and columns(float(c))]
    if not wanted:
        return NOT_EVALUATED, "the sweep has no noise rate in the range the claim is about"
    for a, b in pairs(rows[a_name], rows[b_name]):
        ta, tb = table.partner(a), table.partner(b)
        if ta is None or tb is None:
            gaps.append(f"no topline runs (noise=topline) for {a.label if ta is None else b.label}")
            continue
        for p in wanted:
            ra, _, _ = topline_ratio(a, ta, p, RECALL)
            rb, _, _ = topline_ratio(b, tb, p, RECALL)
            if math.isnan(ra) or math.isnan(rb):
                for row, top, r in ((a, ta, ra), (b, tb, rb)):
                    if math.isnan(r):
                        gaps += [
                            gap(x, p, "noise.rate") for x in (row, top) if math.isnan(mean_at(x, p, RECALL))
                        ]
                continue
            held &= rule(ra, rb)
            done.append(f"p={p}: {a.label} {ra:.3f} vs {b.label} {rb:.3f}")
    return verdict(done, gaps, held)


def _le_ratio_random_vs_fixed(group: Group) -> tuple[str, str] | None:
    return _ratio_check(group, "random", "fixed", lambda p: p >= 0.4 - 1e-9, lambda a, b: a > b)


def _le_clean_fixed_vs_random(group: Group) -> tuple[str, str] | None:
    table = pivot(group, "noise.rate")
    rows = _le_rows(table)
    if not rows["random"] and not rows["fixed"]:
        return None
    if 0 not in [c for c in table.columns if is_number(c)]:
        return NOT_EVALUATED, "the sweep has no p = 0"
    return verdict(*compare_columns(table, pairs(rows["fixed"], rows["random"]), RECALL, [0]))


def _pretrained(group: Group) -> bool:
    return any(bool(lookup(r.config, "backbone.trunk.pretrained")) for r in group.runs if r.has_config)


def _le_marginal_scratch(group: Group) -> tuple[str, str] | None:
    if _pretrained(group):
        return None
    table = pivot(group, "noise.rate")
    rows = _le_rows(table)
    if not rows["marginal"]:
        return None
    found = []
    for other in ("random", "fixed"):
        outcome = _ratio_check(group, "marginal", other, lambda p: p > 0, lambda a, b: a < b)
        found.append(outcome)
    statuses = [o[0] for o in found if o]
    details = " | ".join(o[1] for o in found if o)
    if NOT_HELD in statuses:
        return NOT_HELD, details
    if statuses and all(s == HELD for s in statuses) and len(statuses) == 2:
        return HELD, details
    return NOT_EVALUATED, details


def _le_marginal_pretrained(group: Group) -> tuple[str, str] | None:
    if not _pretrained(group):
        return None
    table = pivot(group, "noise.rate")
    if not _le_rows(table)["marginal"]:
        return None
    return _ratio_check(
        group, "marginal", "random", lambda p: 0 < p <= 0.4 + 1e-9, lambda a, b: abs(a - b) <= SIMILAR_RATIO
    )


# --- Yu et al. 2018 ----------------------------------------------------------------------------------


def _yu_lambda(group: Group) -> tuple[str, str] | None:
    table = pivot(group, "loss.match_weight")
    rows = rows_where(table, loss=lambda loss: loss in ("adapted_triplet", "semi_adapted_triplet"))
    if not rows:
        return None
    metric = metric_for(table, ("test/ncm_accuracy", RECALL))
    lambdas = [c for c in table.columns if is_number(c)]
    if 0 not in lambdas or not any(c > 0 for c in lambdas):
        return NOT_EVALUATED, f"needs loss.match_weight=0 and > 0; the runs have {lambdas}"
    done, gaps, held = [], [], True
    for row in rows:
        base = mean_at(row, 0, metric)
        positive = {c: mean_at(row, c, metric) for c in lambdas if c > 0}
        best = max((v for v in positive.values() if not math.isnan(v)), default=math.nan)
        if math.isnan(base) or math.isnan(best):
            gaps += [
                gap(row, c, table.column_key) for c in [0, *positive] if math.isnan(mean_at(row, c, metric))
            ]
            continue
        held &= best > base
        at = next(c for c, v in positive.items() if v == best)
        done.append(f"{row.label}: best λ={at} {fmt(best, metric)} vs λ=0 {fmt(base, metric)} ({metric})")
    return verdict(done, gaps, held)


# --- BDML --------------------------------------------------------------------------------------------


def _bdml_rows(table: Table) -> tuple[list[Row], list[Row]]:
    # BLMNN trains with the same likelihood on a linear metric; the PCA baseline (backbone=identity)
    # keeps the default loss=triplet but never trains: neither is BDML or DML.
    bdml = rows_where(table, loss="bayesian_triplet", backbone=lambda b: b != "bayesian_linear")
    dml = rows_where(
        table, loss="triplet", backbone=lambda b: not str(b).startswith("bayesian") and b != "identity"
    )
    return bdml, dml


def _bdml_check(
    rule: Callable[[Table, list[Row], list[Row], str], tuple[str, str]],
) -> Callable[[Group], tuple[str, str] | None]:
    """A BDML claim: ``rule(table by noise rate, BDML rows, DML rows, metric)`` where both kinds ran."""

    def check(group: Group) -> tuple[str, str] | None:
        table = pivot(group, "noise.rate")
        bdml, dml = _bdml_rows(table)
        if not bdml:
            return None
        if not dml:
            return NOT_EVALUATED, "no DML runs (loss=triplet on a non-Bayesian backbone)"
        return rule(table, bdml, dml, metric_for(table, ("test/knn_accuracy@3", RECALL)))

    return check


@_bdml_check
def _bdml_at_50(table: Table, bdml: list[Row], dml: list[Row], metric: str) -> tuple[str, str]:
    if 0.5 not in [c for c in table.columns if is_number(c)]:
        return NOT_EVALUATED, "the sweep has no noise.rate=0.5"
    return verdict(*compare_columns(table, pairs(bdml, dml), metric, [0.5]))


@_bdml_check
def _bdml_gap_grows(table: Table, bdml: list[Row], dml: list[Row], metric: str) -> tuple[str, str]:
    rates = [c for c in table.columns if is_number(c)]
    if 0 not in rates or max(rates, default=0) <= 0:
        return NOT_EVALUATED, f"needs p = 0 and a p > 0; the runs have {rates}"
    top = max(rates)
    done, gaps, held = [], [], True
    for a, b in pairs(bdml, dml):
        values = {p: (mean_at(a, p, metric), mean_at(b, p, metric)) for p in (0, top)}
        if any(math.isnan(v) for pair in values.values() for v in pair):
            gaps += [
                gap(r, p, "noise.rate") for p in (0, top) for r in (a, b) if math.isnan(mean_at(r, p, metric))
            ]
            continue
        clean, noisy = (values[p][0] - values[p][1] for p in (0, top))
        held &= noisy > clean
        done.append(f"BDML - DML at p=0: {fmt(clean, metric)}, at p={top}: {fmt(noisy, metric)} ({metric})")
    return verdict(done, gaps, held)


# --- Levi et al. 2021 --------------------------------------------------------------------------------


# miner.negatives of easy_positive -> the miners that draw negatives by the same rule.
EPS_BASELINES = {
    "semihard": ("facenet_semihard", "random_semihard", "fixed_semihard"),
    "distance_weighted": ("distance_weighted",),
    "multi_similarity": ("multi_similarity",),
}


def _negatives(row: Row) -> str | None:
    return next((r.value("miner.negatives") for r in row.runs if r.has_config), None)


def _levi_eps(group: Group) -> tuple[str, str] | None:
    table = pivot(group)
    eps = rows_where(table, miner="easy_positive")
    if not eps:
        return None
    base = rows_where(table, miner=lambda m: m != "easy_positive")
    same_loss = pairs(eps, base, same=lambda a, b: a.choice("loss") == b.choice("loss"))
    # The paper's baseline keeps the negative rule and changes only the positive (Sec. 4.3): compare
    # with that miner where the runs have it, else with every miner of the same loss.
    same_rule = [(a, b) for a, b in same_loss if b.choice("miner") in EPS_BASELINES.get(_negatives(a), ())]
    matched = same_rule or same_loss
    if not matched:
        losses = sorted({str(r.choice("loss")) for r in eps})
        return NOT_EVALUATED, f"no runs of the same loss ({', '.join(losses)}) without miner=easy_positive"
    return verdict(*compare_columns(table, matched, RECALL))


# --- Zhang et al. 2023 (BSPML) -------------------------------------------------------------------------


def _bspml_vs_ms(key: str, require_varied: bool) -> Callable[[Group], tuple[str, str] | None]:
    def check(group: Group) -> tuple[str, str] | None:
        if require_varied and not _varies(group, key):
            return None
        table = pivot(group, key)
        bspml, ms = rows_where(table, loss="bspml"), rows_where(table, loss="multi_similarity")
        if not bspml and not ms:
            return None
        # Other methods of the group may vary the key (a BLMNN's embedding size is its input's).
        if require_varied and len({canonical(r.value(key)) for row in bspml + ms for r in row.runs}) < 2:
            return None
        if not bspml or not ms:
            return NOT_EVALUATED, "no runs of " + ("loss=bspml" if not bspml else "loss=multi_similarity")
        return verdict(*compare_columns(table, pairs(bspml, ms), RECALL))

    return check


def _bspml_trend(key: str, metric: str, increasing: bool) -> Callable[[Group], tuple[str, str] | None]:
    def check(group: Group) -> tuple[str, str] | None:
        if not any(key in r.overrides for r in group.runs) or not _varies(group, key):
            return None
        table = pivot(group, key)
        rows = rows_where(table, loss="bspml")
        if not rows:
            return None
        done, gaps, held = [], [], True
        for row in rows:
            values = [(c, mean_at(row, c, metric)) for c in table.columns if is_number(c)]
            known = [(c, v) for c, v in values if not math.isnan(v)]
            gaps += [gap(row, c, key) for c, v in values if math.isnan(v)]
            if len(known) < 2:
                continue
            first, last = known[0][1], known[-1][1]
            held &= (last > first) if increasing else (last < first)
            trail = ", ".join(f"{c}: {v:.3f}" for c, v in known)
            done.append(f"{row.label}: {trail}")
        return verdict(done, gaps, held)

    return check


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "le2019-ratio",
        "Le & Odobez 2019",
        "Random semi-hard keeps a higher noisy/topline Recall@1 than fixed semi-hard past ~40% noise "
        "(Figs. 1d-3d)",
        "ratio(triplet+random_semihard) > ratio(triplet+fixed_semihard) at every p >= 0.4",
        "triplet + random_semihard and + fixed_semihard, each with noise=topline, at p >= 0.4",
        _le_ratio_random_vs_fixed,
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
        "ratio(marginal) < ratio of each triplet variant at every p > 0 (no pretrained backbone)",
        "loss=marginal and both triplet miners with toplines, backbone not pretrained",
        _le_marginal_scratch,
    ),
    Claim(
        "le2019-marginal-pretrained",
        "Le & Odobez 2019",
        "With a pretrained backbone (CUB, Flowers), marginal loss is about as robust as triplet + random "
        "semi-hard up to its 50% breakpoint (Figs. 2-3 c-d)",
        f"|ratio(marginal) - ratio(triplet+random_semihard)| <= {SIMILAR_RATIO} at every 0 < p <= 0.4",
        "loss=marginal and triplet + random_semihard with toplines, backbone.trunk.pretrained=true",
        _le_marginal_pretrained,
    ),
    Claim(
        "yu2018-lambda",
        "Yu et al. 2018",
        "Adapted triplet with lambda > 0 beats the original triplet loss, lambda = 0 (Table 1, Fig. 4b)",
        "best mean over loss.match_weight > 0 > mean at loss.match_weight = 0 "
        "(NCM accuracy if logged, else Recall@1)",
        "loss=adapted_triplet at loss.match_weight=0 and > 0",
        _yu_lambda,
    ),
    Claim(
        "bdml-50",
        "BDML",
        "BDML beats DML at 50% uniform noise (Tables 1-2)",
        "3-NN accuracy (else Recall@1) of loss=bayesian_triplet > loss=triplet at p = 0.5",
        "loss=bayesian_triplet and loss=triplet (non-Bayesian backbone) at noise.rate=0.5",
        _bdml_at_50,
    ),
    Claim(
        "bdml-gap",
        "BDML",
        "BDML's advantage over DML grows with the noise level (Sec. 4.1.1)",
        "(BDML - DML) at the highest p > (BDML - DML) at p = 0",
        "loss=bayesian_triplet and loss=triplet at p = 0 and a p > 0",
        _bdml_gap_grows,
    ),
    Claim(
        "levi2021-eps",
        "Levi et al. 2021",
        "Easy positive sampling improves Recall@1 over the same loss without it (Table 1 even/odd test "
        "digits, Tables 2-3)",
        "Recall@1(miner=easy_positive) > Recall@1(same loss, other miner) in every column",
        "miner=easy_positive and the same loss with another miner",
        _levi_eps,
    ),
    Claim(
        "zhang2023-noise",
        "Zhang et al. 2023 (BSPML)",
        "BSPML beats multi-similarity at every noise rate (Tables 1-2)",
        "Recall@1(loss=bspml) > Recall@1(loss=multi_similarity) at every noise rate",
        "loss=bspml and loss=multi_similarity",
        _bspml_vs_ms("noise.rate", require_varied=False),
    ),
    Claim(
        "zhang2023-embedding",
        "Zhang et al. 2023 (BSPML)",
        "BSPML beats multi-similarity at every embedding size (Fig. 5)",
        "Recall@1(loss=bspml) > Recall@1(loss=multi_similarity) at every backbone.embedding_size",
        "loss=bspml and loss=multi_similarity over several backbone.embedding_size",
        _bspml_vs_ms("backbone.embedding_size", require_varied=True),
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
