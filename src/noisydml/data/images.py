"""Image files on disk: the labelled list of paths, and the base of the published image layouts."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import scipy.io
import torch
from PIL import Image

from noisydml.data.base import DatasetLayoutError, LabeledDataset, Splits
from noisydml.data.image_cache import DecodedImageCache, cached_test_transform, cached_train_transform
from noisydml.data.transforms import check_augmentation, test_transform, train_transform
from noisydml.data.unreadable import PIL_ERRORS, UnreadableImageError

# The files a class-folder layout holds as images (PRISM's CARS-98N download script skips .gif).
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}


class ImageListDataset(LabeledDataset):
    """Images given as a list of paths, decoded as RGB and passed through ``transform``.

    Nothing is opened in the constructor: Stanford Online Products holds 120k images. Call
    ``verify()`` once before training (and before anything keyed on item indices, such as label
    noise) to find unreadable files up front instead of in the middle of an epoch.

    With a ``cache`` (``dataset.cache_decoded``), items come from the decoded images it holds, through
    its own tensor transforms; ``verify()`` builds it, once per data set (see ``image_cache``).
    """

    def __init__(
        self,
        paths: Sequence[str | Path],
        labels: np.ndarray | Sequence[int],
        transform: Callable[[Image.Image], torch.Tensor],
        skip_unreadable: bool = False,
        eval_transform: Callable[[Image.Image], torch.Tensor] | None = None,
        cache: DecodedImageCache | None = None,
    ):
        super().__init__(np.asarray(labels))
        if len(paths) != len(self.labels):
            raise ValueError(f"{len(paths)} image paths but {len(self.labels)} labels")
        self.paths = [str(path) for path in paths]
        self.transform = transform
        self.eval_transform = eval_transform
        self.skip_unreadable = skip_unreadable
        self.skipped: list[str] = []
        self.cache = cache

    def eval_view(self) -> ImageListDataset:
        """The same images through ``eval_transform`` (the test split's), when one was given."""
        if self.eval_transform is None:
            return self
        view = copy.copy(self)
        view.transform = self.eval_transform
        view.cache = self.cache.eval_view() if self.cache is not None else None
        return view

    def load(self, index: int) -> torch.Tensor:
        if self.cache is not None and self.cache.prepare(self.paths):
            return self.cache.load(index)
        path = self.paths[index]
        try:
            with Image.open(path) as image:
                rgb = image.convert("RGB")
        except PIL_ERRORS as error:
            raise UnreadableImageError(path, error) from error
        return self.transform(rgb)

    def verify(self) -> int:
        """Check every image header; return how many unreadable images were dropped.

        With ``skip_unreadable`` the unreadable images are dropped (their paths kept in
        ``skipped``), which shifts the indices of the items after them. Without it the first
        unreadable image raises ``UnreadableImageError``.
        """
        readable = np.ones(len(self.paths), dtype=bool)
        for index, path in enumerate(self.paths):
            try:
                with Image.open(path) as image:
                    image.verify()
            except PIL_ERRORS as error:
                if not self.skip_unreadable:
                    raise UnreadableImageError(path, error) from error
                readable[index] = False
        self.skipped += [path for path, ok in zip(self.paths, readable, strict=True) if not ok]
        self.paths = [path for path, ok in zip(self.paths, readable, strict=True) if ok]
        self.labels = self.labels[readable]
        if self.cache is not None:
            # Here, in the main process, rather than in every data-loader worker at its first item.
            self.cache.prepare(self.paths)
        return int((~readable).sum())


class ImageLayout:
    """A data set of image files plus annotation files in the layout its authors published.

    The constructor only stores the config, so building it never touches the disk; ``splits()``
    reads the annotation files. Subclasses describe their tree in ``layout``, which every
    ``DatasetLayoutError`` shows, name themselves in ``default_name``, and pass the image options
    below through unchanged (``**options``), so an option added here reaches every data set.
    """

    layout: ClassVar[str]
    default_name: ClassVar[str] = ""
    # What decides which samples train and test, under which labels: a run's identity
    # (noisydml.run.checks.identity); the zero-shot split's classes, where a subclass takes them.
    split_keys: ClassVar[tuple[str, ...]] = ("train_classes",)

    def __init__(
        self,
        root: str | Path,
        image_size: int = 224,
        resize: int = 256,
        skip_unreadable: bool = False,
        name: str = "",
        cache_decoded: bool = False,
        cache_dir: str | Path | None = None,
        augmentation: str = "random_resized_crop",
    ):
        check_augmentation(augmentation)
        self.root = Path(root)
        self.image_size = image_size
        self.resize = resize
        # How a training image becomes a crop (noisydml.data.transforms).
        self.augmentation = augmentation
        self.skip_unreadable = skip_unreadable
        self.name = name or self.default_name or type(self).__name__
        # Decode and resize every image once, then crop the cached pixels (see ``image_cache``).
        self.cache_decoded = cache_decoded
        self.cache_dir = cache_dir

    def annotation(self, relpath: str) -> Path:
        """The path of a layout file, which must exist."""
        path = self.root / relpath
        if not path.is_file():
            raise DatasetLayoutError(self.name, self.root, relpath, self.layout)
        return path

    def mat_array(self, relpath: str, key: str) -> np.ndarray:
        """Array ``key`` of a MATLAB layout file, squeezed to one dimension (1 x N -> N)."""
        mat = scipy.io.loadmat(self.annotation(relpath), squeeze_me=True)
        if key not in mat:
            found = ", ".join(k for k in mat if not k.startswith("__"))
            raise KeyError(
                f"{self.name}: {relpath} under dataset.root={self.root} has no array {key!r} "
                f"(found: {found}); use the file of the original release."
            )
        # squeeze_me turns a single record or label into a 0-d array.
        return np.atleast_1d(mat[key])

    def class_folders(self, folder: str) -> tuple[list[str], np.ndarray]:
        """The images of a one-folder-per-class tree under ``root/folder``, as paths relative to the root,
        and labels ``1..N`` in the folders' sorted (code point) order: the order in which PRISM's lists
        number them (``AM General Hummer SUV 2000`` is 1, ``Acura Integra Type R 2001`` 2)."""
        tree = self.root / folder
        if not tree.is_dir():
            raise DatasetLayoutError(self.name, self.root, f"{folder}/", self.layout)
        relpaths, labels = [], []
        for label, name in enumerate(sorted(p.name for p in tree.iterdir() if p.is_dir()), 1):
            files = sorted(p.name for p in (tree / name).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            relpaths += [f"{folder}/{name}/{file}" for file in files]
            labels += [label] * len(files)
        return relpaths, np.asarray(labels, dtype=np.int64)

    def images(self, relpaths: Sequence[str], labels: np.ndarray, train: bool) -> ImageListDataset:
        """The images at ``relpaths`` under the root, with the train or the test transform."""
        evaluation = test_transform(self.image_size, self.resize, self.augmentation)
        transform = train_transform(self.image_size, self.resize, self.augmentation) if train else evaluation
        paths = [self.root / relpath for relpath in relpaths]
        cache = None
        if self.cache_decoded:
            cached_evaluation = cached_test_transform(self.image_size, self.resize, self.augmentation)
            cache = DecodedImageCache(
                self.name,
                self.root,
                "train" if train else "test",
                self.resize,
                transform=(
                    cached_train_transform(self.image_size, self.resize, self.augmentation)
                    if train
                    else cached_evaluation
                ),
                eval_transform=cached_evaluation,
                cache_dir=self.cache_dir,
            )
        return ImageListDataset(
            paths, labels, transform, self.skip_unreadable, eval_transform=evaluation, cache=cache
        )

    def zero_shot(self, relpaths: Sequence[str], labels: np.ndarray, train_classes: int) -> Splits:
        """Classes ``1..train_classes`` for training, the remaining classes for testing."""
        if len(labels) == 0:
            raise ValueError(f"{self.name}: the layout files under dataset.root={self.root} list no images")
        train = labels <= train_classes
        if train.all() or not train.any():
            raise ValueError(
                f"{self.name}: dataset.train_classes={train_classes} leaves no "
                f"{'test' if train.all() else 'training'} classes among the classes "
                f"{labels.min()}..{labels.max()} found under dataset.root={self.root}; "
                + (
                    f"set it between {labels.min()} and {labels.max() - 1}."
                    if labels.max() > labels.min()
                    else "a class-disjoint split needs two classes or more: the folder holds one."
                )
            )
        return Splits(
            train=self.images(
                [p for p, t in zip(relpaths, train, strict=True) if t], labels[train], train=True
            ),
            test=self.images(
                [p for p, t in zip(relpaths, train, strict=True) if not t], labels[~train], train=False
            ),
        )
