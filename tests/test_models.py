"""Backbones: shapes, the unit sphere, frozen BatchNorm, the offline weight cache, every config."""

from __future__ import annotations

from pathlib import Path

import hydra
import pytest
import torch
import torchvision
from omegaconf import OmegaConf
from torch import nn

from noisydml import CONFIG_DIR
from noisydml.models import MLP, EmbeddingNet, LeNet, SmallCNN, torchvision_trunk
from noisydml.models.torchvision_trunks import cached_weights_path

BACKBONE_DIR = CONFIG_DIR / "backbone"

# Per config: the input it is meant for and the embedding width it gives.
BACKBONES = {
    "resnet34": ((2, 3, 64, 64), 128),
    "resnet50": ((2, 3, 64, 64), 128),
    "googlenet": ((2, 3, 64, 64), 128),
    "mlp": ((2, 64), 32),
    "lenet": ((2, 1, 28, 28), 64),
    "small_cnn": ((2, 1, 28, 28), 2),
    "cnn1d": ((2, 1, 40), 32),
}
# Not EmbeddingNets on the unit sphere (BDML's Bayesian networks, the PCA baseline's identity):
# tested in tests/test_bdml.py.
OTHER_BACKBONES = ("bayesian_mlp", "bayesian_linear", "identity")


@pytest.fixture
def hub_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    hub = Path(torch.hub.get_dir())
    assert hub.is_relative_to(tmp_path), "torch.hub.set_dir was called elsewhere; TORCH_HOME is ignored"
    return hub


def test_every_backbone_config_is_tested() -> None:
    assert sorted(path.stem for path in BACKBONE_DIR.glob("*.yaml")) == sorted([*BACKBONES, *OTHER_BACKBONES])


@pytest.mark.parametrize("name", sorted(BACKBONES))
def test_backbone_config_instantiates_and_embeds_on_the_unit_sphere(name: str) -> None:
    cfg = OmegaConf.load(BACKBONE_DIR / f"{name}.yaml")
    if "pretrained" in cfg.trunk:
        cfg.trunk.pretrained = False
    model = hydra.utils.instantiate(cfg)
    assert isinstance(model, EmbeddingNet)
    input_shape, embedding_size = BACKBONES[name]
    assert model.embedding_size == embedding_size

    model.eval()
    with torch.no_grad():
        out = model(torch.randn(input_shape))
    assert out.shape == (input_shape[0], embedding_size)
    torch.testing.assert_close(out.norm(dim=1), torch.ones(input_shape[0]))


@pytest.mark.parametrize(
    ("trunk", "input_shape"),
    [
        (LeNet(), (3, 1, 28, 28)),
        (LeNet(), (3, 1, 8, 8)),
        (SmallCNN(), (3, 1, 28, 28)),
        (SmallCNN(), (3, 1, 8, 8)),
        (MLP(64, hidden=(16, 8), activation="prelu", dropout=0.1), (3, 8, 8)),
        (MLP(64, hidden=()), (3, 64)),
    ],
    ids=["lenet28", "lenet8", "small_cnn28", "small_cnn8", "mlp", "linear"],
)
def test_small_trunks_give_out_features_on_mnist_and_digit_sizes(
    trunk: nn.Module, input_shape: tuple[int, ...]
) -> None:
    trunk.eval()
    features = trunk(torch.randn(input_shape))
    assert features.shape == (input_shape[0], trunk.out_features)

    raw = EmbeddingNet(trunk, embedding_size=5, normalize=False).eval()
    assert raw(torch.randn(input_shape)).shape == (input_shape[0], 5)


def test_normalize_false_leaves_the_norm_alone() -> None:
    torch.manual_seed(0)
    net = EmbeddingNet(MLP(4, hidden=(8,)), embedding_size=3, normalize=False)
    norms = net(torch.randn(16, 4)).norm(dim=1)
    assert not torch.allclose(norms, torch.ones_like(norms))


def test_four_d_trunk_output_is_average_pooled() -> None:
    trunk = nn.Conv2d(2, 4, kernel_size=1, bias=False)
    trunk.out_features = 4
    net = EmbeddingNet(trunk, embedding_size=4, normalize=False)
    with torch.no_grad():
        net.head.weight.copy_(torch.eye(4))
        net.head.bias.zero_()
    x = torch.randn(2, 2, 5, 5)
    torch.testing.assert_close(net(x), trunk(x).mean(dim=(2, 3)))


