"""ImageNet trunks from torchvision with their classifier cut off, loaded from the local hub cache only."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import torch
import torchvision
from torch import nn
from torchvision.models import GoogLeNet_Weights, ResNet34_Weights, ResNet50_Weights, WeightsEnum

# The weights every paper of the project started from (torchvision's original ImageNet releases).
_ARCHS: dict[str, tuple[Callable[..., nn.Module], WeightsEnum]] = {
    "resnet34": (torchvision.models.resnet34, ResNet34_Weights.IMAGENET1K_V1),
    "resnet50": (torchvision.models.resnet50, ResNet50_Weights.IMAGENET1K_V1),
    "googlenet": (torchvision.models.googlenet, GoogLeNet_Weights.IMAGENET1K_V1),
}


def cached_weights_path(weights: WeightsEnum) -> Path:
    """Where torch's hub cache keeps ``weights``: ``torch.hub.get_dir()/checkpoints/<file of the URL>``."""
    file_name = os.path.basename(urlparse(weights.url).path)
    return Path(torch.hub.get_dir()) / "checkpoints" / file_name


def _load_cached_state_dict(arch: str, weights: WeightsEnum) -> dict[str, torch.Tensor]:
    # Never download: the compute nodes have no network, and a download inside a SLURM job races
    # with every other job of the sweep writing the same file.
    path = cached_weights_path(weights)
    if not path.is_file():
        raise FileNotFoundError(
            f"backbone.trunk.pretrained=true for arch={arch}, but the ImageNet weights are not at "
            f"{path}. No download is attempted. On a machine with internet fetch {weights.url} "
            f"and copy it to {path} (or point TORCH_HOME at a folder holding hub/checkpoints/{path.name}); "
            "or set backbone.trunk.pretrained=false to train from scratch."
        )
    return torch.load(path, map_location="cpu", weights_only=True)


def torchvision_trunk(arch: str, pretrained: bool) -> nn.Module:
    """A torchvision ImageNet model up to and including global average pooling.

    ``fc`` becomes ``nn.Identity`` so the model returns pooled features, whose width is in
    ``out_features`` (512 for resnet34, 2048 for resnet50, 1024 for googlenet). GoogLeNet keeps its
    dropout before ``fc`` and drops the auxiliary classifiers; ``transform_input`` is on only with
    the pretrained weights, which were ported from a network fed differently normalised images and
    expect the ImageNet-normalised input re-scaled (torchvision's default for those weights).

    A one-channel batch (MNIST, Omniglot) is repeated to three channels before the first layer: a gray
    image is the RGB image with equal channels, which is what the ImageNet layers take.

    ``pretrained=True`` reads the weights from torch's hub cache and raises FileNotFoundError,
    naming the file and its URL, when they are not there. The file's hash is not checked, so a
    checkpoint of the same architecture saved under that name is accepted.
    """
    if arch not in _ARCHS:
        raise ValueError(f"backbone.trunk.arch={arch!r} is unknown: choose one of {sorted(_ARCHS)}")
    build, weights = _ARCHS[arch]
    state_dict = _load_cached_state_dict(arch, weights) if pretrained else None

    if arch == "googlenet":
        # init_weights=False skips a slow truncated-normal init when the weights are loaded anyway.
        model = build(weights=None, aux_logits=False, transform_input=pretrained, init_weights=not pretrained)
        if state_dict is not None:
            # The released checkpoint carries untrained auxiliary classifiers; they are not built here.
            state_dict = {k: v for k, v in state_dict.items() if not k.startswith(("aux1.", "aux2."))}
    else:
        model = build(weights=None)
    if state_dict is not None:
        model.load_state_dict(state_dict)

    model.out_features = model.fc.in_features
    model.fc = nn.Identity()
    model.register_forward_pre_hook(_gray_to_rgb)
    return model


def _gray_to_rgb(module: nn.Module, args: tuple) -> tuple | None:
    images, *rest = args
    return (images.expand(-1, 3, -1, -1), *rest) if images.shape[1] == 1 else None
