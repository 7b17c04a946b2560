"""BSPML's baselines (Zhang et al. 2023, "Compared algorithms"): each config against a value worked by hand
or a brute-force loop, and each trained end to end through Hydra on digits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from pytorch_metric_learning import losses
from pytorch_metric_learning.distances import CosineSimilarity, LpDistance, SNRDistance
from pytorch_metric_learning.reducers import MeanReducer

from noisydml import CONFIG_DIR
from noisydml.losses import ProxyAnchorLoss, RescaledHingeTripletLoss
from noisydml.run.train import train
from training_sets import of_classes

# The five 2-d embeddings of test_losses.py; x1 = (0, 3) only comes out right if it is normalised.
EMBEDDINGS = torch.tensor([[1.0, 0.0], [0.0, 3.0], [0.6, 0.8], [0.8, 0.6], [-1.0, 0.0]], dtype=torch.float64)
LABELS = torch.tensor([0, 0, 1, 1, 1])
# Cosines: c01 = 0, c02 = .6, c03 = .8, c04 = -1, c12 = .8, c13 = .6, c14 = 0, c23 = .96, c24 = -.6,
# c34 = -.8; on the unit circle d^2 = 2 - 2c.
TRIPLETS = (torch.tensor([0, 0, 2, 3, 0]), torch.tensor([1, 1, 3, 2, 1]), torch.tensor([2, 3, 0, 1, 4]))


def load_loss(name: str, **overrides):
    cfg = OmegaConf.load(CONFIG_DIR / "loss" / f"{name}.yaml")
    cfg.merge_with(overrides)
    return instantiate(cfg)


def load_miner(name: str):
    return instantiate(OmegaConf.load(CONFIG_DIR / "miner" / f"{name}.yaml"))


def test_contrastive_cosine_equals_hand_value():
    # [1 - S]_+ over the 8 ordered positive pairs: (0,1) 1 - 0 = 1; (2,3) 1 - .96 = .04; (2,4) 1 + .6 = 1.6;
    # (3,4) 1 + .8 = 1.8; each twice: mean (2 + .08 + 3.2 + 3.6) / 8 = 1.11 (all non-zero).
    # [S]_+ over the 12 ordered negative pairs: .6, .8, 0 (anchor 0 vs 2, 3, 4), .8, .6, 0 (anchor 1), each
    # twice: the 8 non-zero ones average 5.6 / 8 = 0.7.  Total 1.81.
    loss = load_loss("contrastive_cosine")
    assert isinstance(loss, losses.ContrastiveLoss) and isinstance(loss.distance, CosineSimilarity)
    assert loss(EMBEDDINGS, LABELS).item() == pytest.approx(1.81, abs=1e-9)


def test_triplet_smooth_with_batch_hard_equals_hand_value():
    # Per anchor, hardest positive and hardest negative (Euclidean, unit circle):
    #   a0: d01 = 1.414214, d03 = 0.632456 -> log(1 + e^0.781758) = 1.158545
    #   a1: d10 = 1.414214, d12 = 0.632456 -> 1.158545
    #   a2: d24 = sqrt(3.2) = 1.788854, d21 = 0.632456 -> log(1 + e^1.156398) = 1.429918
    #   a3: d34 = sqrt(3.6) = 1.897367, d30 = 0.632456 -> log(1 + e^1.264911) = 1.513560
    #   a4: d43 = 1.897367, d41 = 1.414214 -> log(1 + e^0.483153) = 0.963639
    # mean 1.244841
    loss, miner = load_loss("triplet_smooth"), load_miner("batch_hard")
    assert loss(EMBEDDINGS, LABELS, miner(EMBEDDINGS, LABELS)).item() == pytest.approx(1.244841, abs=1e-6)


def test_triplet_smooth_with_batch_hard_is_hermans_soft_margin():
    # Hermans et al. 2017, Eq. 5 with the soft margin: mean_a log(1 + exp(max_p d_ap - min_n d_an)).
    gen = torch.Generator().manual_seed(0)
    embeddings = torch.randn(24, 8, generator=gen, dtype=torch.float64)
    labels = torch.arange(6).repeat_interleave(4)
    loss, miner = load_loss("triplet_smooth"), load_miner("batch_hard")
    dist = LpDistance()(embeddings)
    expected = np.mean(
        [
            math.log1p(math.exp(dist[a][labels == labels[a]].max() - dist[a][labels != labels[a]].min()))
            for a in range(24)
        ]
    )
    assert loss(embeddings, labels, miner(embeddings, labels)).item() == pytest.approx(expected, rel=1e-9)


def test_fastap_equals_hand_value():
    # Four points on the unit circle; squared distances fall on PML's bin centres 0, .4, ..., 4 (10 bins):
    # x0 = (1, 0), x1 = (.8, .6) [class 0]; x2 = (.8, -.6), x3 = (-1, 0) [class 1].
    # d2: 01 = .4, 02 = .4, 03 = 4, 12 = 1.44 (60% bin 1.6, 40% bin 1.2), 13 = 3.6, 23 = 3.6.
    # AP estimate per anchor, sum_j h+_j H+_j / H_j / N+ (H cumulative counts):
    #   a0: positive at .4 with one negative there: 1 * 1 / 2 = .5 -> 1 - AP = .5
    #   a1: positive at .4, negatives farther: 1 -> 0
    #   a2: positive at 3.6, negatives at .4 and 1.2/1.6: 1 / 3 -> 2/3
    #   a3: positive at 3.6 with a negative there: 1 / 2 -> .5
    # mean (0.5 + 0 + 2/3 + 0.5) / 4 = 0.416667
    embeddings = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.8, -0.6], [-1.0, 0.0]], dtype=torch.float64)
    loss = load_loss("fastap")
    assert isinstance(loss, losses.FastAPLoss) and loss.num_bins == 10
    assert loss(embeddings, torch.tensor([0, 0, 1, 1])).item() == pytest.approx(5 / 12, abs=1e-9)


# --- RDML: the rescaled hinge loss (Xu et al. 2017) on triplets ---------------------------------------

# beta_1 = 1 / (1 - e^-1) = 1.581977. Hinges [d2_ap - d2_an + 1]_+ of TRIPLETS (squared distances):
#   (0,1,2): 2 - .8 + 1 = 2.2;  (0,1,3): 2 - .4 + 1 = 2.6;  (2,3,0), (3,2,1): .08 - .8 + 1 = .28;
#   (0,1,4): 2 - 4 + 1 < 0
# Rescaled: 1.581977 (1 - e^-2.2) = 1.406689;  (1 - e^-2.6) -> 1.464478;  (1 - e^-.28) -> 0.386344 (x2); 0
RDML_MEAN = (1.406689 + 1.464478 + 2 * 0.386344) / 5  # 0.728771


def test_rdml_equals_hand_value():
    loss = load_loss("rdml")
    assert isinstance(loss, RescaledHingeTripletLoss) and (loss.eta, loss.margin) == (1.0, 1.0)
    assert loss(EMBEDDINGS, LABELS, TRIPLETS).item() == pytest.approx(RDML_MEAN, abs=1e-6)


def test_rdml_tends_to_the_hinge_and_is_bounded():
    hinge = losses.TripletMarginLoss(margin=1.0, distance=LpDistance(power=2), reducer=MeanReducer())
    small_eta = RescaledHingeTripletLoss(eta=1e-6)
    assert small_eta(EMBEDDINGS, LABELS, TRIPLETS).item() == pytest.approx(
        hinge(EMBEDDINGS, LABELS, TRIPLETS).item(), rel=1e-5
    )
    # However far the flipped label puts a triplet, its loss stays below beta_eta.
    far = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    one = tuple(torch.tensor([i]) for i in (0, 1, 2))
    for eta in (0.5, 1.0, 4.0):
        value = RescaledHingeTripletLoss(eta=eta)(far, torch.tensor([0, 0, 1]), one).item()
        assert value == pytest.approx((1 - math.exp(-5 * eta)) / (1 - math.exp(-eta)), rel=1e-9)
        assert value < 1 / (1 - math.exp(-eta))


def test_rdml_gradcheck():
    gen = torch.Generator().manual_seed(0)
    embeddings = torch.randn(8, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])
    loss = RescaledHingeTripletLoss(eta=2.0)
    assert torch.autograd.gradcheck(lambda e: loss(e, labels), (embeddings,))


# --- Proxy-Anchor ------------------------------------------------------------------------------------


def test_proxy_anchor_equals_hand_value():
    # Proxies p0 = (1, 0), p1 = (0, 1); x0 = (1, 0), x1 = (.6, .8) [class 0], x2 = (0, 1) [class 1];
    # alpha 32, delta .1. Kim et al. Eq. 4:
    #   positive, over P+ = {p0, p1}: log(1 + e^{-32 (1 - .1)} + e^{-32 (.6 - .1)}) = 1.125e-7 (p0),
    #     log(1 + e^{-28.8}) = 3.1e-13 (p1); mean 5.63e-8
    #   negative, over all proxies: p0 vs x2: log(1 + e^{32 (0 + .1)}) = 3.239953;
    #     p1 vs x0, x1: log(1 + e^{3.2} + e^{32 (.8 + .1)}) = 28.800000; mean 16.019977
    loss = load_loss("proxy_anchor", embedding_size=2)
    loss.setup(of_classes(2))
    loss.proxies.data = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    x = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], dtype=torch.float64)
    assert loss(x, torch.tensor([0, 0, 1])).item() == pytest.approx(16.019977, abs=1e-6)


def test_proxy_anchor_matches_pml_once_sized():
    torch.manual_seed(0)
    ours = ProxyAnchorLoss(embedding_size=5)
    assert ours.proxies.shape == (0, 5)
    ours.setup(of_classes(4))
    assert ours.proxies.shape == (4, 5) and ours.proxies.requires_grad and ours.proxies.std() > 0
    pml = losses.ProxyAnchorLoss(num_classes=4, embedding_size=5, margin=0.1, alpha=32)
    pml.proxies.data = ours.proxies.data.clone()
    x, y = torch.randn(12, 5), torch.arange(12) % 4
    assert ours(x, y).item() == pytest.approx(pml(x, y).item(), rel=1e-6)


def test_proxy_anchor_refuses_a_miner_and_an_unsized_call():
    loss = ProxyAnchorLoss(embedding_size=2)
    with pytest.raises(RuntimeError, match="setup"):
        loss(EMBEDDINGS, LABELS)
    loss.setup(of_classes(2))
    with pytest.raises(ValueError, match="miner=none"):
        loss(EMBEDDINGS, LABELS, TRIPLETS)


# --- SNR ---------------------------------------------------------------------------------------------


def snr(a: np.ndarray, x: np.ndarray) -> float:
    """Yuan et al. 2019: Var(a - x) / Var(a), of the normalised embeddings (unbiased variances, as PML)."""
    a, x = a / np.linalg.norm(a), x / np.linalg.norm(x)
    return np.var(a - x, ddof=1) / np.var(a, ddof=1)


def test_snr_equals_the_contrastive_loss_on_snr_by_loops():
    gen = torch.Generator().manual_seed(0)
    embeddings = torch.randn(9, 6, generator=gen, dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    loss = load_loss("snr")
    assert isinstance(loss.distance, SNRDistance) and (loss.pos_margin, loss.neg_margin) == (0, 1)
    e = embeddings.numpy()
    pairs = [(i, j) for i in range(9) for j in range(9) if i != j]
    pos = [snr(e[i], e[j]) for i, j in pairs if labels[i] == labels[j]]
    neg = [max(0.0, 1 - snr(e[i], e[j])) for i, j in pairs if labels[i] != labels[j]]
    # AvgNonZeroReducer: each part over its non-zero terms.
    expected = np.mean([v for v in pos if v > 0]) + np.mean([v for v in neg if v > 0])
    assert loss(embeddings, labels).item() == pytest.approx(expected, rel=1e-9)


def test_snr_with_bspml_margins_never_pushes_negatives():
    # Why snr.yaml departs from "positive margin 1, negative margin 0": SNR distances are >= 0, so the
    # negative term [0 - d_an]_+ is 0 for any embedding, and collapsing every class costs nothing.
    gen = torch.Generator().manual_seed(0)
    one_point = torch.randn(1, 4, generator=gen, dtype=torch.float64)
    collapsed = one_point + 1e-3 * torch.randn(6, 4, generator=gen, dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    as_printed = load_loss("snr", pos_margin=1.0, neg_margin=0.0)
    assert as_printed(collapsed, labels).item() == 0.0
    assert load_loss("snr")(collapsed, labels).item() > 0.5


# --- configs, end to end -----------------------------------------------------------------------------


def test_miner_none_composes_to_no_miner(compose_config):
    assert compose_config("miner=none").miner is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        ("loss=contrastive_cosine", "miner=none"),
        ("loss=triplet_smooth", "miner=batch_hard"),
        ("loss=fastap", "miner=none"),
        ("loss=rdml", "miner=none"),
        # Kim et al.: proxies at 100 x the network's rate (Adam 1e-3 here).
        ("loss=proxy_anchor", "miner=none", "module.loss_lr=0.1"),
        ("loss=snr", "miner=none"),
    ],
)
def test_baseline_trains_on_digits(compose_config, overrides):
    metrics = train(compose_config(*overrides))
    assert metrics and all(np.isfinite(v) for v in metrics.values())
