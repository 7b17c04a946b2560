"""Levi et al. 2021 as Roth et al.'s framework samples it: the baselines and their EPS variants take one
tuple per anchor and differ only in the positive, semi-hard falls back to a random negative, and the
trimmed loss trims batch-size random triplets."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from omegaconf import OmegaConf
from pytorch_metric_learning.distances import LpDistance

import batches
import layouts
from batches import LABEL_SETS, as_list
from configs import compose_node
from noisydml import CONFIG_DIR
from noisydml.data import Digits, MetricDataModule
from noisydml.miners import EasyPositiveMiner, RandomPositiveMiner, RandomTripletsMiner
from noisydml.noise import NoNoise, UniformNoise
from noisydml.run.train import train

# A 16 x 10 batch, the size of Levi et al.'s Omniglot batches, in 8 dimensions.
LABELS = torch.arange(16).repeat_interleave(10)

EVEN_ODD_MAP = [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]

BASELINES = [
    ("levi2021/triplet", "levi2021/eps_triplet"),
    ("levi2021/triplet_semihard", "levi2021/eps_triplet_semihard"),
    ("levi2021/margin_distance_weighted", "levi2021/eps_margin_distance_weighted"),
]


def method(name: str):
    """The miner and loss of ``method=name`` in the composed config."""
    return compose_node("miner", f"method={name}"), compose_node("loss", f"method={name}")


@pytest.mark.parametrize(("baseline", "eps"), BASELINES)
def test_each_anchor_appears_once_in_a_baseline_and_its_eps_variant(baseline, eps):
    # Before: Trip.+SH gave every positive pair x every semi-hard negative (hundreds of triplets per
    # anchor) and Triplet every triplet of the batch (miner=all).
    x = batches.random_batch(0, LABELS, dim=8)
    for name in (baseline, eps):
        miner, _ = method(name)
        anchors, positives, negatives = miner(x, LABELS)
        assert anchors.tolist() == list(range(len(LABELS))), name
        # (Distance-weighted: here every anchor has a negative closer than Wu's cutoff of 1.4.)
        assert (LABELS[positives] == LABELS[anchors]).all() and (positives != anchors).all()
        assert (LABELS[negatives] != LABELS[anchors]).all()


@pytest.mark.parametrize(("baseline", "eps"), BASELINES)
def test_a_baseline_and_its_eps_variant_differ_only_in_the_positive(baseline, eps):
    (base_miner, base_loss), (eps_miner, eps_loss) = method(baseline), method(eps)
    assert type(base_miner) is RandomPositiveMiner and type(eps_miner) is EasyPositiveMiner
    assert vars(base_miner.negatives) == vars(eps_miner.negatives)
    assert type(base_miner.negatives) is type(eps_miner.negatives)
    assert type(base_loss) is type(eps_loss) and base_loss.margin == eps_loss.margin == 0.2
    # Roth et al.: the semi-hard band on the Euclidean distance, the triplet loss on its square.
    for miner in (base_miner, eps_miner):
        assert (miner.distance.power, miner.distance.normalize_embeddings) == (1, True)
    for loss in (base_loss, eps_loss):
        assert loss.distance.power == (1 if "margin" in baseline else 2)


def test_random_positive_is_uniform_over_the_same_class():
    labels = LABEL_SETS["3x4"]
    x = batches.random_batch(1, labels, dim=4)
    miner = RandomPositiveMiner(negatives="random")
    counts = Counter()
    torch.manual_seed(0)
    for _ in range(600):
        a, p, _ = miner(x, labels)
        assert a.tolist() == list(range(len(labels)))
        counts.update(zip(a.tolist(), p.tolist(), strict=True))
    # Each anchor of a class of 4 has 3 positives, each drawn about 200 times of 600.
    assert set(counts) == {(a, p) for a in range(12) for p in range(12) if a != p and a // 4 == p // 4}
    assert all(150 < c < 250 for c in counts.values())


def test_eps_semihard_falls_back_to_a_random_negative():
    # Well-separated classes: no negative is inside any anchor's margin, so the band is empty for all.
    labels = torch.tensor([0, 0, 0, 1, 1, 1])
    x = torch.tensor([[0.0], [0.01], [0.02], [5.0], [5.01], [5.02]])
    plain = LpDistance(normalize_embeddings=False, p=2, power=1)
    dropping = EasyPositiveMiner(negatives="semihard", fallback="none", distance=plain)
    assert len(dropping(x, labels)[0]) == 0 and dropping.num_anchors_without_negative == 6
    falling_back = EasyPositiveMiner(negatives="semihard", fallback="random", distance=plain)
    torch.manual_seed(0)
    draws = Counter()
    for _ in range(300):
        anchors, _, negatives = falling_back(x, labels)
        assert anchors.tolist() == list(range(6)) and falling_back.num_anchors_without_negative == 0
        draws.update(zip(anchors.tolist(), negatives.tolist(), strict=True))
    # Uniform over the 3 negatives of each anchor.
    assert set(draws) == {(a, n) for a in range(6) for n in range(6) if (a < 3) != (n < 3)}
    assert all(60 < c < 140 for c in draws.values())


def test_eps_semihard_keeps_the_band_when_it_has_one():
    # b0 is inside a0's margin (d_ap 0.1, d_an 0.25 < 0.1 + 0.2); the fallback must not widen the choice.
    labels = torch.tensor([0, 0, 1, 1])
    x = torch.tensor([[0.0], [0.1], [0.25], [3.0]])
    plain = LpDistance(normalize_embeddings=False, p=2, power=1)
    miner = EasyPositiveMiner(negatives="semihard", fallback="random", distance=plain)
    for seed in range(20):
        torch.manual_seed(seed)
        assert (0, 1, 2) in as_list(miner(x, labels))


def test_eps_config_falls_back_by_default():
    miner, _ = method("levi2021/eps_triplet_semihard")
    assert miner.negatives.fallback == "random"
    with pytest.raises(ValueError, match="miner.fallback='sometimes' is not one of none, random"):
        EasyPositiveMiner(negatives="semihard", fallback="sometimes")


def test_trimmed_triplet_trims_batch_size_random_triplets():
    # Before: trimming over every triplet of the batch (miner=all), 16 x 10 -> 216,000 triplets.
    miner, loss = method("levi2021/trimmed_triplet")
    assert isinstance(miner, RandomTripletsMiner)
    assert loss.loss.distance.power == 2
    x = batches.random_batch(0, LABELS, dim=8)
    torch.manual_seed(0)
    a, p, n = miner(x, LABELS)
    assert len(a) == len(LABELS)
    assert len(set(zip(a.tolist(), p.tolist(), n.tolist(), strict=True))) == len(LABELS)
    assert (LABELS[a] == LABELS[p]).all() and (a != p).all() and (LABELS[a] != LABELS[n]).all()


def test_random_triplets_are_uniform_over_every_triplet():
    labels = torch.tensor([0, 0, 1, 1])
    # 4 anchors x 1 positive x 2 negatives = 8 triplets; draw 2 at a time.
    miner = RandomTripletsMiner(num_triplets=2)
    x = torch.zeros(4, 2)
    torch.manual_seed(0)
    counts = Counter()
    for _ in range(800):
        counts.update(as_list(miner(x, labels)))
    assert len(counts) == 8 and all(150 < c < 250 for c in counts.values())
    assert len(as_list(RandomTripletsMiner(num_triplets=100)(x, labels))) == 8
    with pytest.raises(ValueError, match="miner.num_triplets=0"):
        RandomTripletsMiner(num_triplets=0)


EVEN_ODD = ["digits/levi2021_even_odd", "levi2021/table1_mnist_even_odd", "mnist5k/levi2021_even_odd"]


@pytest.mark.parametrize("experiment", EVEN_ODD)
@pytest.mark.parametrize("normalize", [False, True])
def test_even_odd_normalisation_is_one_switch(compose_config, experiment, normalize):
    # App. C's plain 2-unit output: before, the loss and the miner normalised the embedding anyway.
    cfg = compose_config(f"experiment={experiment}", f"backbone.normalize={normalize}")
    backbone, loss, miner = (instantiate(cfg[key]) for key in ("backbone", "loss", "miner"))
    assert backbone.normalize is normalize
    assert loss.distance.normalize_embeddings is normalize
    assert miner.distance.normalize_embeddings is normalize


def test_even_odd_embeddings_are_not_unit_norm_in_training_and_evaluation(compose_config):
    # Shortened, and a smaller batch: another run than the experiment's, under labels of its own.
    cfg = compose_config(
        f"experiment={EVEN_ODD[0]}", "data.K=10", "seed=0", "name=even_odd", "report.figure=tests/even_odd"
    )
    backbone, loss, miner = (instantiate(cfg[key]) for key in ("backbone", "loss", "miner"))
    distances = (loss.distance, miner.distance)
    assert not backbone.normalize and not any(d.normalize_embeddings for d in distances)
    train(cfg)
    embeddings = np.load(Path(cfg.paths.output_dir) / "embeddings.npz")["embeddings"]
    assert embeddings.shape[1] == 2
    assert np.abs(np.linalg.norm(embeddings, axis=1) - 1).max() > 0.1


# ---------------------------------------------------------------------------------------------------
# The training split scored by true labels: Table 1's "train digits" columns, Table 4
# ---------------------------------------------------------------------------------------------------


def scored_train_labels(score_train, noise=None, **digits) -> tuple[np.ndarray, MetricDataModule]:
    module = MetricDataModule(Digits(**digits), noise or NoNoise(), P=2, K=10, score_train=score_train)
    module.setup()
    return np.concatenate([labels.numpy() for _, labels, _ in module.scored_train_dataloader()]), module


def test_even_odd_training_split_is_scored_by_digit():
    labels, module = scored_train_labels(
        True, split="disjoint", train_digits=list(range(6)), label_map=EVEN_ODD_MAP
    )
    assert set(labels.tolist()) == set(range(6))
    assert set(module.train_set.labels.tolist()) == {0, 1}
    # The held-out validation samples are not trained on, so not scored.
    assert len(labels) == len(module.train_set)
    observed, _ = scored_train_labels(
        "observed", split="disjoint", train_digits=list(range(6)), label_map=EVEN_ODD_MAP
    )
    assert set(observed.tolist()) == {0, 1}
    unscored = MetricDataModule(Digits(), NoNoise(), P=2, K=10)
    unscored.setup()
    assert unscored.scored_train_dataloader() is None


def test_noisy_training_split_is_scored_by_clean_labels():
    noise = UniformNoise(rate=0.3, seed=0)
    true, module = scored_train_labels("true", noise)
    np.testing.assert_array_equal(true, module.noisy.true)
    observed, _ = scored_train_labels("observed", noise)
    np.testing.assert_array_equal(observed, module.noisy.observed)
    assert (true != observed).mean() > 0.2
    with pytest.raises(ValueError, match="data.score_train='clean' is not one of null, true, observed"):
        MetricDataModule(Digits(), NoNoise(), P=2, K=10, score_train="clean")


def test_the_boolean_spellings_of_the_label_options_mean_their_options(compose_config):
    """`data.val_labels=true` (the docs' spelling) and `data.score_train=false` arrive as booleans."""
    module = instantiate(
        compose_config("data.val_labels=true", "data.score_train=false").data, Digits(), NoNoise()
    )
    assert (module.val_labels, module.score_train) == ("true", None)
    module = instantiate(
        compose_config("data.val_labels=false", "data.score_train=true").data, Digits(), NoNoise()
    )
    assert (module.val_labels, module.score_train) == ("observed", "true")


def test_even_odd_run_reports_train_digit_recall(compose_config):
    # Every training image trained on, the last epoch tested (no hold-out, nothing selected): one test.
    # Shortened, and a smaller batch: another run than the experiment's, under labels of its own.
    cfg = compose_config(
        f"experiment={EVEN_ODD[0]}", "data.K=10", "seed=0", "name=even_odd", "report.figure=tests/even_odd"
    )
    metrics = train(cfg)
    assert {"test/recall@1", "test_train/recall@1"} <= set(metrics)
    assert not any(name.startswith(("test_last", "val/")) for name in metrics)
    assert 0 < metrics["test_train/recall@1"] <= 1


@pytest.mark.parametrize(
    ("experiment", "classes"), [("table3_omniglot_languages", 3), ("table3_omniglot_letters", 2 + 3 + 2)]
)
def test_omniglot_experiments_score_the_training_alphabets(
    compose_config, tmp_path, monkeypatch, experiment, classes
):
    # Table 4: the models trained on alphabet labels, scored on the training alphabets by alphabet
    # ("Language") and by letter ("Letters"). 3 alphabets of 2, 3 and 2 letters, 2 images each.
    monkeypatch.setattr(torchvision.datasets.Omniglot, "_check_integrity", lambda self: True)
    layouts.make_omniglot(tmp_path / "data", characters=(2, 3, 2), per_character=2)
    cfg = compose_config(
        f"experiment=levi2021/{experiment}", f"paths.data_dir={tmp_path / 'data'}", "data.P=2", "data.K=2"
    )
    module = instantiate(cfg.data, _partial_=True)(
        dataset=instantiate(cfg.dataset), noise=instantiate(cfg.noise)
    )
    module.setup("fit")
    loader = module.scored_train_dataloader()
    assert loader is not None
    labels = np.concatenate([batch_labels.numpy() for _, batch_labels, _ in loader])
    assert len(labels) == len(module.splits.train) == 14 and len(np.unique(labels)) == classes
    # Each scored class lies within one training alphabet, and the alphabets' images are its whole split.
    alphabets = module.noisy.true
    assert all(len(np.unique(alphabets[labels == c])) == 1 for c in np.unique(labels))


def test_trimmed_margin_trims_the_dist_margin_baselines_triplets():
    trimmed, _ = method("levi2021/trimmed_margin")
    baseline, _ = method("levi2021/margin_distance_weighted")
    assert type(trimmed) is type(baseline) is RandomPositiveMiner
    assert vars(trimmed.negatives) == vars(baseline.negatives)


def test_fig5b_sweeps_positives_per_class_at_a_batch_of_160(compose_config):
    # Fig. 5b: EPS + Dist-Margin against the number of positives in the batch, K - 1, the batch kept at
    # the paper's 160; the 30 training alphabets bound P.
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        sweep = compose("config", ["experiment=levi2021/fig5b_positives"], return_hydra_config=True)
    swept = [int(k) for k in str(sweep.hydra.sweeper.params["data.K"]).split(",")]
    assert len(swept) >= 4 and min(swept) > 5
    for k in swept:
        cfg = compose_config("experiment=levi2021/fig5b_positives", f"data.K={k}")
        assert cfg.data.P * cfg.data.K == 160 and cfg.data.P <= 30
        assert cfg.miner.negatives == "distance_weighted"
    with pytest.raises(ValueError, match="data.K=7 does not divide the batch of 160"):
        OmegaConf.to_container(
            compose_config("experiment=levi2021/fig5b_positives", "data.K=7"), resolve=True
        )
