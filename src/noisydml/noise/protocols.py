"""What a noise model is, and what it may read of the training split, stated as protocols so that the
noise package depends on no data set class.

Every noise model draws from the labels alone (:class:`LabelNoise`); a model that needs the samples
themselves (PRISM's small-cluster noise clusters their features; a published label list matches their
file paths) also implements :class:`SplitNoise`, and the data module then hands it the split.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from noisydml.noise.models import NoisyLabels


class TrainingSplit(Protocol):
    """The training split as a noise model sees it: item ``i`` is ``(input, label, i)``, ``labels`` holds
    every item's class, ``eval_view()`` gives the items with the test transform. An image split also
    has ``paths``, the file of each item."""

    labels: np.ndarray

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> tuple: ...

    def eval_view(self) -> TrainingSplit: ...


@runtime_checkable
class LabelNoise(Protocol):
    """A noise model that draws the observed labels from the true ones."""

    def apply(self, labels: np.ndarray) -> NoisyLabels: ...


@runtime_checkable
class SplitNoise(Protocol):
    """A noise model that draws the observed labels from the training split itself."""

    def apply_to(self, train: TrainingSplit) -> NoisyLabels: ...
