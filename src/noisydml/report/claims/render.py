"""The claims' verdicts as the report prints them: a markdown table (``claims.md`` and the report's
Claims section), and ``claims.csv`` with one line per comparison."""

from __future__ import annotations

import csv
from pathlib import Path

from noisydml.report.claims.verdicts import STATUSES, Verdict
from noisydml.report.pairing import interval_text, p_text
from noisydml.report.statistics import INCONCLUSIVE, MAX_SEEDS, T
from noisydml.report.tables import csv_number, md_cell


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
