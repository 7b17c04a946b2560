"""Closed forms from Le & Odobez (2019) for noise rates: pair-label flips and the triplet-loss bound."""

from __future__ import annotations

import math


def pair_flip_rates(p: float, num_classes: int) -> tuple[float, float]:
    """``(q_neg_to_pos, q_pos_to_neg)``: the chance that a pair's same/different label flips when each
    sample label flips with probability ``p`` to one of the other ``num_classes - 1`` classes, uniformly
    (Le & Odobez Eq. 6).

    ``q_neg_to_pos`` is Eq. 7, as printed: ``2p(1-p)/(K-1) + p^2 (K-2)/(K-1)^2``.

    ``q_pos_to_neg`` departs from Eq. 8 as printed, ``2p(1-p) + p^2 (1 - 2/(K-1))``, which is a misprint.
    A positive pair stays positive when neither label flips, ``(1-p)^2``, or when both flip to the same
    one of the K-1 other classes, ``p^2/(K-1)``; so ``q_pos_to_neg = 1 - (1-p)^2 - p^2/(K-1)
    = 2p(1-p) + p^2 (1 - 1/(K-1))``. Simulation agrees (200k labels: K=3, p=0.5 gives 0.6248, against
    0.625 here and 0.5 printed), and so does the identity ``q_pos_to_neg = (K-1) q_neg_to_pos`` that
    Eq. 7 and the corrected Eq. 8 satisfy for any p.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p={p} is outside [0, 1]; give the sample label flip rate")
    if num_classes < 2:
        raise ValueError(f"num_classes={num_classes} is below 2; labels flip only between 2 or more classes")
    k = num_classes
    q_neg_to_pos = 2 * p * (1 - p) / (k - 1) + p**2 * (k - 2) / (k - 1) ** 2
    q_pos_to_neg = 2 * p * (1 - p) + p**2 * (1 - 1 / (k - 1))
    return q_neg_to_pos, q_pos_to_neg


def triplet_noise_bound(eta: float) -> float:
    """The largest sample noise rate under which triplet loss with semi-hard mining stays noise
    tolerant, ``1 - sqrt(1 - 1/eta)`` (Le & Odobez Eq. 27, without its small ``eps(K)`` term), where
    ``eta >= 1`` is how much more often the miner picks a hard negative pair than an easy one.

    Eq. 26 prints the condition as ``1 - (2p + q^2) eta >= 0``; it is ``1 - (2p - p^2) eta >= 0``, the
    form whose solution is Eq. 27, since ``2p - p^2 = 1 - (1-p)^2``. At ``eta = 1`` (uniform sampling)
    the bound is 1; it falls to 0.5 at ``eta = 4/3`` and towards 0 as ``eta`` grows.
    """
    if not eta >= 1.0:  # also rejects nan
        raise ValueError(f"eta={eta} is below 1; eta is the hard/easy negative sampling ratio, at least 1")
    return 1.0 - math.sqrt(1.0 - 1.0 / eta)
