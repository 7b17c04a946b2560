"""Digits, clothes, tiny photos and characters, read (or fetched) by torchvision.datasets."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
import torchvision.datasets
from torchvision import transforms
from torchvision.datasets import VisionDataset

from noisydml.data.base import DatasetLayoutError, LabeledDataset, Splits, refuse_unread_keys

CLASSES_SPLITS = ("same", "disjoint")
# The keys only one classes_split reads.
READ_BY = {"train_classes": ("disjoint",)}
OMNIGLOT_LABELS = ("character", "alphabet")


class VisionSubset(LabeledDataset):
    """Items ``indices`` of a torchvision data set, labelled from its metadata, not its images."""

    def __init__(self, dataset: VisionDataset, indices: np.ndarray, labels: np.ndarray):
        super().__init__(labels)
        self.dataset = dataset
        self.indices = np.asarray(indices, dtype=np.int64)

    def load(self, index: int) -> torch.Tensor:
        return self.dataset[int(self.indices[index])][0]


class TorchvisionDataset:
    """A torchvision data set under ``root``, as tensors normalised with its own mean and std.

    With ``download=false`` (the default: compute nodes are often offline) missing files raise a
    ``DatasetLayoutError`` naming them instead of a download attempt.
    """

    vision_class: ClassVar[type[VisionDataset]]
    mean: ClassVar[tuple[float, ...]]
    std: ClassVar[tuple[float, ...]]

    def __init__(
        self, root: str | Path, download: bool = False, image_size: int | None = None, name: str = ""
    ):
        self.root = Path(root)
        self.download = download
        self.image_size = image_size
        self.name = name or type(self).__name__

    def expected_files(self) -> list[str]:
        """The paths under ``root`` that torchvision reads, as the layout error shows them."""
        raise NotImplementedError

    def transform(self) -> transforms.Compose:
        resize = [transforms.Resize(self.image_size)] if self.image_size else []
        return transforms.Compose([*resize, transforms.ToTensor(), transforms.Normalize(self.mean, self.std)])

    def open(self, **kwargs: bool) -> VisionDataset:
        """The torchvision data set; ``kwargs`` choose its part (``train=``, ``background=``)."""
        try:
            return self.vision_class(
                str(self.root), transform=self.transform(), download=self.download, **kwargs
            )
        except RuntimeError as error:
            missing = [path for path in self.expected_files() if not (self.root / path).exists()]
            # Files present but failing torchvision's checksum: its own message says so better.
            if self.download or not missing:
                raise
            layout = "\n".join(
                [f"{self.root}/", *(f"  {path}" for path in self.expected_files())]
                + ["Or set dataset.download=true on a machine with internet access to fetch them there."]
            )
            raise DatasetLayoutError(self.name, self.root, missing[0], layout) from error


class ClassesSplitDataset(TorchvisionDataset):
    """A data set with a train set and a test set of the same classes.

    ``classes_split=same`` keeps them as they are. ``classes_split=disjoint`` makes the zero-shot
    protocol of metric learning: the train-set images of the first ``train_classes`` classes (default:
    half) train, the test-set images of the other classes test. ``label_map`` optionally maps each
    training class to the label the model learns (Levi et al. 2021's even/odd MNIST); the test split
    keeps the true classes, which Levi et al. score by digit.
    """

    # What decides which samples train and test, under which labels: a run's identity
    # (noisydml.run.checks.identity).
    split_keys = ("classes_split", *READ_BY, "label_map")

    def __init__(
        self,
        root: str | Path,
        download: bool = False,
        image_size: int | None = None,
        classes_split: str = "same",
        name: str = "",
        train_classes: int | None = None,
        label_map: list[int] | None = None,
    ):
        super().__init__(root, download, image_size, name)
        if classes_split not in CLASSES_SPLITS:
            raise ValueError(
                f"dataset.classes_split={classes_split!r} must be one of {', '.join(CLASSES_SPLITS)}"
            )
        refuse_unread_keys("classes_split", classes_split, {"train_classes": train_classes}, READ_BY)
        self.classes_split = classes_split
        self.train_classes = train_classes
        self.label_map = None if label_map is None else np.asarray(label_map, dtype=np.int64)

    def splits(self) -> Splits:
        train, test = self.open(train=True), self.open(train=False)
        train_labels, test_labels = np.asarray(train.targets), np.asarray(test.targets)
        if self.classes_split == "same":
            keep_train = np.ones(len(train_labels), dtype=bool)
            keep_test = np.ones(len(test_labels), dtype=bool)
        else:
            classes = np.unique(train_labels)
            num_train = len(classes) // 2 if self.train_classes is None else self.train_classes
            if not 0 < num_train < len(classes):
                raise ValueError(
                    f"dataset.train_classes={num_train} must leave classes on both sides: "
                    f"use 1 to {len(classes) - 1} for {self.name}'s {len(classes)} classes"
                )
            first_part = classes[:num_train]
            keep_train = np.isin(train_labels, first_part)
            keep_test = ~np.isin(test_labels, first_part)
        observed = classes = train_labels[keep_train]
        if self.label_map is not None:
            if len(self.label_map) <= observed.max():
                raise ValueError(
                    f"dataset.label_map has {len(self.label_map)} entries; {self.name} needs one per "
                    f"class, {observed.max() + 1}"
                )
            observed = self.label_map[observed]
        return Splits(
            train=VisionSubset(train, np.flatnonzero(keep_train), observed),
            test=VisionSubset(test, np.flatnonzero(keep_test), test_labels[keep_test]),
            train_eval_labels=None if self.label_map is None else classes,
        )


class MNIST(ClassesSplitDataset):
    vision_class = torchvision.datasets.MNIST
    mean, std = (0.1307,), (0.3081,)

    def __init__(
        self,
        root: str | Path,
        download: bool = False,
        image_size: int | None = None,
        classes_split: str = "same",
        name: str = "mnist",
        train_classes: int | None = None,
        label_map: list[int] | None = None,
    ):
        super().__init__(root, download, image_size, classes_split, name, train_classes, label_map)

    def expected_files(self) -> list[str]:
        folder = self.vision_class.__name__
        return [f"{folder}/raw/{file.removesuffix('.gz')}" for file, _ in self.vision_class.resources]


class FashionMNIST(MNIST):
    vision_class = torchvision.datasets.FashionMNIST
    mean, std = (0.2860,), (0.3530,)

    def __init__(
        self,
        root: str | Path,
        download: bool = False,
        image_size: int | None = None,
        classes_split: str = "same",
        name: str = "fashion_mnist",
    ):
        super().__init__(root, download, image_size, classes_split, name)


class CIFAR10(ClassesSplitDataset):
    vision_class = torchvision.datasets.CIFAR10
    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)

    def __init__(
        self,
        root: str | Path,
        download: bool = False,
        image_size: int | None = None,
        classes_split: str = "same",
        name: str = "cifar10",
    ):
        super().__init__(root, download, image_size, classes_split, name)

    def expected_files(self) -> list[str]:
        cifar = self.vision_class
        files = [file for file, _ in cifar.train_list + cifar.test_list] + [cifar.meta["filename"]]
        return [f"{cifar.base_folder}/{file}" for file in files]


class Omniglot(TorchvisionDataset):
    """Omniglot: the background set (30 alphabets, 964 characters) trains, the evaluation set tests.

    ``labels`` is ``character`` (the usual classes) or ``alphabet`` (Levi et al. train on alphabet
    labels, so a class holds many distinct characters); ``test_labels`` sets the test split's kind
    and defaults to ``labels``. Test labels are offset past the training labels so no id names
    classes in both splits.
    """

    vision_class = torchvision.datasets.Omniglot
    # Black strokes on white: about 8% of the pixels are 0, the rest 1; the std of such binary
    # pixels follows from the mean, sqrt(m * (1 - m)).
    mean, std = (0.9221,), (0.2681,)
    # What decides which samples train and test, under which labels: a run's identity
    # (noisydml.run.checks.identity).
    split_keys = ("labels", "test_labels")

    def __init__(
        self,
        root: str | Path,
        download: bool = False,
        image_size: int | None = None,
        labels: str = "character",
        test_labels: str | None = None,
        name: str = "omniglot",
    ):
        super().__init__(root, download, image_size, name)
        for key, value in (("labels", labels), ("test_labels", test_labels or labels)):
            if value not in OMNIGLOT_LABELS:
                raise ValueError(f"dataset.{key}={value!r} must be one of {', '.join(OMNIGLOT_LABELS)}")
        self.labels = labels
        self.test_labels = test_labels or labels

    def expected_files(self) -> list[str]:
        folder = self.vision_class.folder
        return [f"{folder}/{part}{suffix}" for part in self.vision_class.zips_md5 for suffix in (".zip", "/")]

    def splits(self) -> Splits:
        background, evaluation = self.open(background=True), self.open(background=False)
        train_labels = omniglot_labels(background, self.labels)
        test_labels = omniglot_labels(evaluation, self.test_labels) + train_labels.max() + 1
        return Splits(
            train=VisionSubset(background, np.arange(len(train_labels)), train_labels),
            test=VisionSubset(evaluation, np.arange(len(test_labels)), test_labels),
            # Trained on alphabets, tested on letters: the training images' letters (Levi et al.'s Table 4).
            train_eval_labels=(
                None if self.test_labels == self.labels else omniglot_labels(background, self.test_labels)
            ),
        )


def omniglot_labels(dataset: torchvision.datasets.Omniglot, kind: str) -> np.ndarray:
    """Each image's character or alphabet index, from the file list torchvision builds."""
    characters = np.array([character for _, character in dataset._flat_character_images], dtype=np.int64)
    if kind == "character":
        return characters
    alphabet_index = {alphabet: i for i, alphabet in enumerate(dataset._alphabets)}
    # torchvision names each character "<alphabet>/<character>".
    alphabet_of = np.array([alphabet_index[Path(c).parts[0]] for c in dataset._characters], dtype=np.int64)
    return alphabet_of[characters]
