"""The report's statistics against scipy and hand-worked cases; a claim with a known effect on synthetic
seeds gets each of the three verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from noisydml.report.statistics import (
    BOOTSTRAP,
    BOOTSTRAP_SEED,
    CONTRADICTED,
    HELD,
    INCONCLUSIVE,
    RESAMPLES,
    at_most,
    benjamini_hochberg,
    combine,
    equivalence,
    holm,
    interval_kind,
    paired,
    seeds_for,
    step_down_bar,
    step_up_bar,
)


def test_paired_interval_and_p_value_by_hand_and_against_scipy():
    # Differences 0.02, 0.04, 0.00, 0.06 (seed "3" is in a only and does not count): mean 0.03,
    # sd = sqrt((1 + 1 + 9 + 9) / 3) * 0.01 = 0.0258199, sem = 0.0129099, t(0.975, 3) = 3.182446.
    a = {0: 0.80, 1: 0.74, 2: 0.70, 4: 0.91, 3: 0.5}
    b = {0: 0.78, 1: 0.70, 2: 0.70, 4: 0.85}
    result = paired(a, b)
    assert result.n_seeds == 4 and result.effect == pytest.approx(0.03)
    assert result.sd == pytest.approx(0.0258199, rel=1e-5)
    assert result.ci_low == pytest.approx(0.03 - 3.182446 * 0.0129099, abs=1e-6)
    assert result.ci_high == pytest.approx(0.03 + 3.182446 * 0.0129099, abs=1e-6)
    # t = 0.03 / 0.0129099 = 2.32379 on 3 degrees of freedom.
    reference = stats.ttest_rel([0.80, 0.74, 0.70, 0.91], [0.78, 0.70, 0.70, 0.85])
    assert reference.statistic == pytest.approx(2.32379, rel=1e-5)
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-9)
    interval = reference.confidence_interval(0.95)
    assert (result.ci_low, result.ci_high) == pytest.approx((interval.low, interval.high), rel=1e-9)
    # The interval reaches below zero (0.03 - 0.0411 < 0): p > 0.05 and no verdict.
    assert result.p_value > 0.05 and result.verdict == INCONCLUSIVE


def test_degenerate_cases():
    one = paired({0: 0.9}, {0: 0.5, 1: 0.4})
    assert one.n_seeds == 1 and one.effect == pytest.approx(0.4) and one.verdict == INCONCLUSIVE
    assert math.isinf(one.ci_low) and one.seeds_needed() is None
    none = paired({0: 0.9}, {1: 0.5})
    assert none.n_seeds == 0 and none.verdict == INCONCLUSIVE
    # Seed-independent runs (a PCA baseline): the difference is exact.
    exact = paired({0: 0.6, 1: 0.6}, {0: 0.5, 1: 0.5})
    assert (exact.ci_low, exact.ci_high, exact.p_value) == pytest.approx((0.1, 0.1, 0.0))
    assert exact.verdict == HELD
    # Runs that move with the seed but happen to differ by the same step on each (the digits report had
    # Recall@1 gaps of -0.185 points on both of 2 seeds, "contradicted" at p = 0.009): no interval.
    coincidence = paired({0: 0.935, 1: 0.941}, {0: 0.937, 1: 0.943})
    assert coincidence.effect == pytest.approx(-0.002) and coincidence.verdict == INCONCLUSIVE
    assert math.isinf(coincidence.ci_low) and math.isinf(coincidence.ci_high)
    assert coincidence.seeds_needed() is None


@pytest.mark.parametrize(("size", "seeds"), [(0.2, 199), (0.5, 34), (0.8, 15), (1.0, 10)])
def test_seeds_needed_matches_the_published_paired_t_power_tables(size, seeds):
    # G*Power's paired t-test, two-sided alpha 0.05, power 0.8: dz 0.2 -> 199, 0.5 -> 34, 0.8 -> 15, 1 -> 10.
    assert seeds_for(size * 0.01, 0.01) == seeds

    # ... and by its definition: the power reached at n seeds and not at n - 1.
    def power(n):
        critical = stats.t.ppf(0.975, n - 1)
        nc = size * math.sqrt(n)
        return stats.nct.sf(critical, n - 1, nc) + stats.nct.cdf(-critical, n - 1, nc)

    assert power(seeds) >= 0.8 > power(seeds - 1)


def test_seeds_needed_at_a_strict_level_where_scipys_noncentral_t_gives_nan():
    # A huge effect (d = 19) at the bar of 340 comparisons (alpha / 340): at 2 and 3 seeds the critical
    # t is 4331 and 82, far in a tail where scipy's noncentral t returns nan. Simulated paired t-tests say
    # how often each number of seeds reaches it; the answer must be where the simulation crosses 90%.
    confidence = 1 - 0.05 / 340
    rng = np.random.default_rng(0)

    def simulated(n):
        differences = 19 + rng.standard_normal((20_000, n))
        t = differences.mean(1) / (differences.std(1, ddof=1) / math.sqrt(n))
        return float(np.mean(np.abs(t) > stats.t.ppf(0.5 + confidence / 2, n - 1)))

    assert simulated(3) < 0.9 <= simulated(4)
    assert seeds_for(19.0, 1.0, 0.9, confidence) == 4


def test_seeds_needed_is_none_without_an_effect_or_beyond_reach():
    assert seeds_for(0.0, 0.01) is None
    assert seeds_for(1e-6, 1.0) is None


def synthetic(effect: float, noise: float, seeds: int, rng_seed: int = 0) -> tuple[dict, dict]:
    """Method a = method b + effect, per seed, with seed-to-seed scatter of the difference."""
    rng = np.random.default_rng(rng_seed)
    b = {s: 0.7 + 0.05 * rng.standard_normal() for s in range(seeds)}
    a = {s: b[s] + effect + noise * rng.standard_normal() for s in range(seeds)}
    return a, b


def test_a_known_effect_gets_each_verdict():
    # A 3-point lead with 1 point of scatter over 10 seeds: decisive either way round.
    a, b = synthetic(0.03, 0.01, 10)
    assert paired(a, b).verdict == HELD
    assert paired(b, a).verdict == CONTRADICTED
    # The same lead drowned in 10 points of scatter over 3 seeds: open, and the power estimate asks for
    # more seeds than were run.
    a, b = synthetic(0.03, 0.10, 3)
    open_ = paired(a, b)
    assert open_.verdict == INCONCLUSIVE
    assert open_.seeds_needed() is None or open_.seeds_needed() > 3


def test_combine_and_equivalence():
    assert combine([HELD, HELD]) == HELD
    assert combine([HELD, INCONCLUSIVE]) == INCONCLUSIVE
    assert combine([HELD, CONTRADICTED, INCONCLUSIVE]) == CONTRADICTED
    assert combine([]) == INCONCLUSIVE
    close = paired({0: 0.80, 1: 0.81, 2: 0.79}, {0: 0.80, 1: 0.80, 2: 0.80})
    assert equivalence(close, 0.05) == HELD
    far = paired({0: 0.90, 1: 0.91, 2: 0.92}, {0: 0.80, 1: 0.80, 2: 0.80})
    assert equivalence(far, 0.05) == CONTRADICTED
    assert equivalence(paired({0: 0.9, 1: 0.7}, {0: 0.8, 1: 0.8}), 0.05) == INCONCLUSIVE


def test_at_most_a_margin():
    # Differences +0.5, +0.4, +0.6 points: mean 0.5, interval 0.5 +- 4.303 * 0.1 / sqrt(3) = [0.25, 0.75].
    small = paired({0: 0.805, 1: 0.804, 2: 0.806}, {0: 0.8, 1: 0.8, 2: 0.8})
    assert (small.ci_low, small.ci_high) == pytest.approx((0.00251586, 0.00748414), abs=1e-7)
    assert at_most(small, 0.01) == HELD
    assert at_most(small, 0.002) == CONTRADICTED
    assert at_most(small, 0.005) == INCONCLUSIVE


def test_bootstrap_interval_and_p_value_by_hand():
    # Two seeds, differences 0.01 and 0.05: a resample's mean is 0.01, 0.03 or 0.05 with chances 1/4,
    # 1/2, 1/4, so the 2.5% and 97.5% percentiles are the two differences, and no resample is <= 0.
    two = paired({0: 0.81, 1: 0.85}, {0: 0.80, 1: 0.80}, interval=BOOTSTRAP)
    assert (two.ci_low, two.ci_high) == pytest.approx((0.01, 0.05))
    assert two.p_value == 0 and two.verdict == HELD and two.interval == BOOTSTRAP
    # Three seeds, differences -0.01, 0.02, 0.05: of the 27 equally likely resamples, 1 has every value
    # -0.01 (mean -0.01) and 3 have two -0.01 and one 0.02 (mean 0): P(mean <= 0) = 4/27, p = 8/27.
    # Each extreme resample has chance 1/27 > 2.5%, so the interval is [-0.01, 0.05]: inconclusive.
    three = paired({0: 0.79, 1: 0.82, 2: 0.85}, {0: 0.8, 1: 0.8, 2: 0.8}, interval=BOOTSTRAP)
    assert (three.ci_low, three.ci_high) == pytest.approx((-0.01, 0.05))
    assert three.p_value == pytest.approx(8 / 27, abs=0.02)
    assert three.verdict == INCONCLUSIVE
    # The t-interval of the same seeds is wider: 0.02 +- 4.302653 * 0.03 / sqrt(3) = 0.02 +- 0.0745241.
    t = paired({0: 0.79, 1: 0.82, 2: 0.85}, {0: 0.8, 1: 0.8, 2: 0.8})
    assert (t.ci_low, t.ci_high) == pytest.approx((0.02 - 0.0745241, 0.02 + 0.0745241), abs=1e-6)


def test_bootstrap_matches_scipy_and_is_chosen_for_a_block():
    a, b = synthetic(0.03, 0.02, 8)
    differences = np.array([a[s] - b[s] for s in range(8)])
    reference = stats.bootstrap(
        (differences,),
        np.mean,
        n_resamples=RESAMPLES,
        method="percentile",
        random_state=np.random.default_rng(BOOTSTRAP_SEED),
    ).confidence_interval
    with interval_kind(BOOTSTRAP):
        result = paired(a, b)
    assert result.interval == BOOTSTRAP
    assert (result.ci_low, result.ci_high) == pytest.approx((reference.low, reference.high), rel=1e-12)
    # Outside the block the default is the t-interval again.
    assert paired(a, b).interval == "t"
    with pytest.raises(ValueError, match="interval='jackknife' is not one of t, bootstrap"):
        paired(a, b, interval="jackknife")


# The families and seed values below, with what the hand-written Holm, Benjamini-Hochberg and paired t
# interval gave on them before statsmodels' multipletests and scipy's ttest_1samp replaced them.
FAMILIES = [
    ([0.01, 0.04, 0.03], [0.03, 0.06, 0.06], [0.03, 0.04, 0.04]),
    (
        [0.3, math.nan, 0.02, 0.002, 0.02, 0.7, 1.0, 0.049],
        [1.0, math.nan, 0.14, 0.016, 0.14, 1.0, 1.0, 0.245],
        [0.48, math.nan, 0.05333333333333334, 0.016, 0.05333333333333334, 0.9333333333333332, 1.0, 0.098],
    ),
    ([0.5, 0.9], [1.0, 1.0], [0.9, 0.9]),
    (
        [1e-9, 0.2, 0.2, 0.011, 0.0125, math.nan, 0.9999],
        [7.000000000000001e-09, 0.8, 0.8, 0.066, 0.066, math.nan, 1.0],
        [7.000000000000001e-09, 0.28, 0.28, 0.02916666666666667, 0.02916666666666667, math.nan, 1.0],
    ),
]
# (a, b, confidence) -> effect, ci_low, ci_high, p_value, sd, p_against(0.01).
PAIRED = [
    (
        {0: 0.80, 1: 0.74, 2: 0.70, 4: 0.91},
        {0: 0.78, 1: 0.70, 2: 0.70, 4: 0.85},
        0.95,
        (
            0.030000000000000027,
            -0.011085205135210427,
            0.07108520513521048,
            0.10272807885839899,
            0.025819888974716137,
            0.2191020374170477,
        ),
    ),
    (
        {0: 93.1, 1: 94.7, 2: 92.2},
        {0: 90.0, 1: 91.9, 2: 91.0},
        0.975,
        (
            2.366666666666665,
            -1.2927930707290334,
            6.026126404062364,
            0.05684788625992357,
            1.0214368964029665,
            0.05729059620496406,
        ),
    ),
    (
        {i: 0.5 + 0.001 * i * i for i in range(30)},
        {i: 0.49 + 0.0013 * ((i * 11) % 7) for i in range(30)},
        0.95,
        (
            0.29135333333333335,
            0.19272339613862027,
            0.38998327052804643,
            1.421009911176992e-06,
            0.26413582286304943,
            2.5121491594451406e-06,
        ),
    ),
]


def test_the_bar_a_family_faces_is_its_last_rejections_by_hand():
    # BH over 5: bars 0.01, 0.02, 0.03, 0.04, 0.05 by rank; 0.008 <= 0.02 is the largest rank under its
    # bar (0.039 > 0.03, 0.041 > 0.04, 0.6 > 0.05): 2 rejected, and any p up to 2 x 0.05 / 5 joins them.
    family = [0.001, 0.008, 0.039, 0.041, 0.6]
    assert sum(p < 0.05 for p in benjamini_hochberg(family)) == 2
    assert step_up_bar(2, 5) == pytest.approx(0.02)
    assert sum(p < 0.05 for p in benjamini_hochberg([0.001, 0.008, 0.0199, 0.041, 0.6])) == 3
    # Nothing rejected: the first rejection's bar, 0.05 / 5.
    assert sum(p < 0.05 for p in benjamini_hochberg([0.011, 0.5, 0.6, 0.7, 0.8])) == 0
    assert step_up_bar(0, 5) == pytest.approx(0.01) == step_up_bar(1, 5)
    # Holm over 5: 0.001 <= 0.05 / 5 and 0.008 <= 0.05 / 4, then 0.039 > 0.05 / 3: 2 rejected, the last at
    # 0.05 / 4; a p the procedure did not reject joins them at that bar.
    assert sum(p < 0.05 for p in holm(family)) == 2
    assert step_down_bar(2, 5) == pytest.approx(0.0125)
    assert sum(p < 0.05 for p in holm([0.001, 0.008, 0.0124, 0.041, 0.6])) == 3
    assert step_down_bar(0, 5) == pytest.approx(0.01) == step_down_bar(1, 5)


@pytest.mark.parametrize(("p_values", "by_holm", "by_bh"), FAMILIES)
def test_the_adjustments_give_the_numbers_the_hand_written_ones_gave(p_values, by_holm, by_bh):
    for got, expected in ((holm(p_values), by_holm), (benjamini_hochberg(p_values), by_bh)):
        assert [math.isnan(x) for x in got] == [math.isnan(x) for x in expected]
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-15, nan_ok=True)


@pytest.mark.parametrize(("a", "b", "confidence", "expected"), PAIRED)
def test_the_t_interval_gives_the_numbers_the_hand_written_one_gave(a, b, confidence, expected):
    result = paired(a, b, confidence)
    got = (result.effect, result.ci_low, result.ci_high, result.p_value, result.sd, result.p_against(0.01))
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)
