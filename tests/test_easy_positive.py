"""Easy positive sampling (Levi et al. 2021, Sec. 4.3) and its negative rules against brute-force loops,
and Wu et al.'s distance-weighted sampling against the sphere density it assumes."""

from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import pytest
import torch
from pytorch_metric_learning.distances import CosineSimilarity, LpDistance
from pytorch_metric_learning.miners import DistanceWeightedMiner, MultiSimilarityMiner
from scipy.integrate import quad
from scipy.stats import chi2

import batches
from batches import (
    LABEL_SETS,
    as_list,
    draw_counts,
    sphere_distance,
    unit,
)
from configs import load
from noisydml.miners import EasyPositiveMiner, NegativeRule
from noisydml.miners.easy_positive import (
    DistanceWeightedNegatives,
    MultiSimilarityNegatives,
    SemihardNegatives,
)

SEEDS = range(4)
# float64 so that no distance lands on a rule's boundary by rounding.
random_batch = functools.partial(batches.random_batch, dtype=torch.float64)


# ---------------------------------------------------------------------------------------------------
# Easy positive mining against loops
# ---------------------------------------------------------------------------------------------------


def wu_weight(d: float, dim: int, cutoff: float = 0.5, nonzero_loss_cutoff: float = 1.4) -> float:
    """Wu et al. 2017 Sec. 4: q(d)^-1 = d^(2-n) (1 - d^2/4)^(-(n-3)/2), clamped at the cutoffs."""
    if d >= nonzero_loss_cutoff:
        return 0.0
    d = max(d, cutoff)
    return d ** (2 - dim) * (1 - d * d / 4) ** (-(dim - 3) / 2)


def eps_reference(x: torch.Tensor, labels: torch.Tensor, negatives: str, margin=0.2, epsilon=0.1):
    """Per anchor, None (no same-class sample) or (easy positive, {allowed negative: weight}), as loops.

    Distances are Euclidean between the normalised embeddings; for the multi_similarity rules the rule
    is on the cosine similarity S = <x_a/|x_a|, x_n/|x_n|>, against the hardest positive's (MS mining's
    rule) or the easy positive's (multi_similarity_easy_threshold).
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
        s_hardest = min(float(unit(x[a]) @ unit(x[t])) for t in same)
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
            elif negatives == "multi_similarity":
                w = float(float(unit(x[a]) @ unit(x[m])) > s_hardest - epsilon)
            else:
                w = float(float(unit(x[a]) @ unit(x[m])) > s_ap - epsilon)
            if w > 0:
                weights[m] = w
        out[a] = (p, weights)
    return out


MS_RULES = ("multi_similarity", "multi_similarity_easy_threshold")


@pytest.mark.parametrize("negatives", ["random", "semihard", "distance_weighted", *MS_RULES])
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
        if negatives in MS_RULES:
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
            for negatives in ("semihard", *MS_RULES):
                miner = EasyPositiveMiner(negatives=negatives)
                miner(x, labels)
                drops["positive"] += miner.num_anchors_without_positive
                drops[negatives] += miner.num_anchors_without_negative
    # MS's own rule drops an anchor only when every negative is farther than its hardest positive by
    # epsilon, which these batches never give; the easy positive's threshold drops through the same code.
    assert drops["positive"] > 0 and drops["semihard"] > 0 and drops["multi_similarity_easy_threshold"] > 0


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
    # epsilon 0.5 on the distance: MS mining keeps every negative closer than the hardest positive's
    # distance + .5 (S_an > min S_ap - epsilon for a similarity), with the easy positive pair once.
    #   a0 (hardest a2 at 3): b0 1.3, b1 2.4   a1 (a2 at 2): b0 .3, b1 1.4   a2 (a0 at 3): b0 1.7, b1 .6
    #   b0 (b1 at 1.1): a0 1.3, a1 .3          b1 (b0 at 1.1): a1 1.4, a2 .6  c0: no positive
    # On the easy positive's distance instead, a0 (d_ap 1) loses b1 at 2.4.
    miner = EasyPositiveMiner(negatives="multi_similarity", epsilon=0.5, distance=PLAIN)
    a1, p, a2, n = miner(LINE, LINE_LABELS)
    assert as_list((a1, p)) == [(0, 1), (1, 0), (2, 1), (3, 4), (4, 3)]
    ms_negatives = [(0, 3), (0, 4), (1, 3), (1, 4), (2, 3), (2, 4), (3, 0), (3, 1), (4, 1), (4, 2)]
    assert as_list((a2, n)) == ms_negatives
    easy = EasyPositiveMiner(negatives="multi_similarity_easy_threshold", epsilon=0.5, distance=PLAIN)
    assert as_list(easy(LINE, LINE_LABELS)[2:]) == [pair for pair in ms_negatives if pair != (0, 4)]


def ms_batch(seed: int, spread: float) -> tuple[torch.Tensor, torch.Tensor]:
    """A 32 x 5 batch in 128 dimensions: class centres around one direction, samples ``spread`` around
    them (small: a tight batch, every similarity near 1)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(32).repeat_interleave(5)
    centres = torch.randn(32, 128, generator=g, dtype=torch.float64)
    x = 3.0 + centres[labels] + spread * torch.randn(160, 128, generator=g, dtype=torch.float64)
    return x, labels


