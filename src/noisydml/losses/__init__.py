"""Losses: ``loss(embeddings, labels, indices_tuple) -> scalar``, PML's interface.

Triplet and contrastive losses are PML's, targeted directly from ``conf/loss/``; only the marginal
loss of Le & Odobez 2019 needed a class of its own (see ``MarginalLoss`` for why). The adapted triplet
loss of Yu et al. 2018 adds a distribution-matching term to PML's triplet loss. Wu et al.'s margin loss
is PML's, sized per class by ``ClassBetaMarginLoss``; ``TrimmedLoss`` wraps any per-tuple loss.
PML's multi-similarity, contrastive and SNR losses are subclassed only so that a batch of one positive
and one negative pair gets the formula's value instead of PML's zero (``noisydml.losses.pair``).
BSPML (Zhang et al. 2023) is ``BSPMLLoss``; of its baselines, RDML's rescaled hinge is not in PML
(``RescaledHingeTripletLoss``) and PML's Proxy-Anchor needs its proxies sized from the data
(``ProxyAnchorLoss``), as does Levi et al.'s ProxyNCA baseline (``ProxyNCALoss``); the others are
PML's, targeted directly. ``BatchSizeReducer`` is Caffe's normalisation, for Yu et al.'s lambda grid.
PRISM (Liu et al. 2021) and its memory contrastive baseline are ``PRISMLoss`` and
``MemoryContrastiveLoss``.
"""

from noisydml.losses.adapted_triplet import AdaptedTripletLoss
from noisydml.losses.batch_size_reducer import BatchSizeReducer
from noisydml.losses.bayesian_triplet import BayesianTripletLoss
from noisydml.losses.bspml import BSPMLLoss
from noisydml.losses.margin import ClassBetaMarginLoss
from noisydml.losses.marginal import MarginalLoss
from noisydml.losses.pair import ContrastiveLoss, MultiSimilarityLoss, SignalToNoiseRatioContrastiveLoss
from noisydml.losses.prism import MemoryContrastiveLoss, PRISMLoss
from noisydml.losses.proxy_anchor import ProxyAnchorLoss
from noisydml.losses.proxy_nca import ProxyNCALoss
from noisydml.losses.rdml import RescaledHingeTripletLoss
from noisydml.losses.trimmed import TrimmedLoss

__all__ = [
    "AdaptedTripletLoss",
    "BatchSizeReducer",
    "BayesianTripletLoss",
    "BSPMLLoss",
    "ClassBetaMarginLoss",
    "ContrastiveLoss",
    "MarginalLoss",
    "MemoryContrastiveLoss",
    "MultiSimilarityLoss",
    "PRISMLoss",
    "ProxyAnchorLoss",
    "ProxyNCALoss",
    "RescaledHingeTripletLoss",
    "SignalToNoiseRatioContrastiveLoss",
    "TrimmedLoss",
]
