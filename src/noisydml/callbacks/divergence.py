"""Divergence said out loud: the embedding is normalised, so a learning rate far too high leaves the loss
bounded and the run finishes with plausible scores while its weights blow up (``optimizer.lr=1e9`` ended
at Recall@1 .587 without a word). Once an epoch, the norm of the trained weights is compared with its
value at the start of training; a growth past :data:`GROWTH` is warned about, once, and kept
(:attr:`DivergenceWarning.message`): the run records it as diverged, no result."""

from __future__ import annotations

import math

import pytorch_lightning as pl
import torch
from lightning_fabric.utilities.rank_zero import rank_zero_warn

# Ordinary training moves the weights' norm by a small factor; a diverging run by orders of magnitude.
GROWTH = 1000.0


class DivergenceWarning(pl.Callback):
    """Warns when the trained weights' norm grows more than :data:`GROWTH` times, or is no longer finite."""

    def __init__(self) -> None:
        self._start: float | None = None
        # What was warned, once the weights blew up.
        self.message: str | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = _norm(pl_module)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.message is not None or not self._start:
            return
        now = _norm(pl_module)
        if math.isfinite(now) and now <= GROWTH * self._start:
            return
        lr = f"{trainer.optimizers[0].param_groups[0]['lr']:g}" if trainer.optimizers else "?"
        self.message = (
            f"training diverged: the weights' norm grew from {self._start:.3g} to {now:.3g} by epoch "
            f"{trainer.current_epoch + 1} (the normalised embedding keeps the loss bounded, so the scores "
            f"look plausible); lower optimizer.lr (now {lr})"
        )
        rank_zero_warn(self.message)


def _norm(module: pl.LightningModule) -> float:
    with torch.no_grad():
        norms = [p.detach().float().norm() for p in module.parameters() if p.requires_grad]
        return float(torch.stack(norms).norm()) if norms else 0.0
