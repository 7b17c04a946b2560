"""The LightningModule: embed, mine, compute the loss; embed the test split and score it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytorch_lightning as pl
import torch
from torch import nn

from noisydml.metrics import evaluate


class EmbeddingModule(pl.LightningModule):
    """Trains any backbone with any pytorch-metric-learning style loss and miner.

    ``miner(embeddings, labels) -> indices_tuple`` (or ``None`` to let the loss use every tuple) and
    ``loss(embeddings, labels, indices_tuple) -> scalar``. A loss with learnable parameters (a margin's
    beta, proxies) gets them trained in their own parameter group, at ``loss_lr`` when given.
    """

    def __init__(
        self,
        backbone: nn.Module,
        loss: nn.Module,
        optimizer: Callable[..., torch.optim.Optimizer],
        miner: nn.Module | None = None,
        scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None = None,
        loss_lr: float | None = None,
        recall_ks: Sequence[int] = (1, 2, 4, 8),
        nmi: bool = True,
        nmi_plus_factor: int | None = None,
        map_at_r: bool = True,
        query_mask: np.ndarray | None = None,
        eval_seed: int = 0,
    ):
        super().__init__()
        self.backbone = backbone
        self.loss = loss
        self.miner = miner
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.loss_lr = loss_lr
        self.eval_options = dict(
            recall_ks=tuple(recall_ks), nmi=nmi, nmi_plus_factor=nmi_plus_factor, map_at_r=map_at_r
        )
        self.query_mask = query_mask
        self.eval_seed = eval_seed
        self.test_metrics: dict[str, float] = {}
        self._outputs: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        x, labels, _ = batch
        embeddings = self.backbone(x)
        tuples = self.miner(embeddings, labels) if self.miner is not None else None
        loss = self.loss(embeddings, labels, tuples)
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"loss {type(self.loss).__name__} is {loss.item()} at epoch {self.current_epoch}, "
                f"step {self.global_step}; stopping (lower optimizer.lr or check the data)"
            )
        self.log("train/loss", loss, prog_bar=True, batch_size=len(labels))
        if tuples is not None:
            self.log("train/tuples", float(len(tuples[0])), batch_size=len(labels))
        return loss

    def validation_step(self, batch, batch_idx: int) -> None:
        self._embed(batch)

    def test_step(self, batch, batch_idx: int) -> None:
        self._embed(batch)

    def _embed(self, batch) -> None:
        x, labels, indices = batch
        self._outputs.append((self.backbone(x).detach(), labels, indices))

    def on_validation_epoch_end(self) -> None:
        self._score("val")

    def on_test_epoch_end(self) -> None:
        self.test_metrics = self._score("test")

    def _score(self, stage: str) -> dict[str, float]:
        embeddings, labels, indices = (torch.cat(parts) for parts in zip(*self._outputs, strict=True))
        self._outputs.clear()
        order = torch.argsort(indices)
        metrics = evaluate(
            embeddings[order],
            labels[order].cpu().numpy(),
            query_mask=self.query_mask,
            seed=self.eval_seed,
            **self.eval_options,
        )
        metrics = {f"{stage}/{name}": value for name, value in metrics.items()}
        self.log_dict(metrics)
        return metrics

    def configure_optimizers(self):
        groups = [{"params": [p for p in self.backbone.parameters() if p.requires_grad]}]
        loss_params = [p for p in self.loss.parameters() if p.requires_grad]
        if loss_params:
            groups.append({"params": loss_params, **({"lr": self.loss_lr} if self.loss_lr else {})})
        optimizer = self.optimizer_factory(groups)
        if self.scheduler_factory is None:
            return optimizer
        return {"optimizer": optimizer, "lr_scheduler": self.scheduler_factory(optimizer)}
