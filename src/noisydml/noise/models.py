"""Label-noise models: which training samples a run trains on, and under which labels.

Each model is built by Hydra from ``conf/noise/<name>.yaml``. ``apply`` seeds its own generator from
``seed``, so the noisy labels are a pure function of (labels, parameters, seed) and every method in a
sweep trains on the same ones.

Counts of the form ``round(x)`` (``exact``'s total, ``class_conditional``'s exact counts) round half to
even, as Python's ``round`` and ``np.rint`` do, after snapping ``x`` to 9 decimals:
in binary ``0.07 * 150`` is ``10.500000000000002``, which would round to 11, while the tie 10.5 it stands
for rounds to 10. Half to even rather than half up so that, over many classes landing on a tie, counts
are not biased upwards.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from noisydml.utils.checks import Rule, check_fraction, check_value
from noisydml.utils.errors import BadInput
from noisydml.utils.unread import Parts

# A flip rate at which most observed labels are wrong: allowed, and said.
HIGH_NOISE = 0.5


# eq=False: the fields are arrays, and a generated __eq__ would fail with "truth value is ambiguous".
@dataclass(frozen=True, eq=False)
class NoisyLabels:
    """The training samples a run trains on, as positions into the training set, sorted."""

    indices: np.ndarray
    true: np.ndarray
    observed: np.ndarray

    def __post_init__(self) -> None:
        if not len(self.indices) == len(self.true) == len(self.observed):
            raise ValueError(
                f"NoisyLabels needs one true and one observed label per index; got {len(self.indices)} "
                f"indices, {len(self.true)} true and {len(self.observed)} observed labels"
            )


@dataclass(frozen=True)
class NoNoise:
    """The clean labels, unchanged. ``seed`` is accepted, and unused, so every noise config has it."""

    seed: int = 0

    def apply(self, labels: np.ndarray) -> NoisyLabels:
        labels = _check_labels(labels)
        return NoisyLabels(np.arange(len(labels)), labels.copy(), labels.copy())

    def unread_keys(self, parts: Parts) -> dict[str, str]:
        """``seed`` given for it: no noise is drawn (``noisydml.utils.unread``)."""
        return {"seed": "seeds the noise, but {node} draws none, so nothing reads it; drop {key}"}


@dataclass(frozen=True)
class UniformNoise:
    """Each label flips independently with probability ``rate`` to one of the other classes, chosen
    uniformly (Le & Odobez Eq. 6). The realized number of flips is binomial, not fixed. This is PRISM's
    symmetric noise (Liu et al., CVPR 2021), the noise of their ``*_noised_train.csv`` lists."""

    rate: float
    seed: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", _check_rate("noise.rate", self.rate))
        _check_seed(self.seed)

    def apply(self, labels: np.ndarray) -> NoisyLabels:
        labels = _check_labels(labels)
        check_uniform_rate("noise.rate", self.rate, len(_flippable_classes(labels, type(self).__name__)))
        rng = np.random.default_rng(self.seed)
        return _flip(labels, rng.random(len(labels)) < self.rate, rng)


@dataclass(frozen=True)
class ExactNoise:
    """Exactly ``round(rate * N)`` of the N labels flip, each to one of the other classes, chosen
    uniformly; which samples of a class flip is random (BSPML; BDML "by the respective proportion").

    BSPML "tr[ies its] best to ensure that noisy samples exist in each class", so the flips are spread
    per class rather than drawn over the whole set: when ``rate > 0`` every class of at least 2 samples
    gets at least one flip, and the remaining flips go where they keep the per-class rates closest to
    ``rate`` (the counts ``t_c`` minimise ``sum_c n_c (t_c / n_c - rate)^2``, exact ties broken at
    random). Rounding each class on its own, ``round(rate * n_c)``, would leave classes of 2-5 samples
    clean at 10% and give a class of 2 a 50% rate at 30%.

    The total comes first: it is the noise rate a table is labelled with. When it is smaller than the
    number of classes of >= 2 samples (SOP or In-Shop at 10%: about 1 flip for every 2 classes), each
    flip goes to a different class, the largest classes first (the lowest per-class rate, 1 / n_c);
    the other classes stay clean.
    """

    rate: float
    seed: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", _check_rate("noise.rate", self.rate))
        _check_seed(self.seed)

    def apply(self, labels: np.ndarray) -> NoisyLabels:
        labels = _check_labels(labels)
        check_uniform_rate("noise.rate", self.rate, len(_flippable_classes(labels, type(self).__name__)))
        _, class_index = np.unique(labels, return_inverse=True)
        counts = np.bincount(class_index)
        rng = np.random.default_rng(self.seed)
        rank = _random_ranks(class_index, counts, rng)
        flip_counts = _spread_flips(counts, self.rate, rng)
        return _flip(labels, rank < flip_counts[class_index], rng)


@dataclass(frozen=True)
class ClassConditionalNoise:
    """Per-class flip rates (BDML Table 3): ``rates[i]`` is the rate of the i-th class in sorted class
    order. Flips go to one of the other classes, uniformly. With ``exact`` each class flips exactly
    ``round(rates[i] * n_c)`` samples, as ``ExactNoise`` does; otherwise each sample flips independently,
    as ``UniformNoise`` does.
    """

    rates: Sequence[float]
    seed: int
    exact: bool = False

    def __post_init__(self) -> None:
        # The list's fix: the rates given, each out of range replaced by one in it.
        given = (
            list(self.rates) if isinstance(self.rates, Sequence) and not isinstance(self.rates, str) else []
        )
        fixed = [
            r if isinstance(r, (int, float)) and not isinstance(r, bool) and 0 <= r < 1 else 0.2
            for r in given
        ]
        example = f"noise.rates=[{','.join(f'{r:g}' for r in fixed or [0.2, 0.1])}]"
        check_value(Rule("noise.rates", float, 0, 1, each=True, example=example), self.rates)
        object.__setattr__(self, "rates", tuple(float(rate) for rate in self.rates))
        _check_seed(self.seed)

    def apply(self, labels: np.ndarray) -> NoisyLabels:
        labels = _check_labels(labels)
        classes = _flippable_classes(labels, type(self).__name__)
        if len(self.rates) != len(classes):
            raise ValueError(
                f"noise.rates has {len(self.rates)} entries but the labels hold {len(classes)} classes; "
                f"give one rate per class, in sorted class order"
            )
        for i, rate in enumerate(self.rates):
            # A class's flips spread uniformly over the other classes, as uniform noise's do.
            check_uniform_rate(f"noise.rates[{i}]", rate, len(classes))
        _, class_index = np.unique(labels, return_inverse=True)
        rates = np.asarray(self.rates)[class_index]
        rng = np.random.default_rng(self.seed)
        if self.exact:
            counts = np.bincount(class_index)
            flip = (
                _random_ranks(class_index, counts, rng)
                < _round_half_even(np.asarray(self.rates) * counts)[class_index]
            )
        else:
            flip = rng.random(len(labels)) < rates
        return _flip(labels, flip, rng)


@dataclass(frozen=True)
class ToplineNoise:
    """No flips: keep a random ``1 - rate`` of the clean training set (Le & Odobez 6.1, the "1 - p clean
    random data samples" a run at noise rate p is compared against), every kept sample one a P x K
    sampler can draw.

    The subset is stratified: every class c keeps ``(1 - rate) * n_c`` samples in expectation, chosen at
    random. Stratified because the noisy run it is compared with keeps every class, with about
    ``(1 - rate) * n_c`` correctly labelled samples each; an unstratified draw would drop whole small
    classes (common in SOP, 2-12 images a class) that the noisy run still has. A class keeps the floor or
    the ceiling of ``(1 - rate) * n_c``, except that one that would keep a single sample keeps two or
    none: a lone sample forms no positive pair, so a P x K sampler never draws it, and the topline would
    train on fewer samples than it says (on SOP-like sizes at rate 0.6, 84-93% of them; at 0.7 no class
    of SOP kept K = 5 and the sampler refused). Which classes round up (or keep two) is one systematic
    sample of the classes, with inclusion probability the fraction rounded away (or
    ``(1 - rate) * n_c / 2``): each class is unbiased and the total is within 3 of ``(1 - rate) * N``.
    Rounding every class half to even, as before, was off by up to 2.6% on SOP-like sizes.

    Two or none, rather than a floor of two: a floor would keep well over ``1 - rate`` of a data set of
    small classes (at rate 0.6, every class of 2-4 images keeps 2) and flatter the topline. Keeping lone
    samples as negatives only would need batches the P x K sampler does not make. A class of one sample
    is never kept: no run can train on it.
    """

    rate: float
    seed: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", _check_rate("noise.rate", self.rate))
        _check_seed(self.seed)

    def apply(self, labels: np.ndarray) -> NoisyLabels:
        labels = _check_labels(labels)
        _, class_index = np.unique(labels, return_inverse=True)
        counts = np.bincount(class_index)
        rng = np.random.default_rng(self.seed)
        rank = _random_ranks(class_index, counts, rng)
        target = np.round((1.0 - self.rate) * counts, 9)
        # Every class keeps `low`, or `low + step` with probability `inclusion`: the expectation is `target`.
        low = np.floor(target).astype(np.int64)
        step = np.ones_like(low)
        inclusion = target - low
        lone = target < 2
        low[lone], step[lone] = 0, 2
        inclusion[lone] = np.where(counts[lone] >= 2, target[lone] / 2, 0.0)
        # Systematic sampling, once over the classes rounding by 1 and once over those keeping 2 or none,
        # so both totals are within one step of their expectation: the classes in random order laid end
        # to end on a line, each as long as its inclusion probability (< 1), and a class rounded up when
        # one of u, u + 1, u + 2, ... falls on it.
        up = np.zeros(len(counts), dtype=bool)
        for group in (np.flatnonzero(~lone), np.flatnonzero(lone)):
            group = group[rng.permutation(len(group))]
            ends = np.cumsum(inclusion[group]) - rng.random()
            up[group] = np.floor(ends) > np.floor(ends - inclusion[group])
        keep_counts = low + step * up
        indices = np.flatnonzero(rank < keep_counts[class_index])
        return NoisyLabels(indices, labels[indices], labels[indices])


def _flip(labels: np.ndarray, flip: np.ndarray, rng: np.random.Generator) -> NoisyLabels:
    """Move the samples where ``flip`` is True to another class, uniformly among the others."""
    classes, class_index = np.unique(labels, return_inverse=True)
    # A shift by 1..K-1 (mod K) reaches each of the other K-1 classes exactly once, so a uniform shift
    # is a uniform choice among the other classes, with no loop and no rejection.
    shift = rng.integers(1, len(classes), size=int(flip.sum()))
    observed_index = class_index.copy()
    observed_index[flip] = (class_index[flip] + shift) % len(classes)
    return NoisyLabels(np.arange(len(labels)), labels.copy(), classes[observed_index])


def _spread_flips(counts: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """How many samples of each class ``ExactNoise`` flips (the rule is in its docstring)."""
    total = int(_round_half_even(rate * counts.sum()))
    eligible = (counts >= 2) & (rate > 0)
    if eligible.sum() >= total:
        # One flip for each of ``total`` classes: the first flip of every eligible class is a candidate.
        start, stop = np.zeros_like(counts), eligible.astype(np.int64)
    else:
        start, stop = eligible.astype(np.int64), counts
    # The (t+1)-th flip of class c adds (2t + 1 - 2 rate n_c) / n_c to the objective; the costs rise with
    # t, so the cheapest candidates over all classes are a prefix of every class: the optimum (the
    # objective is separable and convex). Rounding the costs makes ties that are exact in real
    # arithmetic exact in floats, so the random key alone breaks them.
    unit_class = np.repeat(np.arange(len(counts)), stop - start)
    offsets = np.arange(len(unit_class)) - np.repeat(np.cumsum(stop - start) - (stop - start), stop - start)
    t = start[unit_class] + offsets
    cost = np.round((2 * t + 1 - 2 * rate * counts[unit_class]) / counts[unit_class], 9)
    chosen = np.lexsort((rng.random(len(unit_class)), cost))[: total - int(start.sum())]
    return start + np.bincount(unit_class[chosen], minlength=len(counts))


def _random_ranks(class_index: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Every sample's place in a uniformly random order of its class: ``rank < take[class]`` chooses
    ``take[c]`` samples of every class c uniformly at random, without replacement."""
    # Sorting by (class, random key) shuffles each class in place; a sample's rank inside its class is
    # then its position minus where the class starts.
    order = np.lexsort((rng.random(len(class_index)), class_index))
    starts = np.cumsum(counts) - counts
    rank = np.empty(len(class_index), dtype=np.int64)
    rank[order] = np.arange(len(class_index)) - starts[class_index[order]]
    return rank


def _round_half_even(x: np.ndarray) -> np.ndarray:
    return np.rint(np.round(x, 9)).astype(np.int64)


def check_uniform_rate(key: str, rate: float, num_classes: int) -> None:
    """A rate of flips spread uniformly over the other classes means something only while the true class
    stays the most frequent label of its samples: each other class gets ``rate / (C - 1)``, so ``rate``
    must stay below ``(C - 1) / C``. Above one half it is allowed, and said."""
    limit = (num_classes - 1) / num_classes
    if rate >= limit:
        raise BadInput(
            f"{key}={rate}: with {num_classes} training classes a flipped label lands on each other class "
            f"with probability {rate / (num_classes - 1):.3f} > {1 - rate:.3f}, the true class's, so the "
            f"labels teach the wrong classes; use {key.split('[')[0]} < {limit:.3f}"
        )
    warn_high_rate(key, rate)


def warn_high_rate(key: str, rate: float) -> None:
    """A flip rate at which most observed labels are wrong: allowed, and said."""
    if rate > HIGH_NOISE:
        warnings.warn(f"{key}={rate}: most training labels are wrong", stacklevel=3)


def _check_rate(key: str, value: float) -> float:
    return check_fraction(key, value)


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"noise.seed={seed!r} is not a non-negative int; set the run's top-level seed")


def _check_labels(labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or not (np.issubdtype(labels.dtype, np.integer) or labels.size == 0):
        raise ValueError(
            f"noise models take a 1-D array of integer class ids; got shape {labels.shape}, "
            f"dtype {labels.dtype}"
        )
    return labels


def _flippable_classes(labels: np.ndarray, model: str) -> np.ndarray:
    classes = np.unique(labels)
    if len(classes) < 2:
        raise ValueError(
            f"{model} flips labels to other classes, so it needs at least 2 classes; "
            f"the labels hold {len(classes)}"
        )
    return classes
