"""Losses against their formulas worked by hand on five 2-d embeddings, and the loss configs."""

from __future__ import annotations

from itertools import product
from math import exp, log, sqrt

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from pytorch_metric_learning.distances import LpDistance
from pytorch_metric_learning.losses import ContrastiveLoss, MarginLoss, TripletMarginLoss
from pytorch_metric_learning.reducers import AvgNonZeroReducer, MeanReducer

from noisydml import CONFIG_DIR
from noisydml.losses import MarginalLoss
from noisydml.losses.pair import EveryPairTuple
from training_sets import hook_context, training_set

LOSSES = ["triplet", "marginal", "contrastive"]
MINERS = ["random_semihard", "fixed_semihard", "batch_hard", "all"]
AVG_NON_ZERO = "loss.reducer._target_=pytorch_metric_learning.reducers.AvgNonZeroReducer"

# x1 is (0, 3) so that the distances only come out right if the embeddings are normalised.
EMBEDDINGS = torch.tensor([[1.0, 0.0], [0.0, 3.0], [0.6, 0.8], [0.8, 0.6], [-1.0, 0.0]])
LABELS = torch.tensor([0, 0, 1, 1, 1])
# On the unit circle d^2 = 2 - 2 cos:
#   d01 = sqrt(2) = 1.414214    d02 = sqrt(.8) = 0.894427    d03 = sqrt(.4) = 0.632456    d04 = 2
#   d12 = sqrt(.4)              d13 = sqrt(.8)               d23 = sqrt(.08) = 0.282843
TRIPLETS = (
    torch.tensor([0, 0, 2, 3, 0]),
    torch.tensor([1, 1, 3, 2, 1]),
    torch.tensor([2, 3, 0, 1, 4]),
)

# Triplet loss [d_ap - d_an + 0.2]_+ on (0,1,2), (0,1,3), (2,3,0), (3,2,1), (0,1,4):
#   1.414214 - 0.894427 + .2 = 0.719787;  1.414214 - 0.632456 + .2 = 0.981758;
#   0.282843 - 0.894427 + .2 < 0;  0.282843 - 0.894427 + .2 < 0;  1.414214 - 2 + .2 < 0
TRIPLET_TERMS = [sqrt(2) - sqrt(0.8) + 0.2, sqrt(2) - sqrt(0.4) + 0.2]
TRIPLET_MEAN = sum(TRIPLET_TERMS) / 5  # 0.340309
TRIPLET_NON_ZERO = sum(TRIPLET_TERMS) / 2  # 0.850772
# Squared distances: 2 - .8 + .2 = 1.4;  2 - .4 + .2 = 1.8;  .08 - .8 + .2 < 0 (twice);  2 - 4 + .2 < 0
SQUARED_MEAN = (1.4 + 1.8) / 5  # 0.64
SQUARED_NON_ZERO = (1.4 + 1.8) / 2  # 1.6

# Marginal loss, beta 1.4, alpha .2: positive pairs [d - 1.2]_+, negative pairs [1.6 - d]_+.
#   (0,1) three times: 1.414214 - 1.2 = 0.214214;  (2,3), (3,2): 0.282843 - 1.2 < 0
#   (0,2), (2,0), (3,1): 1.6 - 0.894427 = 0.705573;  (0,3): 1.6 - 0.632456 = 0.967544;  (0,4): 1.6 - 2 < 0
MARGINAL_SUM = 3 * (sqrt(2) - 1.2) + 3 * (1.6 - sqrt(0.8)) + (1.6 - sqrt(0.4))  # 3.726904
MARGINAL_MEAN = MARGINAL_SUM / 10  # over all 10 pairs: 0.372690
MARGINAL_NON_ZERO = MARGINAL_SUM / 7  # 0.532415

