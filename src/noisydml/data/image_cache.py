"""Decoded images cached once per data set: JPEG decoding and resizing done once, crops done on uint8 tensors.

Decoding a JPEG and resizing it is most of what a data-loading worker spends per image, and it gives
the same result every epoch. With ``dataset.cache_decoded=true`` each split's images are decoded once,
resized so the short side is ``dataset.resize`` (the test transform's ``Resize``, the same call, so the
whole image and its aspect ratio are kept and the centre crop is exactly the uncached one), and stored as
one memory-mappable ``uint8`` file plus an index. Items are then cut from the mapped file: the training
transform's random resized crop and flip, or the test transform's centre crop, run on ``uint8`` tensors
(``torchvision.transforms.v2``) and are normalised like the uncached items.

One difference from decoding every time: a random crop smaller than ``image_size`` pixels on its short
side is enlarged from the cached image rather than from the full-resolution JPEG, so it is a little
softer. With ``resize`` 256 and ``image_size`` 224 that is a crop under ~77% of the short side. Likewise
``dataset.augmentation=square_resize_crop`` squeezes the cached image's long side to ``resize``, a second
resampling of that side.

Layout of a cache, under ``<cache_dir>/decoded/<dataset>-<split>-r<resize>-<digest>/``:

- ``pixels.npy``: every image's H x W x 3 bytes, one after the other (``np.load(..., mmap_mode="r")``);
- ``index.npy``: ``(offset, height, width)`` of every image, in the split's order;
- ``meta.json``: what the cache was made from (data set, root, split, resize, the image paths).

The digest covers the data set's name, its root, the split, ``resize`` and the list of image paths, so a
changed root, resize or annotation file (or an image dropped as unreadable) gives a new cache, and a
cache is reused only for exactly the images it holds. Editing an image file in place is not noticed:
delete the cache folder. A cache is written in a temporary folder and renamed into place when complete,
so a crash or two processes building at once never leave a half-written cache behind.

A split whose decoded images would take more than half of this machine's memory (``max_bytes``) is not
cached: a warning says so and items are decoded from the JPEGs as before. The page cache then keeps
what fits of the mapped file in memory; data-loader workers share it, as they share the mapping.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import v2
from torchvision.transforms.functional import resize as resize_pil

from noisydml.data.transforms import IMAGENET_MEAN, IMAGENET_STD, check_augmentation, resize_to
from noisydml.data.unreadable import PIL_ERRORS, UnreadableImageError

CACHE_VERSION = 1

TensorTransform = Callable[[torch.Tensor], torch.Tensor]


def default_cache_dir() -> Path:
    """``$NOISYDML_CACHE_DIR``, else ``$XDG_CACHE_HOME/noisydml``, else ``~/.cache/noisydml``."""
    if os.environ.get("NOISYDML_CACHE_DIR"):
        return Path(os.environ["NOISYDML_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "noisydml"


def default_max_bytes() -> int:
    """Half of this machine's physical memory."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def resized_shape(width: int, height: int, resize: int) -> tuple[int, int]:
    """(height, width) after ``torchvision.transforms.Resize(resize)``: short side ``resize``, the long side
    scaled and truncated as torchvision does."""
    short, long = (width, height) if width <= height else (height, width)
    if short == resize:
        return height, width
    new_long = int(resize * long / short)
    return (new_long, resize) if width <= height else (resize, new_long)


def cached_train_transform(
    image_size: int = 224,
    resize: int = 256,
    augmentation: str = "random_resized_crop",
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> v2.Compose:
    """``transforms.train_transform`` on a C x H x W uint8 tensor whose short side is ``resize``."""
    if augmentation == "square_resize_crop":
        crop = [v2.Resize(resize_to(resize, augmentation), antialias=True), v2.RandomCrop(image_size)]
    else:
        check_augmentation(augmentation)
        crop = [v2.RandomResizedCrop(image_size, antialias=True), v2.RandomHorizontalFlip()]
    return v2.Compose([*crop, v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)])


