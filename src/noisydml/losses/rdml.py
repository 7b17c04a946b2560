"""RDML: metric learning with the rescaled hinge loss (Al-Obaidi, Zabihzadeh & Hajiabadi 2020).

The rescaled hinge loss is Xu et al. 2017's (Pattern Recognition 63, Eq. 7), which Al-Obaidi et al.
apply to metric-learning constraints:

    l_rhinge(z) = beta_eta * (1 - exp(-eta * [1 - z]_+)),    beta_eta = 1 / (1 - exp(-eta))

For a triplet (a, p, n) the hinge ``[1 - z]_+`` with ``z = d_an - d_ap`` is the triplet hinge
``[d_ap - d_an + margin]_+`` with margin 1, d the squared distance (Al-Obaidi et al. learn a squared
Mahalanobis distance; here it is the squared Euclidean distance of the embeddings). The loss is
bounded by beta_eta, so a triplet made by a flipped label costs at most that much, whatever its
distances: the robustness the paper claims. ``beta_eta`` makes ``l_rhinge = 1`` where the hinge is 1,
and as eta -> 0 the loss tends to the hinge itself. BSPML (Zhang et al. 2023) tunes eta in
{0.5, 1, 2, 3, 4}.

pytorch-metric-learning has no rescaled hinge; this is PML's triplet loss with the hinge rescaled.
Only the paper's abstract and Xu et al.'s definition could be checked here: the constraint set
(triplets, as in the LMNN-style formulation, rather than pairs) is our reading.
"""

from __future__ import annotations

import math

import torch
from pytorch_metric_learning.distances import BaseDistance, LpDistance
from pytorch_metric_learning.losses import TripletMarginLoss
from pytorch_metric_learning.reducers import BaseReducer, MeanReducer


def rescaled_hinge(hinge: torch.Tensor, eta: float) -> torch.Tensor:
    """``beta_eta (1 - exp(-eta h))`` of a hinge value ``h >= 0`` (Xu et al. 2017, Eq. 7)."""
    # -expm1(-x) = 1 - exp(-x) without the cancellation for small x.
    return -torch.expm1(-eta * hinge) / -math.expm1(-eta)


class RescaledHingeTripletLoss(TripletMarginLoss):
    """``beta_eta (1 - exp(-eta [d_ap - d_an + margin]_+))`` per triplet, averaged over the triplets.

    Triplets come from the miner; with none, every valid triplet of the batch (PML's rule). The
    default distance is the squared Euclidean distance on the unit sphere, the default reducer the
    mean over all triplets, zero-loss ones included.
    """

    def __init__(
        self,
        eta: float = 1.0,
        margin: float = 1.0,
        distance: BaseDistance | None = None,
        reducer: BaseReducer | None = None,
        **kwargs,
    ):
        if eta <= 0:
            raise ValueError(f"loss.eta={eta} must be > 0 (BSPML tunes it in {{0.5, 1, 2, 3, 4}})")
        distance = distance or LpDistance(normalize_embeddings=True, p=2, power=2)
        super().__init__(margin=margin, smooth_loss=False, distance=distance, reducer=reducer, **kwargs)
        self.eta = eta
        self.add_to_recordable_attributes(name="eta", is_stat=False)

    def compute_loss(self, embeddings, labels, indices_tuple, ref_emb, ref_labels):
        losses = super().compute_loss(embeddings, labels, indices_tuple, ref_emb, ref_labels)
        if losses["loss"]["reduction_type"] != "already_reduced":
            losses["loss"]["losses"] = rescaled_hinge(losses["loss"]["losses"], self.eta)
        return losses

    def get_default_reducer(self) -> BaseReducer:
        return MeanReducer()
