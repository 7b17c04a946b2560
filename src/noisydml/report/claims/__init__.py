"""The papers' claims checked on the runs: :mod:`~noisydml.report.claims.verdicts` (the records and how
comparisons become a verdict), :mod:`~noisydml.report.claims.render` (claims.md, claims.csv) and
:mod:`~noisydml.report.claims.readme` (the README's answer and the docs' claims, from the committed results;
imported by name, not here). The claims themselves are the papers', in :mod:`noisydml.report.papers`."""

from noisydml.report.claims.render import (
    CLAIM_FIELDS,
    RATES,
    evaluated,
    markdown,
    not_evaluated_line,
    report_section,
    write_claims_csv,
    write_claims_md,
)
from noisydml.report.claims.verdicts import (
    CONTRADICTED,
    EXTENSION_ONLY,
    HELD,
    INCONCLUSIVE,
    NOT_EVALUATED,
    STAND_IN,
    STATUSES,
    UNDERPOWERED,
    UNSTABLE,
    Assessed,
    Claim,
    Comparison,
    Outcome,
    Verdict,
    evaluate,
)

__all__ = [
    "CLAIM_FIELDS",
    "CONTRADICTED",
    "EXTENSION_ONLY",
    "HELD",
    "INCONCLUSIVE",
    "NOT_EVALUATED",
    "RATES",
    "STAND_IN",
    "STATUSES",
    "UNDERPOWERED",
    "UNSTABLE",
    "Assessed",
    "Claim",
    "Comparison",
    "Outcome",
    "Verdict",
    "evaluate",
    "evaluated",
    "markdown",
    "not_evaluated_line",
    "report_section",
    "write_claims_csv",
    "write_claims_md",
]
