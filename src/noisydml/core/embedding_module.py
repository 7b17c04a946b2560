"""The LightningModule: embed, mine, compute the loss; embed the test split and score it."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytorch_lightning as pl
import torch
from torch import nn

from noisydml.core.embedded import Embedded
from noisydml.core.hooks import HookContext, TrainingHooks, TrainingSet, hooks_of
from noisydml.core.logging_steps import is_logging_step
from noisydml.core.seeding import EPOCH, MINING, STEP, derived_seed, reseed
from noisydml.metrics.evaluator import Evaluator
from noisydml.utils.checks import Rule, check_value
from noisydml.utils.errors import Diverged
from noisydml.utils.unread import Parts

# The learning rate of the loss's own parameters, their group's (null: the optimizer's).
LOSS_LR = Rule("module.loss_lr", float, 0, open_low=True, optional=True, example="module.loss_lr=1e-2")


class EmbeddingModule(pl.LightningModule):
    """Trains any backbone with any pytorch-metric-learning style loss and miner.

    ``miner(embeddings, labels) -> indices_tuple`` (or no miner: the loss uses every tuple) and
    ``loss(embeddings, labels, indices_tuple) -> scalar``. A loss that carries more state implements
    :class:`noisydml.core.hooks.TrainingHooks` and gets a :class:`noisydml.core.hooks.HookContext`, never the
    module itself. The loss's own parameters (a margin's beta, proxies) train in
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
    (Monte Carlo samples of a Bayesian network's weights). ``metrics`` (``conf/metrics/``) scores the
    embedded test split, and the embedded training split when it asks for it as reference; the test
    embeddings stay in ``test_embedded`` for callbacks (``SaveEmbeddings``). ``channels_last`` and
    ``compile`` are GPU throughput options for image backbones.

    Validation scores each of the data module's validation loaders under its stage's prefix (``val/``:
    the validation split held out of the training split; ``test_epoch/``: the test split, when asked)
    and records them in ``validation_history``; the test split is scored under ``test_stage``.
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
        metrics: Evaluator | None = None,
        channels_last: bool = False,
        compile: bool = False,
        query_mask: np.ndarray | None = None,
        seed: int = 0,
    ):
        super().__init__()
        check_value(Rule("module.train_samples", int, 1, example="module.train_samples=1"), train_samples)
        check_value(LOSS_LR, loss_lr)
        self.backbone = backbone
        self.loss = loss
        self.miner = miner
        self.hooks: TrainingHooks = hooks_of(loss)
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.loss_lr = loss_lr
        self.train_samples = train_samples
        self.metrics = metrics or Evaluator()
        self.channels_last = channels_last
        self.compile_backbone = compile
        self._compiled = False
        self.query_mask = query_mask
        self.seed = seed
        # The prefix of the test metrics: "test", or "test_last" when the last epoch is scored beside the
        # selected checkpoint (noisydml.run.selection).
        self.test_stage = "test"
        self.test_metrics: dict[str, float] = {}
        self.test_embedded: Embedded | None = None
        self._outputs: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self._validation_outputs: dict[int, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}
        # Every validation's metrics with its epoch, kept in checkpoints so a resumed run has them all.
        self.validation_history: list[dict[str, float]] = []

    def unread_keys(self, parts: Parts) -> dict[str, str]:
        """The module's keys its backbone and loss leave unused (``noisydml.utils.unread``)."""
        unread = {}
        if self.loss_lr is not None:
            trial = copy.deepcopy(self.loss)
            hooks_of(trial).setup(parts.datamodule.training_set())
            if not any(p.requires_grad for p in trial.parameters()):
                unread["loss_lr"] = (
                    "is the learning rate of the loss's own parameters, but the loss "
                    f"({type(self.loss).__name__}) has none, so nothing reads it; drop {{key}} "
                    f"(optimizer.lr trains the backbone)"
                )
        if self.channels_last and not any(isinstance(m, nn.Conv2d) for m in self.backbone.modules()):
            name = type(getattr(self.backbone, "trunk", self.backbone)).__name__
            unread["channels_last"] = (
                f"lays out a convolution's inputs channels last, but the backbone ({name}) has no 2-d "
                "convolution, so nothing reads it; drop {key}"
            )
        return unread

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
        loss = self._step_loss(x, labels, indices, self.loss, self.miner)
        # Not prog_bar: Lightning would read it back from the GPU after every step
        # (noisydml.callbacks.progress).
        self._log_step("train/loss", loss, len(labels))
        # The check waits for the GPU to finish the loss, and the GPU then waits for the host to launch
        # the backward: last, so nothing else stands between the two.
        if not torch.isfinite(loss):
            raise Diverged(
                f"loss {type(self.loss).__name__} is {loss.item()} at epoch {self.current_epoch + 1}, "
                f"step {self.global_step}; stopping (lower optimizer.lr or check the data)"
            )
        return loss

    def dry_run_step(self, batch, training_set: TrainingSet) -> torch.Tensor:
        """The loss one training step would compute on ``batch``, changing nothing: the same hook sequence
        as :meth:`training_step` (``setup``, ``begin_batch``, miner, loss, regularizer) on copies of the
        loss and miner set up on ``training_set``, in eval mode, without gradient, the random generators
        restored. A loss or miner with state (PRISM's and MCL's memory of past embeddings) thus starts
        training as built, not holding this batch."""
        loss, miner = copy.deepcopy(self.loss), copy.deepcopy(self.miner)
        hooks_of(loss).setup(training_set)
        x, labels, indices = batch
        with self.unchanged():
            return self._step_loss(x, labels, indices, loss, miner)

    @contextmanager
    def unchanged(self) -> Iterator[None]:
        """Eval mode without gradient, the random generators and the training mode restored after: a
        computation that leaves training to draw and learn what it would have (preflight's checks)."""
        training = self.training
        with torch.random.fork_rng(), torch.no_grad():
            self.eval()
            try:
                yield
            finally:
                self.train(training)

    def _step_loss(
        self, x: torch.Tensor, labels: torch.Tensor, indices: torch.Tensor, loss: nn.Module, miner
    ) -> torch.Tensor:
        """The method's hook sequence for one batch: ``begin_batch``, then for each forward pass the miner
        and the loss, averaged, then the regularizer."""
        hooks = hooks_of(loss)
        hooks.begin_batch(indices)
        losses = [self._batch_loss(x, labels, sample, loss, miner) for sample in range(self.train_samples)]
        value = sum(losses) / self.train_samples
        regularizer = hooks.regularizer(self.hook_context())
        if regularizer is not None:
            self._log_step("train/regularizer", regularizer, len(labels))
            value = value + regularizer
        return value

    def _batch_loss(
        self, x: torch.Tensor, labels: torch.Tensor, sample: int, loss: nn.Module, miner
    ) -> torch.Tensor:
        embeddings = self._gather(self(x), sync_grads=True)
        tuples = None
        if miner is not None:
            devices = [embeddings.device] if embeddings.is_cuda else []
            with torch.random.fork_rng(devices=devices):
                reseed(derived_seed(self.seed, MINING, self.global_step, sample))
                tuples = miner(embeddings, labels)
        if tuples is not None:
            # Made on the device: Lightning would copy a Python number there, a copy that waits for the GPU.
            count = torch.full((), len(tuples[0]), dtype=torch.float32, device=embeddings.device)
            self._log_step("train/tuples", count, len(labels))
        return loss(embeddings, labels, tuples)

    def _log_step(self, name: str, value: torch.Tensor, batch_size: int) -> None:
        """``self.log`` of a value of this training step, at the steps where it is read: those the loggers
        write (``trainer.log_every_n_steps``) and the last of an epoch or of training (the epoch line,
        epoch-end callbacks). Lightning keeps only the latest value of a step-wise metric, so the steps
        between lose nothing, and each call costs host time (scripts/bench/README.md). Nothing is logged
        outside a Trainer (:meth:`dry_run_step`)."""
        if self._trainer is None:
            return
        trainer = self.trainer
        last = trainer.is_last_batch or 0 < trainer.max_steps <= trainer.global_step + 1
        if is_logging_step(trainer) or last or trainer.fast_dev_run:
            self.log(name, value, batch_size=batch_size)

    def _gather(self, tensor: torch.Tensor, sync_grads: bool = False) -> torch.Tensor:
        """The tensor concatenated over ranks in rank order (itself on one process or outside a Trainer)."""
        if self._trainer is None or self.trainer.world_size == 1:
            return tensor
        return self.all_gather(tensor, sync_grads=sync_grads).flatten(0, 1)

    def hook_context(self) -> HookContext:
        """What the method's hooks may use now (see :mod:`noisydml.core.hooks`)."""
        return HookContext(
            epoch=self.current_epoch,
            device=self.device,
            backbone=self.backbone,
            embed=self,
            embed_training_set=self.embed_training_set,
        )

    def on_train_epoch_end(self) -> None:
        logs = self.hooks.on_train_epoch_end(self.hook_context())
        if logs:
            self.log_dict({f"train/{name}": value for name, value in logs.items()})

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._validation_outputs.setdefault(dataloader_idx, []).append(self._embed(batch))

    def test_step(self, batch, batch_idx: int) -> None:
        self._outputs.append(self._embed(batch))

    def _embed(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, labels, indices = batch
        return self(x).detach(), labels, indices

    def on_validation_epoch_end(self) -> None:
        # One loader per stage: the validation split ("val") and, when asked, the test split ("test_epoch").
        stages = self.trainer.datamodule.validation_stages
        record = {"epoch": self.current_epoch}
        for index, outputs in sorted(self._validation_outputs.items()):
            # The validation split comes from the training split: every item is a query against the others.
            query_mask = self.query_mask if stages[index] == "test_epoch" else None
            record.update(self._score(stages[index], outputs, query_mask))
        self._validation_outputs.clear()
        if not self.trainer.sanity_checking:
            self.validation_history.append(record)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["validation_history"] = self.validation_history

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.validation_history = list(checkpoint.get("validation_history", []))

    def on_test_epoch_end(self) -> None:
        self.test_metrics = self._score(self.test_stage, self._outputs, self.query_mask)
        self._outputs.clear()
        train = self.trainer.datamodule.scored_train_dataloader()
        if train is not None:
            # test_train/ beside test/, test_last_train/ beside test_last/.
            stage = f"{self.test_stage}_train"
            self.test_metrics.update(self._score(stage, self._embed_loader(train)))

    def _score(self, stage: str, outputs, query_mask: np.ndarray | None = None) -> dict[str, float]:
        embedded = self._in_index_order(outputs)
        reference = None
        if self.metrics.needs_reference:
            train = self.embed_training_set()
            reference = (train.embeddings, train.labels)
        metrics = self.metrics(
            embedded.embeddings,
            embedded.labels,
            query_mask=query_mask,
            seed=self.seed,
            reference=reference,
        )
        metrics = {f"{stage}/{name}": value for name, value in metrics.items()}
        self.log_dict(metrics, rank_zero_only=True)
        if stage == "test":
            self.test_embedded = embedded
        return metrics

    def embed_training_set(self) -> Embedded:
        """Every sample trained on (the test transform, the observed labels), in index order, the same
        on every rank: each rank embeds a share of the reference loader and the shares are gathered."""
        return self._in_index_order(self._embed_loader(self.trainer.datamodule.reference_dataloader()))

    def _embed_loader(self, loader) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Every batch of ``loader`` embedded in eval mode, this rank's share."""
        was_training = self.training
        self.eval()
        with torch.no_grad():
            outputs = [self._embed(self.transfer_batch_to_device(batch, self.device, 0)) for batch in loader]
        self.train(was_training)
        return outputs

    def _in_index_order(self, outputs: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> Embedded:
        """All ranks' embedded batches in data-set order, the distributed sampler's padding removed."""
        embeddings, labels, indices = (self._gather(torch.cat(parts)) for parts in zip(*outputs, strict=True))
        indices, first = np.unique(indices.cpu().numpy(), return_index=True)
        return Embedded(embeddings[first].float().cpu().numpy(), labels[first].cpu().numpy(), indices)

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
