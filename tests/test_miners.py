"""Miners against brute-force Python loops over every (anchor, positive, negative) of small batches."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from pytorch_metric_learning.distances import CosineSimilarity, LpDistance
from scipy.stats import chi2

from batches import LABEL_SETS, as_list, draw_counts, random_batch
from noisydml import CONFIG_DIR
from noisydml.miners import AllTripletsMiner, FixedSemihardMiner, RandomSemihardMiner

MINER_CONFIGS = CONFIG_DIR / "miner"
MARGIN = 0.2
SEEDS = range(8)


def positive_pairs(labels: torch.Tensor) -> list[tuple[int, int]]:
    n = len(labels)
    return [(a, p) for a in range(n) for p in range(n) if a != p and labels[a] == labels[p]]


def negatives_of(a: int, labels: torch.Tensor) -> list[int]:
    return [n for n in range(len(labels)) if labels[n] != labels[a]]


def random_semihard_candidates(dist: torch.Tensor, labels: torch.Tensor) -> dict[tuple[int, int], list[int]]:
    """Eq. 28's candidate set of every positive pair, written as a loop."""
    return {
        (a, p): [n for n in negatives_of(a, labels) if dist[a, p] - dist[a, n] + MARGIN > 0]
        for a, p in positive_pairs(labels)
    }


def fixed_semihard_reference(dist: torch.Tensor, labels: torch.Tensor) -> tuple[list[tuple], int]:
    """Eq. 29 as a loop: the closest negative farther than the positive, lowest index on ties."""
    triplets, dropped = [], 0
    for a, p in positive_pairs(labels):
        farther = [n for n in negatives_of(a, labels) if dist[a, n] > dist[a, p]]
        if farther:
            triplets.append((a, p, min(farther, key=lambda n: (dist[a, n].item(), n))))
        else:
            dropped += 1
    return triplets, dropped


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("labels", LABEL_SETS.values(), ids=LABEL_SETS.keys())
def test_fixed_semihard_equals_brute_force(seed, labels):
    embeddings = random_batch(seed, labels)
    miner = FixedSemihardMiner()
    expected, dropped = fixed_semihard_reference(LpDistance()(embeddings), labels)
    assert as_list(miner(embeddings, labels)) == expected
    assert miner.num_pairs_without_negative == dropped


def test_semihard_miners_drop_pairs_somewhere_in_the_random_batches():
    # Otherwise the brute-force comparisons above and below would never exercise the drop.
    dropped = {"fixed": 0, "random": 0}
    for labels in LABEL_SETS.values():
        for seed in SEEDS:
            embeddings = random_batch(seed, labels)
            for name, miner in (("fixed", FixedSemihardMiner()), ("random", RandomSemihardMiner())):
                miner(embeddings, labels)
                dropped[name] += miner.num_pairs_without_negative
    assert dropped["fixed"] > 0 and dropped["random"] > 0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("labels", LABEL_SETS.values(), ids=LABEL_SETS.keys())
def test_random_semihard_one_valid_negative_per_pair_that_has_one(seed, labels):
    embeddings = random_batch(seed, labels)
    candidates = random_semihard_candidates(LpDistance()(embeddings), labels)
    miner = RandomSemihardMiner(margin=MARGIN)
    torch.manual_seed(seed)
    triplets = as_list(miner(embeddings, labels))

    pairs_with_negative = [pair for pair, negs in candidates.items() if negs]
    assert [(a, p) for a, p, _ in triplets] == pairs_with_negative
    assert all(n in candidates[(a, p)] for a, p, n in triplets)
    assert miner.num_pairs_without_negative == len(candidates) - len(pairs_with_negative)


