"""The kNN label vote, a detector of flipped labels that needs no training (the majority-vote rule of
SimiFeat, Zhu et al. ICML 2022, "Detecting corrupted labels without training a model to predict"), and the
numbers every detector of the project is scored by.

Each sample's vote is the share of its k nearest neighbours (squared L2, itself excluded: the evaluation's
exact search, faiss or torch) whose observed label differs from its own: a clean sample among look-alikes
of its class scores low, a flipped one, whose neighbours carry its true class, scores high. A sample is
*outvoted* when some other label has more of its k neighbours than its own (SimiFeat's rule), the flag for
when the flip rate is unknown: it holds whenever the true class stays the commonest label of a clean
neighbourhood, i.e. for uniform noise below (C - 1) / C, without a threshold to choose.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.metrics import roc_auc_score

from noisydml.metrics.engine import Backend
from noisydml.metrics.recall import neighbour_chunks


@dataclass(frozen=True)
class LabelVote:
    """Per sample: ``votes``, the share of its k neighbours whose label differs from its own, in [0, 1];
    ``outvoted``, whether another label has more of them than its own."""

    votes: np.ndarray
    outvoted: np.ndarray


def knn_label_vote(
    features: np.ndarray, labels: np.ndarray, k: int = 10, backend: Backend = "auto"
) -> LabelVote:
    """The vote of each row of ``features`` (n x d) from its ``k`` nearest other rows' ``labels``."""
    features = np.ascontiguousarray(np.asarray(features).reshape(len(features), -1), dtype=np.float32)
    labels = np.asarray(labels)
    if len(labels) != len(features):
        raise ValueError(f"{len(features)} feature rows but {len(labels)} labels")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k < len(labels):
        raise ValueError(f"k={k} neighbours asked of {len(labels)} samples; give 1 <= k < {len(labels)}")
    _, codes = np.unique(labels, return_inverse=True)
    votes = np.empty(len(labels))
    outvoted = np.empty(len(labels), dtype=bool)
    for start, neighbours in neighbour_chunks(features, k, backend=backend):
        own = codes[start : start + len(neighbours)]
        theirs = codes[neighbours]
        agree = (theirs == own[:, None]).sum(axis=1)
        votes[start : start + len(neighbours)] = 1.0 - agree / k
        # The commonest label among the neighbours: a count per (row, label) of the chunk.
        counts = np.zeros((len(neighbours), codes.max() + 1), dtype=np.int64)
        np.add.at(counts, (np.arange(len(neighbours))[:, None], theirs), 1)
        outvoted[start : start + len(neighbours)] = counts.max(axis=1) > agree
    return LabelVote(votes, outvoted)


def flip_detection(scores: np.ndarray, flipped: np.ndarray) -> dict[str, float]:
    """How well ``scores`` (high: "flipped") find the ``flipped`` samples: ``auc``, the ROC AUC; and of the
    samples with the highest scores, as many as were flipped (the true flip rate, which no method knows),
    ``precision`` (the fraction flipped) and ``recall`` (the fraction of the flipped found). A tie at the
    cut counts each tied sample at the share of the tie that fits, the expectation over the orders of the
    tie: a vote of k neighbours takes k + 1 values, so ties are the rule. Empty when nothing or
    everything is flipped."""
    scores, flipped = np.asarray(scores, dtype=float), np.asarray(flipped, dtype=bool)
    found = int(flipped.sum())
    if not 0 < found < len(flipped):
        return {}
    cut = np.sort(scores)[::-1][found - 1]
    above, tied = scores > cut, scores == cut
    share = (found - above.sum()) / tied.sum()
    hits = float(flipped[above].sum() + share * flipped[tied].sum())
    return {"auc": float(roc_auc_score(flipped, scores)), "precision": hits / found, "recall": hits / found}
