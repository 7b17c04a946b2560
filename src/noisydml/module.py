"""The LightningModule: embed, mine, compute the loss; embed the test split and score it."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np
import pytorch_lightning as pl
import torch
from torch import nn
from torch.utils.data import DataLoader

from noisydml.atomic import atomic_write
from noisydml.hooks import NO_HOOKS, TrainingHooks
from noisydml.metrics import evaluate
from noisydml.metrics.classification import knn_accuracy, ncm_accuracy
from noisydml.rundir import RunDir
from noisydml.seeding import EPOCH, MINING, STEP, derived_seed, reseed


class EmbeddingModule(pl.LightningModule):
    """Trains any backbone with any pytorch-metric-learning style loss and miner.

    ``miner(embeddings, labels) -> indices_tuple`` (or no miner: the loss uses every tuple) and
    ``loss(embeddings, labels, indices_tuple) -> scalar``. A loss that carries more state implements
    :class:`noisydml.hooks.TrainingHooks`. The loss's own parameters (a margin's beta, proxies) train in
    their own parameter group, at ``loss_lr`` when given.

    Under DDP the loss sees the global batch: embeddings are gathered from every rank (gradients flow
    back to the rank that computed them), so mining and the loss match one process with the
    concatenated batch. Evaluation gathers the test embeddings once and scores them on every rank
    (the metrics are deterministic), logging from rank 0.

    Randomness is a function of the run seed and the position in training: torch's generator is
    reseeded at every epoch and step from (seed, epoch or step, rank), and miners draw from (seed, step,
    pass) on every rank alike. A run resumed from a checkpoint therefore continues exactly as an
    uninterrupted one, and DDP ranks mine the global batch identically. (Random augmentation inside
    data-loader worker processes is the exception: workers restart their streams on resume.)

    ``train_samples`` > 1 averages the loss over several forward passes of a stochastic backbone
    (Monte Carlo samples of a Bayesian network's weights). ``ncm_accuracy`` and ``knn_accuracy_k``
    add the papers' classification metrics, which embed the training split as reference.
    ``save_embeddings`` writes the test embeddings to the run directory for the report's figures.
    ``channels_last`` and ``compile`` are GPU throughput options for image backbones.
    """

    def __init__(
        self,
        backbone: nn.Module,
        loss: nn.Module,
        optimizer: Callable[..., torch.optim.Optimizer],
        miner: nn.Module | None = None,
        scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None = None,
        loss_lr: float | None = None,
        train_samples: int = 1,
        recall_ks: Sequence[int] = (1, 2, 4, 8),
        nmi: bool = True,
        nmi_plus_factor: int | None = None,
        map_at_r: bool = True,
        map_full: bool = False,
        ncm_accuracy: bool = False,
        knn_accuracy_k: int | None = None,
        save_embeddings: bool = False,
        channels_last: bool = False,
        compile: bool = False,
        query_mask: np.ndarray | None = None,
        seed: int = 0,
    ):
        super().__init__()
        if train_samples < 1:
            raise ValueError(f"module.train_samples={train_samples} must be >= 1")
        self.backbone = backbone
        self.loss = loss
        self.miner = miner
        self.hooks: TrainingHooks = loss if isinstance(loss, TrainingHooks) else NO_HOOKS
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.loss_lr = loss_lr
        self.train_samples = train_samples
        self.eval_options = dict(
            recall_ks=tuple(recall_ks),
            nmi=nmi,
            nmi_plus_factor=nmi_plus_factor,
            map_at_r=map_at_r,
            map_full=map_full,
        )
        self.ncm_accuracy = ncm_accuracy
        self.knn_accuracy_k = knn_accuracy_k
        self.save_embeddings = save_embeddings
        self.channels_last = channels_last
        self.compile_backbone = compile
        self._compiled = False
        self.query_mask = query_mask
        self.seed = seed
        self.test_metrics: dict[str, float] = {}
        self._outputs: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        return self.backbone(x)

    def configure_model(self) -> None:
        # Once, on the device: NHWC convolutions (faster under bf16 on tensor cores) and torch.compile in
        # place, so the state dict keeps its keys and checkpoints load either way.
        if self.channels_last:
            self.backbone.to(memory_format=torch.channels_last)
        if self.compile_backbone and not self._compiled:
            self.backbone.compile()
            self._compiled = True

    def setup(self, stage: str) -> None:
        # Before a checkpoint is restored, so per-sample state is sized when its values are loaded.
        if stage == "fit":
            self.hooks.setup(self.trainer.datamodule.training_set())

    def on_train_epoch_start(self) -> None:
        # Before the data loader's iterator is created: its worker seeds come from this generator.
        reseed(derived_seed(self.seed, EPOCH, self.current_epoch, self.global_rank))

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        reseed(derived_seed(self.seed, STEP, self.global_step, self.global_rank))

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        x, labels, indices = batch
        labels, indices = self._gather(labels), self._gather(indices)
        self.hooks.begin_batch(indices)
        losses = [self._batch_loss(x, labels, sample) for sample in range(self.train_samples)]
        loss = sum(losses) / self.train_samples
        regularizer = self.hooks.regularizer(self)
        if regularizer is not None:
            self.log("train/regularizer", regularizer, batch_size=len(labels))
            loss = loss + regularizer
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"loss {type(self.loss).__name__} is {loss.item()} at epoch {self.current_epoch}, "
                f"step {self.global_step}; stopping (lower optimizer.lr or check the data)"
            )
        self.log("train/loss", loss, prog_bar=True, batch_size=len(labels))
        return loss

    def _batch_loss(self, x: torch.Tensor, labels: torch.Tensor, sample: int) -> torch.Tensor:
        embeddings = self._gather(self(x), sync_grads=True)
        tuples = None
        if self.miner is not None:
            devices = [embeddings.device] if embeddings.is_cuda else []
            with torch.random.fork_rng(devices=devices):
                reseed(derived_seed(self.seed, MINING, self.global_step, sample))
                tuples = self.miner(embeddings, labels)
        if tuples is not None:
            self.log("train/tuples", float(len(tuples[0])), batch_size=len(labels))
        return self.loss(embeddings, labels, tuples)

    def _gather(self, tensor: torch.Tensor, sync_grads: bool = False) -> torch.Tensor:
        """The tensor concatenated over ranks in rank order (itself on one process)."""
        if self.trainer.world_size == 1:
            return tensor
        return self.all_gather(tensor, sync_grads=sync_grads).flatten(0, 1)

    def on_train_epoch_end(self) -> None:
        logs = self.hooks.on_train_epoch_end(self)
        if logs:
            self.log_dict({f"train/{name}": value for name, value in logs.items()})

    def validation_step(self, batch, batch_idx: int) -> None:
        self._outputs.append(self._embed(batch))

    def test_step(self, batch, batch_idx: int) -> None:
        self._outputs.append(self._embed(batch))

    def _embed(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, labels, indices = batch
        return self(x).detach(), labels, indices

    def on_validation_epoch_end(self) -> None:
        self._score("val")

    def on_test_epoch_end(self) -> None:
        self.test_metrics = self._score("test")

    def _score(self, stage: str) -> dict[str, float]:
        embeddings, labels, indices = self._collect(self._outputs)
        self._outputs.clear()
        if stage == "test" and self.save_embeddings and self.global_rank == 0:
            self._write_embeddings(embeddings, labels, indices)
        metrics = evaluate(
            embeddings, labels, query_mask=self.query_mask, seed=self.seed, **self.eval_options
        )
        if self.ncm_accuracy or self.knn_accuracy_k:
            metrics.update(self._classification(embeddings, labels))
        metrics = {f"{stage}/{name}": value for name, value in metrics.items()}
        self.log_dict(metrics, rank_zero_only=True)
        return metrics

    def _write_embeddings(self, embeddings: np.ndarray, labels: np.ndarray, indices: np.ndarray) -> None:
        """``embeddings.npz`` (embeddings, labels, and the image files where the test set has them):
        the report draws them (Levi et al. Fig. 2) and a retrieval grid."""
        arrays = {"embeddings": embeddings, "labels": labels}
        paths = getattr(self.trainer.datamodule.splits.test, "paths", None)
        if paths is not None:
            arrays["paths"] = np.asarray([os.path.abspath(paths[i]) for i in indices])
        with atomic_write(RunDir(self.trainer.default_root_dir).embeddings, "wb") as f:
            np.savez(f, **arrays)

    def _collect(self, outputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All ranks' embeddings in data-set order, the distributed sampler's padding removed."""
        embeddings, labels, indices = (self._gather(torch.cat(parts)) for parts in zip(*outputs, strict=True))
        indices, first = np.unique(indices.cpu().numpy(), return_index=True)
        return embeddings[first].float().cpu().numpy(), labels[first].cpu().numpy(), indices

    def _classification(self, embeddings: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        loader: DataLoader = self.trainer.datamodule.reference_dataloader()
        with torch.no_grad():
            outputs = [self._embed(self.transfer_batch_to_device(batch, self.device, 0)) for batch in loader]
        reference, reference_labels, _ = self._collect(outputs)
        metrics = {}
        if self.ncm_accuracy:
            metrics["ncm_accuracy"] = ncm_accuracy(embeddings, labels, reference, reference_labels)
        if self.knn_accuracy_k:
            metrics[f"knn_accuracy@{self.knn_accuracy_k}"] = knn_accuracy(
                embeddings, labels, reference, reference_labels, k=self.knn_accuracy_k
            )
        return metrics

    def has_parameters_to_train(self) -> bool:
        """Whether the backbone or the loss has a trainable parameter (backbone=identity has none)."""
        return any(p.requires_grad for p in (*self.backbone.parameters(), *self.loss.parameters()))

    def configure_optimizers(self):
        groups = [{"params": [p for p in self.backbone.parameters() if p.requires_grad]}]
        loss_params = [p for p in self.loss.parameters() if p.requires_grad]
        if loss_params:
            groups.append({"params": loss_params, **({"lr": self.loss_lr} if self.loss_lr else {})})
        optimizer = self.optimizer_factory(groups)
        if self.scheduler_factory is None:
            return optimizer
        return {"optimizer": optimizer, "lr_scheduler": self.scheduler_factory(optimizer)}
