"""Levi et al. 2021: easy positive mining, the margin, multi-similarity and trimmed losses, even/odd digits.

Miners against brute-force loops, losses against values worked by hand or loops, Wu et al.'s sphere
density against a simulation, and every new option trained end to end through Hydra on digits.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from omegaconf import OmegaConf
from pytorch_metric_learning.distances import CosineSimilarity, LpDistance
from pytorch_metric_learning.losses import ContrastiveLoss, MarginLoss, MultiSimilarityLoss, TripletMarginLoss
from pytorch_metric_learning.miners import DistanceWeightedMiner, MultiSimilarityMiner
from pytorch_metric_learning.reducers import MeanReducer
from scipy.integrate import quad
from scipy.stats import chi2
from sklearn.datasets import load_digits

import batches
from batches import LABEL_SETS, as_list, draw_counts
from layouts import make_mnist
from noisydml.data import Digits
from noisydml.data.torchvision_sets import MNIST
from noisydml.hooks import TrainingHooks
from noisydml.losses import ClassBetaMarginLoss, TrimmedLoss
from noisydml.miners import EasyPositiveMiner
from noisydml.train import train
from training_sets import of_classes

CONF = Path(__file__).resolve().parents[1] / "conf"
SEEDS = range(4)
EVEN_ODD = [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]


def load(group: str, name: str, *overrides: str):
    cfg = OmegaConf.merge(
        OmegaConf.create({"node": OmegaConf.load(CONF / group / f"{name}.yaml")}),
        OmegaConf.from_dotlist([f"node.{o}" for o in overrides]),
    )
    return instantiate(cfg.node)


def compose_node(group: str, *overrides: str):
    """``cfg.<group>`` of the real composed config, instantiated (for configs with a defaults list)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    GlobalHydra.instance().clear()
    return instantiate(cfg[group])


# float64 so that no distance lands on a rule's boundary by rounding.
random_batch = functools.partial(batches.random_batch, dtype=torch.float64)


# ---------------------------------------------------------------------------------------------------
# Easy positive mining against loops
# ---------------------------------------------------------------------------------------------------


def unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm()


def sphere_distance(x: torch.Tensor, a: int, b: int) -> float:
    return float((unit(x[a]) - unit(x[b])).norm())


def wu_weight(d: float, dim: int, cutoff: float = 0.5, nonzero_loss_cutoff: float = 1.4) -> float:
    """Wu et al. 2017 Sec. 4: q(d)^-1 = d^(2-n) (1 - d^2/4)^(-(n-3)/2), clamped at the cutoffs."""
    if d >= nonzero_loss_cutoff:
        return 0.0
    d = max(d, cutoff)
    return d ** (2 - dim) * (1 - d * d / 4) ** (-(dim - 3) / 2)


def eps_reference(x: torch.Tensor, labels: torch.Tensor, negatives: str, margin=0.2, epsilon=0.1):
    """Per anchor, None (no same-class sample) or (easy positive, {allowed negative: weight}), as loops.

    Distances are Euclidean between the normalised embeddings; for multi_similarity the rule is on
    the cosine similarity S = <x_a/|x_a|, x_n/|x_n|>.
    """
    n, dim = x.shape
    out = {}
    for a in range(n):
        same = [t for t in range(n) if t != a and labels[t] == labels[a]]
        if not same:
            out[a] = None
            continue
        p = min(same, key=lambda t: (sphere_distance(x, a, t), t))
        d_ap = sphere_distance(x, a, p)
        s_ap = float(unit(x[a]) @ unit(x[p]))
        weights = {}
        for m in range(n):
            if labels[m] == labels[a]:
                continue
            d_am = sphere_distance(x, a, m)
            if negatives == "random":
                w = 1.0
            elif negatives == "semihard":
                w = float(d_ap < d_am < d_ap + margin)
            elif negatives == "distance_weighted":
                w = wu_weight(d_am, dim)
            else:
                w = float(float(unit(x[a]) @ unit(x[m])) > s_ap - epsilon)
            if w > 0:
                weights[m] = w
        out[a] = (p, weights)
    return out