def cached_test_transform(
    image_size: int = 224,
    resize: int = 256,
    augmentation: str = "random_resized_crop",
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> v2.Compose:
    """``transforms.test_transform`` on a C x H x W uint8 tensor already resized (the cache did that; a
    square resize squeezes the long side too)."""
    square = augmentation == "square_resize_crop"
    squeeze = [v2.Resize(resize_to(resize, augmentation), antialias=True)] if square else []
    return v2.Compose(
        [*squeeze, v2.CenterCrop(image_size), v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)]
    )


class DecodedImageCache:
    """The cached decoded images of one split, and the tensor transform its items go through.

    Nothing is read or written until :meth:`prepare` (called by ``ImageListDataset.verify`` in the main
    process, or at the first item otherwise): it opens the cache of the given image paths, building it
    first when there is none. ``load(index)`` then returns the transformed item. The opened file is not
    pickled: a data-loader worker started by ``spawn`` opens it again (forked workers share the mapping).
    """

    def __init__(
        self,
        dataset: str,
        root: str | Path,
        split: str,
        resize: int,
        transform: TensorTransform,
        eval_transform: TensorTransform | None = None,
        cache_dir: str | Path | None = None,
        max_bytes: int | None = None,
        threads: int | None = None,
    ):
        self.dataset = dataset
        self.root = str(Path(root).resolve())
        self.split = split
        self.resize = resize
        self.transform = transform
        self.eval_transform = eval_transform
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.max_bytes = max_bytes if max_bytes is not None else default_max_bytes()
        self.threads = threads or min(8, os.cpu_count() or 1)
        self.directory: Path | None = None
        # Why the split is not cached (too big, no room on disk); items are then decoded as before.
        self.disabled: str | None = None
        self._paths: Sequence[str] | None = None
        self._pixels: np.ndarray | None = None
        self._index: np.ndarray | None = None

    def eval_view(self) -> DecodedImageCache:
        """The same cache with ``eval_transform``, sharing the opened file."""
        if self.eval_transform is None:
            return self
        view = copy.copy(self)
        view.transform = self.eval_transform
        return view

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_paths"] = state["_pixels"] = state["_index"] = None
        return state

    def key(self, paths: Sequence[str]) -> Path:
        """The folder of the cache of ``paths`` under ``cache_dir``."""
        digest = hashlib.sha256(
            json.dumps(
                [CACHE_VERSION, self.dataset, self.root, self.split, self.resize, list(paths)]
            ).encode()
        ).hexdigest()[:16]
        safe_name = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.dataset)
        return self.cache_dir / "decoded" / f"{safe_name}-{self.split}-r{self.resize}-{digest}"

    def prepare(self, paths: Sequence[str]) -> bool:
        """Open the cache of ``paths``, building it if needed; False when the split is not cached.

        Cheap after the first call for the same list of paths.
        """
        if self.disabled is not None:
            return False
        if self._pixels is not None and self._paths is paths:
            return True
        directory = self.key(paths)
        if not (directory / "meta.json").is_file():
            self._build(paths, directory)
            if self.disabled is not None:
                return False
        self._open(paths, directory)
        return True

    def image(self, index: int) -> torch.Tensor:
        """Cached image ``index``, a 3 x H x W uint8 tensor (a copy: the mapped file stays read-only)."""
        offset, height, width = (int(v) for v in self._index[index])
        pixels = np.array(self._pixels[offset : offset + height * width * 3]).reshape(height, width, 3)
        return torch.from_numpy(pixels).permute(2, 0, 1)

    def load(self, index: int) -> torch.Tensor:
        return self.transform(self.image(index))

    def _open(self, paths: Sequence[str], directory: Path) -> None:
        meta = json.loads((directory / "meta.json").read_text())
        if meta.get("paths") != list(paths):
            raise RuntimeError(
                f"the decoded-image cache {directory} holds other images than dataset={self.dataset} "
                f"split={self.split} asks for; delete that folder and it will be rebuilt"
            )
        self._pixels = np.load(directory / "pixels.npy", mmap_mode="r")
        self._index = np.load(directory / "index.npy")
        self._paths = paths
        self.directory = directory

    def _build(self, paths: Sequence[str], directory: Path) -> None:
        shapes = np.zeros((len(paths), 2), dtype=np.int64)
        for i, path in enumerate(paths):
            try:
                with Image.open(path) as image:
                    shapes[i] = resized_shape(*image.size, self.resize)
            except PIL_ERRORS as error:
                raise UnreadableImageError(path, error) from error
        sizes = shapes[:, 0] * shapes[:, 1] * 3
        total = int(sizes.sum())
        if total > self.max_bytes:
            self._disable(
                f"the decoded images need {total / 2**30:.1f} GiB, more than max_bytes = "
                f"{self.max_bytes / 2**30:.1f} GiB (by default half of this machine's memory)"
            )
            return
        free = shutil.disk_usage(_existing_parent(self.cache_dir)).free
        if total > free:
            self._disable(
                f"the decoded images need {total / 2**30:.1f} GiB but {self.cache_dir} has "
                f"{free / 2**30:.1f} GiB free; set dataset.cache_dir to a larger disk"
            )
            return
        index = np.zeros((len(paths), 3), dtype=np.int64)
        index[:, 0] = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        index[:, 1:] = shapes

        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=directory.parent))
        try:
            self._write_pixels(paths, index, staging / "pixels.npy")
            np.save(staging / "index.npy", index)
            meta = {
                "version": CACHE_VERSION,
                "dataset": self.dataset,
                "root": self.root,
                "split": self.split,
                "resize": self.resize,
                "bytes": total,
                "paths": list(paths),
            }
            # meta.json last: its presence marks a complete cache.
            (staging / "meta.json").write_text(json.dumps(meta))
            for name in ("pixels.npy", "index.npy", "meta.json"):
                with open(staging / name, "rb") as f:
                    os.fsync(f.fileno())
            try:
                os.rename(staging, directory)
            except OSError:
                # Another process finished the same cache first: keep theirs.
                if not (directory / "meta.json").is_file():
                    raise
        except UnreadableImageError:
            raise
        except OSError as error:
            self._disable(f"writing the cache under {self.cache_dir} failed ({error})")
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _write_pixels(self, paths: Sequence[str], index: np.ndarray, file: Path) -> None:
        """Decode and resize every image into ``file``, at the offsets of ``index``."""
        total = int(index[-1, 0] + index[-1, 1] * index[-1, 2] * 3)
        pixels = np.lib.format.open_memmap(file, mode="w+", dtype=np.uint8, shape=(total,))

        def decode(i: int) -> None:
            offset, height, width = (int(v) for v in index[i])
            try:
                with Image.open(paths[i]) as image:
                    # The test transform's own Resize call, so the centre crop is the uncached one.
                    resized = np.asarray(resize_pil(image.convert("RGB"), self.resize))
            except PIL_ERRORS as error:
                raise UnreadableImageError(paths[i], error) from error
            if resized.shape != (height, width, 3):
                raise RuntimeError(f"{paths[i]}: resized to {resized.shape}, expected {(height, width, 3)}")
            pixels[offset : offset + resized.size] = resized.reshape(-1)

        # PIL releases the GIL while it decodes and resizes, so threads use every core.
        with ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(decode, range(len(paths))))
        pixels.flush()

    def _disable(self, reason: str) -> None:
        self.disabled = reason
        warnings.warn(
            f"dataset.cache_decoded: not caching {self.dataset} {self.split}: {reason}; decoding the JPEGs "
            "at every epoch instead",
            stacklevel=3,
        )


def _existing_parent(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
