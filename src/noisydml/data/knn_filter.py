"""The features a run starts from, for the kNN label vote on them.

The features a run starts from are its inputs (the digits' and MNIST's pixels, which the MLP and the LeNet
learn from scratch) or, for a pretrained backbone, its trunk's pooled features (an ImageNet GoogLeNet's
1,024): ``trunk_features``, which the configs set from ``backbone.trunk.pretrained``. The vote itself is
:func:`noisydml.metrics.label_vote.knn_label_vote`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


def starting_features(
    dataset: Dataset, backbone: nn.Module | None = None, batch_size: int = 256
) -> np.ndarray:
    """One row per item of ``dataset`` (items ``(input, label, index)``, in order): the input flattened,
    or, given ``backbone`` (an embedding network with a ``trunk``), the trunk's output as its weights
    stand, average-pooled when 4-d (the features its embedding layer reads), in eval mode, no gradient."""
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False)
    if backbone is None:
        return torch.cat([x.flatten(1).float() for x, _, _ in loader]).numpy()
    trunk = backbone.trunk
    device = next(backbone.parameters(), torch.zeros(0)).device
    was_training = backbone.training
    # The network's own eval(): its train() keeps frozen BatchNorms in eval mode afterwards.
    backbone.eval()
    parts = []
    with torch.no_grad():
        for x, _, _ in loader:
            features = trunk(x.to(device))
            if features.dim() == 4:
                features = F.adaptive_avg_pool2d(features, 1)
            parts.append(features.flatten(1).float().cpu())
    backbone.train(was_training)
    return torch.cat(parts).numpy()
