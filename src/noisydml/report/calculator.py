"""Le & Odobez (2019)'s theory as numbers: pair-label flip rates from p and K (Eq. 7 and the corrected
Eq. 8) and the triplet-loss noise bound of Eq. 27 for a few values of eta."""

from __future__ import annotations

import math
from collections.abc import Sequence

from noisydml.noise.theory import finite_k_triplet_bound, pair_flip_rates, triplet_noise_bound

DEFAULT_ETAS = (1.5, 2.0, 4.0)


def printed_eq8(p: float, num_classes: int) -> float:
    """Eq. 8 exactly as printed, ``2p(1-p) + p^2 (1 - 2/(K-1))``: shown beside the corrected value only so
    a reader comparing with the paper sees the difference."""
    return 2 * p * (1 - p) + p**2 * (1 - 2 / (num_classes - 1))


def largest_tolerated_eta(p: float) -> float:
    """The largest hard/easy sampling skew eta under which rate ``p`` still meets Eq. 26,
    ``1 - (2p - p^2) eta >= 0``: ``1 / (2p - p^2)`` (infinite at p = 0)."""
    flipped = 2 * p - p**2
    return math.inf if flipped == 0 else 1 / flipped


def theory_text(p: float, num_classes: int, etas: Sequence[float] = DEFAULT_ETAS) -> str:
    """The calculator's printout for sample noise rate ``p`` over ``num_classes`` classes."""
    q_neg_to_pos, q_pos_to_neg = pair_flip_rates(p, num_classes)
    lines = [
        f"Le & Odobez 2019, uniform sample label noise p = {p:g} over K = {num_classes} classes (Eq. 6)",
        f"  q(negative pair -> positive), Eq. 7:            {q_neg_to_pos:.6f}",
        f"  q(positive pair -> negative), Eq. 8 corrected:  {q_pos_to_neg:.6f}",
        f"    (Eq. 8 as printed, a misprint:                {printed_eq8(p, num_classes):.6f})",
        "Triplet loss with semi-hard mining is noise tolerant for p < 1 - sqrt(1 - 1/eta)"
        " (Eq. 27, eps(K) dropped), eta weighting hard negative pairs eta/K and easy ones 1/(eta K);"
        f" at K = {num_classes}, Eq. 24 (eps(K) kept) bounds p lower:",
    ]
    for eta in etas:
        bound = triplet_noise_bound(eta)
        finite = finite_k_triplet_bound(eta, num_classes)
        side = "below" if p < finite else "at or above"
        lines.append(
            f"  eta = {eta:g}: p < {bound:.6f}   finite K: p < {finite:.6f}   (p = {p:g} is {side} the "
            "finite-K bound)"
        )
    lines.append(f"  p = {p:g} meets Eq. 26 for every eta <= 1 / (2p - p^2) = {largest_tolerated_eta(p):.6f}")
    return "\n".join(lines)
