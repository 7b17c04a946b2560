"""Embeddings with known structure for the metric tests: random points, and tightly separated classes."""

from __future__ import annotations

import numpy as np


def random_data(n, dim=8, classes=20, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` standard normal points with labels drawn at random: no class structure."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, dim)).astype(np.float32), rng.integers(0, classes, size=n)


def separated_blobs(classes=10, per_class=20, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """Classes far apart (centres ~100 apart, spread 0.1): any sound clustering recovers them."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, 16)) * 100
    labels = np.repeat(np.arange(classes), per_class)
    return (centres[labels] + rng.normal(size=(len(labels), 16)) * 0.1).astype(np.float32), labels
