"""The loaders read tiny folders written in the published layouts, and fail on broken ones by name."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
import torchvision

from layouts import (
    class_colour,
    make_cars,
    make_cub,
    make_features,
    make_flowers,
    make_inshop,
    make_mnist,
    make_omniglot,
    make_sop,
)
from noisydml.data.base import DatasetLayoutError
from noisydml.data.cars import Cars196
from noisydml.data.cub import CUB200
from noisydml.data.features import PrecomputedFeatures
from noisydml.data.flowers import Flowers102
from noisydml.data.images import ImageListDataset
from noisydml.data.inshop import InShop
from noisydml.data.sop import StanfordOnlineProducts
from noisydml.data.torchvision_sets import CIFAR10, MNIST, FashionMNIST, Omniglot
from noisydml.data.transforms import IMAGENET_MEAN, IMAGENET_STD
from noisydml.data.unreadable import UnreadableImageError

SMALL = {"image_size": 32, "resize": 36}

# make_*, loader, training class ids, test class ids (3 images each), a layout file, its first file.
IMAGE_LAYOUTS = {
    "cub": (make_cub, CUB200, [1, 2], [101, 102], "image_class_labels.txt", "images.txt"),
    "cars196": (make_cars, Cars196, [1, 2], [99, 100], "cars_annos.mat", "cars_annos.mat"),
    "sop": (make_sop, StanfordOnlineProducts, [1, 2], [11319, 11320], "Ebay_test.txt", "Ebay_train.txt"),
    "inshop": (make_inshop, InShop, [1, 2], [3, 4], "list_eval_partition.txt", "list_eval_partition.txt"),
    "flowers102": (make_flowers, Flowers102, [1, 2], [52, 53], "imagelabels.mat", "imagelabels.mat"),
}


def mean_colour(image: torch.Tensor) -> np.ndarray:
    """The average RGB of a normalised image tensor, in 0..255."""
    mean, std = torch.tensor(IMAGENET_MEAN), torch.tensor(IMAGENET_STD)
    return ((image.mean(dim=(1, 2)) * std + mean) * 255).numpy()


@pytest.mark.parametrize("name", IMAGE_LAYOUTS)
def test_splits_hold_the_published_classes(tmp_path: Path, name: str):
    make, loader, train_ids, test_ids, _, _ = IMAGE_LAYOUTS[name]
    splits = loader(make(tmp_path), **SMALL).splits()
    for split, ids in ((splits.train, train_ids), (splits.test, test_ids)):
        classes, counts = np.unique(split.labels, return_counts=True)
        assert classes.tolist() == ids
        assert counts.tolist() == [3, 3]
        assert split.labels.dtype == np.int64
    assert splits.num_train_classes == 2


@pytest.mark.parametrize("name", IMAGE_LAYOUTS)
def test_items_are_the_image_of_their_label(tmp_path: Path, name: str):
    make, loader, *_ = IMAGE_LAYOUTS[name]
    splits = loader(make(tmp_path), **SMALL).splits()
    for split in (splits.train, splits.test):
        for index in range(len(split)):
            image, label, item_index = split[index]
            assert image.shape == (3, 32, 32)
            assert image.dtype == torch.float32
            assert (label, item_index) == (split.labels[index], index)
            assert isinstance(label, int)
            # Solid-colour JPEGs decode within a few levels of their colour, whatever the crop.
            np.testing.assert_allclose(mean_colour(image), class_colour(label), atol=4)


def test_inshop_tests_queries_then_gallery(tmp_path: Path):
    splits = InShop(make_inshop(tmp_path), **SMALL).splits()
    assert splits.query_mask.tolist() == [True, True, False, False, False, False]
    assert splits.test.labels.tolist() == [3, 4, 3, 3, 4, 4]
    assert [Path(p).name for p in splits.test.paths[:2]] == ["02_1_front.jpg", "02_1_front.jpg"]
    assert splits.train.labels.tolist() == [1, 1, 1, 2, 2, 2]


def test_generated_cars_annos_loads_like_the_release(tmp_path: Path):
    annotations = scipy.io.loadmat(make_cars(tmp_path) / "cars_annos.mat")["annotations"]
    assert annotations.shape == (1, 12)
    first = annotations[0, 0]
    assert first["relative_im_path"].tolist() == ["car_ims/000001.jpg"]
    assert first["class"].shape == (1, 1) and first["class"][0, 0] == 1
    assert set(annotations.dtype.names) >= {"relative_im_path", "bbox_x1", "bbox_y2", "class", "test"}


@pytest.mark.parametrize("name", IMAGE_LAYOUTS)
def test_missing_root_names_the_first_layout_file(tmp_path: Path, name: str):
    _, loader, _, _, _, first_file = IMAGE_LAYOUTS[name]
    dataset = loader(tmp_path / "absent")  # Building it reads nothing.
    with pytest.raises(DatasetLayoutError, match=re.escape(first_file)) as error:
        dataset.splits()
    assert str(tmp_path / "absent") in str(error.value)
    assert "Expected layout" in str(error.value)


@pytest.mark.parametrize("name", IMAGE_LAYOUTS)
def test_missing_layout_file_is_named_with_the_tree(tmp_path: Path, name: str):
    make, loader, _, _, layout_file, _ = IMAGE_LAYOUTS[name]
    root = make(tmp_path)
    (root / layout_file).unlink()
    with pytest.raises(DatasetLayoutError, match=re.escape(f"{layout_file} not found")) as error:
        loader(root).splits()
    assert loader.layout in str(error.value)


def test_train_classes_moves_the_zero_shot_boundary(tmp_path: Path):
    splits = CUB200(make_cub(tmp_path), train_classes=1).splits()
    assert np.unique(splits.train.labels).tolist() == [1]
    assert np.unique(splits.test.labels).tolist() == [2, 101, 102]
    with pytest.raises(ValueError, match=re.escape("dataset.train_classes=200 leaves no test classes")):
        CUB200(tmp_path / "CUB_200_2011", train_classes=200).splits()


def test_flowers_labels_follow_the_image_numbers(tmp_path: Path):
    splits = Flowers102(make_flowers(tmp_path)).splits()
    # make_flowers interleaves the classes: image i has class [1, 2, 52, 53][(i - 1) % 4].
    names = [Path(p).name for p in splits.train.paths[:3]]
    assert names == ["image_00001.jpg", "image_00002.jpg", "image_00005.jpg"]
    assert splits.train.labels[:3].tolist() == [1, 2, 1]


def break_image(path: str, how: str) -> None:
    if how == "corrupt":
        Path(path).write_bytes(b"not a jpeg")
    else:
        Path(path).unlink()


@pytest.mark.parametrize("how", ["corrupt", "missing"])
def test_unreadable_image_raises_naming_its_path(tmp_path: Path, how: str):
    train = CUB200(make_cub(tmp_path), **SMALL).splits().train
    break_image(train.paths[4], how)
    train[3]  # Its neighbours still load.
    with pytest.raises(UnreadableImageError, match=re.escape(train.paths[4])):
        train[4]
    with pytest.raises(UnreadableImageError, match=re.escape(train.paths[4])) as error:
        train.verify()
    assert "dataset.skip_unreadable=true" in str(error.value)
    assert len(train) == 6


@pytest.mark.parametrize("how", ["corrupt", "missing"])
def test_verify_with_skip_unreadable_drops_and_counts(tmp_path: Path, how: str):
    train = CUB200(make_cub(tmp_path), skip_unreadable=True, **SMALL).splits().train
    bad = train.paths[4]
    break_image(bad, how)
    assert train.verify() == 1
    assert train.skipped == [bad]
    assert len(train) == len(train.paths) == 5
    assert train.labels.tolist() == [1, 1, 1, 2, 2]
    for index in range(len(train)):
        image, label, _ = train[index]
        np.testing.assert_allclose(mean_colour(image), class_colour(label), atol=4)


def test_verify_keeps_readable_images(tmp_path: Path):
    test = CUB200(make_cub(tmp_path), **SMALL).splits().test
    assert test.verify() == 0
    assert test.skipped == [] and len(test) == 6


def test_image_list_rejects_mismatched_labels(tmp_path: Path):
    with pytest.raises(ValueError, match="2 image paths but 3 labels"):
        ImageListDataset(["a.jpg", "b.jpg"], [0, 1, 2], transform=lambda image: image)


@pytest.mark.parametrize("int_split", [False, True])
def test_features_split_by_the_split_array(tmp_path: Path, int_split: bool):
    root = make_features(tmp_path, int_split=int_split)
    splits = PrecomputedFeatures(root).splits()
    saved = np.load(root / "features.npz")
    assert splits.train.labels.tolist() == [0, 1] * 3
    assert splits.test.labels.tolist() == [2, 3] * 3
    feature, label, index = splits.test[1]
    assert feature.dtype == torch.float32 and feature.shape == (5,)
    assert (label, index) == (3, 1)
    np.testing.assert_allclose(feature.numpy(), saved["features"][3], rtol=1e-6)


def test_features_name_a_missing_file_or_key(tmp_path: Path):
    with pytest.raises(DatasetLayoutError, match="features.npz not found"):
        PrecomputedFeatures(tmp_path).splits()
    np.savez(tmp_path / "features.npz", features=np.zeros((2, 3)), labels=np.zeros(2))
    with pytest.raises(KeyError, match="has no array 'split' \\(found: features, labels\\)"):
        PrecomputedFeatures(tmp_path).splits()
    np.savez(tmp_path / "features.npz", features=np.zeros((2, 3)), labels=np.zeros(2), split=["train", "val"])
    with pytest.raises(ValueError, match=re.escape("split values ['val']")):
        PrecomputedFeatures(tmp_path).splits()


@pytest.mark.parametrize(
    "loader, expected",
    [
        (MNIST, "MNIST/raw/train-images-idx3-ubyte"),
        (FashionMNIST, "FashionMNIST/raw/train-images-idx3-ubyte"),
        (CIFAR10, "cifar-10-batches-py/data_batch_1"),
        (Omniglot, "omniglot-py/images_background.zip"),
    ],
)
def test_torchvision_sets_name_missing_files_instead_of_downloading(tmp_path: Path, loader, expected: str):
    dataset = loader(tmp_path / "empty", download=False)
    with pytest.raises(DatasetLayoutError, match=re.escape(f"{expected} not found")) as error:
        dataset.splits()
    assert "dataset.download=true" in str(error.value)


@pytest.mark.parametrize("fashion", [False, True])
def test_mnist_same_and_disjoint_classes(tmp_path: Path, fashion: bool):
    root = make_mnist(tmp_path, per_class=2, fashion=fashion)
    loader = FashionMNIST if fashion else MNIST
    same = loader(root).splits()
    assert len(same.train) == len(same.test) == 20
    image, label, index = same.test[13]
    assert (label, index) == (3, 13) and image.shape == (1, 28, 28)
    np.testing.assert_allclose(image * loader.std[0] + loader.mean[0], (20 * 3 + 10) / 255, atol=1e-5)

    disjoint = loader(root, classes_split="disjoint", image_size=14).splits()
    assert sorted(set(disjoint.train.labels.tolist())) == [0, 1, 2, 3, 4]
    assert sorted(set(disjoint.test.labels.tolist())) == [5, 6, 7, 8, 9]
    image, label, _ = disjoint.test[0]
    assert label == 5 and image.shape == (1, 14, 14)
    with pytest.raises(ValueError, match="dataset.classes_split='zero_shot'"):
        loader(root, classes_split="zero_shot")


@pytest.fixture
def omniglot_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(torchvision.datasets.Omniglot, "_check_integrity", lambda self: True)
    return make_omniglot(tmp_path, characters=(2, 3), per_character=2)


def test_omniglot_labels_characters_or_alphabets(omniglot_root: Path):
    characters = Omniglot(omniglot_root).splits()
    assert characters.train.labels.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    # The evaluation set's 5 characters come after the background set's.
    assert characters.test.labels.tolist() == [5, 5, 6, 6, 7, 7, 8, 8, 9, 9]
    image, label, index = characters.train[7]
    assert (label, index) == (3, 7) and image.shape == (1, 10, 10)

    alphabets = Omniglot(omniglot_root, labels="alphabet", test_labels="character").splits()
    assert alphabets.train.labels.tolist() == [0] * 4 + [1] * 6
    assert alphabets.test.labels.tolist() == [2, 2, 3, 3, 4, 4, 5, 5, 6, 6]
    with pytest.raises(ValueError, match="dataset.labels='stroke'"):
        Omniglot(omniglot_root, labels="stroke")