@pytest.mark.parametrize("negatives", ["random", "semihard", "distance_weighted", "multi_similarity"])
@pytest.mark.parametrize("labels", LABEL_SETS.values(), ids=LABEL_SETS.keys())
def test_easy_positive_equals_brute_force(negatives, labels):
    for seed in SEEDS:
        x = random_batch(seed, labels, dim=3)
        reference = eps_reference(x, labels, negatives)
        miner = EasyPositiveMiner(negatives=negatives)
        torch.manual_seed(seed)
        mined = miner(x, labels)

        kept = [a for a, ref in reference.items() if ref is not None and ref[1]]
        positives = [reference[a][0] for a in kept]
        assert miner.num_anchors_without_positive == sum(ref is None for ref in reference.values())
        assert miner.num_anchors_without_negative == sum(
            ref is not None and not ref[1] for ref in reference.values()
        )
        if negatives == "multi_similarity":
            a1, p, a2, n = mined
            assert a1.tolist() == kept and p.tolist() == positives
            assert as_list((a2, n)) == [(a, m) for a in kept for m in sorted(reference[a][1])]
        else:
            assert [(a, p) for a, p, _ in as_list(mined)] == list(zip(kept, positives, strict=True))
            assert all(n in reference[a][1] for a, _, n in as_list(mined))


def test_easy_positive_brute_force_sees_drops_of_both_kinds():
    # Otherwise the comparisons above would never exercise the two drop rules.
    drops = Counter()
    for labels in LABEL_SETS.values():
        for seed in SEEDS:
            x = random_batch(seed, labels, dim=3)
            for negatives in ("semihard", "multi_similarity"):
                miner = EasyPositiveMiner(negatives=negatives)
                miner(x, labels)
                drops["positive"] += miner.num_anchors_without_positive
                drops[negatives] += miner.num_anchors_without_negative
    assert drops["positive"] > 0 and drops["semihard"] > 0 and drops["multi_similarity"] > 0


@pytest.mark.parametrize("negatives", ["random", "semihard", "distance_weighted"])
def test_easy_positive_draws_negatives_with_the_rule_probabilities(negatives):
    # Pearson's statistic over every anchor with a choice: counts against the loop's weights,
    # uniform for random and semi-hard, Wu's q(d)^-1 for distance_weighted.
    labels = LABEL_SETS["3x4"]
    x = random_batch(1, labels, dim=4)
    reference = eps_reference(x, labels, negatives, margin=0.6)
    miner = EasyPositiveMiner(negatives=negatives, margin=0.6)
    draws = 500
    counts = draw_counts(miner, x, labels, draws)
    statistic, dof = 0.0, 0
    for a, (p, weights) in ((a, ref) for a, ref in reference.items() if ref and len(ref[1]) > 1):
        total = sum(weights.values())
        for m, w in weights.items():
            expected = draws * w / total
            statistic += (counts[(a, p, m)] - expected) ** 2 / expected
        dof += len(weights) - 1
    assert dof >= 8
    assert chi2.sf(statistic, dof) > 1e-3


def points_on_a_line(*xs: float) -> torch.Tensor:
    return torch.tensor([[x, 0.0] for x in xs])


# Unnormalised distances on a line: a0=0, a1=1, a2=3 | b0=1.3, b1=2.4 | c0=10 (indices 0-5).
LINE = points_on_a_line(0, 1, 3, 1.3, 2.4, 10)
LINE_LABELS = torch.tensor([0, 0, 0, 1, 1, 2])
PLAIN = LpDistance(normalize_embeddings=False)


