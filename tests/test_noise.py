"""Label-noise models, their summary and the noise theory, against counts and formulas worked by hand."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from omegaconf import OmegaConf
from scipy import stats

from configs import compose_node
from noisydml import CONFIG_DIR
from noisydml.data.sampler import PKSampler
from noisydml.noise import (
    ClassConditionalNoise,
    ExactNoise,
    NoisyLabels,
    NoNoise,
    ToplineNoise,
    UniformNoise,
    finite_k_conditions,
    finite_k_triplet_bound,
    pair_flip_rates,
    summarize,
    triplet_noise_bound,
)

NOISE_CONF = CONFIG_DIR / "noise"

# Class ids that are neither contiguous nor start at 0, as a data set's own ids may be.
CLASS_IDS = np.array([3, 7, 10, 42, 99])


def balanced(num_classes: int, per_class: int, ids: np.ndarray | None = None) -> np.ndarray:
    ids = np.arange(num_classes) if ids is None else ids
    return np.repeat(ids, per_class)


def binomial_tolerance(p: float, n: int, sigmas: float = 4.0) -> float:
    return sigmas * math.sqrt(p * (1 - p) / n)


def flips_per_class(noisy: NoisyLabels) -> dict[int, int]:
    return {int(c): int((noisy.observed[noisy.true == c] != c).sum()) for c in np.unique(noisy.true)}


# ---------------------------------------------------------------------------------------------- uniform


@pytest.mark.parametrize("p", [0.05, 0.3, 0.6])
def test_uniform_realized_rate_within_binomial_tolerance(p):
    labels = balanced(5, 4000, CLASS_IDS)
    noisy = UniformNoise(rate=p, seed=0).apply(labels)
    realized = np.mean(noisy.observed != noisy.true)
    assert abs(realized - p) < binomial_tolerance(p, len(labels))
    for c, flips in flips_per_class(noisy).items():
        assert abs(flips / 4000 - p) < binomial_tolerance(p, 4000), c


def test_uniform_flips_land_uniformly_on_the_other_classes():
    labels = balanced(5, 4000, CLASS_IDS)
    noisy = UniformNoise(rate=0.5, seed=1).apply(labels)
    np.testing.assert_array_equal(noisy.indices, np.arange(len(labels)))
    np.testing.assert_array_equal(noisy.true, labels)
    assert set(np.unique(noisy.observed)) == set(CLASS_IDS)
    for c in CLASS_IDS:
        flipped = noisy.observed[(noisy.true == c) & (noisy.observed != noisy.true)]
        assert not np.any(flipped == c)
        counts = np.array([np.sum(flipped == d) for d in CLASS_IDS if d != c])
        assert counts.sum() == len(flipped)
        # 4 cells of ~500 each: a biased destination (e.g. always the next class) gives p ~ 0.
        assert stats.chisquare(counts).pvalue > 1e-3, (c, counts)


def test_uniform_is_a_pure_function_of_its_seed():
    labels = balanced(10, 200)
    first = UniformNoise(rate=0.3, seed=5).apply(labels)
    again = UniformNoise(rate=0.3, seed=5).apply(labels)
    other = UniformNoise(rate=0.3, seed=6).apply(labels)
    np.testing.assert_array_equal(first.observed, again.observed)
    assert np.any(first.observed != other.observed)


def test_uniform_rate_zero_changes_nothing():
    labels = balanced(4, 50)
    noisy = UniformNoise(rate=0.0, seed=0).apply(labels)
    np.testing.assert_array_equal(noisy.observed, labels)


def test_uniform_does_not_alias_the_callers_labels():
    labels = balanced(3, 10)
    noisy = UniformNoise(rate=0.5, seed=0).apply(labels)
    noisy.true[0] = 99
    assert labels[0] == 0


# ------------------------------------------------------------------------------------------------ exact


def test_exact_flips_round_of_rate_times_n_in_total_and_at_least_one_per_class():
    # Rounding per class (the old rule) flips 0 of the classes of 2-5 samples at 10% and 21 in all.
    sizes = [2, 3, 4, 5, 6, 40, 60, 100]
    labels = np.repeat(np.arange(len(sizes)) * 10, sizes)
    noisy = ExactNoise(rate=0.1, seed=0).apply(labels)
    flips = flips_per_class(noisy)
    assert sum(flips.values()) == 22
    assert min(flips.values()) >= 1
    # The 17 flips left after one each keep the rates nearest 10%: none to the small classes.
    assert list(flips.values()) == [1, 1, 1, 1, 1, 3, 5, 9]
    flipped = noisy.observed != noisy.true
    assert set(np.unique(noisy.observed[flipped])) <= set(np.unique(labels))


def test_exact_rates_are_as_even_as_equal_sizes_allow():
    # 10 classes of 6 at 30%: 18 flips, 1.8 per class. Rounding per class gave 2 each (20) and a class
    # of 2 at 30% one flip in two (50%).
    flips = flips_per_class(ExactNoise(rate=0.3, seed=0).apply(balanced(10, 6)))
    assert sum(flips.values()) == 18 and set(flips.values()) == {1, 2}
    flips = flips_per_class(ExactNoise(rate=0.3, seed=0).apply(balanced(10, 2)))
    assert sum(flips.values()) == 6 and set(flips.values()) == {0, 1}


def test_exact_with_fewer_flips_than_classes_flips_the_largest_classes_once():
    # SOP-like sizes at 10%: 3 flips for 6 classes; one each, to the largest (lowest rate 1 / n_c).
    labels = np.repeat(np.arange(6), [2, 3, 4, 6, 7, 8])
    flips = flips_per_class(ExactNoise(rate=0.1, seed=0).apply(labels))
    assert flips == {0: 0, 1: 0, 2: 0, 3: 1, 4: 1, 5: 1}


def test_exact_counts_survive_binary_float_error_at_a_tie():
    # In binary 0.07 * 300 is 21.000000000000004 and 0.035 * 300 is 10.500000000000002: the tie 10.5 it
    # stands for rounds half to even, to 10, not 11.
    labels = np.repeat([1, 2], [150, 150])
    assert sum(flips_per_class(ExactNoise(rate=0.07, seed=3).apply(labels)).values()) == 21
    assert sum(flips_per_class(ExactNoise(rate=0.035, seed=3).apply(labels)).values()) == 10


def test_exact_leaves_singletons_clean_below_half_and_flips_nothing_at_rate_zero():
    labels = np.repeat(np.arange(4), [1, 1, 20, 20])
    flips = flips_per_class(ExactNoise(rate=0.2, seed=0).apply(labels))
    assert flips == {0: 0, 1: 0, 2: 4, 3: 4}
    assert sum(flips_per_class(ExactNoise(rate=0.0, seed=0).apply(labels)).values()) == 0


def test_exact_chooses_different_samples_for_different_seeds():
    labels = balanced(3, 100)
    a = ExactNoise(rate=0.2, seed=0).apply(labels)
    b = ExactNoise(rate=0.2, seed=1).apply(labels)
    assert flips_per_class(a) == flips_per_class(b) == {0: 20, 1: 20, 2: 20}
    assert np.any((a.observed != a.true) != (b.observed != b.true))


# ------------------------------------------------------------------------------------ class-conditional

BDML_ROW = [0.5, 0.6, 0.1, 0.4, 0.4, 0.4, 0.2, 0.4, 0.6, 0.3]


def test_class_conditional_per_class_rates_match_the_vector():
    ids = np.arange(10)[::-1] * 3  # given unsorted: rates follow sorted class order regardless
    labels = balanced(10, 3000, ids)
    noisy = ClassConditionalNoise(rates=BDML_ROW, seed=0).apply(labels)
    flips = flips_per_class(noisy)
    for rate, c in zip(BDML_ROW, sorted(ids), strict=True):
        assert abs(flips[int(c)] / 3000 - rate) < binomial_tolerance(rate, 3000), c


def test_class_conditional_exact_flips_exact_counts():
    sizes = [10, 20, 30, 40, 55, 60, 70, 80, 90, 100]
    labels = np.repeat(np.arange(10), sizes)
    noisy = ClassConditionalNoise(rates=BDML_ROW, seed=0, exact=True).apply(labels)
    # 5, 12, 3, 16, 22, 24, 14, 32, 54, 30 (no ties here; 0.4 * 55 = 22).
    assert list(flips_per_class(noisy).values()) == [5, 12, 3, 16, 22, 24, 14, 32, 54, 30]


def test_class_conditional_rejects_a_vector_of_the_wrong_length():
    model = ClassConditionalNoise(rates=[0.1, 0.2, 0.3], seed=0)
    with pytest.raises(ValueError, match=r"noise\.rates has 3 entries but the labels hold 10 classes"):
        model.apply(balanced(10, 5))


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, float("nan")])
def test_class_conditional_rejects_a_rate_out_of_range(bad):
    # The fix: the rates given, the one out of range replaced.
    problem = r"is not a number; give one," if bad != bad else r"is outside \[0, 1\);"
    message = rf"noise\.rates=\[0\.1,0\.2,{bad}\]: {bad} {problem} e\.g\. noise\.rates=\[0\.1,0\.2,0\.2\]$"
    with pytest.raises(ValueError, match=message):
        ClassConditionalNoise(rates=[0.1, 0.2, bad], seed=0)


# ---------------------------------------------------------------------------------------------- topline


def test_topline_keeps_a_stratified_clean_subset_with_no_lone_sample():
    sizes = [1, 2, 3, 5, 10, 100]
    labels = np.repeat(CLASS_IDS.tolist() + [123], sizes)
    kept = []
    for seed in range(400):
        noisy = ToplineNoise(rate=0.5, seed=seed).apply(labels)
        np.testing.assert_array_equal(noisy.observed, noisy.true)
        np.testing.assert_array_equal(noisy.true, labels[noisy.indices])
        assert np.all(np.diff(noisy.indices) > 0)
        per_class = dict(zip(*np.unique(noisy.true, return_counts=True), strict=True))
        kept.append([per_class.get(c, 0) for c in [3, 7, 10, 42, 99, 123]])
        # Within 3 of (1 - rate) N = 60.5.
        assert abs(len(noisy.indices) - 60.5) <= 3
    kept = np.array(kept)
    # Never a class of one (the sampler could not draw it): 2 or none where 0.5 * n_c < 2.
    assert set(kept[:, 0]) == {0} and set(kept[:, 1]) == {0, 2} and set(kept[:, 2]) == {0, 2}
    assert set(kept[:, 3]) == {2, 3} and set(kept[:, 4]) == {5} and set(kept[:, 5]) == {50}
    # Unbiased per class: 1, 1.5, 2.5 samples on average (the old rule kept 1, 1, 2, 2).
    np.testing.assert_allclose(kept[:, 1:4].mean(axis=0), [1, 1.5, 2.5], atol=0.15)


def test_topline_rate_zero_keeps_everything_and_seeds_pick_different_subsets():
    labels = balanced(4, 30)
    np.testing.assert_array_equal(ToplineNoise(rate=0.0, seed=0).apply(labels).indices, np.arange(120))
    a = ToplineNoise(rate=0.4, seed=0).apply(labels).indices
    b = ToplineNoise(rate=0.4, seed=1).apply(labels).indices
    assert len(a) == len(b) == 4 * 18
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, ToplineNoise(rate=0.4, seed=0).apply(labels).indices)


# ---------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize("model", [UniformNoise, ExactNoise, ToplineNoise])
@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.2, float("nan")])
def test_rates_outside_zero_one_are_rejected_naming_key_and_value(model, bad):
    problem = r"is not a number" if bad != bad else r"is outside \[0, 1\)"
    with pytest.raises(ValueError, match=rf"^noise\.rate={bad} {problem}"):
        model(rate=bad, seed=0)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_seeds_are_rejected(bad):
    with pytest.raises(ValueError, match=r"noise\.seed="):
        UniformNoise(rate=0.1, seed=bad)


@pytest.mark.parametrize(
    "model", [UniformNoise(0.1, 0), ExactNoise(0.1, 0), ClassConditionalNoise([0.1], 0)], ids=repr
)
def test_flipping_needs_two_classes(model):
    with pytest.raises(ValueError, match="at least 2 classes; the labels hold 1"):
        model.apply(np.full(10, 4))


def test_labels_must_be_a_1d_integer_array():
    with pytest.raises(ValueError, match="1-D array of integer class ids"):
        UniformNoise(0.1, 0).apply(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="1-D array of integer class ids"):
        NoNoise().apply(np.zeros((2, 2), dtype=int))


# ---------------------------------------------------------------------------------------------- theory


def test_pair_flip_rates_by_hand():
    # K = 3, p = 1/2: q- = 2(.5)(.5)/2 + .25(1)/4 = 0.3125; q+ = 2(.5)(.5) + .25(1 - 1/2) = 0.625.
    assert pair_flip_rates(0.5, 3) == pytest.approx((0.3125, 0.625))
    assert pair_flip_rates(0.0, 10) == (0.0, 0.0)
    # Everything flips with K = 2: every pair keeps its relation.
    assert pair_flip_rates(1.0, 2) == pytest.approx((0.0, 0.0))


@pytest.mark.parametrize("k", [2, 3, 10, 100])
@pytest.mark.parametrize("p", [0.1, 0.37, 0.9])
def test_pair_flip_rates_satisfy_q_pos_equals_k_minus_one_q_neg(p, k):
    q_neg, q_pos = pair_flip_rates(p, k)
    assert q_pos == pytest.approx((k - 1) * q_neg)
    assert q_pos == pytest.approx(1 - (1 - p) ** 2 - p**2 / (k - 1))


def test_finite_k_bound_keeps_eq27s_eps_term():
    # K = 10: lower than Eq. 27 (0.423 / 0.293 / 0.134), Eq. 24's factors at zero there.
    for eta, bound in ((1.5, 0.348865), (2.0, 0.248628), (4.0, 0.117415)):
        p = finite_k_triplet_bound(eta, 10)
        assert p == pytest.approx(bound, abs=1e-6) and p < triplet_noise_bound(eta)
        assert min(finite_k_conditions(p, eta, 10)) == pytest.approx(0, abs=1e-9)
    # The large-K limit is Eq. 27.
    assert finite_k_triplet_bound(2.0, 100_000) == pytest.approx(triplet_noise_bound(2.0), abs=1e-4)


def test_triplet_noise_bound_by_hand():
    assert triplet_noise_bound(1.0) == 1.0
    assert triplet_noise_bound(4 / 3) == pytest.approx(0.5)  # 1 - sqrt(1/4)
    assert triplet_noise_bound(4.0) == pytest.approx(1 - math.sqrt(0.75))
    # It is the root of Eq. 26 in its corrected form, 1 - (2p - p^2) eta = 0.
    eta = 2.7
    p = triplet_noise_bound(eta)
    assert 1 - (2 * p - p**2) * eta == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match=r"eta=0\.5 is below 1"):
        triplet_noise_bound(0.5)


# --------------------------------------------------------------------------------------------- summary


def test_summary_on_a_hand_sized_case():
    # true     0 0 0 1 1 2
    # observed 0 0 1 1 2 2
    # Same-true pairs: (0,1) (0,2) (1,2) (3,4) = 4; their observed differ for (0,2) (1,2) (3,4): 3/4.
    # Different-true pairs: 15 - 4 = 11; observed equal for (2,3) [1,1] and (4,5) [2,2]: 2/11.
    # Samples 2 and 4 flipped: rate 2/6; per class 1/3, 1/2, 0.
    noisy = NoisyLabels(np.arange(6), np.array([0, 0, 0, 1, 1, 2]), np.array([0, 0, 1, 1, 2, 2]))
    s = summarize(noisy)
    assert s["num_trained_on"] == 6 and s["num_classes"] == 3
    assert s["realized_rate"] == pytest.approx(1 / 3)
    assert s["realized_rate_per_class"] == pytest.approx({"0": 1 / 3, "1": 1 / 2, "2": 0.0})
    assert s["q_pos_to_neg"] == pytest.approx(3 / 4)
    assert s["q_neg_to_pos"] == pytest.approx(2 / 11)
    q_neg, q_pos = pair_flip_rates(1 / 3, 3)
    assert (s["q_neg_to_pos_theory"], s["q_pos_to_neg_theory"]) == pytest.approx((q_neg, q_pos))
    with_k5 = summarize(noisy, num_classes=5)
    assert with_k5["q_neg_to_pos_theory"] == pytest.approx(pair_flip_rates(1 / 3, 5)[0])


def test_summary_pair_counts_match_brute_force():
    rng = np.random.default_rng(0)
    true = rng.integers(0, 6, 80) * 11
    noisy = UniformNoise(rate=0.4, seed=2).apply(true)
    s = summarize(noisy)
    pairs = list(itertools.combinations(range(80), 2))
    pos = [(i, j) for i, j in pairs if true[i] == true[j]]
    neg = [(i, j) for i, j in pairs if true[i] != true[j]]
    obs = noisy.observed
    assert s["q_pos_to_neg"] == pytest.approx(np.mean([obs[i] != obs[j] for i, j in pos]))
    assert s["q_neg_to_pos"] == pytest.approx(np.mean([obs[i] == obs[j] for i, j in neg]))


def test_summary_is_json_serialisable_and_rejects_too_few_classes():
    s = summarize(UniformNoise(rate=0.2, seed=0).apply(balanced(3, 20, np.array([5, 6, 7]))))
    assert json.loads(json.dumps(s)) == s
    with pytest.raises(ValueError, match="num_classes=2 is below the 3 classes"):
        summarize(NoNoise().apply(balanced(3, 2)), num_classes=2)


# Over 200 seeds of 40k labels the measured q stayed within 0.12% (relative) of the theory at the
# realized rate, and within 1.6% of the theory at the configured rate; the tolerances leave headroom.
AT_REALIZED = 0.01
AT_CONFIGURED = 0.03


@pytest.mark.parametrize("k", [10, 100])
@pytest.mark.parametrize("p", [0.3, 0.6])
def test_summary_measured_pair_flips_agree_with_eq_7_and_corrected_eq_8(p, k):
    noisy = UniformNoise(rate=p, seed=0).apply(np.arange(40_000) % k)
    s = summarize(noisy)
    assert s["q_neg_to_pos"] == pytest.approx(s["q_neg_to_pos_theory"], rel=AT_REALIZED)
    assert s["q_pos_to_neg"] == pytest.approx(s["q_pos_to_neg_theory"], rel=AT_REALIZED)
    q_neg, q_pos = pair_flip_rates(p, k)
    assert s["q_neg_to_pos"] == pytest.approx(q_neg, rel=AT_CONFIGURED)
    assert s["q_pos_to_neg"] == pytest.approx(q_pos, rel=AT_CONFIGURED)


def test_eq_8_as_printed_does_not_match_simulation_but_the_corrected_form_does():
    k, p = 3, 0.5
    s = summarize(UniformNoise(rate=p, seed=0).apply(np.arange(40_000) % k))
    realized = s["realized_rate"]
    printed = 2 * realized * (1 - realized) + realized**2 * (1 - 2 / (k - 1))  # 0.5 at p = 0.5
    corrected = pair_flip_rates(realized, k)[1]  # 0.625 at p = 0.5
    assert s["q_pos_to_neg"] == pytest.approx(corrected, rel=AT_REALIZED)
    assert abs(s["q_pos_to_neg"] - printed) > 0.1


# --------------------------------------------------------------------------------------------- configs


OPTIONS = ["none", "uniform", "exact", "class_conditional", "topline", "small_cluster"]
# Models that need the data set (image paths, backbone features, the inputs): tests/test_prism_noise.py and
# tests/test_instance_dependent_noise.py run them.
DATASET_OPTIONS = ["small_cluster_kmeans", "from_file", "instance_dependent", "nearest_class"]


LABEL_OPTIONS = sorted(p for p in NOISE_CONF.glob("*.yaml") if p.stem not in DATASET_OPTIONS)


@pytest.mark.parametrize("path", LABEL_OPTIONS, ids=lambda p: p.stem)
def test_every_noise_config_instantiates_and_applies(path):
    cfg = OmegaConf.create({"seed": 11, "noise": OmegaConf.load(path)})
    model = instantiate(cfg.noise)
    assert model.seed == 11
    labels = balanced(10, 40)  # 10 classes: the class-conditional default is a 10-class BDML row
    noisy = model.apply(labels)
    assert isinstance(noisy, NoisyLabels)
    np.testing.assert_array_equal(noisy.true, labels[noisy.indices])
    assert summarize(noisy)["num_trained_on"] == len(noisy.indices)


@pytest.mark.parametrize("option", OPTIONS)
def test_every_noise_option_instantiates_through_the_main_config(option):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(NOISE_CONF.parent), version_base="1.3"):
        cfg = compose("config", overrides=[f"noise={option}"])
    model = instantiate(cfg.noise)
    assert model.seed == cfg.seed


def test_the_config_group_has_every_model():
    assert {p.stem for p in NOISE_CONF.glob("*.yaml")} == set(OPTIONS + DATASET_OPTIONS)


@pytest.mark.parametrize(
    ("experiment", "model"),
    [
        # Tables 1-2: uniform noise injected "by flipping the labels by the respective proportion of data
        # points", exact counts (Sec. 4.1.1); Table 3's "corresponding proportions", per class. The
        # digits-scale analogue flips the tables' exact counts too.
        ("bdml/table1_mnist", ExactNoise),
        ("bdml/table2_cifar10", ExactNoise),
        ("digits/bdml_noise", ExactNoise),
        ("bdml/table3_cifar10", ClassConditionalNoise),
        ("zhang2023/table2_cub", ExactNoise),
    ],
)
def test_each_paper_table_composes_its_published_noise_model(experiment, model):
    assert type(compose_node("noise", f"experiment={experiment}")) is model


def test_the_sop_topline_sweep_composes_and_samples_every_kept_image():
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "config", overrides=["experiment=le2019/fig1_sop", "noise=topline"], return_hydra_config=True
        )
    GlobalHydra.instance().clear()
    rates = [float(r) for r in str(cfg.hydra.sweeper.params["noise.rate"]).split(",")]
    assert max(rates) == 0.7
    # SOP's training classes hold 2-12 images.
    labels = np.repeat(np.arange(220), np.arange(220) % 11 + 2)
    for rate in rates:
        noisy = instantiate(cfg.noise, rate=rate).apply(labels)
        sampler = PKSampler(
            noisy.observed,
            P=cfg.data.P,
            K=cfg.data.K,
            small_classes=cfg.data.small_classes,
            batches_per_epoch=1000 if rate == 0.7 else None,
        )
        # Every kept image is in a class the sampler draws from (the old topline kept lone images).
        drawable = np.sort(np.concatenate(sampler.members))
        np.testing.assert_array_equal(drawable, np.arange(len(noisy.indices)), err_msg=f"noise.rate={rate}")
    # And is drawn.
    np.testing.assert_array_equal(np.unique(np.concatenate(list(sampler))), drawable)


@pytest.mark.parametrize(
    "experiment", ["bdml/table1_mnist", "bdml/table2_cifar10", "digits/bdml_noise", "mnist5k/bdml_noise"]
)
def test_bdml_experiments_flip_the_tables_exact_counts(experiment):
    # BDML Sec. 4.1.1: "by flipping the labels by the respective proportion of data points": the analogues
    # draw the tables' noise, the same number of flips on every seed.
    labels = balanced(10, 113)
    realised = set()
    for seed in range(4):
        noise = compose_node("noise", f"experiment={experiment}", "noise.rate=0.3", f"seed={seed}")
        noisy = noise.apply(labels)
        realised.add(int((noisy.observed != noisy.true).sum()))
    assert realised == {round(0.3 * len(labels))}
