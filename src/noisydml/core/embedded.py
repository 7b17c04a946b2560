"""A split embedded in data-set order: what the module scores and what the method hooks receive."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Embedded:
    """A split embedded in data-set order: ``embeddings[i]`` is item ``indices[i]``, of class ``labels[i]``.

    Arrays on the host, as the metrics take them."""

    embeddings: np.ndarray
    labels: np.ndarray
    indices: np.ndarray
