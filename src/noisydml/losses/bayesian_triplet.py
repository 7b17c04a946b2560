"""BDML's variational objective: triplet negative log-likelihood (Eq. 3) plus KL(q || prior) (Eq. 5)."""

from __future__ import annotations

import torch
from pytorch_metric_learning.distances import BaseDistance, LpDistance
from pytorch_metric_learning.losses import TripletMarginLoss
from pytorch_metric_learning.reducers import BaseReducer, SumReducer

from noisydml.core.hooks import Bayesian, HookContext, TrainingHooks, TrainingSet

# Eq. 3: p(z | theta) = C exp(-2 max(1 + d2_ap - d2_an, 0)). The 2 (with the margin 1) is Polson &
# Scott (2011)'s SVM pseudo-likelihood, exp(-2 max(1 - u, 0)) = int_0^inf (2 pi l)^-1/2
# exp(-(1 + l - u)^2 / (2 l)) dl with u = d2_an - d2_ap (checked by quadrature), on which BLMNN's
# (Wang & Tan 2018) inference builds; it sets how much one violated triplet weighs against the KL.
LIKELIHOOD_SCALE = 2.0


class BayesianTripletLoss(TripletMarginLoss, TrainingHooks):
    """``-log p(z | theta) = 2 max(1 + d2_ap - d2_an, 0) - log C`` per triplet, plus the KL of the
    Bayesian backbone (:class:`noisydml.core.hooks.Bayesian`) once per step.

    Eq. 5 minimises ``KL(q || p) - E_q log p(Z | theta)`` with ``log p(Z | theta)`` the SUM over the
    triplets (Eq. 3 is a product). On mini-batches this is Blundell et al. (2015)'s Eq. 8-9 with
    ``pi_i = 1/M``: each step costs ``KL / M + sum over the batch's triplets of 2 h(.)``, M the
    number of batches per epoch, so one epoch counts the KL once and every triplet once. Hence the
    default ``SumReducer``; the constant ``-log C`` moves no gradient and is left out.

    Which triplets form Z the paper does not say beyond "establish the triplet training set"
    (Algorithm 1) of independent triplets (i, j, l) with y_i = y_j != y_l, with no mining, in batches of
    1024 (BDML, Sec. 4.1). ``conf/method/bdml/`` draws that many uniformly from the valid triplets of
    each P x K batch (``miner=random_triplets``); ``miner=all`` takes every one of them (with no miner
    PML does the same). The sum makes their number set the weight of the likelihood against the KL.

    ``E_q`` is estimated by Monte Carlo: the module averages this loss over ``module.train_samples``
    forward passes, each with freshly sampled weights; the KL is closed-form (Eq. 6 estimates it by
    sampling too; the closed form is its exact expectation) and is added by :meth:`regularizer`,
    once per step whatever the number of samples.
    """

    def __init__(
        self,
        margin: float = 1.0,
        distance: BaseDistance | None = None,
        reducer: BaseReducer | None = None,
        **kwargs,
    ):
        # Eq. 2: squared Euclidean distance of the raw embeddings.
        distance = distance or LpDistance(normalize_embeddings=False, p=2, power=2)
        super().__init__(margin=margin, distance=distance, reducer=reducer, **kwargs)
        self.batches_per_epoch: int | None = None

    def get_default_reducer(self) -> BaseReducer:
        return SumReducer()

    def compute_loss(self, embeddings, labels, indices_tuple, ref_emb, ref_labels):
        losses = super().compute_loss(embeddings, labels, indices_tuple, ref_emb, ref_labels)
        losses["loss"]["losses"] = LIKELIHOOD_SCALE * losses["loss"]["losses"]
        return losses

    def setup(self, train_set: TrainingSet) -> None:
        self.batches_per_epoch = train_set.batches_per_epoch

    def regularizer(self, context: HookContext) -> torch.Tensor:
        """``KL(q || p) / M`` of the backbone's weights."""
        if self.batches_per_epoch is None:
            raise RuntimeError(
                "BayesianTripletLoss.regularizer called before setup(): the KL is scaled by the "
                "number of batches per epoch, which setup(TrainingSet) provides"
            )
        if not isinstance(context.backbone, Bayesian):
            raise ValueError(
                f"loss=bayesian_triplet needs a Bayesian backbone, but {type(context.backbone).__name__} "
                "has no posterior to regularise (no kl_divergence()): use backbone=bayesian_mlp (BDML) or "
                "backbone=bayesian_linear (BLMNN), or loss=triplet for the point-estimate DML baseline"
            )
        return context.backbone.kl_divergence() / self.batches_per_epoch
