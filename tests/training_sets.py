"""``TrainingSet`` records as the data module hands them to a loss's ``setup`` hook, and the ``HookContext``
the training module lends its other hooks."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from noisydml.core.hooks import HookContext, TrainingSet


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


def hook_context(backbone: nn.Module | None = None, epoch: int = 0) -> HookContext:
    """A context on the CPU whose ``embed`` is ``backbone`` (default: the identity, inputs as embeddings);
    embedding the training set is refused, as a loss under test that needs it needs a real module."""

    def no_training_set():
        raise AssertionError("this test's hook context embeds no training set")

    backbone = backbone or nn.Identity()
    return HookContext(
        epoch=epoch,
        device=torch.device("cpu"),
        backbone=backbone,
        embed=backbone,
        embed_training_set=no_training_set,
    )
