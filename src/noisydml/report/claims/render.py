"""The claims' verdicts as the report prints them: a markdown table (``claims.md``, every claim; the
report's Claims section, the claims its runs can evaluate and one line for the rest), and ``claims.csv``
with one line per comparison."""

from __future__ import annotations

import csv
from pathlib import Path

from noisydml.report.claims.verdicts import NOT_EVALUATED, STATUSES, UNDERPOWERED, UNSTABLE, Verdict
from noisydml.report.pairing import interval_text, p_text
from noisydml.report.statistics import INCONCLUSIVE, MAX_SEEDS, T
from noisydml.report.tables import csv_number, md_cell

# The one sentence the README and claims.md say about the error rate a verdict carries.
RATES = (
    "A verdict carries a family-wise error rate of 5%: `held` needs every comparison's 95% interval above "
    "zero (an intersection-union test, 5% without adjustment), and `contradicted` needs one below zero "
    "after Holm's step-down adjustment over the claim's comparisons in that experiment; either stands only "
    "when each half of the seeds, judged alone, reaches it too, else the claim is `underpowered` (a "
    "half's seeds could not be expected to reach it; the seeds that would are given) or `unstable` (the "
    "halves disagree with seeds enough)."
)


def _seeds(verdict: Verdict) -> str:
    deciding = verdict.deciding
    if deciding is None:
        return "-"
    fewest = min(c.result.n_seeds for c in verdict.comparisons)
    if verdict.status not in (INCONCLUSIVE, UNSTABLE, UNDERPOWERED):
        return str(fewest)
    if fewest < 2:
        return f"{fewest}; 2 or more give an interval"
    needed = verdict.seeds_needed
    goal = "to decide" if verdict.status == INCONCLUSIVE else "to replicate"
    return f"{fewest}; {needed} {goal}" if needed else f"{fewest}; more than {MAX_SEEDS} {goal}"


def _p(verdict: Verdict) -> str:
    """The deciding comparison's raw p and, where it was adjusted, Holm's."""
    deciding = verdict.deciding
    if deciding is None:
        return "-"
    found = next((a for a in verdict.assessed if a.comparison is deciding), None)
    if found is None or found.family < 2 or found.p_holm != found.p_holm:
        return p_text(deciding.result)
    return f"{p_text(deciding.result)} (Holm {found.p_holm:.3g}, {found.family})"


def _halves(verdict: Verdict) -> str:
    if verdict.halves_agree is None:
        return "-"
    return f"{verdict.halves[0]} / {verdict.halves[1]}" + ("" if verdict.halves_agree else " (disagree)")


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
        ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s]) + ". "
        "Each comparison is paired by seed: the mean difference in the paper's direction with its 95% "
        f"{_interval_name(verdicts)}. {RATES} A comparison against a stand-in (BLMNN's) is `not evaluated "
        "(stand-in)`; one beyond what the paper states is an `extension`, judged in its own column and not "
        "the paper's verdict. `halves`: the verdict on each half of the seeds. `seeds`: the fewest seeds "
        "a comparison has, and for an inconclusive claim how many would decide it with 80% power at the "
        "observed effect (for an unstable one, how many would let each half reach it with 90%). `effect` is "
        "the comparison the verdict rests on; `claims.csv` has every one.\n",
        "| id | paper | the paper says | rule | where | verdict | all seeds | halves | extension | "
        "effect [95% CI] | p | seeds | detail |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        claim, deciding = v.claim, v.deciding
        interval = interval_text(deciding.result, deciding.metric) if deciding else "-"
        said = f"“{claim.quote}” ({claim.text})" if claim.quote else claim.text
        cells = (
            claim.id,
            claim.paper,
            said,
            claim.rule,
            v.where or "-",
            f"**{v.status}**",
            v.pooled or "-",
            _halves(v),
            v.extension or "-",
            interval,
            _p(v),
            _seeds(v),
            v.detail,
        )
        out.append("| " + " | ".join(md_cell(text) for text in cells) + " |")
    return "\n".join(out) + "\n"


def write_claims_md(verdicts: list[Verdict], path: Path) -> Path:
    """``claims.md``: every claim, evaluated or not, with what it needs."""
    Path(path).write_text(markdown(verdicts))
    return Path(path)


def evaluated(verdicts: list[Verdict]) -> tuple[list[Verdict], list[Verdict]]:
    """``(the verdicts these runs could reach, those not evaluated)``: a claim not evaluated lacks the
    runs it compares, or is about methods none of the runs trained."""
    return (
        [v for v in verdicts if v.status != NOT_EVALUATED],
        [v for v in verdicts if v.status == NOT_EVALUATED],
    )


