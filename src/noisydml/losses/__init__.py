"""Losses: ``loss(embeddings, labels, indices_tuple) -> scalar``, PML's interface.

Triplet and contrastive losses are PML's, targeted directly from ``conf/loss/``; only the marginal
loss of Le & Odobez 2019 needed a class of its own (see ``MarginalLoss`` for why).
"""

from noisydml.losses.marginal import MarginalLoss

__all__ = ["MarginalLoss"]
