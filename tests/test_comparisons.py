"""A comparison of methods judged again on each half of the seeds: the seeds that would replicate a verdict
the halves do not both reach, at the bar Benjamini-Hochberg sets in the halves' own families."""

from __future__ import annotations

from dataclasses import replace

from noisydml.report import registry
from noisydml.report.comparisons import BETTER, INCONCLUSIVE, UNDERPOWERED, UNSTABLE, Comparison, adjust
from noisydml.report.statistics import halves, paired, seeds_for
from noisydml.report.tables import Group

SEEDS = [str(s) for s in range(20)]
# Per-seed differences in points / 100, in seed order: the 1st, 3rd, ... near 1.6 (better alone), the
# 2nd, 4th, ... spread around 0.6 (p = 0.095 alone); on all 20, +1.08 [+0.69, +1.48].
LOPSIDED = [1.5, 0.2, 1.7, 1.8, 1.6, -0.7, 1.55, 1.5, 1.65, 0.9, 1.6, -0.6, 1.5, 1.6, 1.7, -0.2, 1.6, 1.2]
LOPSIDED = [v / 100 for v in [*LOPSIDED, 1.63, -0.1]]


def comparison(differences: list[float], method: str) -> Comparison:
    """``method`` against a baseline at 0.5 on every seed, ``differences`` above it, as ``_compare`` builds
    it: on all the seeds and on each half."""
    a = {seed: 0.5 + d for seed, d in zip(SEEDS, differences, strict=True)}
    b = dict.fromkeys(SEEDS, 0.5)
    split = tuple(paired({s: a[s] for s in half}, {s: b[s] for s in half}) for half in halves(SEEDS))
    group = Group("test/fig", "digits", [])
    return Comparison(group, "uniform", 0.25, method, "baseline", 0.0, 0.0, paired(a, b), halves=split)


def test_seeds_to_replicate_at_the_bar_the_halves_reached_not_the_first_rejections():
    # Nine comparisons ahead by 3-7 points on every seed, which each half rejects, and the lopsided one,
    # which only the first half does: Benjamini-Hochberg rejects 10 and 9 of the 10 on the halves.
    steady = [comparison([0.05 + 0.01 * ((7 * i + j) % 5 - 2) for i in range(20)], f"m{j}") for j in range(9)]
    *_, lopsided = adjust([*steady, comparison(LOPSIDED, "lopsided")])
    assert (lopsided.pooled, lopsided.half_verdict(0), lopsided.half_verdict(1)) == (
        BETTER,
        BETTER,
        INCONCLUSIVE,
    )
    result = lopsided.result
    # The stricter half rejected 9 of 10: its bar is 9 x 0.05 / 10, not the first rejection's 0.05 / 10
    # (which asks 2 x 15 = 30 seeds).
    assert lopsided.seeds_to_replicate() == 2 * seeds_for(result.effect, result.sd, 0.9, 1 - 0.045) == 18
    assert 2 * seeds_for(result.effect, result.sd, 0.9, 1 - 0.005) == 30
    # 18 seeds would do and 20 ran: the halves disagree with seeds enough.
    assert lopsided.verdict == UNSTABLE


def test_seeds_to_replicate_at_the_first_rejections_bar_where_a_half_rejects_nothing():
    # The lopsided comparison beside nine that no half can tell from zero: the second half rejects none.
    noise = [comparison([0.01 * ((7 * i + j) % 5 - 2) for i in range(20)], f"m{j}") for j in range(9)]
    *_, lopsided = adjust([*noise, comparison(LOPSIDED, "lopsided")])
    assert lopsided.half_verdict(1) == INCONCLUSIVE and lopsided.halves_rejected[1] == 0
    result = lopsided.result
    assert lopsided.seeds_to_replicate() == 2 * seeds_for(result.effect, result.sd, 0.9, 1 - 0.005) == 30
    assert lopsided.verdict == UNDERPOWERED


def test_exploratory_comparisons_are_adjusted_apart_and_do_not_move_the_confirmatory_verdicts():
    # The nine steady comparisons confirmatory; ninety that no seed set can tell from zero beside them, in
    # one family, would lift the bar the steady ones face: marked exploratory, they are a family apart.
    steady = [comparison([0.05 + 0.01 * ((7 * i + j) % 5 - 2) for i in range(20)], f"m{j}") for j in range(9)]
    noise = [comparison([0.01 * ((7 * i + j) % 5 - 2) for i in range(20)], f"n{j}") for j in range(90)]
    alone = adjust(steady)
    together = adjust([*steady, *(replace(c, exploratory=True) for c in noise)])
    assert [c.p_adjusted for c in together[:9]] == [c.p_adjusted for c in alone]
    assert {c.family for c in together[:9]} == {9} and {c.family for c in together[9:]} == {90}
    assert all(c.exploratory for c in together[9:]) and not any(c.exploratory for c in together[:9])
    # In one family they would not be the same.
    mixed = adjust([*steady, *noise])
    assert [c.p_adjusted for c in mixed[:9]] != [c.p_adjusted for c in alone]


def test_a_comparison_off_its_experiments_registered_seeds_is_exploratory():
    # noisy_dml/mnist1d_symmetric registers seeds 5-32: its focused methods run there, the others at 5-9.
    figure = "noisy_dml/mnist1d_symmetric"
    assert not registry.exploratory(figure, [str(s) for s in range(5, 33)])
    assert registry.exploratory(figure, ["5", "6", "7", "8", "9"])
    assert registry.exploratory(figure, list(range(0, 5)))  # the pilot's
    # An experiment that registers no seeds has nothing to mark.
    assert not registry.exploratory("test/fig", SEEDS)
