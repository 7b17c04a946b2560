"""MNIST-1D (Greydanus 2020, "Scaling down deep learning"): 10 classes of 1-D signals made from one
template per digit by padding, dilation, scaling, translation, correlated and i.i.d. noise and shear,
generated locally by the ``mnist1d`` package (Apache-2.0), never downloaded.

It is built to be hard for methods that compare raw signals (a kNN vote on them classifies about half
the test signals) and easy for a small convolutional net (94% test accuracy in its paper, 68% for an
MLP), so a learned embedding matters where on digits or MNIST the pixels nearly suffice.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from mnist1d.data import get_dataset_args, make_dataset

from noisydml.data.digits import Digits
from noisydml.utils.checks import BadValue, Rule, check_value
from noisydml.utils.random_state import streams_kept

# The package's generation arguments, in the ranges its transforms take (mnist1d.transform): enough signals
# for a split, a seed numpy accepts, a template dilated to at least a sample, padding drawn from low to high
# zeros, a translation drawn below max_translation, a scale factor 1 + scale_coeff * (u - 1/2) that stays
# positive, noise scales, a resampled length of at least two.
GENERATION_RULES = (
    Rule(
        "dataset.num_samples",
        int,
        20,
        example="dataset.num_samples=10000",
        why="num_samples // 10 signals per digit, and a stratified split needs two of each",
    ),
    Rule("dataset.generation_seed", int, 0, 2**32, example="dataset.generation_seed=42 (the package's set)"),
    Rule("dataset.template_len", int, 1, example="dataset.template_len=12"),
    Rule("dataset.padding", int, 0, each=True, length=2, example="dataset.padding=[36,60]"),
    Rule("dataset.max_translation", int, 1, example="dataset.max_translation=48"),
    Rule("dataset.scale_coeff", float, 0, 2, example="dataset.scale_coeff=0.4"),
    Rule("dataset.corr_noise_scale", float, 0, example="dataset.corr_noise_scale=0.25"),
    Rule("dataset.iid_noise_scale", float, 0, example="dataset.iid_noise_scale=0.02"),
    Rule("dataset.shear_scale", float, 0, example="dataset.shear_scale=0.75"),
    Rule("dataset.final_seq_length", int, 2, example="dataset.final_seq_length=40"),
)


class MNIST1D(Digits):
    """MNIST-1D signals as (1, L) tensors (L = ``final_seq_length``, 40), standardised over the whole
    set as the package does, ``num_samples // 10`` per digit.

    The generation arguments are the package's own (``mnist1d.data.get_dataset_args``), defaults
    included, so a run's config (and results.json) says which signals it saw; ``generation_seed`` is the
    package's ``seed`` (42 gives its published set). The package's own 80/20 split is not used: the split
    options are the digits' (``Digits``): ``same_classes`` (default, a stratified 70/30 split seeded by
    ``split_seed``: 350 training and 150 test signals per digit at 5,000), ``disjoint`` (``train_digits``
    train, the others test) and ``label_map``.
    """

    name = "mnist1d"

    def __init__(
        self,
        split: str = "same_classes",
        test_fraction: float | None = None,
        split_seed: int | None = None,
        train_digits: list[int] | None = None,
        label_map: list[int] | None = None,
        num_samples: int = 5000,
        generation_seed: int = 42,
        template_len: int = 12,
        padding: tuple[int, int] = (36, 60),
        scale_coeff: float = 0.4,
        max_translation: int = 48,
        corr_noise_scale: float = 0.25,
        iid_noise_scale: float = 0.02,
        shear_scale: float = 0.75,
        shuffle_seq: bool = False,
        final_seq_length: int = 40,
    ):
        generation = (
            num_samples,
            generation_seed,
            template_len,
            padding,
            max_translation,
            scale_coeff,
            corr_noise_scale,
            iid_noise_scale,
            shear_scale,
            final_seq_length,
        )
        for rule, value in zip(GENERATION_RULES, generation, strict=True):
            check_value(rule, value)
        if padding[0] > padding[1]:
            raise BadValue(
                "dataset.padding",
                f"=[{padding[0]},{padding[1]}]: each template is padded with low to high zeros, so low may "
                "not exceed high; e.g. dataset.padding=[36,60]",
            )
        self.generation = {
            "num_samples": num_samples,
            "seed": generation_seed,
            "template_len": template_len,
            "padding": [int(p) for p in padding],
            "scale_coeff": scale_coeff,
            "max_translation": max_translation,
            "corr_noise_scale": corr_noise_scale,
            "iid_noise_scale": iid_noise_scale,
            "shear_scale": shear_scale,
            "shuffle_seq": shuffle_seq,
            "final_seq_length": final_seq_length,
        }
        super().__init__(split, test_fraction, split_seed, train_digits, label_map)

    def images_and_labels(self) -> tuple[torch.Tensor, np.ndarray]:
        """Every signal as an (N, 1, L) float tensor, and its digit."""
        signals, labels = _generate(tuple(sorted((k, _hashable(v)) for k, v in self.generation.items())))
        return torch.from_numpy(signals.copy()).unsqueeze(1), labels.copy()


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value


@functools.lru_cache(maxsize=2)
def _generate(items: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The package's ``make_dataset`` on these arguments, its two splits joined back in its order.

    Cached: a sweep's jobs in one process generate once (about 1 s at 5,000). The package seeds the
    global ``random`` and ``numpy.random`` generators; their states are put back, so generating leaves
    the run's seeding as it was.
    """
    args = get_dataset_args()
    # Only the generation arguments are set; the package's url (its download path) is never read here.
    for key, value in items:
        setattr(args, key, list(value) if isinstance(value, tuple) else value)
    with streams_kept():
        data = make_dataset(args)
    signals = np.concatenate([data["x"], data["x_test"]]).astype(np.float32)
    labels = np.concatenate([data["y"], data["y_test"]]).astype(np.int64)
    signals.setflags(write=False)
    labels.setflags(write=False)
    return signals, labels