def test_easy_positive_semihard_hand_built():
    # Margin 0.5: negatives with d_ap < d_an < d_ap + 0.5.
    #   a0: positive a1 (1 < a2's 3); b0 1.3 in (1, 1.5), b1 2.4 no          -> (0, 1, 3)
    #   a1: positive a0 (1 < a2's 2); b0 .3 too close, b1 1.4 in (1, 1.5)    -> (1, 0, 4)
    #   a2: positive a1 (2); b0 1.7 and b1 .6 closer than it, c0 7 too far   -> dropped
    #   b0: positive b1 (1.1); a0 1.3 in (1.1, 1.6), a2 1.7 out              -> (3, 4, 0)
    #   b1: positive b0 (1.1); a1 1.4 in (1.1, 1.6), a0 2.4 out              -> (4, 3, 1)
    #   c0: alone in its class                                                -> no positive
    miner = EasyPositiveMiner(negatives="semihard", margin=0.5, distance=PLAIN)
    assert as_list(miner(LINE, LINE_LABELS)) == [(0, 1, 3), (1, 0, 4), (3, 4, 0), (4, 3, 1)]
    assert (miner.num_anchors_without_positive, miner.num_anchors_without_negative) == (1, 1)


def test_easy_positive_multi_similarity_hand_built():
    # epsilon 0.5 on the distance (the rule d_an - epsilon < d_ap, i.e. S_an > S_ap - epsilon for
    # the similarity): every negative closer than d_ap + .5, with the easy positive pair once.
    #   a0 (d_ap 1): b0 1.3              a1 (d_ap 1): b0 .3, b1 1.4     a2 (d_ap 2): b0 1.7, b1 .6
    #   b0 (d_ap 1.1): a0 1.3, a1 .3     b1 (d_ap 1.1): a1 1.4, a2 .6   c0: no positive
    miner = EasyPositiveMiner(negatives="multi_similarity", epsilon=0.5, distance=PLAIN)
    a1, p, a2, n = miner(LINE, LINE_LABELS)
    assert as_list((a1, p)) == [(0, 1), (1, 0), (2, 1), (3, 4), (4, 3)]
    assert as_list((a2, n)) == [(0, 3), (1, 3), (1, 4), (2, 3), (2, 4), (3, 0), (3, 1), (4, 1), (4, 2)]


def test_easy_positive_random_keeps_every_anchor_with_a_positive():
    miner = EasyPositiveMiner(negatives="random", distance=PLAIN)
    triplets = as_list(miner(LINE, LINE_LABELS))
    assert [(a, p) for a, p, _ in triplets] == [(0, 1), (1, 0), (2, 1), (3, 4), (4, 3)]
    assert all(LINE_LABELS[n] != LINE_LABELS[a] for a, _, n in triplets)


def test_easy_positive_ties_go_to_the_lowest_index_and_cosine_matches_euclidean():
    # a1 and a2 are both at distance 1 from a0.
    x = points_on_a_line(0, 1, -1, 5)
    a, p, _ = EasyPositiveMiner(negatives="random", distance=PLAIN)(x, torch.tensor([0, 0, 0, 1]))
    assert p[0] == 1
    # On the unit sphere the nearest by distance is the most similar by cosine.
    labels = LABEL_SETS["3x4"]
    for seed in SEEDS:
        x = random_batch(seed, labels, dim=5)
        torch.manual_seed(0)
        euclid = EasyPositiveMiner(negatives="random")(x, labels)
        torch.manual_seed(0)
        cosine = EasyPositiveMiner(negatives="random", distance=CosineSimilarity())(x, labels)
        assert all(torch.equal(e, c) for e, c in zip(euclid, cosine, strict=True))