def not_evaluated_line(rest: list[Verdict]) -> str:
    """One line for the claims not evaluated: how many, and why in two kinds."""
    absent = list(dict.fromkeys(v.claim.id for v in rest if not v.where))
    lacking = list(dict.fromkeys(v.claim.id for v in rest if v.where))
    reasons = list(dict.fromkeys(v.detail.removeprefix("missing: ") for v in rest if v.where))
    count = len(dict.fromkeys(v.claim.id for v in rest))
    parts = []
    if absent:
        parts.append(f"{len(absent)} about methods or settings these runs do not include")
    if lacking:
        parts.append(f"{len(lacking)} lacking runs to compare with (such as: {reasons[0]})")
    return (
        f"Not evaluated on these runs: {count} claim{'s' if count != 1 else ''} of the papers, "
        f"{' and '.join(parts)}; `claims.md` lists each with the runs it needs."
    )


def report_section(verdicts: list[Verdict]) -> str:
    """The report's Claims section: the claims its runs can evaluate, as in ``claims.md``, and one line
    for the rest."""
    found, rest = evaluated(verdicts)
    if found or not verdicts:
        section = markdown(found).replace("# Claims", "## Claims", 1)
    else:
        section = "## Claims\n\nNo claim of the papers can be evaluated on these runs.\n"
    return section + (f"\n{not_evaluated_line(rest)}\n" if rest else "") + "\n"


CLAIM_FIELDS = (
    "claim",
    "paper",
    "experiment",
    "comparison",
    "metric",
    "effect",
    "ci_low",
    "ci_high",
    # The p of the test that can contradict the claim (against 0, or the claim's margin), and Holm's
    # adjustment of it over the n_comparisons of its family: the claim's own, or its extension's.
    "p_value",
    "p_holm",
    "n_comparisons",
    "n_seeds",
    "seeds",
    "seeds_needed",
    # The comparison's verdict after Holm, on all seeds and on each half ("not evaluated (stand-in)").
    "verdict",
    "verdict_half_a",
    "verdict_half_b",
    # Why the comparison lies beyond the paper's statement; blank when the paper states it there.
    "extension",
    # The claim in this experiment: the verdict reported, on all seeds, on each half, whether both halves
    # reach the all-seeds verdict, and the verdict of its extensions.
    "claim_verdict",
    "claim_all_seeds",
    "claim_half_a",
    "claim_half_b",
    "halves_agree",
    "extension_verdict",
    "interval",
    "claim_text",
    "quote",
)


def write_claims_csv(verdicts: list[Verdict], path: Path) -> Path:
    """One line per comparison (numbers as fractions, as the runs log them); a claim without one gets a
    line of its own with its verdict."""
    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CLAIM_FIELDS, lineterminator="\n")
        writer.writeheader()
        for v in verdicts:
            agree = v.halves_agree
            base = {
                "claim": v.claim.id,
                "paper": v.claim.paper,
                "experiment": v.where,
                "claim_verdict": v.status,
                "claim_all_seeds": v.pooled,
                "claim_half_a": v.halves[0],
                "claim_half_b": v.halves[1],
                "halves_agree": "" if agree is None else ("yes" if agree else "no"),
                "extension_verdict": v.extension,
                "claim_text": v.claim.text,
                "quote": v.claim.quote,
            }
            if not v.assessed:
                writer.writerow({**base, "verdict": v.status})
            for a in v.assessed:
                c, r = a.comparison, a.comparison.result
                needed = r.seeds_needed() if a.verdict == INCONCLUSIVE else None
                writer.writerow(
                    {
                        **base,
                        "comparison": c.what,
                        "metric": c.metric,
                        "effect": csv_number(r.effect),
                        "ci_low": csv_number(r.ci_low),
                        "ci_high": csv_number(r.ci_high),
                        "p_value": csv_number(c.p_contradicts()),
                        "p_holm": csv_number(a.p_holm),
                        "n_comparisons": a.family or "",
                        "n_seeds": r.n_seeds,
                        "seeds": " ".join(map(str, r.seeds)),
                        "seeds_needed": needed or "",
                        "verdict": a.verdict,
                        "verdict_half_a": a.half_verdicts[0],
                        "verdict_half_b": a.half_verdicts[1],
                        "extension": a.extension,
                        "interval": r.interval,
                    }
                )
    return Path(path)
