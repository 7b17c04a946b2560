"""What a noise model did to a run's training labels, measured and against theory, for results files."""

from __future__ import annotations

import numpy as np

from noisydml.noise.models import NoisyLabels
from noisydml.noise.theory import pair_flip_rates


def summarize(noisy: NoisyLabels, num_classes: int | None = None) -> dict:
    """JSON-ready numbers describing ``noisy``.

    - ``num_trained_on``: samples trained on; ``num_classes``: K, the classes present among the true labels
      unless ``num_classes`` says otherwise.
    - ``realized_rate``: the fraction of samples with observed != true; ``realized_rate_per_class``: the
      same per true class, keyed by the class id as a string.
    - ``q_neg_to_pos`` / ``q_pos_to_neg``: measured pair-label flip rates over all pairs i < j: among
      pairs with different true labels, the fraction whose observed labels are equal, and among pairs
      with equal true labels, the fraction whose observed labels differ.
    - ``q_neg_to_pos_theory`` / ``q_pos_to_neg_theory``: Le & Odobez Eq. 7 and corrected Eq. 8 (see
      ``pair_flip_rates``) at ``realized_rate`` and K. The realized rate, not the configured one,
      because it is defined for every model (class-conditional has a vector, ``exact`` rounds) and
      removes the binomial scatter of the realized rate from the comparison. The formulas assume
      independent uniform flips (Eq. 6). For class-conditional noise they are a reference, not a
      prediction; for ``exact`` noise on small classes measured ``q_pos_to_neg`` runs above them, since
      flips drawn without replacement make two samples of a class less likely to flip together (SOP-like
      classes of ~5 at rate 0.4: 0.683 measured, 0.642 theory).

    A quantity with nothing to measure (no samples, no pairs of a kind, K < 2) is ``None``.
    """
    n = len(noisy.true)
    true_classes, true_index = np.unique(noisy.true, return_inverse=True)
    k = len(true_classes) if num_classes is None else num_classes
    if k < len(true_classes):
        raise ValueError(
            f"num_classes={num_classes} is below the {len(true_classes)} classes among the true labels; "
            f"leave it unset or give the full number of classes"
        )
    flipped = noisy.observed != noisy.true
    rate = float(flipped.mean()) if n else None
    per_class = np.bincount(true_index, weights=flipped) / np.bincount(true_index)
    rate_per_class = {str(c): float(r) for c, r in zip(true_classes.tolist(), per_class, strict=True)}

    # Pair counts from the (true, observed) contingency table's non-empty cells, never an N x N matrix:
    # pairs sharing the true label, the observed label, and both.
    observed_classes, observed_index = np.unique(noisy.observed, return_inverse=True)
    cell = true_index.astype(np.int64) * len(observed_classes) + observed_index
    _, cells = np.unique(cell, return_counts=True)
    same_true = _pairs(np.bincount(true_index))
    same_observed = _pairs(np.bincount(observed_index))
    same_both = _pairs(cells)
    different_true = n * (n - 1) // 2 - same_true

    theory = pair_flip_rates(rate, k) if rate is not None and k >= 2 else (None, None)
    return {
        "num_trained_on": n,
        "num_classes": int(k),
        "realized_rate": rate,
        "realized_rate_per_class": rate_per_class,
        "q_neg_to_pos": (same_observed - same_both) / different_true if different_true else None,
        "q_pos_to_neg": (same_true - same_both) / same_true if same_true else None,
        "q_neg_to_pos_theory": theory[0],
        "q_pos_to_neg_theory": theory[1],
    }


def _pairs(counts: np.ndarray) -> int:
    """Number of unordered pairs within groups of the given sizes, sum of C(n, 2)."""
    counts = counts.astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())
