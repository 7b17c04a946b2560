"""The one protocol between the LightningModule and a method that needs more than PML's loss call.

A plain pytorch-metric-learning loss is called as ``loss(embeddings, labels, indices_tuple)`` and
needs nothing else. A method that carries extra state (BSPML's per-sample weights, a Bayesian KL
term, statistics it logs each epoch) subclasses :class:`TrainingHooks` beside its loss class and
overrides only what it needs; every default does nothing. The module calls the hooks of its loss,
never asks which method it runs.

What a method may know and use is all here: the :class:`TrainingSet` record before training, and a
:class:`HookContext` at each step and epoch end (the epoch, the device, the backbone, embedding a batch,
embedding the whole training set). A method never reaches into the Trainer, the data module or
Lightning's multi-GPU calls: the module embeds and gathers, once, for every method.

Learnable parameters of a loss (a margin's beta, proxies) need no hook: the module trains every
parameter of the loss in its own group, at ``module.loss_lr`` when set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:
    from torch.utils.data import Dataset

    from noisydml.core.embedded import Embedded


@dataclass(frozen=True)
class TrainingSet:
    """What a method may know about the training data before the first step.

    Per-sample state is indexed by ``index`` (the data set's training-split index that every batch
    carries), so it has ``num_indices`` slots; ``indices`` are the ones this run trains on (a topline
    trains on a subset). ``flipped`` is for diagnostics only (e.g. how well BSPML's weights find the
    noise); a method must not learn from it.

    ``unlabeled`` holds the training samples whose labels the data module hid
    (``data.unlabeled_fraction``, for semi-supervised methods), as items ``(input, -1, index)``; they are
    not in ``indices`` and never in a batch. None when no labels are hidden.
    """

    num_indices: int
    indices: np.ndarray
    labels: np.ndarray
    flipped: np.ndarray
    num_classes: int
    batches_per_epoch: int
    unlabeled: Dataset | None = None


@dataclass(frozen=True)
class HookContext:
    """What the training module lends a method's hooks during training.

    ``embed(x)`` is the module's forward pass on a batch of inputs already on ``device`` (with
    gradient, as in a training step). ``embed_training_set()`` embeds every sample trained on, with the
    test transform and without gradient, in the data set's index order (``Embedded.indices``, the
    ``TrainingSet.indices``), the same on every rank under DDP: each rank embeds a share and the module
    gathers them.
    """

    epoch: int
    device: torch.device
    backbone: nn.Module
    embed: Callable[[torch.Tensor], torch.Tensor]
    embed_training_set: Callable[[], Embedded]


@runtime_checkable
class Bayesian(Protocol):
    """A backbone with a posterior over its weights (``noisydml.models.BayesianMLP``)."""

    def kl_divergence(self) -> torch.Tensor:
        """``KL(q || prior)`` of all its weights."""


class TrainingHooks:
    """Optional behaviour of a loss beyond ``loss(embeddings, labels, indices_tuple)``."""

    def setup(self, train_set: TrainingSet) -> None:
        """Called once before training: size per-sample state, scale per-batch terms."""

    def reads_unlabeled(self) -> bool:
        """Whether the method trains on the samples whose labels the data module hid
        (``TrainingSet.unlabeled``); a run whose method does not trains on the labelled ones alone."""
        return False

    def begin_batch(self, indices: torch.Tensor) -> None:
        """Called before each training loss call with the batch's sample indices."""

    def regularizer(self, context: HookContext) -> torch.Tensor | None:
        """A term added to each step's loss (e.g. a KL divergence), or None."""
        return None

    def on_train_epoch_end(self, context: HookContext) -> dict[str, float]:
        """Called after each training epoch (e.g. a weight update); returns values to log."""
        return {}

    def save(self, run_dir: Path) -> None:
        """Write the method's state that belongs with the run's results (e.g. sample weights)."""


NO_HOOKS = TrainingHooks()


def hooks_of(loss: nn.Module) -> TrainingHooks:
    """The training hooks of a loss: the loss itself when it implements them, else none."""
    return loss if isinstance(loss, TrainingHooks) else NO_HOOKS
