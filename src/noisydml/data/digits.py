"""scikit-learn's 8x8 handwritten digits: the real data set that ships with the project."""

from __future__ import annotations

import functools

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from noisydml.data.base import Splits, TensorDataset, refuse_unread_keys
from noisydml.utils.checks import Rule, check_value

SPLITS = ("same_classes", "disjoint")
DIGITS = tuple(range(10))
# The keys only one split reads (null: that split's default, below).
READ_BY = {"test_fraction": ("same_classes",), "split_seed": ("same_classes",), "train_digits": ("disjoint",)}
DEFAULT_TEST_FRACTION, DEFAULT_SPLIT_SEED, DEFAULT_TRAIN_DIGITS = 0.3, 0, (0, 1, 2, 3, 4)
# numpy's and scikit-learn's seeds are below 2**32.
SPLIT_SEED = Rule("dataset.split_seed", int, 0, 2**32, optional=True, example="dataset.split_seed=0")
TEST_FRACTION = Rule(
    "dataset.test_fraction", float, 0, 1, open_low=True, optional=True, example="dataset.test_fraction=0.3"
)


class Digits:
    """1,797 8x8 grayscale digits, 10 classes, as (1, 8, 8) tensors scaled to [0, 1].

    ``split="same_classes"`` (default): a stratified split of every class, ``test_fraction`` (0.3) of it
    tested, seeded by ``split_seed`` (0; fixed across runs, so seeds vary the training, not the test set).
    ``split="disjoint"``: the zero-shot protocol, ``train_digits`` (0-4) for training and the rest for
    testing. A key the chosen split does not read is refused when given (left null it takes the default).
    ``label_map`` optionally maps each training digit to the label the model learns (Levi et al.'s
    even/odd: [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]). The test split keeps the true digits: Levi et al. 2021
    (Sec. 5.1, Table 1) train on digits 0-5 labelled even/odd and score Recall@k on digits 6-9 by digit,
    which is how a class-collapsed embedding shows (their R@1 of 35-42% is below the 50% that two
    parity classes would give by chance).
    """

    name = "digits"
    # What decides which samples train and test, under which labels: a run's identity
    # (noisydml.run.checks.identity).
    split_keys = ("split", *READ_BY, "label_map")

    def __init__(
        self,
        split: str = "same_classes",
        test_fraction: float | None = None,
        split_seed: int | None = None,
        train_digits: list[int] | None = None,
        label_map: list[int] | None = None,
    ):
        if split not in SPLITS:
            raise ValueError(f"dataset.split={split!r} is not one of {SPLITS}")
        check_value(SPLIT_SEED, split_seed)
        check_value(TEST_FRACTION, test_fraction)
        given = {"test_fraction": test_fraction, "split_seed": split_seed, "train_digits": train_digits}
        refuse_unread_keys("split", split, given, READ_BY)
        test_fraction = DEFAULT_TEST_FRACTION if test_fraction is None else test_fraction
        if label_map is not None and len(label_map) != 10:
            raise ValueError(f"dataset.label_map has {len(label_map)} entries; digits need 10")
        self.split = split
        self.test_fraction = test_fraction
        self.split_seed = DEFAULT_SPLIT_SEED if split_seed is None else split_seed
        self.train_digits = list(DEFAULT_TRAIN_DIGITS if train_digits is None else train_digits)
        self.label_map = None if label_map is None else np.asarray(label_map, dtype=np.int64)
        self._check_training_digits()

    def _check_training_digits(self) -> None:
        """Digits that do not exist, a disjoint split that leaves nothing to test, or training labels of
        one class (even/odd over digits of one parity) are refused here, naming the keys: the noise or the
        sampler would otherwise fail on what is left of the training split, blaming themselves."""
        digits = _listed("dataset.train_digits", self.train_digits)
        fix = "e.g. dataset.train_digits=[0,1,2,3,4,5] (Levi et al.'s even/odd trains on 0-5)"
        unknown = [str(d) for d in self.train_digits if d not in DIGITS]
        if unknown:
            raise ValueError(
                f"{digits}: dataset={self.name} has no digit{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(unknown)} (its classes are 0 to 9); {fix}"
            )
        disjoint = self.split == "disjoint"
        trained = sorted(set(self.train_digits)) if disjoint else list(DIGITS)
        if disjoint and len(trained) == len(DIGITS):
            raise ValueError(f"{digits} with dataset.split=disjoint leaves no digit to test on; {fix}")
        if self.label_map is None:
            labels, what = trained, f"{digits} trains on {len(trained)} digit"
        else:
            labels = sorted(set(self.label_map[trained].tolist()))
            mapped = _listed("dataset.label_map", self.label_map.tolist())
            what = f"{digits} under {mapped} trains on one label" if disjoint else f"{mapped} is one label"
            fix = fix if disjoint else "e.g. dataset.label_map=[0,1,0,1,0,1,0,1,0,1] (even/odd)"
        if len(labels) < 2:
            raise ValueError(
                f"{what}; metric learning needs at least 2 training classes (the P x K sampler draws data.P "
                f"of them); {fix}"
            )

    def images_and_labels(self) -> tuple[torch.Tensor, np.ndarray]:
        """Every image as an (N, 1, H, W) float tensor in [0, 1], and its digit."""
        pixels, target = _load_digits()
        images = torch.from_numpy(pixels.astype(np.float32) / 16.0).unsqueeze(1)
        return images, target.astype(np.int64)

    def splits(self) -> Splits:
        images, labels = self.images_and_labels()
        if self.split == "same_classes":
            try:
                train_idx, test_idx = train_test_split(
                    np.arange(len(labels)),
                    test_size=self.test_fraction,
                    stratify=labels,
                    random_state=self.split_seed,
                )
            except ValueError as error:
                # A stratified split needs a sample of every class on each side.
                classes = len(np.unique(labels))
                raise ValueError(
                    f"dataset.test_fraction={self.test_fraction} leaves too few of the {len(labels)} samples "
                    f"on one side for a split of each of the {classes} classes ({error}); e.g. "
                    "dataset.test_fraction=0.3"
                ) from error
        else:
            is_train = np.isin(labels, self.train_digits)
            train_idx, test_idx = np.flatnonzero(is_train), np.flatnonzero(~is_train)
        train_idx, test_idx = np.sort(train_idx), np.sort(test_idx)
        train_labels = labels[train_idx] if self.label_map is None else self.label_map[labels[train_idx]]
        return Splits(
            train=TensorDataset(images[train_idx], train_labels),
            test=TensorDataset(images[test_idx], labels[test_idx]),
            train_eval_labels=None if self.label_map is None else labels[train_idx],
        )


@functools.cache
def _load_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as it ships them, read once a process (a sweep's jobs share it), read-only."""
    digits = load_digits()
    digits.images.setflags(write=False)
    digits.target.setflags(write=False)
    return digits.images, digits.target


def _listed(key: str, values: list) -> str:
    """``key=[a,b,c]``, as it is typed on the command line."""
    return f"{key}=[{','.join(str(v) for v in values)}]"