def test_easy_positive_single_class_batch_and_bad_options():
    miner = EasyPositiveMiner(negatives="semihard")
    out = miner(torch.randn(4, 3), torch.zeros(4, dtype=torch.int64))
    assert all(t.numel() == 0 and t.dtype == torch.int64 for t in out)
    assert miner.num_anchors_without_negative == 4
    with pytest.raises(ValueError, match="miner.negatives='hardest'"):
        EasyPositiveMiner(negatives="hardest")
    with pytest.raises(ValueError, match="miner.distance=CosineSimilarity"):
        EasyPositiveMiner(negatives="distance_weighted", distance=CosineSimilarity())
    with pytest.raises(ValueError, match="miner.nonzero_loss_cutoff=2.5"):
        EasyPositiveMiner(negatives="distance_weighted", nonzero_loss_cutoff=2.5)


def test_easy_positive_is_reproducible_under_manual_seed():
    labels = torch.arange(6).repeat_interleave(5)
    x = random_batch(0, labels, dim=16)
    miner = EasyPositiveMiner(negatives="distance_weighted")
    runs = []
    for seed in (7, 7, 8):
        torch.manual_seed(seed)
        runs.append(miner(x, labels))
    assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[1], strict=True))
    assert not torch.equal(runs[0][2], runs[2][2])


def test_easy_positive_config_defaults():
    miner = load("miner", "easy_positive")
    assert isinstance(miner, EasyPositiveMiner) and miner.negatives == "semihard" and miner.margin == 0.2
    assert (miner.cutoff, miner.nonzero_loss_cutoff, miner.epsilon) == (0.5, 1.4, 0.1)
    assert isinstance(miner.distance, LpDistance) and miner.distance.normalize_embeddings
    ms = load("miner", "easy_positive", "negatives=multi_similarity")
    assert isinstance(ms.distance, CosineSimilarity)


# ---------------------------------------------------------------------------------------------------
# Distance-weighted sampling (Wu et al. 2017)
# ---------------------------------------------------------------------------------------------------


def test_wu_sphere_density_matches_a_simulation():
    # q(d) ~ d^(n-2) (1 - d^2/4)^((n-3)/2) from cos = 1 - d^2/2 and the cos density (1 - t^2)^((n-3)/2):
    # check the histogram of distances between uniform points on the sphere of R^8.
    dim, pairs = 8, 20000
    g = torch.Generator().manual_seed(0)
    u, v = (torch.nn.functional.normalize(torch.randn(pairs, dim, generator=g), dim=1) for _ in range(2))
    d = (u - v).norm(dim=1).numpy()

    def q(t):
        return t ** (dim - 2) * (1 - t * t / 4) ** ((dim - 3) / 2)

    edges = np.linspace(0.2, 2.0, 19)
    total = quad(q, 0, 2)[0]
    expected = np.array([quad(q, lo, hi)[0] for lo, hi in zip(edges[:-1], edges[1:], strict=True)]) / total
    observed = np.histogram(d, bins=edges)[0]
    keep = expected * pairs > 5
    statistic = (((observed - pairs * expected) ** 2) / (pairs * expected))[keep].sum()
    assert chi2.sf(statistic, keep.sum() - 1) > 1e-3
    # Below d = 0.2 the density is ~0.2^6: fewer than one pair in 20000.
    assert (d < 0.2).sum() <= 2


def test_distance_weighted_config_samples_wu_weights():
    miner = load("miner", "distance_weighted")
    assert isinstance(miner, DistanceWeightedMiner)
    assert (miner.cutoff, miner.nonzero_loss_cutoff) == (0.5, 1.4)
    # PML draws K triplets per anchor; its negatives follow the same q(d)^-1 as the loop.
    labels = LABEL_SETS["3x4"]
    x = random_batch(1, labels, dim=4).float()
    dim = x.shape[1]
    counts, per_anchor = Counter(), Counter()
    torch.manual_seed(0)
    for _ in range(150):
        a, p, n = miner(x, labels)
        assert torch.equal(labels[a], labels[p]) and not (a == p).any()
        counts.update(zip(a.tolist(), n.tolist(), strict=True))
        per_anchor.update(a.tolist())
    statistic, dof = 0.0, 0
    for a in range(len(labels)):
        weights = {
            m: wu_weight(sphere_distance(x, a, m), dim) for m in range(len(labels)) if labels[m] != labels[a]
        }
        weights = {m: w for m, w in weights.items() if w > 0}
        assert set(m for (b, m) in counts if b == a) <= set(weights)
        total = sum(weights.values())
        for m, w in weights.items():
            expected = per_anchor[a] * w / total
            statistic += (counts[(a, m)] - expected) ** 2 / expected
        dof += len(weights) - 1
    assert dof >= 8
    assert chi2.sf(statistic, dof) > 1e-3


