"""BDML's feature pipeline (dataset=extracted): flattened inputs or cached extractor features, then PCA
and standardisation fitted on the training split only."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

from layouts import make_cub, make_features
from noisydml.data import Digits, transforms
from noisydml.data.extracted import ExtractedFeatures
from noisydml.run.train import train

DIGITS = {"_target_": "noisydml.data.Digits"}
# 2 output channels over the whole 8 x 8 image: two features per image, one weighted sum per channel.
CONV = {"_target_": "torch.nn.Conv2d", "in_channels": 3, "out_channels": 2, "kernel_size": 8}


def cub_source(root) -> dict:
    return {"_target_": "noisydml.data.cub.CUB200", "root": str(root), "image_size": 8, "resize": 8}


def pairwise(x: np.ndarray) -> np.ndarray:
    return np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))


def test_without_extractor_the_features_are_the_flattened_inputs():
    splits = ExtractedFeatures(DIGITS, standardize=False).splits()
    digits = Digits().splits()
    assert splits.train.inputs.shape == (1257, 64)
    torch.testing.assert_close(splits.train.inputs, digits.train.inputs.flatten(1))
    torch.testing.assert_close(splits.test.inputs, digits.test.inputs.flatten(1))
    np.testing.assert_array_equal(splits.test.labels, digits.test.labels)


def test_pca_and_standardisation_are_fitted_on_the_training_split_only():
    splits = ExtractedFeatures(DIGITS, pca_dim=10, standardize=True).splits()
    train, test = splits.train.inputs.numpy(), splits.test.inputs.numpy()
    assert train.shape == (1257, 10) and test.shape == (540, 10)

    # The definition in float64: eigenvectors of the training covariance, then z-scores with the
    # training mean and std. Component signs are arbitrary, so compare pairwise distances.
    raw = Digits().splits()
    x_train = raw.train.inputs.flatten(1).double().numpy()
    x_test = raw.test.inputs.flatten(1).double().numpy()
    mean = x_train.mean(0)
    _, vectors = np.linalg.eigh(np.cov(x_train - mean, rowvar=False))
    top = vectors[:, ::-1][:, :10]
    z_train, z_test = (x_train - mean) @ top, (x_test - mean) @ top
    z_mean, z_std = z_train.mean(0), z_train.std(0)
    expected_test = (z_test - z_mean) / z_std
    np.testing.assert_allclose(pairwise(test), pairwise(expected_test), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(pairwise(train[:200]), pairwise(((z_train - z_mean) / z_std)[:200]), atol=1e-4)
    np.testing.assert_allclose(train.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(train.std(0), 1, atol=1e-4)
    # Fitted without the test items, the test statistics are close to, not exactly, 0 and 1.
    assert not np.allclose(test.std(0), 1, atol=1e-3)


def test_features_from_an_npz_go_through_the_same_pipeline(tmp_path):
    make_features(tmp_path, classes=4, per_class=5, dim=6)
    source = {"_target_": "noisydml.data.features.PrecomputedFeatures", "root": str(tmp_path / "features")}
    splits = ExtractedFeatures(source, pca_dim=3).splits()
    assert splits.train.inputs.shape == (10, 3) and splits.test.inputs.shape == (10, 3)
    np.testing.assert_allclose(splits.train.inputs.numpy().std(0), 1, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"pca_dim": 65}, "dataset.pca_dim=65 exceeds .* at most 64"),
        ({"pca_dim": 0}, "dataset.pca_dim=0 must be >= 1"),
        ({"source": {"root": "x"}}, "dataset.source has no _target_"),
    ],
)
def test_bad_options_name_their_key(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ExtractedFeatures(**{"source": DIGITS, **kwargs}).splits()


def test_extractor_features_are_computed_once_and_cached_by_weights(tmp_path, monkeypatch):
    make_cub(tmp_path, classes=4, per_class=3)
    source = cub_source(tmp_path / "CUB_200_2011")
    pipeline = ExtractedFeatures(source, CONV, standardize=False, cache_dir=tmp_path / "cache")
    torch.manual_seed(0)
    first = pipeline.splits()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [pipeline.cache_path.name]
    # Named <source>-<extractor>-<digest>; a source config without a name gives its class.
    assert pipeline.cache_path.name.startswith("CUB200-Conv2d-")

    # The features are the extractor's outputs on the test-time view of the images.
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 2, kernel_size=8)
    images = torch.stack([transforms.test_transform(8, 8)(img) for img in _cub_images(tmp_path, train=True)])
    with torch.no_grad():
        torch.testing.assert_close(first.train.inputs, conv(images).flatten(1))
    assert first.train.inputs.shape == (6, 2) and first.test.inputs.shape == (6, 2)

    # Same weights: read back from the cache, the extractor never runs.
    monkeypatch.setattr(ExtractedFeatures, "_embed", _fail)
    torch.manual_seed(0)
    second = ExtractedFeatures(source, CONV, standardize=False, cache_dir=tmp_path / "cache").splits()
    torch.testing.assert_close(second.test.inputs, first.test.inputs)

    # Other weights: another cache entry.
    monkeypatch.undo()
    torch.manual_seed(1)
    ExtractedFeatures(source, CONV, standardize=False, cache_dir=tmp_path / "cache").splits()
    assert len(list((tmp_path / "cache").iterdir())) == 2


def _fail(*args, **kwargs):
    raise AssertionError("the extractor ran although its features were cached")


def _cub_images(root, train: bool):
    """The CUB images of the training (class <= 100) or the test classes, in images.txt order."""
    folder = root / "CUB_200_2011"
    rows = [line.split() for line in (folder / "images.txt").read_text().splitlines()]
    labels = dict(line.split() for line in (folder / "image_class_labels.txt").read_text().splitlines())
    for image_id, relpath in rows:
        if (int(labels[image_id]) <= 100) == train:
            yield Image.open(folder / "images" / relpath).convert("RGB")


def test_extracted_image_features_train_bdml_end_to_end(compose_config, tmp_path):
    make_cub(tmp_path, classes=4, per_class=6)
    cfg = compose_config(
        f"paths.data_dir={tmp_path}",
        "dataset=extracted",
        "dataset@dataset.source=cub",
        "dataset.source.image_size=8",
        "dataset.source.resize=8",
        "dataset.extractor={_target_: torch.nn.Conv2d, in_channels: 3, out_channels: 4, kernel_size: 8}",
        "backbone=bayesian_mlp",
        "backbone.in_features=4",
        "loss=bayesian_triplet",
        "miner=all",
        "data.P=2",
        "data.K=3",
        "metrics.recall_ks=[1,2]",
        # Two training classes: none to spare for a class-disjoint validation split.
        "data.val_fraction=0",
    )
    metrics = train(cfg)
    assert all(math.isfinite(metrics[name]) for name in ("test/recall@1", "test/nmi"))
    assert len(list((tmp_path / "cache").glob("cub-Conv2d-*.npz"))) == 1
