"""Wu et al. 2017's margin loss with one learnable beta per training class, sized from the data."""

from __future__ import annotations

import torch
from pytorch_metric_learning.losses import MarginLoss

from noisydml.core.hooks import TrainingHooks, TrainingSet
from noisydml.utils.checks import BadValue


class ClassBetaMarginLoss(MarginLoss, TrainingHooks):
    """PML's ``MarginLoss`` with a learnable beta per training class (Wu et al. 2017, Sec. 4).

    Per pair, ``(alpha + y_ij (D_ij - beta_c(i)))_+``; Levi et al. 2021 write it as L_mar (Sec. 3,
    ``g(z1, z2) = (z1 - z2 + alpha)_+``). PML's loss is Wu et al.'s as written and as in their reference
    code: beta indexed by the anchor's class, a ``nu * beta`` regulariser, and the sum of the pair terms
    divided by the number of non-zero ones (``DivisorReducer``), on the unsquared Euclidean distance
    between normalised embeddings. Levi's Sec. 3 notation squares D, but alpha 0.2 and beta 1.2 are
    Wu's values for the unsquared distance, which the Roth et al. framework Levi ran also uses.

    What PML cannot do alone is size the per-class beta: ``num_classes`` is only known once the data
    module has read the data and drawn the noise, so :meth:`setup` makes it, before the optimizer is
    built (and before a checkpoint is restored). Beta is a loss parameter, so it trains in the loss's
    own optimizer group at ``module.loss_lr``. ``per_class_beta=False`` keeps PML's single global beta
    (Wu et al.'s beta^(0) alone).
    """

    def __init__(
        self,
        margin: float = 0.2,
        nu: float = 0.0,
        beta: float = 1.2,
        learn_beta: bool = True,
        per_class_beta: bool = True,
        **kwargs,
    ):
        if per_class_beta and not learn_beta:
            raise BadValue(
                "per_class_beta",
                "=true sizes a beta for each class to learn, but learn_beta=false holds each class's at its "
                "initial value, as one global beta does; give per_class_beta=false with learn_beta=false",
            )
        super().__init__(margin=margin, nu=nu, beta=beta, learn_beta=learn_beta, **kwargs)
        self.initial_beta = float(beta)
        self.per_class_beta = per_class_beta

    def setup(self, train_set: TrainingSet) -> None:
        if self.per_class_beta:
            # Observed training labels are 0..C-1 (the data module remaps them), so they index beta.
            # Not PML's initialize_beta: it first assigns a plain tensor, which a Parameter refuses.
            beta = torch.full((train_set.num_classes,), self.initial_beta)
            self.beta = torch.nn.Parameter(beta) if self.learn_beta else beta
