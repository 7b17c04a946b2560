"""Trimmed loss: a loss applied only to the lowest-loss fraction of a batch's tuples."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from pytorch_metric_learning.losses import BaseMetricLossFunction
from pytorch_metric_learning.utils import common_functions as c_f

from noisydml.core.hooks import HookContext, TrainingHooks, TrainingSet, hooks_of

IndicesTuple = tuple[torch.Tensor, ...]


class TrimmedLoss(torch.nn.Module, TrainingHooks):
    """Iterative trimmed loss (Shen & Sanghavi 2019), as Levi et al. 2021 compare it (Sec. 5.2.5, Fig. 4).

    Each batch, the wrapped ``loss`` scores every tuple it would use (the miner's, or all of them
    without a miner); only the ``ceil(keep_fraction * n)`` tuples with the lowest current loss are
    kept, and ``loss`` is computed again on those alone, with its own reduction: with a mean reducer,
    ``1/k * sum`` of the k smallest tuple losses, Shen & Sanghavi's trimmed objective on one batch.
    Levi et al.'s "trimming percentage" is ``1 - keep_fraction``. Ties go to the earlier tuple.

    A tuple is what ``loss`` gives one loss value: a triplet (triplet loss, margin loss) or a pair
    (contrastive loss; positive and negative pairs are ranked together). A loss that only has
    per-anchor values (multi-similarity's log-sum-exp, the marginal loss's anchor-indexed terms) has
    no per-tuple loss to trim and is refused with an error at its first batch.

    The wrapped loss's parameters train as the loss's own (a margin's beta), and its
    :class:`TrainingHooks`, if any, are forwarded.
    """

    def __init__(self, loss: BaseMetricLossFunction, keep_fraction: float):
        super().__init__()
        if not 0 < keep_fraction <= 1:
            raise ValueError(f"loss.keep_fraction={keep_fraction} is outside (0, 1]")
        self.loss = loss
        self.keep_fraction = keep_fraction

    def forward(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor | None = None,
        indices_tuple: IndicesTuple | None = None,
        ref_emb: torch.Tensor | None = None,
        ref_labels: torch.Tensor | None = None,
    ) -> torch.Tensor:
        kept = self.lowest_loss_tuples(embeddings, labels, indices_tuple, ref_emb, ref_labels)
        return self.loss(embeddings, labels, kept, ref_emb, ref_labels)

    def lowest_loss_tuples(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor | None,
        indices_tuple: IndicesTuple | None,
        ref_emb: torch.Tensor | None = None,
        ref_labels: torch.Tensor | None = None,
    ) -> IndicesTuple | None:
        """The kept tuples, in their original order: triplets, or pairs ``(a1, p, a2, n)``."""
        if labels is not None:
            labels = c_f.to_device(labels, embeddings)
        ref_emb, ref_labels = c_f.set_ref_emb(embeddings, labels, ref_emb, ref_labels)
        with torch.no_grad():
            terms = self.loss.compute_loss(embeddings, labels, indices_tuple, ref_emb, ref_labels)
        kinds = {name: term["reduction_type"] for name, term in terms.items()}
        triplet_terms = [term for term in terms.values() if term["reduction_type"] == "triplet"]
        pos = [term for term in terms.values() if term["reduction_type"] == "pos_pair"]
        neg = [term for term in terms.values() if term["reduction_type"] == "neg_pair"]
        if len(triplet_terms) == 1 and not (pos or neg):
            (term,) = triplet_terms
            return self._keep(term["losses"], term["indices"])
        if not triplet_terms and len(pos) <= 1 and len(neg) <= 1 and (pos or neg):
            pos_a, pos_p, pos_losses = _pairs(pos, embeddings)
            neg_a, neg_n, neg_losses = _pairs(neg, embeddings)
            is_pos = torch.cat(
                [torch.ones_like(pos_a, dtype=torch.bool), torch.zeros_like(neg_a, dtype=torch.bool)]
            )
            anchors, others, is_pos = self._keep(
                torch.cat([pos_losses, neg_losses]),
                (torch.cat([pos_a, neg_a]), torch.cat([pos_p, neg_n]), is_pos),
            )
            return anchors[is_pos], others[is_pos], anchors[~is_pos], others[~is_pos]
        if all(kind == "already_reduced" for kind in kinds.values()):
            # No tuple at all: the loss is zero whatever is kept.
            return indices_tuple
        raise ValueError(
            f"loss.loss={type(self.loss).__name__} gives sub-losses {kinds}, not one loss per triplet "
            "or per pair, so there is no per-tuple loss to trim; wrap a triplet, margin or "
            "contrastive loss instead"
        )

    def kept_count(self, num_tuples: int) -> int:
        # The tolerance keeps 0.7 * 10 (7.000000000000001 in floating point) at 7.
        return min(num_tuples, math.ceil(self.keep_fraction * num_tuples - 1e-9))

    def _keep(self, losses: torch.Tensor, indices: IndicesTuple) -> IndicesTuple:
        order = torch.sort(losses.detach(), stable=True).indices[: self.kept_count(len(losses))]
        kept = order.sort().values
        return tuple(index[kept] for index in indices)

    def _hooks(self) -> TrainingHooks:
        return hooks_of(self.loss)

    def setup(self, train_set: TrainingSet) -> None:
        self._hooks().setup(train_set)

    def begin_batch(self, indices: torch.Tensor) -> None:
        self._hooks().begin_batch(indices)

    def regularizer(self, context: HookContext) -> torch.Tensor | None:
        return self._hooks().regularizer(context)

    def on_train_epoch_end(self, context: HookContext) -> dict[str, float]:
        return self._hooks().on_train_epoch_end(context)

    def save(self, run_dir: Path) -> None:
        self._hooks().save(run_dir)


def _pairs(terms: list[dict], embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Anchors, partners and losses of a pair sub-loss; empty when there is none."""
    if terms and len(terms[0]["indices"][0]) > 0:
        (anchors, others), losses = terms[0]["indices"], terms[0]["losses"]
        return anchors, others, losses
    # PML gives a pair sub-loss with no pairs the loss 0, a plain number.
    empty = torch.empty(0, dtype=torch.long, device=embeddings.device)
    return empty, empty, embeddings.new_empty(0)