# ---------------------------------------------------------------------------------------------------
# Margin loss with a learnable beta per class
# ---------------------------------------------------------------------------------------------------

# Four points on the unit circle, classes [0, 0, 1, 1]: e0 (1, 0), e1 (.8, .6), e2 (0, 1), e3 (.6, .8).
# Cosines S01 .8, S02 0, S03 .6, S12 .6, S13 .96, S23 .8; distances d^2 = 2 - 2S:
#   d01 = sqrt(.4) = 0.632456   d02 = sqrt(2) = 1.414214   d03 = sqrt(.8) = 0.894427
#   d12 = sqrt(.8) = 0.894427   d13 = sqrt(.08) = 0.282843 d23 = sqrt(.4) = 0.632456
CIRCLE = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [0.6, 0.8]])
CIRCLE_LABELS = torch.tensor([0, 0, 1, 1])
CIRCLE_TRIPLETS = (torch.tensor([0, 0, 2, 3]), torch.tensor([1, 1, 3, 2]), torch.tensor([2, 3, 1, 0]))
# Margin loss, alpha .2, beta [1.2, .7] (class 0, class 1): [d_ap - beta + .2]_+ + [beta - d_an + .2]_+
#   (0,1,2) beta 1.2: [.632 - 1]_+ = 0,    [1.4 - 1.414214]_+ = 0
#   (0,1,3) beta 1.2: 0,                   1.4 - .894427 = .505573
#   (2,3,1) beta .7:  .632456 - .5 = .132456,   .9 - .894427 = .005573
#   (3,2,0) beta .7:  .132456,                  .9 - d30 (.894427) = .005573
# Five non-zero pair terms: (.505573 + 2 * .132456 + 2 * .005573) / 5 = 0.156326
MARGIN_HAND = (1.4 - math.sqrt(0.8) + 2 * (math.sqrt(0.4) - 0.5) + 2 * (0.9 - math.sqrt(0.8))) / 5


def margin_with_betas(*betas: float) -> ClassBetaMarginLoss:
    loss = load("loss", "margin")
    loss.setup(of_classes(len(betas)))
    with torch.no_grad():
        loss.beta.copy_(torch.tensor(betas))
    return loss


def test_margin_config_is_wu_with_a_beta_per_class():
    loss = load("loss", "margin")
    assert isinstance(loss, ClassBetaMarginLoss) and isinstance(loss, TrainingHooks)
    assert (loss.margin, loss.nu, loss.beta.item()) == (0.2, 0.0, pytest.approx(1.2))
    loss.setup(of_classes(7))
    params = list(loss.parameters())
    assert len(params) == 1 and params[0] is loss.beta
    assert loss.beta.shape == (7,) and torch.allclose(loss.beta, torch.full((7,), 1.2))


def test_margin_loss_equals_hand_value_and_pml():
    loss = margin_with_betas(1.2, 0.7)
    assert loss(CIRCLE, CIRCLE_LABELS, CIRCLE_TRIPLETS).item() == pytest.approx(MARGIN_HAND, abs=1e-6)
    pml = MarginLoss(margin=0.2, beta=1.2, learn_beta=True, num_classes=2)
    with torch.no_grad():
        pml.beta.copy_(torch.tensor([1.2, 0.7]))
    assert pml(CIRCLE, CIRCLE_LABELS, CIRCLE_TRIPLETS).item() == pytest.approx(MARGIN_HAND, abs=1e-6)


