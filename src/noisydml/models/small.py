"""Small trunks for MNIST-sized images and feature vectors; each ends before the embedding layer.

The embedding layer itself is ``EmbeddingNet``'s linear head, so every trunk here stops at the last
hidden layer and reports its width in ``out_features``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

_ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "prelu": nn.PReLU,
    "gelu": nn.GELU,
    "sigmoid": nn.Sigmoid,
}


class MLP(nn.Module):
    """Flatten, then ``Linear -> activation [-> Dropout]`` for each width in ``hidden``.

    BDML's network is ``MLP(in_features, (512, 512), "tanh")`` under a linear embedding layer.
    An empty ``hidden`` leaves the flattened input as it is, so ``EmbeddingNet`` becomes a linear
    metric (x -> Lx).
    """

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int] = (512, 512),
        activation: str = "relu",
        dropout: float = 0.0,
    ):
        super().__init__()
        if in_features < 1:
            raise ValueError(
                f"backbone.trunk.in_features={in_features} must be >= 1 (the flattened input size)"
            )
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"backbone.trunk.activation={activation!r} is unknown: choose one of {sorted(_ACTIVATIONS)}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"backbone.trunk.dropout={dropout} is outside [0, 1)")
        hidden = [int(width) for width in hidden]
        if any(width < 1 for width in hidden):
            raise ValueError(f"backbone.trunk.hidden={hidden} must hold widths >= 1")

        layers: list[nn.Module] = [nn.Flatten()]
        width = in_features
        for next_width in hidden:
            layers += [nn.Linear(width, next_width), _ACTIVATIONS[activation]()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = next_width
        self.layers = nn.Sequential(*layers)
        self.out_features = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class LeNet(nn.Module):
    """Yu et al. (2018)'s modified LeNet for MNIST, up to the layer before the 64-d embedding.

    The paper says only: a LeNet [LeCun et al. 1998] with 3x3 filters in all convolutional layers
    and every activation replaced by PReLU, implemented in Caffe. Where it is silent we follow Caffe's
    LeNet (conv 20 -> max-pool 2 -> conv 50 -> max-pool 2 -> fc 500 -> ip2), the one a Caffe user
    starts from, with ip2 becoming the embedding layer:

        conv 3x3, 20, pad 1 -> PReLU -> max-pool 2
        conv 3x3, 50, pad 1 -> PReLU -> adaptive max-pool to 7x7
        flatten -> fc 500 -> PReLU                      (out_features = 500)

    Choices where the paper is silent:

    - a PReLU after each convolution too: Caffe's LeNet has a single ReLU (after fc 500) while
      LeCun's LeNet-5 has a nonlinearity after every layer; "all activation layers" reads as the latter.
    - padding 1, so a 3x3 convolution keeps the map size; a 28x28 digit gives 14x14 and 7x7 maps and
      an 8x8 digit (scikit-learn's) 4x4 and 2x2 instead of vanishing.
    - the second pooling is adaptive to 7x7, which on 28x28 inputs is exactly the 2x2 max-pool, and on
      smaller inputs repeats cells so the fc layer keeps its 50*7*7 inputs.
    - PReLU with one slope per channel, initialised at 0.25 (He et al. 2015).
    """

    def __init__(self, in_channels: int = 1):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 20, kernel_size=3, padding=1),
            nn.PReLU(20),
            nn.MaxPool2d(2),
            nn.Conv2d(20, 50, kernel_size=3, padding=1),
            nn.PReLU(50),
            nn.AdaptiveMaxPool2d(7),
        )
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(50 * 7 * 7, 500), nn.PReLU(500))
        self.out_features = 500

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


class SmallCNN(nn.Module):
    """Levi et al. (2021)'s shallow CNN for the MNIST even/odd experiment (their Appendix C).

    The paper: two 3x3 convolutions with 32 and 64 filters, "followed by Relu activation and batch
    normalization layer", a 2x2 max-pool, then dense layers of 128 and 2 units. The 2-unit layer is
    ``EmbeddingNet``'s head, so this trunk is

        conv 3x3, 32 -> ReLU -> BatchNorm
        conv 3x3, 64 -> ReLU -> BatchNorm -> adaptive max-pool to 12x12
        flatten -> fc 128 -> ReLU                       (out_features = 128)

    Choices where the paper is silent (it reads as Keras' MNIST CNN example with batch norm, and the
    choices follow that example):

    - ReLU + BatchNorm after each convolution, not once after the pair.
    - no padding (Keras' default), so 28x28 inputs give 26, 24 and, pooled, 12x12 maps; an 8x8 digit
      gives 6, 4 and 2x2.
    - the pooling is adaptive to 12x12, exactly the 2x2 max-pool on 28x28 inputs; smaller inputs
      (at least 5x5) repeat cells so the dense layer keeps its 64*12*12 inputs.
    - a ReLU after the 128-unit layer, as in the Keras example; none after the 2-d embedding.
    """

    def __init__(self, in_channels: int = 1):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, kernel_size=3),
            nn.ReLU(),
            nn.BatchNorm2d(32),
            nn.Conv2d(32, 64, kernel_size=3),
            nn.ReLU(),
            nn.BatchNorm2d(64),
            nn.AdaptiveMaxPool2d(12),
        )
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(64 * 12 * 12, 128), nn.ReLU())
        self.out_features = 128

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


class CNN1D(nn.Module):
    """MNIST-1D's small convolutional net (Greydanus 2020; its ``ConvBase``), up to the layer before
    the output: three 1-D convolutions of 25 channels, each followed by a ReLU, then flattened,

        conv k5, stride 2, pad 1 -> ReLU            (40 samples -> 19)
        conv k3, stride 2, pad 1 -> ReLU            (-> 10)
        conv k3, stride 2, pad 1 -> ReLU -> flatten (-> 5; out_features = 25 * 5 = 125)

    Its linear layer to the 10 classes becomes ``EmbeddingNet``'s linear head. ``input_length`` is the
    signal's length (MNIST-1D's ``final_seq_length``), which sets the flattened width.
    """

    def __init__(self, input_length: int = 40, channels: int = 25, in_channels: int = 1):
        super().__init__()
        length = int(input_length)
        for kernel in (5, 3, 3):
            length = (length + 2 - kernel) // 2 + 1
        if length < 1 or channels < 1:
            raise ValueError(
                f"backbone.trunk.input_length={input_length} and backbone.trunk.channels={channels} leave "
                "no features: the signal needs at least 3 samples and a channel"
            )
        self.features = nn.Sequential(
            nn.Conv1d(in_channels, channels, kernel_size=5, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv1d(channels, channels, kernel_size=3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv1d(channels, channels, kernel_size=3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.out_features = channels * length

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x.reshape(len(x), -1, x.shape[-1]))
