"""The per-sample training loss as a detector of flipped labels: the reference every sample-scoring method
(PRISM's selection, BSPML's weights) is to beat, for any run whose loss is one of pytorch-metric-learning's.

A Lightning callback (``callbacks=loss_detection``; on in the ``noisy_dml`` experiments). It reads the
unreduced losses the loss already computed, as its reducer receives them, so training is unchanged and
the cost is one scatter-add a step: each tuple's loss counts for its anchor (a triplet's, a pair's first
item; an ``element`` loss for its sample). Per epoch, each sample's mean loss over the tuples it anchored
ranks the samples, and the callback logs

- ``train/loss_auc``: the ROC AUC of that loss at finding the flipped labels (a high loss says "flipped");
- ``train/loss_precision``, ``train/loss_recall``: of the samples with the highest losses, as many as were
  flipped (the true flip rate, which no method knows), the fraction flipped and the fraction of the
  flipped ones found. With as many flagged as flipped the two coincide; both are logged to sit beside
  PRISM's ``train/prism_precision`` and ``train/prism_recall``, which flag at the rate PRISM is told.

Samples that anchored no tuple in an epoch (a miner found none) are left out of that epoch's numbers. The
flipped labels come from the data module and are used for nothing else. On one process only: under DDP the
loss sees the gathered batch and the callback logs nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from sklearn.metrics import roc_auc_score
from torch.utils.hooks import RemovableHandle

from noisydml.utils.unread import Parts, no_flips

# PML's reduction types whose indices name the tuples' samples, the anchor first.
TUPLE_TYPES = ("pos_pair", "neg_pair", "triplet")


class LossDetection(pl.Callback):
    """Logs how well the per-sample training loss finds the flipped labels (module docstring)."""

    def __init__(self) -> None:
        self._handle: RemovableHandle | None = None
        self._flipped: np.ndarray | None = None
        self._indices: np.ndarray | None = None
        self._sum = np.zeros(0)
        self._count = np.zeros(0)

    def unread_keys(self, parts: Parts) -> dict[str, str]:
        """Nothing to log: no label flipped, or a loss whose losses no reducer receives
        (``noisydml.utils.unread``)."""
        loss = parts.model.loss
        if not isinstance(getattr(loss, "reducer", None), torch.nn.Module):
            return {
                "": f"reads each sample's loss from the loss's reducer, but the loss ({type(loss).__name__}) "
                "has none, so it would log nothing; drop it (it scores pytorch-metric-learning's losses)"
            }
        return no_flips(parts)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        reducer = getattr(pl_module.loss, "reducer", None)
        if not isinstance(reducer, torch.nn.Module) or trainer.world_size > 1:
            return
        train_set = trainer.datamodule.training_set()
        self._flipped = np.zeros(train_set.num_indices, dtype=bool)
        self._flipped[train_set.indices] = train_set.flipped
        self._sum = np.zeros(train_set.num_indices)
        self._count = np.zeros(train_set.num_indices)
        self._handle = reducer.register_forward_hook(self._record)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch, batch_idx: int):
        self._indices = batch[2].cpu().numpy()

    def _record(self, reducer: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        """The reducer's forward hook: each loss of the batch added to its anchor's tally."""
        loss_dict, embeddings = args[0], args[1]
        if self._indices is None or len(embeddings) != len(self._indices):
            return
        for term in loss_dict.values():
            losses, indices, kind = term.get("losses"), term.get("indices"), term.get("reduction_type")
            if not torch.is_tensor(losses) or losses.dim() != 1 or not len(losses):
                continue
            if kind in TUPLE_TYPES:
                anchors = indices[0]
            elif kind == "element":
                anchors = indices
            else:
                continue
            if not torch.is_tensor(anchors) or len(anchors) != len(losses):
                continue
            samples = self._indices[anchors.cpu().numpy()]
            np.add.at(self._sum, samples, losses.detach().float().cpu().numpy())
            np.add.at(self._count, samples, 1)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._flipped is None:
            return
        scored = self._count > 0
        losses, flipped = self._sum[scored] / self._count[scored], self._flipped[scored]
        self._sum[:] = 0
        self._count[:] = 0
        found = int(flipped.sum())
        if not 0 < found < len(flipped):
            return
        # The highest losses, as many as were flipped (ties broken by index, for reproducibility).
        flagged = np.argsort(-losses, kind="stable")[:found]
        hits = int(flipped[flagged].sum())
        pl_module.log_dict(
            {
                "train/loss_auc": float(roc_auc_score(flipped, losses)),
                "train/loss_precision": hits / len(flagged),
                "train/loss_recall": hits / found,
            }
        )
