"""The trimmed loss (Levi et al. 2021, Sec. 4.4): the lowest tuple losses kept, against brute-force loops."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from pytorch_metric_learning.losses import ContrastiveLoss, MultiSimilarityLoss, TripletMarginLoss
from pytorch_metric_learning.reducers import MeanReducer

import batches
from batches import (
    CIRCLE,
    CIRCLE_LABELS,
    LABEL_SETS,
    as_list,
    sphere_distance,
)
from configs import compose_node, load, margin_with_betas
from noisydml.losses import ClassBetaMarginLoss, TrimmedLoss
from noisydml.miners import EasyPositiveMiner
from training_sets import of_classes

SEEDS = range(4)
# float64 so that no distance lands on a rule's boundary by rounding.
random_batch = functools.partial(batches.random_batch, dtype=torch.float64)


# ---------------------------------------------------------------------------------------------------
# Trimmed loss
# ---------------------------------------------------------------------------------------------------


def lowest(losses: list[float], keep_fraction: float) -> list[int]:
    """Positions of the ceil(f * n) smallest losses, ties to the earlier, in their original order."""
    k = math.ceil(round(keep_fraction * len(losses), 9))
    return sorted(sorted(range(len(losses)), key=lambda i: (losses[i], i))[:k])


@pytest.mark.parametrize("keep_fraction", [0.25, 0.5, 0.8, 1.0])
def test_trimmed_triplet_and_margin_equal_brute_force(keep_fraction):
    labels = LABEL_SETS["3x4"]
    x = random_batch(2, labels, dim=3)
    triplets = as_list(load("miner", "all")(x, labels))

    # Triplet loss [d_ap - d_an + .2]_+ (mean reducer): mean over the kept triplets.
    losses = [max(sphere_distance(x, a, p) - sphere_distance(x, a, n) + 0.2, 0) for a, p, n in triplets]
    kept = lowest(losses, keep_fraction)
    indices = tuple(torch.tensor(t) for t in zip(*triplets, strict=True))
    loss = compose_node("loss", "loss=trimmed", f"loss.keep_fraction={keep_fraction}")
    value = loss(x, labels, indices).item()
    assert value == pytest.approx(sum(losses[i] for i in kept) / len(kept), abs=1e-9)

    # Margin loss, beta 1.2 and .9 for classes 0-1 and 2: the kept triplets' pair terms over the number
    # of non-zero ones among them.
    betas = [1.2, 1.2, 0.9]
    pair_terms = [
        (
            max(sphere_distance(x, a, p) - betas[labels[a]] + 0.2, 0),
            max(betas[labels[a]] - sphere_distance(x, a, n) + 0.2, 0),
        )
        for a, p, n in triplets
    ]
    kept = lowest([pos + neg for pos, neg in pair_terms], keep_fraction)
    terms = [t for i in kept for t in pair_terms[i]]
    loss = TrimmedLoss(margin_with_betas(*betas), keep_fraction)
    # beta is a float32 parameter: 1.2 is 1.2000000477 in it.
    assert loss(x, labels, indices).item() == pytest.approx(sum(terms) / sum(t > 0 for t in terms), abs=1e-6)


def test_trimmed_contrastive_ranks_positive_and_negative_pairs_together():
    labels = LABEL_SETS["3x4"]
    x = random_batch(3, labels, dim=3)
    triplets = as_list(load("miner", "all")(x, labels))
    # PML turns each triplet into the pairs (a, p) and (a, n): [d]_+ and [1.6 - d]_+ (margins 0 and 1.6,
    # so that the lowest half holds pairs of both kinds).
    pairs = [(a, p, True) for a, p, _ in triplets] + [(a, n, False) for a, _, n in triplets]
    distances = [sphere_distance(x, a, b) for a, b, _ in pairs]
    losses = [d if pos else max(1.6 - d, 0) for d, (_, _, pos) in zip(distances, pairs, strict=True)]
    kept = lowest(losses, 0.5)
    pos = [losses[i] for i in kept if pairs[i][2]]
    neg = [losses[i] for i in kept if not pairs[i][2]]
    indices = tuple(torch.tensor(t) for t in zip(*triplets, strict=True))
    value = TrimmedLoss(load("loss", "contrastive", "neg_margin=1.6"), 0.5)(x, labels, indices).item()
    assert len(pos) > 1 and len(neg) > 1
    assert value == pytest.approx(sum(pos) / len(pos) + sum(neg) / len(neg), abs=1e-9)


def test_trimmed_keep_all_is_the_loss_and_gradchecks():
    labels = LABEL_SETS["3x4"]
    x = random_batch(4, labels, dim=3).requires_grad_()
    miner = EasyPositiveMiner(negatives="random")
    torch.manual_seed(0)
    triplets = miner(x.detach(), labels)
    inner = TripletMarginLoss(margin=0.2, reducer=MeanReducer())
    assert TrimmedLoss(inner, 1.0)(x, labels, triplets).item() == pytest.approx(
        inner(x, labels, triplets).item()
    )
    loss = TrimmedLoss(inner, 0.6)
    assert torch.autograd.gradcheck(lambda e: loss(e, labels, triplets), (x,))


def test_trimmed_without_a_miner_trims_every_triplet_and_handles_no_tuples():
    labels = LABEL_SETS["uneven"]
    x = random_batch(5, labels, dim=3)
    everything = TrimmedLoss(TripletMarginLoss(margin=0.2, reducer=MeanReducer()), 0.5)
    all_triplets = load("miner", "all")(x, labels)
    assert everything(x, labels).item() == pytest.approx(everything(x, labels, all_triplets).item())
    empty = tuple(torch.empty(0, dtype=torch.int64) for _ in range(3))
    e = x.clone().requires_grad_()
    value = everything(e, labels, empty)
    value.backward()
    assert value.item() == 0 and torch.equal(e.grad, torch.zeros_like(e))


def test_trimmed_refuses_losses_without_per_tuple_values_and_bad_fractions():
    with pytest.raises(ValueError, match="loss.loss=MultiSimilarityLoss"):
        TrimmedLoss(MultiSimilarityLoss(), 0.5)(CIRCLE, CIRCLE_LABELS)
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match=f"loss.keep_fraction={bad}"):
            TrimmedLoss(ContrastiveLoss(), bad)


def test_trimmed_config_nests_a_loss_and_forwards_its_hooks():
    loss = compose_node("loss", "loss=trimmed")
    assert isinstance(loss.loss, TripletMarginLoss) and loss.keep_fraction == 0.8
    nested = compose_node("loss", "loss=trimmed", "loss@loss.loss=margin", "loss.loss.beta=1.0")
    assert isinstance(nested.loss, ClassBetaMarginLoss) and nested.loss.beta.item() == 1.0
    assert loss.kept_count(10) == 8 and TrimmedLoss(loss.loss, 0.7).kept_count(10) == 7
    margin = TrimmedLoss(load("loss", "margin"), 0.5)
    margin.setup(of_classes(4))
    assert margin.loss.beta.shape == (4,)
    assert [p.shape for p in margin.parameters()] == [(4,)]