# Contrastive loss, positive margin 0, negative margin 1, PML's form: mean over the positive pairs plus
# mean over the negative pairs.
#   positive (0,1) x3, (2,3), (3,2): (3 * 1.414214 + 2 * 0.282843) / 5 = 0.961665
#   negative (0,2), (2,0), (3,1): 1 - 0.894427 = 0.105573;  (0,3): 1 - 0.632456 = 0.367544;  (0,4): 0
CONTRASTIVE_POS = (3 * sqrt(2) + 2 * sqrt(0.08)) / 5
CONTRASTIVE_NEG = 3 * (1 - sqrt(0.8)) + (1 - sqrt(0.4))
CONTRASTIVE_MEAN = CONTRASTIVE_POS + CONTRASTIVE_NEG / 5  # 1.098518
CONTRASTIVE_NON_ZERO = CONTRASTIVE_POS + CONTRASTIVE_NEG / 4  # 1.132731


def load_loss(*overrides: str):
    cfg = OmegaConf.merge(
        OmegaConf.create({"loss": OmegaConf.load(CONFIG_DIR / "loss" / f"{overrides[0]}.yaml")}),
        OmegaConf.from_dotlist(list(overrides[1:])),
    )
    return instantiate(cfg.loss)


def hand_loss(loss) -> float:
    return loss(EMBEDDINGS, LABELS, TRIPLETS).item()


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (("triplet",), TRIPLET_MEAN),
        (("triplet", AVG_NON_ZERO), TRIPLET_NON_ZERO),
        (("triplet", "loss.distance.power=2"), SQUARED_MEAN),
        (("triplet", "loss.distance.power=2", AVG_NON_ZERO), SQUARED_NON_ZERO),
        (("marginal",), MARGINAL_MEAN),
        (("marginal", AVG_NON_ZERO), MARGINAL_NON_ZERO),
        (("contrastive",), CONTRASTIVE_MEAN),
        (("contrastive", AVG_NON_ZERO), CONTRASTIVE_NON_ZERO),
    ],
)
def test_configured_loss_equals_hand_value(overrides, expected):
    assert hand_loss(load_loss(*overrides)) == pytest.approx(expected, abs=1e-6)


def test_pml_triplet_default_reducer_averages_non_zero_triplets():
    # Why triplet.yaml names its reducer: PML's default is not the paper's Eq. 4 mean.
    assert hand_loss(TripletMarginLoss(margin=0.2)) == pytest.approx(TRIPLET_NON_ZERO, abs=1e-6)


def test_pml_margin_loss_is_not_the_mean_over_pairs():
    # Same pair terms, but PML sums the two per triplet: twice the mean with MeanReducer, and its
    # DivisorReducer divides by the number of non-zero pairs.
    pml = MarginLoss(margin=0.2, beta=1.4, nu=0, learn_beta=False)
    assert hand_loss(pml) == pytest.approx(MARGINAL_NON_ZERO, abs=1e-6)
    pml_mean = MarginLoss(margin=0.2, beta=1.4, nu=0, learn_beta=False, reducer=MeanReducer())
    assert hand_loss(pml_mean) == pytest.approx(2 * MARGINAL_MEAN, abs=1e-6)


def test_marginal_loss_without_indices_averages_every_pair():
    loss = MarginalLoss(alpha=0.2, beta=1.4)
    dist = LpDistance()(EMBEDDINGS)
    terms = [
        max(0.0, (dist[i, j].item() - 1.4) * (1 if LABELS[i] == LABELS[j] else -1) + 0.2)
        for i in range(5)
        for j in range(5)
        if i != j
    ]
    assert loss(EMBEDDINGS, LABELS).item() == pytest.approx(sum(terms) / len(terms), abs=1e-6)


def test_marginal_loss_takes_pair_tuples():
    # The same 10 pairs as TRIPLETS, given as (a1, p, a2, n).
    a, p, n = TRIPLETS
    loss = MarginalLoss(reducer=AvgNonZeroReducer())
    assert loss(EMBEDDINGS, LABELS, (a, p, a, n)).item() == pytest.approx(MARGINAL_NON_ZERO, abs=1e-6)


@pytest.mark.parametrize("name", LOSSES)
def test_no_triplets_gives_a_differentiable_zero(name):
    embeddings = EMBEDDINGS.clone().requires_grad_()
    empty = tuple(torch.empty(0, dtype=torch.int64) for _ in range(3))
    value = load_loss(name)(embeddings, LABELS, empty)
    value.backward()
    assert value.item() == 0 and torch.equal(embeddings.grad, torch.zeros_like(embeddings))


