"""The kNN label vote as a detector of flipped labels: the training-free reference beside every method's own
detector (PRISM's score, BSPML's weights, the per-sample loss of ``callbacks/loss_detection.py``).

A Lightning callback (``callbacks=knn_detection``; on in the ``noisy_dml`` experiments). Each training
sample's vote is the share of its k nearest neighbours whose observed label differs from its own
(:func:`noisydml.metrics.label_vote.knn_label_vote`), on

- the features the run starts from (``train/knn_start_*``): the inputs, or the pretrained trunk's pooled
  features with ``trunk_features`` (the config sets it from ``backbone.trunk.pretrained``), computed once
  before the first step and logged with each vote on the embedding; the same for every method trained on
  the same noisy labels;
- the embedding (``train/knn_*``): every sample trained on, embedded as the classification metrics embed
  it (test transform, eval mode). By default at the run's last validation only, the value every table
  reads (the last logged: ``report.collect.last_logged``, detection.csv, runs.csv); with
  ``every_validation`` at each validation, the per-epoch curves of the report's detection figure, at the
  cost of embedding the training set once more each time. A run that stops before its last epoch (early
  stopping, a time limit) is voted on as it ends, with the weights it stopped with.

Each logs ``auc`` (the ROC AUC of the vote at finding the flipped labels) and ``precision`` and ``recall``
of the highest votes, as many as were flipped, as ``train/loss_*`` does. Without a validation split the
embedding is voted on at the end of a training epoch instead. A run whose data module filtered its
training set (``data.filter``: ``method=reference/knn_filter``) logs no starting vote: its samples were
chosen by that vote, and its ``noise.filter`` in results.json already says how well it found the flips.
The flipped labels come from the data module and are used for nothing else, and the vote draws nothing
from the run's random streams (iterating a loader draws a seed from torch's), so that training is the same
with the vote, without it, and whichever epochs it is taken at.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch

from noisydml.data.knn_filter import starting_features
from noisydml.metrics.label_vote import flip_detection, knn_label_vote
from noisydml.utils.checks import Rule, check_value
from noisydml.utils.errors import BadInput
from noisydml.utils.unread import Parts, no_flips


class KnnDetection(pl.Callback):
    """Logs how well the kNN label vote of ``k`` neighbours finds the flipped labels (module docstring)."""

    def __init__(
        self, k: int = 10, trunk_features: bool = False, batch_size: int = 256, every_validation: bool = False
    ) -> None:
        check_value(
            Rule("callbacks.knn_detection.k", int, 1, example="callbacks.knn_detection.k=10 neighbours"), k
        )
        check_value(
            Rule(
                "callbacks.knn_detection.batch_size", int, 1, example="callbacks.knn_detection.batch_size=256"
            ),
            batch_size,
        )
        self.k = k
        self.trunk_features = trunk_features
        self.batch_size = batch_size
        self.every_validation = every_validation
        self._flipped = None
        # The global step the embedding was last voted at: a run that ends later is voted on at its end.
        self._voted_at: int | None = None
        # The starting vote's numbers, kept in the checkpoint: a resumed run's weights are no longer the
        # ones it started from.
        self._start: dict[str, float] | None = None

    def unread_keys(self, parts: Parts) -> dict[str, str]:
        """Nothing to log where no label is flipped (``noisydml.utils.unread``)."""
        return no_flips(parts)

    def check_data(self, key: str, datamodule: Any) -> None:
        """Before the first step: the vote reads each training sample's k nearest of the others, so k is below
        their number (with fewer it would vote on nothing and log nothing)."""
        others = len(datamodule.training_set().labels) - 1
        if self.k > others:
            example = min(10, others)
            raise BadInput(
                f"{key}.k={self.k}: the kNN label vote reads each training sample's k nearest of the "
                f"{others} others, so it would log nothing; use k up to {others}, e.g. {key}.k={example}"
            )

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
        with torch.random.fork_rng(devices=[]):
            features = starting_features(datamodule.reference_dataloader().dataset, backbone, self.batch_size)
        self._start = flip_detection(knn_label_vote(features, train_set.labels, self.k).votes, flipped)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking and self._due(trainer):
            pl_module.log_dict(self._logs(trainer, pl_module), rank_zero_only=True)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.datamodule.validation_stages and self._due(trainer):
            pl_module.log_dict(self._logs(trainer, pl_module), rank_zero_only=True)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Stopped before the epoch the vote waited for: voted on now (every rank embeds its share), and
        # logged straight to the loggers (Lightning takes no log_dict here) as the epoch it stopped in.
        if self._flipped is None or self._voted_at == trainer.global_step:
            return
        logs = {**self._logs(trainer, pl_module), "epoch": pl_module.current_epoch}
        if trainer.is_global_zero:
            for logger in trainer.loggers:
                logger.log_metrics(logs, step=trainer.global_step)

    def _due(self, trainer: pl.Trainer) -> bool:
        """Whether this validation (or epoch end) votes: each one when asked, else the run's last."""
        last_epoch = (trainer.max_epochs or 0) > 0 and trainer.current_epoch + 1 >= trainer.max_epochs
        last_step = 0 < trainer.max_steps <= trainer.global_step
        return self._flipped is not None and (self.every_validation or last_epoch or last_step)

    def _logs(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, float]:
        with torch.random.fork_rng(devices=[]):
            embedded = pl_module.embed_training_set()
        votes = knn_label_vote(embedded.embeddings, embedded.labels, self.k).votes
        found = flip_detection(votes, self._flipped[embedded.indices])
        logs = {f"train/knn_{name}": value for name, value in found.items()}
        logs.update({f"train/knn_start_{name}": value for name, value in (self._start or {}).items()})
        self._voted_at = trainer.global_step
        return logs

    def state_dict(self) -> dict[str, Any]:
        return {"start": self._start}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._start = state_dict.get("start")
