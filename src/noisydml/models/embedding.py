"""The embedding head every backbone shares: trunk -> pooled features -> linear -> unit sphere."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from noisydml.utils.checks import Rule, check_value
from noisydml.utils.unread import Parts

# The width of the embedding, whichever backbone makes it.
EMBEDDING_SIZE = Rule("backbone.embedding_size", int, 1, example="backbone.embedding_size=128")


class EmbeddingNet(nn.Module):
    """A trunk followed by a linear embedding layer, optionally L2-normalised.

    A 4-d trunk output (N, C, H, W) is global-average-pooled first, so a convolutional trunk can be
    used with its classifier cut off. ``feature_dim`` is the trunk's output width; when None it is
    read from the trunk's ``out_features`` attribute, which every trunk in this package sets.

    ``freeze_bn`` keeps the trunk's BatchNorm layers in eval mode with their affine parameters frozen,
    also after ``train()``: with P x K batches of a few classes, batch statistics differ enough from
    the ImageNet ones to hurt a pretrained trunk.
    """

    def __init__(
        self,
        trunk: nn.Module,
        embedding_size: int,
        feature_dim: int | None = None,
        normalize: bool = True,
        freeze_bn: bool = False,
    ):
        super().__init__()
        check_value(EMBEDDING_SIZE, embedding_size)
        trunk_dim = getattr(trunk, "out_features", None)
        if feature_dim is None:
            if trunk_dim is None:
                raise ValueError(
                    f"backbone.feature_dim is not set and the trunk {type(trunk).__name__} has no "
                    "`out_features` attribute: set backbone.feature_dim to the trunk's output width"
                )
            feature_dim = int(trunk_dim)
        elif trunk_dim is not None and trunk_dim != feature_dim:
            raise ValueError(
                f"backbone.feature_dim={feature_dim} but the trunk {type(trunk).__name__} gives "
                f"{trunk_dim} features: drop backbone.feature_dim or set it to {trunk_dim}"
            )
        self.trunk = trunk
        self.head = nn.Linear(feature_dim, embedding_size)
        self.embedding_size = embedding_size
        self.feature_dim = feature_dim
        self.normalize = normalize
        self.freeze_bn = freeze_bn
        if freeze_bn:
            for module in self._trunk_batchnorms():
                for parameter in module.parameters():
                    parameter.requires_grad_(False)
        # Construction leaves modules in training mode; put the frozen BatchNorms in eval right away.
        self.train(self.training)

    def unread_keys(self, parts: Parts) -> dict[str, str]:
        """``freeze_bn`` on a trunk without BatchNorm (:mod:`noisydml.utils.unread`)."""
        if not self.freeze_bn or self._trunk_batchnorms():
            return {}
        return {
            "freeze_bn": "freezes the backbone's BatchNorm layers, but the trunk of {node} "
            f"({type(self.trunk).__name__}) has none, so nothing reads it; drop {{key}}"
        }

    def _trunk_batchnorms(self) -> list[_BatchNorm]:
        return [module for module in self.trunk.modules() if isinstance(module, _BatchNorm)]

    def train(self, mode: bool = True) -> EmbeddingNet:
        super().train(mode)
        if self.freeze_bn:
            for module in self._trunk_batchnorms():
                module.eval()
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.trunk(x)
        if features.dim() == 4:
            features = F.adaptive_avg_pool2d(features, 1)
        embedding = self.head(features.flatten(1))
        if self.normalize:
            embedding = F.normalize(embedding, p=2, dim=1)
        return embedding
