"""``TrainingSet`` records as the data module hands them to a loss's ``setup`` hook."""

from __future__ import annotations

import numpy as np

from noisydml.hooks import TrainingSet


def training_set(labels, num_indices: int | None = None, flipped: np.ndarray | None = None) -> TrainingSet:
    """Samples 0..len(labels)-1 of a data set of ``num_indices`` (default: just these), none flipped."""
    labels = np.asarray(labels)
    return TrainingSet(
        num_indices=num_indices or len(labels),
        indices=np.arange(len(labels)),
        labels=labels,
        flipped=np.zeros(len(labels), bool) if flipped is None else flipped,
        num_classes=len(np.unique(labels)),
        batches_per_epoch=1,
    )


def of_classes(num_classes: int) -> TrainingSet:
    """Three samples of each of ``num_classes`` classes (what class-sized state such as proxies needs)."""
    return training_set(np.arange(3 * num_classes) % num_classes)
