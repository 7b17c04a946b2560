"""The decoded-image cache: same test items as decoding every time, random crops of the right shape, one
cache per (data set, root, split, resize), reused when nothing changed."""

from __future__ import annotations

import json
import pickle
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from layouts import make_cub
from noisydml.data import transforms
from noisydml.data.cub import CUB200
from noisydml.data.image_cache import DecodedImageCache, cached_test_transform, resized_shape
from noisydml.data.images import ImageListDataset
from noisydml.run.train import train

IMAGE_SIZE, RESIZE = 32, 36
# One grey level after normalisation: what JPEG decoding or resampling could move a pixel by.
ONE_LEVEL = 1 / 255 / min(transforms.IMAGENET_STD)


def textured_cub(root: Path) -> Path:
    """CUB's layout with textured, non-square JPEGs (landscape and portrait), so that resizing and the
    centre crop have something to get wrong."""
    folder = make_cub(root, classes=4, per_class=3)
    rng = np.random.default_rng(0)
    for i, path in enumerate(sorted((folder / "images").rglob("*.jpg"))):
        width, height = (57, 43) if i % 2 else (41, 66)
        y, x = np.mgrid[0:height, 0:width]
        pixels = np.stack([x * 4, y * 3, (x + y) * 2], axis=-1) + rng.integers(0, 60, (height, width, 3))
        Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(path, "JPEG", quality=90)
    return folder


def cub(root: Path, cache_dir: Path | None, resize: int = RESIZE) -> CUB200:
    return CUB200(
        root, image_size=IMAGE_SIZE, resize=resize, cache_decoded=cache_dir is not None, cache_dir=cache_dir
    )


def cache_folders(cache_dir: Path) -> list[Path]:
    return sorted(p for p in (cache_dir / "decoded").iterdir() if not p.name.startswith("."))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return textured_cub(tmp_path / "data")


def test_cached_test_items_equal_the_decoded_ones(folder: Path, tmp_path: Path):
    plain = cub(folder, cache_dir=None).splits()
    cached = cub(folder, cache_dir=tmp_path / "cache").splits()
    for split_plain, split_cached in (
        (plain.test, cached.test),
        (plain.train.eval_view(), cached.train.eval_view()),
    ):
        split_cached.verify()
        assert split_cached.cache is not None and split_cached.cache.directory is not None
        for index in range(len(split_plain)):
            expected, label, item = split_plain[index]
            got, got_label, got_item = split_cached[index]
            assert (got_label, got_item) == (label, item)
            assert got.shape == expected.shape == (3, IMAGE_SIZE, IMAGE_SIZE)
            assert got.dtype == torch.float32
            # The cache resizes with the test transform's own call and crops the same centre: in practice
            # equal; allow a grey level for a resampling difference between library versions.
            assert (got - expected).abs().max() <= ONE_LEVEL + 1e-6


def test_cached_pixels_are_the_resized_images(folder: Path, tmp_path: Path):
    test = cub(folder, cache_dir=tmp_path / "cache").splits().test
    test.verify()
    for index, path in enumerate(test.paths):
        with Image.open(path) as image:
            assert test.cache.image(index).shape == (3, *resized_shape(*image.size, RESIZE))
            full = transforms.test_transform(resize=RESIZE).transforms[0](image.convert("RGB"))
        np.testing.assert_array_equal(test.cache.image(index).permute(1, 2, 0).numpy(), np.asarray(full))


def test_random_crops_have_the_right_shape_and_vary(folder: Path, tmp_path: Path):
    train = cub(folder, cache_dir=tmp_path / "cache").splits().train
    train.verify()
    torch.manual_seed(0)
    crops = [train[0][0] for _ in range(8)]
    for crop in crops:
        assert crop.shape == (3, IMAGE_SIZE, IMAGE_SIZE)
        assert crop.dtype == torch.float32
        assert torch.isfinite(crop).all()
    assert any(not torch.equal(crops[0], crop) for crop in crops[1:])