@pytest.mark.slow
def test_random_semihard_draws_every_valid_negative_uniformly():
    labels = LABEL_SETS["3x4"]
    embeddings = random_batch(3, labels)
    candidates = random_semihard_candidates(LpDistance()(embeddings), labels)
    miner = RandomSemihardMiner(margin=MARGIN)
    draws = 2000
    counts = draw_counts(miner, embeddings, labels, draws)

    # Pearson's statistic summed over the pairs with a real choice, each uniform over its candidates.
    statistic, dof = 0.0, 0
    for (a, p), negs in candidates.items():
        if len(negs) < 2:
            continue
        observed = torch.tensor([counts[(a, p, n)] for n in negs], dtype=torch.float64)
        assert observed.sum() == draws
        expected = draws / len(negs)
        statistic += float(((observed - expected) ** 2 / expected).sum())
        dof += len(negs) - 1
    assert dof > 20
    assert chi2.sf(statistic, dof) > 1e-3


def test_random_semihard_is_reproducible_under_manual_seed():
    labels = torch.arange(6).repeat_interleave(5)
    embeddings = random_batch(0, labels, dim=16)
    miner = RandomSemihardMiner()
    runs = []
    for seed in (7, 7, 8):
        torch.manual_seed(seed)
        runs.append(miner(embeddings, labels))
    assert all(torch.equal(x, y) for x, y in zip(runs[0], runs[1], strict=True))
    assert not torch.equal(runs[0][2], runs[2][2])


def points_on_a_line(*xs: float) -> torch.Tensor:
    return torch.tensor([[x, 0.0] for x in xs])


def test_random_semihard_hand_built_drops():
    # Unnormalised distances on a line, margin 0.5. a0=0, a1=1 | b0=1.3, b1=3 | c0=10, c1=10.1.
    # (a0,a1): d_ap 1; b0: 1 - 1.3 + .5 = .2 > 0 yes; b1: 1 - 3 + .5 < 0; c: no   -> b0
    # (a1,a0): d_ap 1; b0: 1 - .3 + .5 > 0 yes;  b1: 1 - 2 + .5 < 0; c: no       -> b0
    # (b0,b1): d_ap 1.7; a0: 1.7 - 1.3 + .5 > 0, a1: 1.7 - .3 + .5 > 0; c: no    -> a0 or a1
    # (b1,b0): d_ap 1.7; a0: 1.7 - 3 + .5 < 0, a1: 1.7 - 2 + .5 = .2 > 0; c: no  -> a1
    # (c0,c1), (c1,c0): d_ap .1, every negative at 7 or more                      -> dropped
    embeddings = points_on_a_line(0, 1, 1.3, 3, 10, 10.1)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    miner = RandomSemihardMiner(margin=0.5, distance=LpDistance(normalize_embeddings=False))
    seen = set()
    for seed in range(20):
        torch.manual_seed(seed)
        triplets = as_list(miner(embeddings, labels))
        assert miner.num_pairs_without_negative == 2
        assert triplets[:2] == [(0, 1, 2), (1, 0, 2)] and triplets[3] == (3, 2, 1) and len(triplets) == 4
        seen.add(triplets[2])
    assert seen == {(2, 3, 0), (2, 3, 1)}


def test_fixed_semihard_hand_built():
    # Same line: the closest negative farther than the positive.
    # (a0,a1) d_ap 1: b0 1.3 -> b0. (a1,a0) d_ap 1: b0 .3 too close, b1 2 -> b1.
    # (b0,b1) d_ap 1.7: a0 1.3, a1 .3 too close, c0 8.7 -> c0. (b1,b0) d_ap 1.7: a1 2 < a0 3 -> a1.
    # (c0,c1) d_ap .1: b1 7 -> b1. (c1,c0) d_ap .1: b1 7.1 -> b1.
    embeddings = points_on_a_line(0, 1, 1.3, 3, 10, 10.1)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    miner = FixedSemihardMiner(distance=LpDistance(normalize_embeddings=False))
    expected = [(0, 1, 2), (1, 0, 3), (2, 3, 4), (3, 2, 1), (4, 5, 3), (5, 4, 3)]
    assert as_list(miner(embeddings, labels)) == expected
    assert miner.num_pairs_without_negative == 0

    # a0=0, a1=10, b0=1: from either end of the positive pair, b0 is closer than the positive.
    assert as_list(miner(points_on_a_line(0, 10, 1), torch.tensor([0, 0, 1]))) == []
    assert miner.num_pairs_without_negative == 2


