"""Marginal loss of Le & Odobez 2019 (Eq. 2) with a fixed threshold, averaged over pairs (Eq. 4)."""

from __future__ import annotations

import torch
from pytorch_metric_learning.distances import BaseDistance
from pytorch_metric_learning.losses import BaseMetricLossFunction
from pytorch_metric_learning.reducers import BaseReducer, MeanReducer
from pytorch_metric_learning.utils import common_functions as c_f
from pytorch_metric_learning.utils import loss_and_miner_utils as lmu

from noisydml.utils.checks import NONNEGATIVE_BOUNDARY, NONNEGATIVE_MARGIN, check_value


class MarginalLoss(BaseMetricLossFunction):
    """``[(d_ij - beta) t_ij + alpha]_+`` per pair, t_ij = +1 for a positive pair and -1 for a negative.

    A triplet (a, p, n) from a miner contributes its two pairs, (a, p) and (a, n); a pair tuple
    (a1, p, a2, n) is used as given; with neither, every pair of the batch is used. All the pair
    terms go to the reducer as one vector, so the default ``MeanReducer`` gives the paper's risk,
    the mean over all pairs, and ``AvgNonZeroReducer`` the mean over the pairs inside the margin.

    PML's ``MarginLoss(margin=alpha, beta=beta)`` has the same pair terms but sums them per triplet
    before reducing: with ``MeanReducer`` it returns twice the mean over pairs, and its default
    ``DivisorReducer`` averages over the non-zero pairs only. Neither is Eq. 4.
    """

    def __init__(
        self,
        alpha: float = 0.2,
        beta: float = 1.4,
        distance: BaseDistance | None = None,
        reducer: BaseReducer | None = None,
        **kwargs,
    ):
        check_value(NONNEGATIVE_MARGIN.at("alpha", "alpha=0.2"), alpha)
        check_value(NONNEGATIVE_BOUNDARY.at("beta", "beta=1.4"), beta)
        super().__init__(distance=distance, reducer=reducer, **kwargs)
        self.alpha = alpha
        self.beta = beta
        self.add_to_recordable_attributes(list_of_names=["alpha", "beta"], is_stat=False)

    def compute_loss(self, embeddings, labels, indices_tuple, ref_emb, ref_labels):
        c_f.labels_or_indices_tuple_required(labels, indices_tuple)
        a1, p, a2, n = lmu.convert_to_pairs(indices_tuple, labels, ref_labels)
        if len(a1) + len(a2) == 0:
            return self.zero_losses()
        dist = self.distance(embeddings, ref_emb)
        pos_loss = torch.nn.functional.relu(self.distance.margin(dist[a1, p], self.beta) + self.alpha)
        neg_loss = torch.nn.functional.relu(self.distance.margin(self.beta, dist[a2, n]) + self.alpha)
        return {
            "loss": {
                "losses": torch.cat([pos_loss, neg_loss]),
                # Each pair term is attributed to its anchor, so per-anchor reducers still apply.
                "indices": torch.cat([a1, a2]),
                "reduction_type": "element",
            }
        }

    def get_default_reducer(self) -> BaseReducer:
        return MeanReducer()