def test_cache_is_reused_on_a_second_load(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cache_dir = tmp_path / "cache"
    first = cub(folder, cache_dir).splits()
    first.train.verify()
    first.test.verify()
    folders = cache_folders(cache_dir)
    assert len(folders) == 2  # train and test
    stamps = {p: (p / "pixels.npy").stat().st_mtime_ns for p in folders}

    def no_rebuild(*args, **kwargs):
        raise AssertionError("the cache was built again")

    monkeypatch.setattr(DecodedImageCache, "_build", no_rebuild)
    second = cub(folder, cache_dir).splits()
    second.train.verify()
    second.test.verify()
    assert second.test.cache.directory == first.test.cache.directory
    assert {p: (p / "pixels.npy").stat().st_mtime_ns for p in cache_folders(cache_dir)} == stamps
    torch.testing.assert_close(second.test[1][0], first.test[1][0], rtol=0, atol=0)


def test_changed_root_or_resize_gives_a_new_cache(folder: Path, tmp_path: Path):
    cache_dir = tmp_path / "cache"
    directories = set()
    moved = tmp_path / "elsewhere" / "CUB_200_2011"
    shutil.copytree(folder, moved)
    for root, resize in ((folder, RESIZE), (moved, RESIZE), (folder, RESIZE + 4)):
        test = cub(root, cache_dir, resize=resize).splits().test
        test.verify()
        directories.add(test.cache.directory)
        assert test[0][0].shape == (3, IMAGE_SIZE, IMAGE_SIZE)
    assert len(directories) == 3
    assert len(cache_folders(cache_dir)) == 3


def test_dropped_unreadable_image_gives_the_cache_of_the_remaining_ones(folder: Path, tmp_path: Path):
    layout = cub(folder, tmp_path / "cache")
    layout.skip_unreadable = True
    test = layout.splits().test
    plain = cub(folder, cache_dir=None).splits().test
    Path(test.paths[2]).write_bytes(b"not a jpeg")
    assert test.verify() == 1
    meta = json.loads((test.cache.directory / "meta.json").read_text())
    assert meta["paths"] == test.paths == plain.paths[:2] + plain.paths[3:]
    # Item 2 is now the image that came after the dropped one.
    assert (test[2][0] - plain[3][0]).abs().max() <= ONE_LEVEL + 1e-6


def test_a_split_too_big_for_memory_is_decoded_as_before(folder: Path, tmp_path: Path):
    plain = cub(folder, cache_dir=None).splits().test
    cache = DecodedImageCache(
        "cub",
        folder,
        "test",
        RESIZE,
        cached_test_transform(IMAGE_SIZE),
        cache_dir=tmp_path / "cache",
        max_bytes=100,
    )
    test = ImageListDataset(plain.paths, plain.labels, plain.transform, cache=cache)
    with pytest.warns(UserWarning, match="cache_decoded.*more than max_bytes"):
        test.verify()
    assert cache.disabled is not None
    torch.testing.assert_close(test[0][0], plain[0][0], rtol=0, atol=0)
    assert not (tmp_path / "cache" / "decoded").exists() or not cache_folders(tmp_path / "cache")


def test_cache_travels_to_data_loader_workers(folder: Path, tmp_path: Path):
    test = cub(folder, tmp_path / "cache").splits().test
    test.verify()
    # A spawned worker gets a pickled copy: the mapped file is left behind and opened again.
    copy = pickle.loads(pickle.dumps(test))
    assert copy.cache._pixels is None
    torch.testing.assert_close(copy[3][0], test[3][0], rtol=0, atol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batches = list(DataLoader(test, batch_size=4, num_workers=2))
    images = torch.cat([images for images, _, _ in batches])
    torch.testing.assert_close(images, torch.stack([test[i][0] for i in range(len(test))]), rtol=0, atol=0)


@pytest.mark.slow
def test_cache_option_of_every_image_dataset_config_trains_through_hydra(
    compose_config, tiny_cub, tmp_path: Path
):
    cfg = compose_config(
        *tiny_cub,
        "dataset.cache_decoded=true",
        f"dataset.cache_dir={tmp_path / 'cache'}",
        "metrics.recall_ks=[1]",
        "trainer.max_steps=1",
    )
    assert 0.0 <= train(cfg)["test/recall@1"] <= 1.0
    # One cache per split, written where the config said.
    assert len(list((tmp_path / "cache" / "decoded").glob("*/pixels.npy"))) == 2
