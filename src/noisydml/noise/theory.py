"""Closed forms from Le & Odobez (2019) for noise rates: pair-label flips and the triplet-loss bound."""

from __future__ import annotations

import math

from scipy.optimize import brentq


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
    ``eta >= 1`` is how the paper skews the weights of negative pairs: a hard one weighs ``eta / K``, an
    easy one ``1 / (eta K)`` (Sec. 4.2; positives weigh 1). ``finite_k_triplet_bound`` keeps ``eps(K)``.

    Eq. 26 prints the condition as ``1 - (2p + q^2) eta >= 0``; it is ``1 - (2p - p^2) eta >= 0``, the
    form whose solution is Eq. 27, since ``2p - p^2 = 1 - (1-p)^2``. At ``eta = 1`` (uniform sampling)
    the bound is 1; it falls to 0.5 at ``eta = 4/3`` and towards 0 as ``eta`` grows.
    """
    if not eta >= 1.0:  # also rejects nan
        raise ValueError(f"eta={eta} is below 1; eta is the hard/easy negative sampling ratio, at least 1")
    return 1.0 - math.sqrt(1.0 - 1.0 / eta)


def finite_k_conditions(p: float, eta: float, num_classes: int) -> tuple[float, float]:
    """Eq. 24's two factors for semi-hard triplet mining at finite K, each >= 0 when triplet loss stays
    noise tolerant at sample noise rate ``p``.

    As the paper sets up Eq. 26 (Sec. 4.2): positive pairs weigh 1; negative pairs 1/K on average, the
    hard ones ``eta / K`` and the easy ones ``1 / (eta K)``, ``eta >= 1``. Eq. 24's factor for a positive
    pair, ``1 - q+ - q+ w- / w+``, is smallest at the largest negative weight, ``eta / K``; for a negative
    pair, ``1 - q- - q- w+ / w-``, at the smallest, ``1 / (eta K)``:

        1 - q+ - q+ eta / K        and        1 - q- - q- eta K

    with ``q-`` (Eq. 7) and ``q+`` (Eq. 8 corrected) from ``pair_flip_rates``. As K grows the second
    becomes ``1 - (2p - p^2) eta`` (Eq. 26) and the first 1 - q+, so Eq. 27 is the large-K limit.
    """
    q_neg, q_pos = pair_flip_rates(p, num_classes)
    return 1 - q_pos - q_pos * eta / num_classes, 1 - q_neg - q_neg * eta * num_classes


def finite_k_triplet_bound(eta: float, num_classes: int) -> float:
    """The largest sample noise rate at which both of Eq. 24's factors (``finite_k_conditions``) stay
    >= 0: Eq. 27's bound with its ``eps(K)`` term kept. At K = 10 it is 0.349 / 0.249 / 0.117 for eta =
    1.5 / 2 / 4, against Eq. 27's 0.423 / 0.293 / 0.134."""
    triplet_noise_bound(eta)  # the same check of eta
    # Past (K-1)/K the labels are uniform and noise only mixes them further; both factors fall in p.
    uniform = (num_classes - 1) / num_classes
    return float(brentq(lambda p: min(finite_k_conditions(p, eta, num_classes)), 0.0, uniform))
