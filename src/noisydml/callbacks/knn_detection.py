"""The kNN label vote as a detector of flipped labels: the training-free reference beside every method's own
detector (PRISM's score, BSPML's weights, the per-sample loss of ``callbacks/loss_detection.py``).

A Lightning callback (``callbacks=knn_detection``; on in the ``noisy_dml`` experiments). Each training
sample's vote is the share of its k nearest neighbours whose observed label differs from its own
(:func:`noisydml.metrics.label_vote.knn_label_vote`), on

- the features the run starts from (``train/knn_start_*``): the inputs, or the pretrained trunk's pooled
  features with ``trunk_features`` (the config sets it from ``backbone.trunk.pretrained``), computed once
  before the first step and logged at every validation, a flat line beside the methods' curves; the same
  for every method trained on the same noisy labels;
- the embedding at each validation (``train/knn_*``): every sample trained on, embedded as the
  classification metrics embed it (test transform, eval mode).

Each logs ``auc`` (the ROC AUC of the vote at finding the flipped labels) and ``precision`` and ``recall``
of the highest votes, as many as were flipped, as ``train/loss_*`` does. Without a validation split the
embedding is voted on at the end of each training epoch instead. A run whose data module filtered its
training set (``data.filter``: ``method=reference/knn_filter``) logs no starting vote: its samples were
chosen by that vote, and its ``noise.filter`` in results.json already says how well it found the flips.
The flipped labels come from the data module and are used for nothing else.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytorch_lightning as pl

from noisydml.data.knn_filter import starting_features
from noisydml.metrics.label_vote import flip_detection, knn_label_vote
from noisydml.utils.checks import Rule, check_value


class KnnDetection(pl.Callback):
    """Logs how well the kNN label vote of ``k`` neighbours finds the flipped labels (module docstring)."""

    def __init__(self, k: int = 10, trunk_features: bool = False, batch_size: int = 256) -> None:
        check_value(
            Rule("callbacks.knn_detection.k", int, 1, example="callbacks.knn_detection.k=10 neighbours"), k
        )
        self.k = k
        self.trunk_features = trunk_features
        self.batch_size = batch_size
        self._flipped = None
        # The starting vote's numbers, kept in the checkpoint: a resumed run's weights are no longer the
        # ones it started from.
        self._start: dict[str, float] | None = None

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        datamodule = trainer.datamodule
        train_set = datamodule.training_set()
        flipped = train_set.flipped
        if not 0 < flipped.sum() < len(flipped) or self.k >= len(flipped):
            return
        # By the data set's index: the embedded training set comes back in index order.
        self._flipped = np.zeros(train_set.num_indices, dtype=bool)
        self._flipped[train_set.indices] = flipped
        if self._start is not None or getattr(datamodule, "filter", None) is not None:
            return
        backbone = pl_module.backbone if self.trunk_features else None
        features = starting_features(datamodule.reference_dataloader().dataset, backbone, self.batch_size)
        self._start = flip_detection(knn_label_vote(features, train_set.labels, self.k).votes, flipped)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._log(pl_module)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.datamodule.validation_stages:
            self._log(pl_module)

    def _log(self, pl_module: pl.LightningModule) -> None:
        if self._flipped is None:
            return
        embedded = pl_module.embed_training_set()
        votes = knn_label_vote(embedded.embeddings, embedded.labels, self.k).votes
        found = flip_detection(votes, self._flipped[embedded.indices])
        logs = {f"train/knn_{name}": value for name, value in found.items()}
        logs.update({f"train/knn_start_{name}": value for name, value in (self._start or {}).items()})
        pl_module.log_dict(logs, rank_zero_only=True)

    def state_dict(self) -> dict[str, Any]:
        return {"start": self._start}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._start = state_dict.get("start")
