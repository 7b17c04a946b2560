"""PML's pair losses with the formula's value when a batch yields only one pair of each kind.

``pytorch_metric_learning.losses.GenericPairLoss.compute_loss`` returns a zero loss whenever every list
of the pair tuple ``(a1, p, a2, n)`` holds at most one entry: one positive and one negative pair (or
one of either) count as "nothing to learn from", although the multi-similarity, contrastive and SNR
formulas all have a non-zero value there (multi-similarity on one positive pair at cosine .5 and one
negative at .5: ``log(1 + e^1) / 2 + log(1 + e^-25) / 50``, .657 before the mean over anchors). The
multi-similarity miner leaves such tuples in tight batches (about one in eight 8 x 4 digits batches).
:class:`EveryPairTuple` keeps PML's loss and changes only that test: only an empty tuple gives zero.
It counts the batches PML would have zeroed and logs their number per epoch as
``train/lone_pair_batches``.
"""

from __future__ import annotations

from pytorch_metric_learning import losses
from pytorch_metric_learning.utils import common_functions as c_f
from pytorch_metric_learning.utils import loss_and_miner_utils as lmu

from noisydml.core.hooks import HookContext, TrainingHooks


class EveryPairTuple(TrainingHooks):
    """Put before a ``GenericPairLoss`` subclass: its formula on every non-empty pair tuple."""

    lone_pair_batches: int = 0

    def compute_loss(self, embeddings, labels, indices_tuple, ref_emb, ref_labels):
        c_f.labels_or_indices_tuple_required(labels, indices_tuple)
        indices_tuple = lmu.convert_to_pairs(indices_tuple, labels, ref_labels)
        if all(len(x) == 0 for x in indices_tuple):
            return self.zero_losses()
        if all(len(x) <= 1 for x in indices_tuple):
            self.lone_pair_batches += 1
        mat = self.distance(embeddings, ref_emb)
        return self.loss_method(mat, indices_tuple)

    def on_train_epoch_end(self, context: HookContext) -> dict[str, float]:
        count, self.lone_pair_batches = self.lone_pair_batches, 0
        return {"lone_pair_batches": float(count)}


class MultiSimilarityLoss(EveryPairTuple, losses.MultiSimilarityLoss):
    """PML's multi-similarity loss (Wang et al. 2019), its formula on a tuple of one pair of each kind."""


class ContrastiveLoss(EveryPairTuple, losses.ContrastiveLoss):
    """PML's contrastive loss, its formula on a tuple of one pair of each kind."""


class SignalToNoiseRatioContrastiveLoss(EveryPairTuple, losses.SignalToNoiseRatioContrastiveLoss):
    """PML's SNR contrastive loss (Yuan et al. 2019), its formula on a tuple of one pair of each kind."""