def test_loss_configs_use_the_paper_parameters():
    triplet, marginal = load_loss("triplet"), load_loss("marginal")
    assert isinstance(triplet, TripletMarginLoss) and triplet.margin == 0.2
    assert not triplet.swap and not triplet.smooth_loss
    assert isinstance(marginal, MarginalLoss) and (marginal.alpha, marginal.beta) == (0.2, 1.4)
    contrastive = load_loss("contrastive")
    assert isinstance(contrastive, ContrastiveLoss)
    assert (contrastive.pos_margin, contrastive.neg_margin) == (0, 1)
    for loss in (triplet, marginal, contrastive):
        assert (loss.distance.normalize_embeddings, loss.distance.p, loss.distance.power) == (True, 2, 1)


@pytest.mark.parametrize("loss_name, miner_name", list(product(LOSSES, MINERS)))
def test_loss_and_miner_configs_train(loss_name, miner_name):
    torch.manual_seed(0)
    loss = load_loss(loss_name)
    miner = instantiate(OmegaConf.load(CONFIG_DIR / "miner" / f"{miner_name}.yaml"))
    labels = torch.arange(4).repeat_interleave(5)
    embeddings = torch.randn(20, 8, requires_grad=True)
    value = loss(embeddings, labels, miner(embeddings, labels))
    value.backward()
    assert value.ndim == 0 and torch.isfinite(value) and value.item() > 0
    assert torch.isfinite(embeddings.grad).all() and embeddings.grad.abs().sum() > 0


# --- a pair tuple of one positive and one negative pair (issue: PML's GenericPairLoss returns 0) -------
# Positive (0, 1), negative (0, 2). Cosine: S_01 = 0 (x1 normalised is (0, 1)), S_02 = .6.
LONE_PAIRS = (torch.tensor([0]), torch.tensor([1]), torch.tensor([0]), torch.tensor([2]))
# Multi-similarity, alpha 2, beta 50, lambda 1, anchor 0 only, then the mean over the 5 anchors:
#   1/2 log(1 + e^(-2 (0 - 1))) + 1/50 log(1 + e^(50 (.6 - 1))) = 1.063464 + 4e-11
MS_LONE = (0.5 * log(1 + exp(2)) + log(1 + exp(-20)) / 50) / 5  # 0.212693
# Contrastive, margins 0 and 1, unit-circle distances, mean over positives + mean over negatives:
#   d01 = 1.414214;  [1 - d02]_+ = 1 - .894427
CONTRASTIVE_LONE = sqrt(2) + 1 - sqrt(0.8)  # 1.519787


@pytest.mark.parametrize("name, expected", [("multi_similarity", MS_LONE), ("contrastive", CONTRASTIVE_LONE)])
def test_one_positive_and_one_negative_pair_give_the_formula(name, expected):
    assert load_loss(name)(EMBEDDINGS, LABELS, LONE_PAIRS).item() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("name", ["multi_similarity", "contrastive", "contrastive_cosine", "snr", "bspml"])
def test_pair_losses_learn_from_a_lone_pair_and_count_it(name):
    overrides = ["loss.weight_classes=1", "loss.weight_samples=1", "loss.seed=0"] if name == "bspml" else []
    loss = load_loss(name, *overrides)
    if name == "bspml":
        loss.setup(training_set(LABELS.numpy()))
        loss.begin_batch(torch.arange(5))
    embeddings = EMBEDDINGS.clone().requires_grad_()
    a, p, n = TRIPLETS
    for tuples in (LONE_PAIRS, LONE_PAIRS, (a, p, a, n)):
        value = loss(embeddings, LABELS, tuples)
    value.backward()
    assert embeddings.grad.abs().sum() > 0
    assert loss.lone_pair_batches == 2
    empty = tuple(torch.empty(0, dtype=torch.int64) for _ in range(4))
    assert loss(EMBEDDINGS, LABELS, empty).item() == 0 and loss.lone_pair_batches == 2
    # What the module logs as train/lone_pair_batches at the epoch's end; the count starts again.
    assert EveryPairTuple.on_train_epoch_end(loss, hook_context()) == {"lone_pair_batches": 2.0}
    assert loss.lone_pair_batches == 0