@pytest.mark.parametrize("spread", [1.0, 0.05])
def test_eps_multi_similarity_keeps_ms_minings_negative_pairs(spread):
    # Levi Sec. 5.2.3: "we replace the positive hard-mining method with EPS and use the same hard-negative
    # method": on the same batch, EPS + MS keeps exactly the negative pairs of PML's MS miner, and for
    # its positives only each anchor's easy one.
    for seed in range(3):
        x, labels = ms_batch(seed, spread)
        ms = MultiSimilarityMiner(epsilon=0.1)
        _, _, ms_a, ms_n = ms(x, labels)
        eps = EasyPositiveMiner(negatives="multi_similarity", epsilon=0.1)
        a1, p, a2, n = eps(x, labels)
        assert sorted(as_list((a2, n))) == sorted(as_list((ms_a, ms_n)))
        assert len(a2) > 0 and len(a1) == len(set(a1.tolist()))
        similarity = CosineSimilarity()(x)
        nearest = torch.where(labels[:, None] == labels[None], similarity.fill_diagonal_(-2), -2).argmax(1)
        assert torch.equal(p, nearest[a1])
        # The easy positive's threshold keeps a strict subset of them.
        easy = EasyPositiveMiner(negatives="multi_similarity_easy_threshold", epsilon=0.1)
        kept = set(as_list(easy(x, labels)[2:]))
        assert kept < set(as_list((ms_a, ms_n)))


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
    assert isinstance(miner, EasyPositiveMiner) and isinstance(miner.negatives, SemihardNegatives)
    assert miner.negatives.margin == 0.2
    assert isinstance(miner.distance, LpDistance) and miner.distance.normalize_embeddings
    ms = load("miner", "easy_positive", "negatives=multi_similarity", "epsilon=0.3")
    assert isinstance(ms.negatives, MultiSimilarityNegatives) and ms.negatives.epsilon == 0.3
    assert isinstance(ms.distance, CosineSimilarity)
    dw = load("miner", "easy_positive", "negatives=distance_weighted", "cutoff=0.4")
    assert isinstance(dw.negatives, DistanceWeightedNegatives)
    assert (dw.negatives.cutoff, dw.negatives.nonzero_loss_cutoff) == (0.4, 1.4)


def test_easy_positive_takes_a_rule_object():
    # A new base method's rule is a NegativeRule of its own: here the hardest negative of each anchor,
    # against a loop over LINE (a0: b0 at 1.3; a1: b0 at .3; a2: b1 at .6; b0: a1 at .3; b1: a2 at .6).
    class HardestNegatives(NegativeRule):
        name = "hardest"

        def weights(self, dist, allowed, dim):
            return allowed & (dist == torch.where(allowed, dist, torch.inf).amin(dim=1, keepdim=True))

    miner = EasyPositiveMiner(negatives=HardestNegatives(), distance=PLAIN)
    assert as_list(miner(LINE, LINE_LABELS)) == [(0, 1, 3), (1, 0, 3), (2, 1, 4), (3, 4, 1), (4, 3, 2)]
    same = EasyPositiveMiner(negatives=SemihardNegatives(margin=0.5), distance=PLAIN)
    assert as_list(same(LINE, LINE_LABELS)) == [(0, 1, 3), (1, 0, 4), (3, 4, 0), (4, 3, 1)]


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