@pytest.mark.parametrize("freeze_bn", [True, False])
def test_freeze_bn_keeps_running_stats_and_affine_parameters_fixed(freeze_bn: bool) -> None:
    torch.manual_seed(0)
    net = EmbeddingNet(SmallCNN(), embedding_size=2, freeze_bn=freeze_bn)
    bns = [m for m in net.trunk.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(bns) == 2
    before = [(bn.running_mean.clone(), bn.running_var.clone()) for bn in bns]

    net.eval()
    net.train()  # the call Lightning makes at the start of every epoch
    net(3 + 2 * torch.randn(4, 1, 28, 28)).sum().backward()

    for bn, (mean, var) in zip(bns, before, strict=True):
        stats_unchanged = torch.equal(bn.running_mean, mean) and torch.equal(bn.running_var, var)
        assert stats_unchanged == freeze_bn
        assert bn.training != freeze_bn
        assert all(p.requires_grad != freeze_bn for p in bn.parameters())
        assert (bn.weight.grad is None) == freeze_bn
    # Everything else still trains.
    assert net.head.weight.requires_grad and net.head.weight.grad is not None
    assert net.trunk.features[0].weight.grad is not None


def test_invalid_embedding_size_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"backbone\.embedding_size=0 must be >= 1"):
        EmbeddingNet(MLP(4, hidden=(8,)), embedding_size=0)


def test_trunk_without_out_features_needs_feature_dim() -> None:
    with pytest.raises(ValueError, match=r"set backbone\.feature_dim"):
        EmbeddingNet(nn.Flatten(), embedding_size=2)
    assert EmbeddingNet(nn.Flatten(), embedding_size=2, feature_dim=6)(torch.randn(3, 2, 3)).shape == (3, 2)
    with pytest.raises(ValueError, match=r"backbone\.feature_dim=7 but the trunk MLP gives 8"):
        EmbeddingNet(MLP(4, hidden=(8,)), embedding_size=2, feature_dim=7)


def test_unknown_mlp_activation_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"backbone\.trunk\.activation='swish'.*'relu'.*'tanh'"):
        MLP(4, activation="swish")


def test_unknown_arch_is_rejected_with_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"arch='vgg16'.*\['googlenet', 'resnet34', 'resnet50'\]"):
        torchvision_trunk("vgg16", pretrained=False)


@pytest.mark.parametrize(
    ("arch", "file_name"),
    [
        ("resnet34", "resnet34-b627a593.pth"),
        ("resnet50", "resnet50-0676ba61.pth"),
        ("googlenet", "googlenet-1378be20.pth"),
    ],
)
def test_missing_pretrained_weights_name_the_path_and_url(hub_dir: Path, arch: str, file_name: str) -> None:
    expected = hub_dir / "checkpoints" / file_name
    with pytest.raises(FileNotFoundError) as error:
        torchvision_trunk(arch, pretrained=True)
    message = str(error.value)
    assert str(expected) in message
    assert f"https://download.pytorch.org/models/{file_name}" in message
    assert "pretrained=false" in message


def _save_fake_release(reference: nn.Module, weights: torchvision.models.WeightsEnum) -> None:
    path = cached_weights_path(weights)
    path.parent.mkdir(parents=True)
    torch.save(reference.state_dict(), path)


@pytest.mark.slow
def test_pretrained_resnet_loads_from_the_hub_cache(hub_dir: Path) -> None:
    torch.manual_seed(0)
    reference = torchvision.models.resnet34(weights=None)
    _save_fake_release(reference, torchvision.models.ResNet34_Weights.IMAGENET1K_V1)

    trunk = torchvision_trunk("resnet34", pretrained=True)
    expected = {k: v for k, v in reference.state_dict().items() if not k.startswith("fc.")}
    assert trunk.state_dict().keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(trunk.state_dict()[key], value), key
    assert trunk.out_features == 512 and isinstance(trunk.fc, nn.Identity)


@pytest.mark.slow
def test_pretrained_googlenet_loads_without_its_auxiliary_classifiers(hub_dir: Path) -> None:
    torch.manual_seed(0)
    # The released checkpoint holds the auxiliary classifiers, so the fake one does too.
    reference = torchvision.models.googlenet(weights=None, aux_logits=True, init_weights=False)
    _save_fake_release(reference, torchvision.models.GoogLeNet_Weights.IMAGENET1K_V1)

    trunk = torchvision_trunk("googlenet", pretrained=True)
    expected = {
        k: v for k, v in reference.state_dict().items() if not k.startswith(("fc.", "aux1.", "aux2."))
    }
    assert trunk.state_dict().keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(trunk.state_dict()[key], value), key
    assert trunk.out_features == 1024 and trunk.transform_input and trunk.aux1 is None


@pytest.mark.parametrize("arch", ["resnet34", "googlenet"])
def test_gray_images_feed_an_imagenet_trunk_as_equal_rgb_channels(arch: str) -> None:
    torch.manual_seed(0)
    trunk = torchvision_trunk(arch, pretrained=False).eval()
    gray = torch.rand(2, 1, 32, 32)
    with torch.no_grad():
        assert torch.equal(trunk(gray), trunk(gray.repeat(1, 3, 1, 1)))
