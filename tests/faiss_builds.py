"""Scores the same real embeddings with whichever faiss build this interpreter imports, for
tests/test_faiss_gpu_build.py: run as a script, it prints the metrics at two SIMD levels and the engine's
record as JSON."""

from __future__ import annotations

import json

import faiss
import numpy as np
from sklearn.datasets import load_digits

from noisydml.metrics.evaluator import Evaluator


def score_each_level() -> dict:
    """:func:`score` with faiss's generic CPU kernels (``NONE``) and with the ones it picks for this CPU, and
    the engine's record."""
    native = faiss.SIMDConfig.get_level()
    faiss.SIMDConfig.set_level(faiss.SIMDLevel_NONE)
    generic = score()
    faiss.SIMDConfig.set_level(native)
    return {"generic": generic, "native": score(), "engine": Evaluator().engine_record()}


def score() -> dict[str, float]:
    """Every metric whose search or k-means faiss runs, on scikit-learn's digits (1,797 x 64, duplicates
    and near-ties included), the last 297 as the reference set of the k-NN vote."""
    x, labels = load_digits(return_X_y=True)
    x = ((x - x.mean(axis=0)) / (x.std(axis=0) + 1e-6)).astype(np.float32)
    test, reference = slice(0, 1500), slice(1500, None)
    evaluator = Evaluator(
        recall_ks=(1, 2, 4, 8, 16),
        nmi_plus_factor=2,
        nmi_seeds=2,
        kmeans_restarts=2,
        map_full=True,
        knn_accuracy_k=5,
    )
    metrics = evaluator(x[test], labels[test], seed=3, reference=(x[reference], labels[reference]))
    plus_plus = Evaluator(recall_ks=(1,), map_at_r=False, kmeans_init="k-means++")(x, labels, seed=1)
    metrics.update({f"k-means++/{name}": value for name, value in plus_plus.items()})
    return metrics


if __name__ == "__main__":
    print(json.dumps(score_each_level()))