def test_margin_beta_gradient_reaches_only_the_anchor_classes():
    # Anchors of classes 0 and 2 only: class 1's beta gets no gradient.
    loss = margin_with_betas(1.2, 0.7, 0.9)
    labels = torch.tensor([0, 0, 1, 2, 2])
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    triplets = (torch.tensor([0, 3]), torch.tensor([1, 4]), torch.tensor([2, 2]))
    loss(x, labels, triplets).backward()
    assert loss.beta.grad[1] == 0 and (loss.beta.grad[[0, 2]] != 0).all()


def test_margin_global_beta_when_asked():
    loss = load("loss", "margin", "per_class_beta=false")
    loss.setup(of_classes(5))
    assert loss.beta.shape == (1,)


# ---------------------------------------------------------------------------------------------------
# Multi-similarity loss and miner (Wang et al. 2019)
# ---------------------------------------------------------------------------------------------------


def ms_reference(x: torch.Tensor, labels: torch.Tensor, pairs, alpha=2.0, beta=50.0, lam=1.0) -> float:
    """Wang et al. 2019's batch loss as loops over anchors: 1/m sum_i pos_i + neg_i."""
    total = 0.0
    for i in range(len(labels)):
        s = {k: float(unit(x[i]) @ unit(x[k])) for k in range(len(labels))}
        pos = [k for a, k in as_list(pairs[:2]) if a == i]
        neg = [k for a, k in as_list(pairs[2:]) if a == i]
        if pos:
            total += math.log(1 + sum(math.exp(-alpha * (s[k] - lam)) for k in pos)) / alpha
        if neg:
            total += math.log(1 + sum(math.exp(beta * (s[k] - lam)) for k in neg)) / beta
    return total / len(labels)


