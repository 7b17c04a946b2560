"""One learnable proxy per training class, made once the data module knows how many classes there are."""

from __future__ import annotations

import warnings

import torch

from noisydml.core.hooks import TrainingHooks, TrainingSet


class ClassProxies(TrainingHooks):
    """Mixin for a pytorch-metric-learning proxy loss (``proxies``, ``weight_init_func``): its proxies
    are sized at :meth:`setup` rather than when the loss is built.

    PML needs the number of classes in the constructor, but it is known only once the data module has
    drawn the noisy labels (and a topline may train on fewer classes). The loss is therefore built with
    no proxies, and ``setup``, which the module calls before it builds the optimizer, makes one per
    observed training class with PML's own initialisation, drawn from the global generator that
    ``seed`` fixes; a checkpoint's proxies are loaded after it. Being a parameter of the loss, the
    proxies train in the loss's own optimizer group at ``module.loss_lr``.

    Proxy losses score every sample against every proxy and use no miner: a miner's tuples would
    become PML's per-sample miner weights, which none of the papers use, so they are refused.
    Subclasses name their ``conf/loss`` option in ``option``, for the error messages.
    """

    option: str

    def __init__(self, embedding_size: int, **kwargs):
        with warnings.catch_warnings():
            # No classes yet: PML initialises an empty (0, embedding_size) proxy matrix.
            warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")
            super().__init__(num_classes=0, embedding_size=embedding_size, **kwargs)
        self.num_classes = 0

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
                f"{type(self).__name__} has no proxies yet: the training module calls setup(train_set) at "
                "fit; outside a Trainer call it with MetricDataModule.training_set()"
            )
        if indices_tuple is not None:
            raise ValueError(
                f"loss={self.option} got {len(indices_tuple)}-tuples from a miner; a proxy loss uses every "
                f"sample-proxy pair: use miner=none"
            )
        return super().compute_loss(embeddings, labels, indices_tuple, ref_emb, ref_labels)
