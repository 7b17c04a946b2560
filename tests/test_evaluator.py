"""The metrics group: conf/metrics/default.yaml builds the Evaluator the module hands its arrays to."""

from __future__ import annotations

import numpy as np
import pytest

from configs import load
from noisydml.metrics.evaluator import Evaluator

# On a line: class 0 at 0, 1 and 10; class 1 at 4 and 5.
EMBEDDINGS = np.array([[0.0], [1.0], [4.0], [5.0], [10.0]], dtype=np.float32)
LABELS = np.array([0, 0, 1, 1, 0])
# Training embeddings: class 0 at 0 and 1 (mean 0.5), class 1 at 8 and 12 (mean 10).
REFERENCE = (np.array([[0.0], [1.0], [8.0], [12.0]], dtype=np.float32), np.array([0, 0, 1, 1]))


def test_default_metrics_config_scores_arrays():
    evaluator = load("metrics", "default", "recall_ks=[1,2]", "nmi=false")
    assert isinstance(evaluator, Evaluator) and not evaluator.needs_reference
    # Leave one out: 0 -> 1, 1 -> 0, 4 -> 5, 5 -> 4 hit at 1; 10's two nearest (5, 4) are class 1: a miss.
    # MAP@R: 0 and 1 (R = 2) rank their class-mate first, then 4: 1/2 each; 4 and 5 (R = 1): 1; 10: 0.
    assert evaluator(EMBEDDINGS, LABELS) == {
        "recall@1": pytest.approx(0.8),
        "recall@2": pytest.approx(0.8),
        "map@r": pytest.approx((0.5 + 0.5 + 1 + 1 + 0) / 5),
    }


def test_classification_metrics_take_the_training_embeddings_as_reference():
    evaluator = load(
        "metrics",
        "default",
        "recall_ks=[1]",
        "nmi=false",
        "map_at_r=false",
        "ncm_accuracy=true",
        "knn_accuracy_k=1",
    )
    assert evaluator.needs_reference
    # Nearest class mean: 0, 1 -> 0 (right); 4 (3.5 vs 6), 5 (4.5 vs 5) -> 0 (wrong); 10 -> 1 (wrong).
    # 1-NN: 0, 1 -> 0 (right); 4 -> 1 (class 0, wrong); 5 -> 8 (class 1, right); 10 -> 8 or 12 (wrong).
    metrics = evaluator(EMBEDDINGS, LABELS, reference=REFERENCE)
    assert list(metrics) == ["recall@1", "ncm_accuracy", "knn_accuracy@1"]
    assert metrics["ncm_accuracy"] == pytest.approx(2 / 5)
    assert metrics["knn_accuracy@1"] == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match=r"pass reference=\(embeddings, labels\)"):
        evaluator(EMBEDDINGS, LABELS)


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["recall_ks=[]", "nmi_seeds=2", "nmi_plus_factor=2", "map_full=true"],
        ["recall_ks=[1]", "nmi=false", "map_at_r=false", "ncm_accuracy=true", "knn_accuracy_k=1"],
    ],
)
def test_the_names_an_evaluator_announces_are_the_metrics_it_returns(overrides):
    """What preflight checks optimized_metric and an early stop's monitor against."""
    # Five items: at most four neighbours each.
    evaluator = load("metrics", "default", "recall_ks=[1,2]", *overrides)
    assert evaluator.names() == list(evaluator(EMBEDDINGS, LABELS, reference=REFERENCE))