def test_multi_similarity_config_equals_hand_value():
    # Every pair of CIRCLE, alpha 2, lambda 1, beta 50:
    #   positive terms, each anchor's single positive at S = .8: 1/2 ln(1 + e^.4) = 0.456508
    #   negative terms: anchors 1 and 3 see S = .96: 1/50 ln(1 + e^-2 + e^-20) = 0.002539;
    #   anchors 0 and 2 see S = 0 and .6 at most: 1/50 ln(1 + e^-20 + e^-50) ~ 4e-11
    #   mean over the 4 anchors: (4 * 0.456508 + 2 * 0.002539) / 4 = 0.457777
    loss = load("loss", "multi_similarity")
    assert isinstance(loss, MultiSimilarityLoss) and (loss.alpha, loss.beta, loss.base) == (2, 50, 1)
    hand = (4 * 0.5 * math.log(1 + math.exp(0.4)) + 2 * math.log(1 + math.exp(-2) + math.exp(-20)) / 50) / 4
    assert loss(CIRCLE, CIRCLE_LABELS).item() == pytest.approx(hand, abs=1e-6)
    assert hand == pytest.approx(0.457777, abs=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_multi_similarity_miner_config_and_loss_equal_brute_force(seed):
    labels = LABEL_SETS["3x4"]
    x = random_batch(seed, labels, dim=3)
    miner = load("miner", "multi_similarity")
    assert isinstance(miner, MultiSimilarityMiner) and miner.epsilon == 0.1
    # Zhang et al. 2023 Eq. 4-5 (Wang et al.'s mining): negatives above the least similar positive
    # minus epsilon, positives below the most similar negative plus epsilon.
    n = len(labels)
    s = [[float(unit(x[i]) @ unit(x[j])) for j in range(n)] for i in range(n)]
    expected_pos, expected_neg = [], []
    for i in range(n):
        pos = [j for j in range(n) if j != i and labels[j] == labels[i]]
        neg = [j for j in range(n) if labels[j] != labels[i]]
        expected_pos += [(i, j) for j in pos if s[i][j] - 0.1 < max(s[i][k] for k in neg)]
        expected_neg += [(i, j) for j in neg if s[i][j] + 0.1 > min(s[i][k] for k in pos)]
    pairs = miner(x, labels)
    assert sorted(as_list(pairs[:2])) == expected_pos and sorted(as_list(pairs[2:])) == expected_neg
    loss = load("loss", "multi_similarity")
    assert loss(x, labels, pairs).item() == pytest.approx(ms_reference(x, labels, pairs), rel=1e-9)


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


# ---------------------------------------------------------------------------------------------------
# Even/odd labels: train on the parity of digits 0-5, test on digits 6-9 by digit (Sec. 5.1, Table 1)
# ---------------------------------------------------------------------------------------------------


def test_digits_even_odd_trains_on_parity_and_tests_on_digits():
    splits = Digits(split="disjoint", train_digits=list(range(6)), label_map=EVEN_ODD).splits()
    digits = load_digits().target
    train_digits = digits[np.isin(digits, range(6))]
    np.testing.assert_array_equal(splits.train.labels, train_digits % 2)
    assert set(splits.test.labels.tolist()) == {6, 7, 8, 9}
    assert len(splits.train) + len(splits.test) == len(digits)
    # With the stratified split too, only the training labels are mapped.
    same = Digits(label_map=EVEN_ODD).splits()
    assert set(same.train.labels.tolist()) == {0, 1} and set(same.test.labels.tolist()) == set(range(10))


def test_mnist_even_odd_trains_on_parity_and_tests_on_digits(tmp_path: Path):
    root = make_mnist(tmp_path, per_class=2)
    splits = MNIST(root, classes_split="disjoint", train_classes=6, label_map=EVEN_ODD).splits()
    # Every image of digit d has grey level 20 d + 10: the image tells the true digit.
    true_digits = [
        round((float(splits.train[i][0].mean()) * MNIST.std[0] + MNIST.mean[0]) * 255 - 10) // 20
        for i in range(len(splits.train))
    ]
    assert sorted(set(true_digits)) == list(range(6))
    np.testing.assert_array_equal(splits.train.labels, np.array(true_digits) % 2)
    assert sorted(set(splits.test.labels.tolist())) == [6, 7, 8, 9]
    half = MNIST(root, classes_split="disjoint").splits()
    assert sorted(set(half.train.labels.tolist())) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="dataset.train_classes=6 only applies"):
        MNIST(root, train_classes=6)
    with pytest.raises(ValueError, match="dataset.train_classes=10"):
        MNIST(root, classes_split="disjoint", train_classes=10).splits()
    with pytest.raises(ValueError, match="dataset.label_map has 3 entries"):
        MNIST(root, label_map=[0, 1, 0]).splits()


# ---------------------------------------------------------------------------------------------------
# End to end through Hydra on digits: every new option trains
# ---------------------------------------------------------------------------------------------------

EVEN_ODD_DIGITS = [
    "backbone=small_cnn",
    "dataset.split=disjoint",
    "dataset.train_digits=[0,1,2,3,4,5]",
    f"dataset.label_map=[{','.join(map(str, EVEN_ODD))}]",
    "data.P=2",
    "data.K=20",
]


@pytest.mark.parametrize(
    "overrides",
    [
        ["loss=margin", "miner=easy_positive", "miner.negatives=distance_weighted"],
        ["loss=multi_similarity", "miner=multi_similarity"],
        ["loss=trimmed", "loss@loss.loss=margin", "miner=distance_weighted", "module.loss_lr=0.01"],
        ["miner=easy_positive", *EVEN_ODD_DIGITS],
    ],
    ids=["eps_margin", "multi_similarity", "trimmed_margin", "eps_triplet_even_odd"],
)
def test_levi_options_train_end_to_end(compose_config, overrides):
    metrics = train(compose_config(*overrides))
    assert metrics and all(math.isfinite(v) for v in metrics.values())
    assert 0 < metrics["test/recall@1"] <= 1
