"""Two methods compared seed by seed: the mean difference, its 95% confidence interval, a p-value, a verdict,
and how many seeds would settle a comparison that is still open.

Runs of one seed share their noisy labels and sampler across methods (the data module seeds them), so the
difference of two methods is taken per seed and the seeds are the sample: a paired t-test. A claim holds
only when the interval excludes zero in the paper's direction; ``a`` is the side the paper says is larger.

The interval is Student's t by default. ``interval="bootstrap"`` (``noisydml-report --interval bootstrap``,
or ``with interval_kind("bootstrap")``) takes the percentile bootstrap over seeds instead, which assumes
no normality of the differences; with the 2-5 seeds of most experiments it is narrower than it should be
(a resample of 3 seeds has 10 distinct means), which is why t stays the default.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np
from scipy import integrate, stats
from statsmodels.stats.multitest import multipletests

HELD, CONTRADICTED, INCONCLUSIVE = "held", "contradicted", "inconclusive"
CONFIDENCE = 0.95
# The error rate each decision is held to: per comparison, or per family once adjusted (holm, bh).
ALPHA = 1 - CONFIDENCE
# The power a seed count is sized for: the usual 80% chance that the interval excludes zero.
POWER = 0.8
# The power each half of the seeds is sized for, so that both halves reach a true effect with about
# 0.9 x 0.9 = 81% chance: the seed counts the report proposes for an unstable or inconclusive verdict.
HALF_POWER = 0.9
# Beyond this many seeds the effect is too small to chase: ``seeds_needed`` says None.
MAX_SEEDS = 1000
# Equal differences on fewer seeds than this, from runs that move with the seed, give no interval (paired).
COINCIDENCE_SEEDS = 3
T, BOOTSTRAP = "t", "bootstrap"
INTERVALS = (T, BOOTSTRAP)
# Resamples of the bootstrap, from a fixed generator: the same runs give the same report.
RESAMPLES = 9999
BOOTSTRAP_SEED = 0
# The interval ``paired`` takes when not told: set for a block by ``interval_kind``.
_INTERVAL: ContextVar[str] = ContextVar("interval", default=T)


@contextmanager
def interval_kind(kind: str) -> Iterator[None]:
    """``paired`` computes ``kind`` intervals (``t`` or ``bootstrap``) inside the block."""
    if kind not in INTERVALS:
        raise ValueError(f"interval={kind!r} is not one of {', '.join(INTERVALS)}")
    token = _INTERVAL.set(kind)
    try:
        yield
    finally:
        _INTERVAL.reset(token)


@dataclass(frozen=True)
class Paired:
    """``a - b`` over the seeds both sides ran: mean (``effect``), ``confidence`` interval, two-sided p."""

    effect: float
    ci_low: float
    ci_high: float
    p_value: float
    n_seeds: int
    sd: float
    interval: str = T
    # The per-seed differences in seed order: what ``p_against`` tests a value other than zero on.
    differences: tuple[float, ...] = field(default=(), repr=False, compare=False)
    # The seeds the differences were taken on, in the same order.
    seeds: tuple[Hashable, ...] = field(default=(), repr=False, compare=False)

    @property
    def verdict(self) -> str:
        """``held`` when the interval lies above zero, ``contradicted`` below, ``inconclusive`` across it."""
        if self.ci_low > 0:
            return HELD
        if self.ci_high < 0:
            return CONTRADICTED
        return INCONCLUSIVE

    def seeds_needed(self, power: float = POWER, confidence: float = CONFIDENCE) -> int | None:
        """Seeds at which a paired t-test would find the observed effect with probability ``power``,
        if the effect and the spread of the differences stay as observed; None when that takes more than
        ``MAX_SEEDS`` or cannot be said (no effect, one seed)."""
        return seeds_for(self.effect, self.sd, power, confidence)

    def p_against(self, value: float = 0.0) -> float:
        """The two-sided p of the mean difference being ``value`` (``p_value`` is this at 0): a claim's
        contradiction is tested against the value its interval must clear (0, or a margin). nan when no
        interval can be told (one seed, equal differences by coincidence)."""
        n = self.n_seeds
        if n < 2 or math.isnan(self.sd):
            return math.nan
        if self.sd == 0:
            return 1.0 if self.effect == value else 0.0
        if self.interval == BOOTSTRAP:
            return _bootstrap(np.asarray(self.differences) - value, CONFIDENCE)[2]
        return _t_test(np.asarray(self.differences) - value, CONFIDENCE)[2]


def paired(
    a: Mapping[Hashable, float],
    b: Mapping[Hashable, float],
    confidence: float = CONFIDENCE,
    interval: str | None = None,
) -> Paired:
    """Compare ``a`` and ``b`` (values by seed) on the seeds both have: the mean difference with a t- or
    bootstrap ``interval`` (``interval_kind``'s when None) and its p-value.

    One shared seed gives the difference with an unbounded interval. Differences that are all equal give
    the point as its interval (p = 0, or 1 when they are all zero) only when neither side moves with the
    seed (a PCA baseline): the difference is then exact. Equal differences of runs that do move with the
    seed are a coincidence of a discrete metric (Recall@1 over N test items moves in steps of 1/N; two seeds
    that both differ by one step are common), not a spread of zero: no interval can be told from them, so
    the interval is unbounded, as for one seed. From ``COINCIDENCE_SEEDS`` seeds on, equal differences are
    taken as an exact effect again (three equal steps by chance are rare).
    """
    kind = interval or _INTERVAL.get()
    if kind not in INTERVALS:
        raise ValueError(f"interval={kind!r} is not one of {', '.join(INTERVALS)}")
    shared = seed_order(seed for seed in a if seed in b)
    differences = np.array([a[seed] - b[seed] for seed in shared], dtype=np.float64)
    kept, ids = tuple(float(d) for d in differences), tuple(shared)
    n = len(differences)
    if n == 0:
        return Paired(math.nan, math.nan, math.nan, math.nan, 0, math.nan, kind)
    effect = float(differences.mean())
    if n == 1:
        return Paired(effect, -math.inf, math.inf, math.nan, 1, math.nan, kind)
    sd = float(differences.std(ddof=1))
    if sd == 0:
        seed_independent = len({a[seed] for seed in shared}) == 1 and len({b[seed] for seed in shared}) == 1
        if seed_independent or n >= COINCIDENCE_SEEDS:
            return Paired(effect, effect, effect, 1.0 if effect == 0 else 0.0, n, 0.0, kind, kept, ids)
        return Paired(effect, -math.inf, math.inf, math.nan, n, math.nan, kind, kept, ids)
    if kind == BOOTSTRAP:
        low, high, p_value = _bootstrap(differences, confidence)
        return Paired(effect, low, high, p_value, n, sd, kind, kept, ids)
    low, high, p_value = _t_test(differences, confidence)
    return Paired(effect, low, high, p_value, n, sd, kind, kept, ids)


def _t_test(differences: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """scipy's one-sample t interval of the differences' mean and the two-sided p of it being zero.
    Differences equal up to float rounding (``0.95 - 0.90`` on one seed, ``0.85 - 0.80`` on the next) make
    scipy warn of precision loss; their interval is the point, up to that rounding, as intended."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        test = stats.ttest_1samp(differences, 0.0)
        interval = test.confidence_interval(confidence)
    return float(interval.low), float(interval.high), float(test.pvalue)


def seed_order(seeds: Iterable[Hashable]) -> list[Hashable]:
    """Seeds in a fixed order, numbers by value (``"10"`` after ``"9"``), whatever order they came in:
    the bootstrap's resamples, a sum's rounding and the split into halves depend on it, and a set's order
    changes with Python's hash seed."""
    return sorted(seeds, key=lambda s: (0, float(s), "") if _numeric(s) else (1, 0.0, str(s)))


def _numeric(seed: Hashable) -> bool:
    try:
        float(seed)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


def halves(seeds: Iterable[Hashable]) -> tuple[list[Hashable], list[Hashable]]:
    """Two disjoint halves of the seeds, by position in ``seed_order``: the 1st, 3rd, 5th... and the 2nd,
    4th...; a replication check judges a claim on each as if it were the only run."""
    ordered = seed_order(seeds)
    return ordered[0::2], ordered[1::2]


def _bootstrap(differences: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """Percentile bootstrap of the mean difference over seeds (scipy's), and the two-sided p-value read
    from the same resampled means: twice the smaller share on either side of zero, so the interval
    excludes zero exactly when p < 1 - confidence (up to the resampling's granularity)."""
    result = stats.bootstrap(
        (differences,),
        np.mean,
        confidence_level=confidence,
        n_resamples=RESAMPLES,
        method="percentile",
        random_state=np.random.default_rng(BOOTSTRAP_SEED),
    )
    means = result.bootstrap_distribution
    p_value = min(1.0, 2 * min(float(np.mean(means <= 0)), float(np.mean(means >= 0))))
    interval = result.confidence_interval
    return float(interval.low), float(interval.high), p_value


def seeds_for(effect: float, sd: float, power: float = POWER, confidence: float = CONFIDENCE) -> int | None:
    """The smallest number of seeds at which a two-sided paired t-test at level ``1 - confidence`` has
    ``power`` against a true mean difference ``effect`` with spread ``sd`` (noncentral t)."""
    if not (math.isfinite(effect) and math.isfinite(sd)) or effect == 0:
        return None
    if sd == 0:
        return 2
    size = abs(effect) / sd

    def reached(n: int) -> bool:
        critical = stats.t.ppf(0.5 + confidence / 2, n - 1)
        noncentrality = size * math.sqrt(n)
        chance = _above(critical, n - 1, noncentrality) + _above(critical, n - 1, -noncentrality)
        return not chance < power

    # The power grows with n: double until it is reached, then bisect between the last two.
    high = 2
    while not reached(high):
        if high >= MAX_SEEDS:
            return None
        high = min(2 * high, MAX_SEEDS)
    low = max(2, high // 2)
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if reached(middle) else (middle + 1, high)
    return low


def _above(critical: float, df: int, noncentrality: float) -> float:
    """P(T > critical) for T noncentral t: scipy's, or where scipy gives nan (far out in a tail, e.g. a
    critical value in the thousands at one degree of freedom), the same probability integrated over the
    chi-distributed scale: T = (Z + noncentrality) / (X / sqrt(df)), X ~ chi(df)."""
    chance = float(stats.nct.sf(critical, df, noncentrality))
    if not math.isnan(chance):
        return chance
    scale = stats.chi(df)
    value, _ = integrate.quad(
        lambda x: stats.norm.sf(critical * x / math.sqrt(df) - noncentrality) * scale.pdf(x), 0, math.inf
    )
    return float(value)


def combine(verdicts: list[str]) -> str:
    """A claim over several comparisons ("at every noise rate"): held when each one held, contradicted
    when any one was, else inconclusive."""
    if verdicts and all(v == HELD for v in verdicts):
        return HELD
    if CONTRADICTED in verdicts:
        return CONTRADICTED
    return INCONCLUSIVE


def equivalence(comparison: Paired, margin: float) -> str:
    """A claim that two methods are about as good ("relatively as robust"): held when the interval lies
    within ``[-margin, margin]``, contradicted when it lies wholly outside, else inconclusive."""
    if -margin <= comparison.ci_low and comparison.ci_high <= margin:
        return HELD
    if comparison.ci_low > margin or comparison.ci_high < -margin:
        return CONTRADICTED
    return INCONCLUSIVE


def at_most(comparison: Paired, margin: float) -> str:
    """A claim of no real improvement ("no significant improvement"): held when the interval's upper end
    is at most ``margin``, contradicted when its lower end is above it, else inconclusive."""
    if comparison.ci_high <= margin:
        return HELD
    if comparison.ci_low > margin:
        return CONTRADICTED
    return INCONCLUSIVE


def _adjust(p_values: list[float], method: str) -> list[float]:
    """statsmodels' ``multipletests`` over the family; a nan p (no test possible) counts in the family as
    p = 1 and stays nan."""
    if not p_values:
        return []
    filled = [1.0 if math.isnan(p) else p for p in p_values]
    adjusted = multipletests(filled, alpha=ALPHA, method=method)[1]
    return [math.nan if math.isnan(p) else float(a) for p, a in zip(p_values, adjusted, strict=True)]


def step_up_bar(rejected: int, family: int) -> float:
    """The p-value below which Benjamini and Hochberg's step-up procedure rejects in a family of ``family``
    tests where it rejected ``rejected``: ``rejected x ALPHA / family``, ``ALPHA / family`` when it
    rejected none.

    The procedure rejects the k smallest p-values for the largest k with p_(k) <= k x ALPHA / family
    (Benjamini & Hochberg 1995, JRSS B 57(1):289-300, section 3). Given the family's other p-values, any p
    at or below k x ALPHA / family is rejected, whether or not it is among the k: that is the bar a test of
    the family faces, and ALPHA / family, the strictest, is only the first rejection's. For a test outside
    the k the exact bar is one step looser, (k + 1) x ALPHA / family, so seeds sized at this bar err by a
    step towards too many, never too few. Where nothing is rejected the first rejection needs
    p_(1) <= ALPHA / family, the same bar."""
    return ALPHA * max(rejected, 1) / family


def step_down_bar(rejected: int, family: int) -> float:
    """The p-value below which Holm's step-down procedure rejects in a family of ``family`` tests where it
    rejected ``rejected``: ``ALPHA / (family - rejected + 1)``, the bar of its last rejection,
    ``ALPHA / family`` when it rejected none.

    The procedure rejects p_(1), p_(2), ... while p_(i) <= ALPHA / (family - i + 1) (Holm 1979, Scand. J.
    Statist. 6(2):65-70). Given the family's other p-values, a test it did not reject would be rejected at
    or below the last rejection's bar; its exact bar is one step looser, ALPHA / (family - rejected), so,
    as for ``step_up_bar``, seeds sized at this bar err by a step towards too many."""
    return ALPHA / (family - max(rejected, 1) + 1)


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values: rejecting where the adjusted p is below
    ``ALPHA`` keeps the chance of any false rejection in the family at ``ALPHA`` (family-wise error
    rate), whatever the dependence between the tests. A nan p counts as p = 1 and stays nan."""
    return _adjust(p_values, "holm")


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Benjamini and Hochberg's adjustment: rejecting where the adjusted p is below ``ALPHA`` keeps the
    expected share of false rejections among the rejections at ``ALPHA`` (false discovery rate) for
    independent or positively dependent tests. A nan p counts as p = 1 and stays nan."""
    return _adjust(p_values, "fdr_bh")
