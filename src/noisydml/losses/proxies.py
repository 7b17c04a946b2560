"""One learnable proxy per training class, made once the data module knows how many classes there are."""

from __future__ import annotations

import warnings

import torch

from noisydml.core.hooks import TrainingHooks, TrainingSet


class ClassProxies(TrainingHooks):
    """Mixin for a pytorch-metric-learning proxy loss (``proxies``, ``weight_init_func``) that takes PML's
    constructor, ``num_classes`` and ``embedding_size``, and also lets ``num_classes`` wait for the data.

    PML needs the number of classes in the constructor, but a run knows it only once the data module has
    drawn the noisy labels (and a topline may train on fewer classes). A config therefore builds the loss
    with ``num_classes`` left out, and ``setup``, which the module calls before it builds the optimizer,
    makes one proxy per observed training class with PML's own initialisation, drawn from the global
    generator that ``seed`` fixes; a checkpoint's proxies are loaded after it. Given ``num_classes``, as a
    PML user writes it, the proxies are made at once, as PML makes them. Being a parameter of the loss,
    the proxies train in the loss's own optimizer group at ``module.loss_lr``.

    Proxy losses score every sample against every proxy and use no miner: a miner's tuples would
    become PML's per-sample miner weights, which none of the papers use, so they are refused.
    Subclasses name their ``conf/loss`` option in ``option``, for the error messages.
    """

    option: str

    def __init__(self, num_classes: int | None = None, embedding_size: int | None = None, **kwargs):
        if embedding_size is None:
            raise TypeError(f"{type(self).__name__} needs embedding_size, the width of the embeddings")
        with warnings.catch_warnings():
            # No classes yet: PML initialises an empty (0, embedding_size) proxy matrix.
            warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")
            super().__init__(num_classes=num_classes or 0, embedding_size=embedding_size, **kwargs)
        self.num_classes = num_classes or 0

    def setup(self, train_set: TrainingSet) -> None:
        if self.num_classes == train_set.num_classes:
            return
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
                f"{type(self).__name__} has no proxies yet: give num_classes= as PML's constructor takes it, "
                "or call setup(train_set) (the training module does, at fit)"
            )
        if indices_tuple is not None:
            raise ValueError(
                f"loss={self.option} got {len(indices_tuple)}-tuples from a miner; a proxy loss uses every "
                f"sample-proxy pair: use miner=none"
            )
        return super().compute_loss(embeddings, labels, indices_tuple, ref_emb, ref_labels)
