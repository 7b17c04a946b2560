"""The kNN label vote on the features a run starts from, and the filter of the training-free reference
(``method=reference/knn_filter``): the samples the vote flags leave the training set before the first step.

The features a run starts from are its inputs (the digits' and MNIST's pixels, which the MLP and the LeNet
learn from scratch) or, for a pretrained backbone, its trunk's pooled features (an ImageNet GoogLeNet's
1,024): ``trunk_features``, which the configs set from ``backbone.trunk.pretrained``. The vote itself is
:func:`noisydml.metrics.label_vote.knn_label_vote`.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from noisydml.metrics.label_vote import flip_detection, knn_label_vote
from noisydml.noise import NoisyLabels
from noisydml.utils.checks import Rule, check_fraction, check_value

log = logging.getLogger(__name__)

# Second word of the seed of the draw that orders tied votes, independent of the data module's streams.
_TIE_STREAM = 0x4B4E4E46


def starting_features(
    dataset: Dataset, backbone: nn.Module | None = None, batch_size: int = 256
) -> np.ndarray:
    """One row per item of ``dataset`` (items ``(input, label, index)``, in order): the input flattened,
    or, given ``backbone`` (an embedding network with a ``trunk``), the trunk's output as its weights
    stand, average-pooled when 4-d (the features its embedding layer reads), in eval mode, no gradient."""
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False)
    if backbone is None:
        return torch.cat([x.flatten(1).float() for x, _, _ in loader]).numpy()
    trunk = backbone.trunk
    device = next(backbone.parameters(), torch.zeros(0)).device
    was_training = backbone.training
    # The network's own eval(): its train() keeps frozen BatchNorms in eval mode afterwards.
    backbone.eval()
    parts = []
    with torch.no_grad():
        for x, _, _ in loader:
            features = trunk(x.to(device))
            if features.dim() == 4:
                features = F.adaptive_avg_pool2d(features, 1)
            parts.append(features.flatten(1).float().cpu())
    backbone.train(was_training)
    return torch.cat(parts).numpy()


class KnnLabelFilter:
    """Flags training samples by the kNN label vote of ``k`` neighbours on the features the run starts
    from, to drop them before training (``data.filter``).

    ``rate`` known (the noise config's ``noise.rate``): the ``round(rate x n)`` samples with the highest
    votes are dropped, the share the noise flipped (under small-cluster noise ``rate`` is the share of
    classes dissolved, which is the share of labels flipped when classes are of equal size); tied votes at
    the cut are drawn at random, seeded by ``seed``. ``rate`` None (unknown): the outvoted samples are
    dropped, those whose own label is not the commonest among their neighbours (SimiFeat's majority rule:
    no threshold to choose, and right as long as a clean neighbourhood's commonest label is its class).

    ``min_per_class`` (the configs set it to ``data.K``, the samples a batch draws from a class) is a floor:
    the filter takes no class below it (a class already smaller loses nothing), so that it never makes a
    class too small for the sampler to draw. Walking the samples from the highest vote down, one whose
    class is down to the floor is spared and the next is taken instead, so the count dropped stays
    ``round(rate x n)`` while enough samples sit above the floor (with the rate unknown, the spared
    outvoted samples are simply kept); a class keeps its lowest-voted samples. Where no class would fall
    below the floor, the samples dropped are exactly those without it.

    ``report`` says what was dropped, how many of the dropped and kept samples were flipped, and how many
    the floor spared.
    """

    def __init__(
        self,
        k: int = 10,
        rate: float | None = None,
        seed: int = 0,
        trunk_features: bool = False,
        backbone: nn.Module | None = None,
        batch_size: int = 256,
        min_per_class: int = 0,
    ):
        check_value(Rule("data.filter.k", int, 1, example="data.filter.k=10 neighbours"), k)
        self.k = k
        self.rate = None if rate is None else check_fraction("data.filter.rate", rate, example=0.2)
        self.seed = seed
        floor = "data.filter.min_per_class=${data.K} (what a batch draws from a class), or 0 for no floor"
        check_value(Rule("data.filter.min_per_class", int, 0, example=floor), min_per_class)
        self.min_per_class = min_per_class
        if trunk_features and backbone is None:
            raise ValueError(
                "data.filter.trunk_features=true votes on the backbone's trunk features, but "
                "data.filter.backbone is null; set it to ${backbone}, or trunk_features=false for the inputs"
            )
        self.backbone = backbone if trunk_features else None
        self.batch_size = batch_size
        self.report: dict = {}

    def keep(self, split: Dataset, noisy: NoisyLabels) -> np.ndarray:
        """The mask of ``noisy``'s samples to train on: ``split`` is the training split with its test
        transform (``eval_view()``), ``noisy`` the samples and labels the run would train on."""
        if self.backbone is not None and torch.cuda.is_available():
            self.backbone = self.backbone.cuda()
        features = starting_features(Subset(split, noisy.indices.tolist()), self.backbone, self.batch_size)
        vote = knn_label_vote(features, noisy.observed, self.k)
        order = self._order(vote.votes)
        if self.rate is None:
            order = order[vote.outvoted[order]]
            count = len(order)
            rule = "outvoted"
        else:
            count = int(np.rint(round(self.rate * len(vote.votes), 9)))
            rule = f"highest votes, rate {self.rate:g}"
        drop, spared = self._drop(order, noisy.observed, count)
        flipped = noisy.observed != noisy.true
        self.report = {
            "k": self.k,
            "rule": rule,
            "features": "trunk" if self.backbone is not None else "inputs",
            "min_per_class": self.min_per_class,
            "spared": spared,
            "dropped": int(drop.sum()),
            "dropped_flipped": int(flipped[drop].sum()),
            "kept": int((~drop).sum()),
            "kept_flipped": int(flipped[~drop].sum()),
            "vote_auc": flip_detection(vote.votes, flipped).get("auc"),
        }
        log.info(
            "kNN label filter (%s): dropped %d of %d training samples, %d of them flipped",
            rule,
            self.report["dropped"],
            len(drop),
            self.report["dropped_flipped"],
        )
        return ~drop

    def _drop(self, order: np.ndarray, labels: np.ndarray, count: int) -> tuple[np.ndarray, int]:
        """The mask of the first ``count`` samples of ``order`` whose class stays at ``min_per_class`` or
        more without them, and how many of ``order`` were passed over for the floor before the count."""
        drop = np.zeros(len(labels), dtype=bool)
        classes, left = np.unique(labels, return_counts=True)
        left = dict(zip(classes.tolist(), left.tolist(), strict=True))
        taken = spared = 0
        for i in order.tolist():
            if taken == count:
                break
            label = labels[i].item()
            if left[label] <= self.min_per_class:
                spared += 1
                continue
            drop[i] = True
            left[label] -= 1
            taken += 1
        return drop, spared

    def _order(self, votes: np.ndarray) -> np.ndarray:
        """The samples by vote, highest first, ties in a random order seeded by ``seed``."""
        ties = np.random.default_rng([self.seed, _TIE_STREAM]).random(len(votes))
        return np.lexsort((ties, -votes))
