"""Proxy-Anchor loss (Kim et al. 2020) with one proxy per training class, sized from the data."""

from __future__ import annotations

import warnings

import torch
from pytorch_metric_learning import losses

from noisydml.hooks import TrainingHooks, TrainingSet


class ProxyAnchorLoss(losses.ProxyAnchorLoss, TrainingHooks):
    """PML's ``ProxyAnchorLoss`` (Kim et al. 2020, Eq. 4), whose proxies are made at :meth:`setup`.

    ``1/|P+| sum_{p in P+} log(1 + sum_{x in X_p+} e^{-alpha (s(x, p) - delta)})
    + 1/|P| sum_{p in P} log(1 + sum_{x in X_p-} e^{alpha (s(x, p) + delta)})``, s the cosine
    similarity, P+ the proxies with a positive in the batch; PML's ``margin`` is delta.

    PML needs the number of classes when the loss is built, but it is known only once the data module
    has drawn the noisy labels (and a topline may train on fewer classes), so the proxies are created
    in ``setup``, which the module calls before it builds the optimizer; a checkpoint's proxies are
    loaded after it. Their initialisation is PML's (Kaiming normal, fan out; BSPML: "initialized
    using a normal distribution"), drawn from the global generator that ``seed`` fixes.

    The proxies are a parameter of the loss, so they train in the loss's own optimizer group at
    ``module.loss_lr``; Kim et al. train them 100 times faster than the network
    (``module.loss_lr`` = 100 x ``optimizer.lr``).

    Proxy-Anchor takes every sample-proxy pair of the batch and no miner: a miner's tuples would
    become PML's per-sample miner weights, which neither paper uses, so they are refused.
    """

    def __init__(self, embedding_size: int, margin: float = 0.1, alpha: float = 32.0, **kwargs):
        with warnings.catch_warnings():
            # No classes yet: PML initialises an empty (0, embedding_size) proxy matrix.
            warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")
            super().__init__(
                num_classes=0, embedding_size=embedding_size, margin=margin, alpha=alpha, **kwargs
            )

    def setup(self, train_set: TrainingSet) -> None:
        # Observed training labels are 0..C-1 (the data module remaps them), so they index the proxies.
        proxies = torch.empty(
            train_set.num_classes, self.proxies.shape[1], dtype=self.proxies.dtype, device=self.proxies.device
        )
        self.weight_init_func(proxies)
        self.proxies = torch.nn.Parameter(proxies)
        self.num_classes = train_set.num_classes

    def compute_loss(self, embeddings, labels, indices_tuple, ref_emb, ref_labels):
        if self.num_classes == 0:
            raise RuntimeError(
                "ProxyAnchorLoss has no proxies yet: the training module calls setup(train_set) at fit; "
                "outside a Trainer call it with MetricDataModule.training_set()"
            )
        if indices_tuple is not None:
            raise ValueError(
                f"loss=proxy_anchor got {len(indices_tuple)}-tuples from a miner; Proxy-Anchor uses every "
                f"sample-proxy pair: use miner=none"
            )
        return super().compute_loss(embeddings, labels, indices_tuple, ref_emb, ref_labels)
