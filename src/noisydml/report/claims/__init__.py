"""The papers' claims checked on the runs: :mod:`~noisydml.report.claims.verdicts` (the records and how
comparisons become a verdict) and :mod:`~noisydml.report.claims.render` (claims.md, claims.csv). The claims
themselves are the papers', in :mod:`noisydml.report.papers`."""

from noisydml.report.claims.render import CLAIM_FIELDS, markdown, write_claims_csv
from noisydml.report.claims.verdicts import (
    CONTRADICTED,
    HELD,
    INCONCLUSIVE,
    NOT_EVALUATED,
    STATUSES,
    Claim,
    Comparison,
    Outcome,
    Verdict,
    evaluate,
)

__all__ = [
    "CLAIM_FIELDS",
    "CONTRADICTED",
    "HELD",
    "INCONCLUSIVE",
    "NOT_EVALUATED",
    "STATUSES",
    "Claim",
    "Comparison",
    "Outcome",
    "Verdict",
    "evaluate",
    "markdown",
    "write_claims_csv",
]
