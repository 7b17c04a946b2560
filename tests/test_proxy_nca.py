"""ProxyNCA (Levi et al. 2021's baseline, Tables 2-3): PML's loss with proxies sized from the data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from pytorch_metric_learning import losses

from noisydml import CONFIG_DIR
from noisydml.losses import ProxyNCALoss
from noisydml.run.train import train
from training_sets import of_classes


def config_loss(embedding_size: int) -> ProxyNCALoss:
    cfg = OmegaConf.load(CONFIG_DIR / "loss" / "proxy_nca.yaml")
    cfg.embedding_size = embedding_size
    return instantiate(cfg)


def test_proxy_nca_equals_hand_value():
    # Proxies p0 = (1, 0), p1 = (0, 1); x0 = (1, 0) [class 0] and x1 = (0, 2) [class 1], normalised to
    # (0, 1). Squared distances on the unit circle: x0-p0 0, x0-p1 2; x1-p0 2, x1-p1 0. With scale 9 each
    # sample's term is -log(e^0 / (e^0 + e^-18)) = log(1 + e^-18); the mean is the same.
    loss = config_loss(2)
    loss.setup(of_classes(2))
    loss.proxies.data = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    assert loss(x, torch.tensor([0, 1])).item() == pytest.approx(math.log1p(math.exp(-18)), rel=1e-9)
    # Swapped labels: each sample is 2 from its proxy and 0 from the other, log(1 + e^18).
    assert loss(x, torch.tensor([1, 0])).item() == pytest.approx(math.log1p(math.exp(18)), rel=1e-9)


def test_proxy_nca_matches_pml_once_sized():
    torch.manual_seed(0)
    ours = config_loss(5)
    assert ours.proxies.shape == (0, 5)
    ours.setup(of_classes(4))
    assert ours.proxies.shape == (4, 5) and ours.proxies.requires_grad and ours.proxies.std() > 0
    assert ours.proxy_labels.tolist() == [0, 1, 2, 3]
    pml = losses.ProxyNCALoss(num_classes=4, embedding_size=5, softmax_scale=9.0)
    pml.proxies.data = ours.proxies.data.clone()
    x, y = torch.randn(12, 5), torch.arange(12) % 4
    assert ours(x, y).item() == pytest.approx(pml(x, y).item(), rel=1e-6)
    assert ProxyNCALoss(embedding_size=5).softmax_scale == 1  # PML's default, when not configured


def test_proxy_nca_refuses_a_miner_and_an_unsized_call():
    loss = ProxyNCALoss(embedding_size=2)
    x, y = torch.randn(4, 2), torch.tensor([0, 0, 1, 1])
    with pytest.raises(RuntimeError, match="setup"):
        loss(x, y)
    loss.setup(of_classes(2))
    triplets = (torch.tensor([0]), torch.tensor([1]), torch.tensor([2]))
    with pytest.raises(ValueError, match="loss=proxy_nca.*miner=none"):
        loss(x, y, triplets)


def test_proxy_nca_trains_on_digits(compose_config):
    # Roth et al.'s ratio: the proxies 50 x faster than the network (Adam 1e-3 here).
    cfg = compose_config("loss=proxy_nca", "miner=none", "module.loss_lr=0.05")
    metrics = train(cfg)
    assert metrics and all(np.isfinite(v) for v in metrics.values())
    assert 0 < metrics["test/recall@1"] <= 1
