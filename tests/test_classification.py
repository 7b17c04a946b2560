"""Nearest-class-mean (Yu et al. Eq. 21) and k-NN (BDML) accuracy: hand-sized cases, brute force, and a
digits run that reports both."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.neighbors import NearestCentroid

from noisydml.metrics.classification import knn_accuracy, ncm_accuracy
from noisydml.run.train import train
from noisydml.utils.errors import BadInput

# On a line, with class ids that are neither contiguous nor sorted by position:
#   class 7 at 0 and 2 (mean 1), class 3 at 4, 6 and 8 (mean 6).
REFERENCE = np.array([[0.0], [2.0], [4.0], [6.0], [8.0]])
REFERENCE_LABELS = np.array([7, 7, 3, 3, 3])


def test_ncm_hand_sized_case():
    # 3.4: mean 1 at 2.4, mean 6 at 2.6 -> 7, although its nearest item (4) is a 3.
    # 3.6: 2.6 against 2.4 -> 3.   0.5: -> 7.   7.9: -> 3.
    test = np.array([[3.4], [3.6], [0.5], [7.9]])
    assert ncm_accuracy(test, np.array([7, 3, 7, 3]), REFERENCE, REFERENCE_LABELS) == 1.0
    assert ncm_accuracy(test, np.array([3, 3, 3, 3]), REFERENCE, REFERENCE_LABELS) == 0.5
    # The nearest-neighbour rule disagrees on 3.4: NCM is not 1-NN.
    assert knn_accuracy(test, np.array([7, 3, 7, 3]), REFERENCE, REFERENCE_LABELS, k=1) == 0.75


def test_knn_hand_sized_majority():
    # k = 3. 3.4: neighbours 4 (3), 2 (7), 6 (3) -> 3.   0.9: 0 (7), 2 (7), 4 (3) -> 7.
    #        6.9: 6 (3), 8 (3), 4 (3) -> 3.
    test = np.array([[3.4], [0.9], [6.9]])
    assert knn_accuracy(test, np.array([3, 7, 3]), REFERENCE, REFERENCE_LABELS, k=3) == 1.0
    assert knn_accuracy(test, np.array([7, 7, 7]), REFERENCE, REFERENCE_LABELS, k=3) == pytest.approx(1 / 3)


def test_knn_tie_goes_to_the_nearest_tied_class():
    # Classes 1, 2, 5 at 0, 1, 2, 3, 4.3 and 6: distinct distances everywhere, so faiss's order is exact.
    reference = np.array([[0.0], [1.0], [2.0], [3.0], [4.3], [6.0]])
    labels = np.array([5, 2, 2, 5, 1, 1])
    # k = 2 from 2.4: 2 (2), 3 (5): a 1-1 tie -> 2, the nearer.
    # k = 4 from 3.2: 3 (5), 4.3 (1), 2 (2), 1 (2): 2 has two votes -> 2, though 5 is nearest.
    # k = 4 from 1.4: 1 (2), 2 (2), 0 (5), 3 (5): a 2-2 tie -> 2, whose first vote is nearest.
    # k = 4 from 0.4: 0 (5), 1 (2), 2 (2), 3 (5): the same counts, the other order -> 5.
    # k = 4 from 4.9: 4.3 (1), 6 (1), 3 (5), 2 (2): 1 wins 2-1-1.
    # k = 2 from 3.7: 4.3 (1), 3 (5): a tie -> 1, the nearer (0.6 against 0.7).
    cases = [(2.4, 2, 2), (3.2, 4, 2), (1.4, 4, 2), (0.4, 4, 5), (4.9, 4, 1), (3.7, 2, 1)]
    for x, k, expected in cases:
        wrong = 1 if expected == 5 else 5
        query = np.array([[x]])
        assert knn_accuracy(query, np.array([expected]), reference, labels, k=k) == 1.0, (x, k)
        assert knn_accuracy(query, np.array([wrong]), reference, labels, k=k) == 0.0, (x, k)


def brute_force_knn(test, test_labels, reference, reference_labels, k) -> float:
    """The rule written out: float64 distances, stable order, majority, ties to the nearest tied class."""
    distances = ((test[:, None, :] - reference[None, :, :]) ** 2).sum(-1)
    correct = 0
    for row, label in zip(np.argsort(distances, axis=1, kind="stable")[:, :k], test_labels, strict=True):
        votes = reference_labels[row].tolist()
        counts = {c: votes.count(c) for c in votes}
        best = max(counts.values())
        correct += next(c for c in votes if counts[c] == best) == label
    return correct / len(test)


@pytest.mark.parametrize("k", [1, 3, 4, 10])
def test_knn_matches_brute_force_on_random_data(k):
    rng = np.random.default_rng(k)
    reference, test = rng.normal(size=(200, 5)), rng.normal(size=(150, 5))
    reference_labels, test_labels = rng.integers(0, 6, 200), rng.integers(0, 6, 150)
    expected = brute_force_knn(test, test_labels, reference, reference_labels, k)
    got = knn_accuracy(test, test_labels, reference, reference_labels, k=k)
    assert got == pytest.approx(expected, abs=1e-12)
    assert 0 < got < 1


def test_ncm_matches_sklearn_nearest_centroid():
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=2.0, size=(8, 6))
    reference_labels, test_labels = rng.integers(0, 8, 400) * 3 + 1, rng.integers(0, 8, 300) * 3 + 1
    reference = centres[(reference_labels - 1) // 3] + rng.normal(size=(400, 6))
    test = centres[(test_labels - 1) // 3] + rng.normal(size=(300, 6))
    expected = np.mean(NearestCentroid().fit(reference, reference_labels).predict(test) == test_labels)
    got = ncm_accuracy(test.astype(np.float32), test_labels, reference.astype(np.float32), reference_labels)
    assert got == pytest.approx(expected, abs=1e-12) and 0.3 < got < 1


def test_unseen_test_class_and_bad_k_are_refused():
    with pytest.raises(BadInput, match=r"metrics.ncm_accuracy needs every test class.*\[4\]"):
        ncm_accuracy(np.zeros((1, 1)), np.array([4]), REFERENCE, REFERENCE_LABELS)
    with pytest.raises(ValueError, match=r"metrics.knn_accuracy_k=6 must be in \[1, 5\]"):
        knn_accuracy(np.zeros((1, 1)), np.array([3]), REFERENCE, REFERENCE_LABELS, k=6)


@pytest.mark.slow
def test_digits_run_reports_ncm_and_knn_accuracy(compose_config):
    metrics = train(compose_config("metrics.ncm_accuracy=true", "metrics.knn_accuracy_k=3"))
    assert {"test/ncm_accuracy", "test/knn_accuracy@3"} <= set(metrics)
    # Ten classes, chance 0.1; three batches of triplet training already separate digits well.
    assert 0.5 < metrics["test/ncm_accuracy"] <= 1 and 0.5 < metrics["test/knn_accuracy@3"] <= 1
