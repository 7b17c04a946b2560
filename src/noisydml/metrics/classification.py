"""Classification of test items against training embeddings: the papers' accuracy metrics.

Yu et al. 2018 (Eq. 21) classify by the nearest class mean of the training embeddings; BDML
classifies by the majority of the k nearest training embeddings (k = 3). Both need test classes
that also occur in training (same-class splits), and use the labels the run trained on.
"""

from __future__ import annotations

import faiss
import numpy as np

from noisydml.metrics.engine import Backend
from noisydml.metrics.recall import neighbour_chunks
from noisydml.utils.errors import BadInput


def check_same_classes(
    test_labels: np.ndarray, reference_labels: np.ndarray, metric: str, split: str = "test"
) -> None:
    """Every class of the scored ``split`` among the training classes it is classified into: a run checks
    it before its first step (:meth:`noisydml.metrics.evaluator.Evaluator.check_classes`), scoring once
    more."""
    unseen = np.setdiff1d(test_labels, reference_labels)
    if len(unseen):
        raise BadInput(
            f"{metric} needs every {split} class among the training classes, but {len(unseen)} are not "
            f"(e.g. {unseen[:5].tolist()}): use a same-classes split (dataset.split=same_classes) "
            f"or turn {metric} off"
        )


def ncm_accuracy(
    test: np.ndarray, test_labels: np.ndarray, reference: np.ndarray, reference_labels: np.ndarray
) -> float:
    """Fraction of test items whose nearest training class mean (L2) is their class (Yu et al. Eq. 21)."""
    check_same_classes(test_labels, reference_labels, "metrics.ncm_accuracy")
    classes, inverse = np.unique(reference_labels, return_inverse=True)
    means = np.zeros((len(classes), reference.shape[1]), dtype=np.float64)
    np.add.at(means, inverse, reference)
    means /= np.bincount(inverse)[:, None]
    index = faiss.IndexFlatL2(reference.shape[1])
    index.add(np.ascontiguousarray(means, dtype=np.float32))
    _, nearest = index.search(np.ascontiguousarray(test, dtype=np.float32), 1)
    return float(np.mean(classes[nearest[:, 0]] == test_labels))


def knn_accuracy(
    test: np.ndarray,
    test_labels: np.ndarray,
    reference: np.ndarray,
    reference_labels: np.ndarray,
    k: int = 3,
    use_gpu: bool | None = None,
    backend: Backend = "auto",
) -> float:
    """Fraction of test items whose k nearest training items vote for their class (BDML).

    A tie between classes goes to the class of the nearest neighbour among the tied ones. Training
    items at exactly the k-th neighbour's distance are taken in the search's (index) order: unlike
    Recall@K and MAP@R (``ties``), the vote is not averaged over their orders.
    """
    if not 1 <= k <= len(reference):
        raise ValueError(f"metrics.knn_accuracy_k={k} must be in [1, {len(reference)}]")
    check_same_classes(test_labels, reference_labels, "metrics.knn_accuracy_k")
    correct = 0
    for start, neighbours in neighbour_chunks(
        np.ascontiguousarray(reference, dtype=np.float32),
        k,
        queries=np.ascontiguousarray(test, dtype=np.float32),
        use_gpu=use_gpu,
        backend=backend,
    ):
        votes = reference_labels[neighbours]
        correct += int(np.sum(_majority(votes) == test_labels[start : start + len(votes)]))
    return correct / len(test)


def _majority(votes: np.ndarray) -> np.ndarray:
    """Per row, the most frequent label; ties go to the label that appears first (nearest)."""
    same = votes[:, :, None] == votes[:, None, :]
    counts = same.sum(axis=2)
    best = counts.max(axis=1, keepdims=True)
    first_best = np.argmax(counts == best, axis=1)
    return votes[np.arange(len(votes)), first_best]