@pytest.mark.parametrize("miner_cls", [RandomSemihardMiner, FixedSemihardMiner, AllTripletsMiner])
def test_batch_without_positive_pair_gives_empty_triplets(miner_cls):
    miner = miner_cls()
    out = miner(torch.randn(5, 3), torch.arange(5))
    assert len(out) == 3
    assert all(t.numel() == 0 and t.dtype == torch.int64 for t in out)
    assert getattr(miner, "num_pairs_without_negative", 0) == 0


def test_pairs_of_a_single_class_batch_are_all_dropped():
    miner = RandomSemihardMiner()
    out = miner(torch.randn(4, 3), torch.zeros(4, dtype=torch.int64))
    assert all(t.numel() == 0 for t in out)
    assert miner.num_pairs_without_negative == 12


def test_fixed_semihard_under_cosine_similarity_matches_euclidean():
    # On the unit sphere d^2 = 2 - 2 cos, so the inverted similarity must order negatives identically.
    labels = LABEL_SETS["3x4"]
    for seed in SEEDS:
        embeddings = random_batch(seed, labels, dim=4)
        euclid = FixedSemihardMiner()(embeddings, labels)
        cosine = FixedSemihardMiner(distance=CosineSimilarity())(embeddings, labels)
        assert all(torch.equal(x, y) for x, y in zip(euclid, cosine, strict=True))


def test_all_triplets_equals_brute_force():
    labels = LABEL_SETS["uneven"]
    expected = [(a, p, n) for a, p in positive_pairs(labels) for n in negatives_of(a, labels)]
    assert sorted(as_list(AllTripletsMiner()(torch.randn(len(labels), 2), labels))) == expected


def load_miner(name: str):
    return instantiate(OmegaConf.load(MINER_CONFIGS / f"{name}.yaml"))


def test_batch_hard_config_equals_brute_force():
    miner = load_miner("batch_hard")
    for labels in LABEL_SETS.values():
        for seed in SEEDS:
            embeddings = random_batch(seed, labels)
            dist = LpDistance()(embeddings)
            expected = []
            for a in range(len(labels)):
                positives = [p for p in range(len(labels)) if p != a and labels[p] == labels[a]]
                negatives = negatives_of(a, labels)
                if positives and negatives:
                    hardest_p = max(positives, key=lambda p: dist[a, p].item())
                    expected.append((a, hardest_p, min(negatives, key=lambda n: dist[a, n].item())))
            assert as_list(miner(embeddings, labels)) == expected


@pytest.mark.parametrize("name", ["random_semihard", "fixed_semihard", "batch_hard", "all"])
def test_miner_configs_instantiate_and_mine(name):
    miner = load_miner(name)
    labels = torch.arange(4).repeat_interleave(5)
    anchors, positives, negatives = miner(torch.randn(20, 8), labels)
    assert len(anchors) > 0
    assert torch.equal(labels[anchors], labels[positives])
    assert not (labels[anchors] == labels[negatives]).any()
    assert not (anchors == positives).any()


def test_semihard_configs_use_the_paper_distance_and_margin():
    random_semihard = load_miner("random_semihard")
    assert isinstance(random_semihard, RandomSemihardMiner) and random_semihard.margin == 0.2
    for miner in (random_semihard, load_miner("fixed_semihard")):
        distance = miner.distance
        assert isinstance(distance, LpDistance)
        assert (distance.normalize_embeddings, distance.p, distance.power) == (True, 2, 1)
