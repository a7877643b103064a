"""The statistic of the sanity benchmark (itermask.core.sanity_statistics) on constructed values: the pooled
Spearman rho, its bootstrap interval over examples (the verdict), and a NaN rho with a true reason for constant
and missing measures."""

import numpy as np
import pytest
from scipy import stats

from itermask.core.sanity_statistics import (
    CONSTANT,
    MISSING,
    _pooled_rho,
    example_correlations,
    level_correlation,
)

LEVELS = [0.0, 0.25, 0.5, 0.75, 1.0]
FALLING = np.array([[1.0, 0.8, 0.5, 0.2, 0.1], [3.0, 2.0, 1.5, 1.0, 0.0], [0.9, 0.7, 0.6, 0.5, 0.4]])


def _spearman(values):
    """scipy's Spearman rho over the finite (example, level) pairs, the reference for the vectorized one."""
    x, y = np.broadcast_to(LEVELS, values.shape).ravel(), values.ravel()
    keep = np.isfinite(y)
    return stats.spearmanr(x[keep], y[keep]).statistic  # pyright: ignore[reportAttributeAccessIssue]


def test_monotone_measures_get_rho_minus_one_or_plus_one_and_rank_the_order():
    found = level_correlation(np.tile(FALLING, (4, 1)), LEVELS, higher_is_more_faithful=True, n_boot=500, seed=0)
    assert found.mean_example_rho == pytest.approx(-1.0, abs=1e-12) and found.expected_sign == -1
    assert found.rho == pytest.approx(_spearman(np.tile(FALLING, (4, 1))), abs=1e-12)
    assert found.ranks_known_order and found.reason is None and found.ci_high < 0 and found.interval_method == "BCa"
    assert found.p_boot == pytest.approx(1 / 501)  # no resample on the wrong side: (1 + 0) / (1 + 500)
    rising = level_correlation(-np.tile(FALLING, (4, 1)), LEVELS, higher_is_more_faithful=False, n_boot=500)
    assert rising.expected_sign == 1 and rising.ranks_known_order and rising.ci_low > 0
    # the same values read with the other direction cannot rank a known order, and say why
    wrong = level_correlation(np.tile(FALLING, (4, 1)), LEVELS, higher_is_more_faithful=False, n_boot=500)
    assert not wrong.ranks_known_order and "is not entirely above 0" in str(wrong.reason)
    assert wrong.p_boot == pytest.approx(1.0)
    none = level_correlation(FALLING, LEVELS, True, n_boot=0)  # rho, but no interval and no verdict
    assert none.rho == pytest.approx(_spearman(FALLING)) and np.isnan(none.ci_low) and not none.ranks_known_order
    assert none.reason == "no bootstrap interval (n_boot=0), no verdict"
    one = level_correlation(FALLING[:1], LEVELS, True, n_boot=100)
    assert (
        one.rho == pytest.approx(-1.0)
        and one.reason == "fewer than 2 examples with a value: no bootstrap over examples"
    )


def test_the_vectorized_pooled_rho_is_scipys_spearmanr_also_with_missing_pairs():
    values = np.random.default_rng(0).normal(size=(8, 5))
    values[0, 0], values[3, 2:] = np.nan, np.nan
    values[5, 1] = values[6, 4]  # a tie
    picks = np.random.default_rng(3).integers(0, 8, (50, 8))
    expected = [_spearman(values[p]) for p in picks]
    assert np.allclose(_pooled_rho(values, np.asarray(LEVELS), picks), expected, atol=1e-12, rtol=0)


def test_a_measure_constant_in_every_example_has_no_rho_even_when_examples_differ():
    # never_flip_rate: 1 for examples that never flip, 0 for one that does, at every level. The pooled pairs
    # vary between examples, but nothing varies with the level: rho NaN, not a tied rho of 0
    never = np.array([[1.0] * 5, [0.0] * 5, [1.0] * 5, [1.0] * 5])
    found = level_correlation(never, LEVELS, False, n_boot=200)
    assert np.isnan(found.rho) and not found.ranks_known_order and found.n_constant == 4
    assert found.reason == "constant over every level in every example" and found.as_dict()["rho"] is None
    # float noise within the tolerance (1e-12 of max(1, |values|)) and -0.0 are constant, too
    noisy = np.zeros((4, 5))
    noisy[0, 2], noisy[1, 3], noisy[2, 0] = 1e-17, -0.0, -3e-13
    assert level_correlation(noisy, LEVELS, True, n_boot=200).reason == "constant over every level in every example"
    big = np.full((3, 5), 1e6)
    big[1, 1] += 1e-7  # 1e-13 of the scale
    assert level_correlation(big, LEVELS, True, n_boot=200).reason == "constant over every level in every example"
    noisy[0, 2] = 1e-9  # beyond the tolerance: a value that varies
    assert np.isfinite(level_correlation(noisy, LEVELS, True, n_boot=200).rho)
    rho, reason = example_correlations(noisy, LEVELS)
    assert list(reason) == ["", CONSTANT, CONSTANT, CONSTANT] and rho[0] == pytest.approx(
        stats.spearmanr(LEVELS, noisy[0]).statistic  # pyright: ignore[reportAttributeAccessIssue]
    )


def test_missing_values_get_a_reason_that_is_true():
    # first_flip_fraction: undefined for examples that never flip; the one that flips flips at the same step
    first = np.full((8, 5), np.nan)
    first[2] = 0.125
    found = level_correlation(first, LEVELS, False, n_boot=200)
    assert np.isnan(found.rho) and (found.n_constant, found.n_missing, found.n_pairs) == (1, 7, 5)
    assert (
        found.reason
        == "constant over every level in every example with a value (7 of 8 undefined (NaN) at every level)"
    )
    bare = FALLING.copy()
    bare[:, 4] = np.nan
    assert (
        level_correlation(bare, LEVELS, True, n_boot=200).reason
        == "undefined (NaN) for every example at level(s) [1.0]"
    )
    assert str(level_correlation(np.full((3, 5), np.nan), LEVELS, True).reason).startswith(
        "undefined (NaN) for every example at level(s) [0.0, 0.25, 0.5, 0.75, 1.0]"
    )
    few = np.full((2, 2), np.nan)
    few[0, 0], few[1, 1] = 1.0, 0.0
    assert level_correlation(few, [0.0, 1.0], True).reason == "fewer than 3 (example, level) pairs with a value"
    rho, reason = example_correlations(bare, LEVELS)
    assert np.isnan(rho).all() and set(reason) == {MISSING}
    # some examples missing, the rest informative: a rho and a verdict from the pairs with a value
    part = np.tile(FALLING, (4, 1))
    part[[0, 4], 2] = np.nan
    found = level_correlation(part, LEVELS, True, n_boot=300)
    assert found.n_missing == 2 and found.rho == pytest.approx(_spearman(part), abs=1e-12) and found.ranks_known_order


def test_examples_that_each_fall_rank_the_order_despite_large_offsets_between_them():
    # each example falls with the level (its own rho -1 up to noise) but sits far from the others: the pooled
    # rho is small and the test that treats the 150 pairs as independent says "not significant", yet every
    # example agrees: resampling the examples (the independent units) puts the whole interval below 0
    rng = np.random.default_rng(0)
    values = 100 * rng.permutation(30)[:, None] - np.asarray(LEVELS)[None, :] + rng.normal(0, 0.01, (30, 5))
    found = level_correlation(values, LEVELS, True, n_boot=1000, seed=0)
    assert found.mean_example_rho == pytest.approx(-1.0) and -0.1 < found.rho < 0
    pairs = stats.spearmanr(np.broadcast_to(LEVELS, values.shape).ravel(), values.ravel(), alternative="less")
    assert pairs.pvalue > 0.05  # pyright: ignore[reportAttributeAccessIssue]
    assert found.ranks_known_order and found.ci_high < 0 and found.p_boot == pytest.approx(1 / 1001)
    # every jackknife rho is the same here (blocks that never overlap): BCa's acceleration is 0/0, so the
    # percentile interval; a resample's repeated examples shrink the between-example spread, so its rhos are
    # more negative than the point estimate (the bias BCa corrects where it is defined)
    assert found.interval_method == "percentile" and found.rho > found.ci_high


def test_no_relation_cannot_rank_and_the_interval_holds_rho():
    noise = np.random.default_rng(0).normal(size=(30, 5))
    found = level_correlation(noise, LEVELS, True, n_boot=500, seed=1)
    assert not found.ranks_known_order and abs(found.rho) < 0.2 and found.ci_low < 0 < found.ci_high
    assert found.ci_low <= found.rho <= found.ci_high and str(found.reason).startswith("the 95 % interval of rho [")
    again = level_correlation(noise, LEVELS, True, n_boot=500, seed=1)
    assert (again.ci_low, again.ci_high) == (found.ci_low, found.ci_high)  # seeded


def test_the_verdict_is_the_interval_on_every_seed():
    verdicts = []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        slope = rng.uniform(-0.6, 0.2)  # from clearly falling to slightly rising: both verdicts occur
        values = slope * np.asarray(LEVELS) + rng.normal(size=(12, 5)) + rng.normal(0, 2, (12, 1))
        found = level_correlation(values, LEVELS, True, n_boot=300, seed=seed)
        assert found.ranks_known_order == (found.ci_high < 0) and found.ci_low <= found.ci_high
        assert found.ranks_known_order == (found.reason is None)
        verdicts.append(found.ranks_known_order)
    assert 0 < sum(verdicts) < len(verdicts)


def test_bca_undefined_falls_back_to_the_percentile_interval():
    # a resample of only the constant example has no rho: BCa is undefined, the percentile interval is used
    values = np.array([[1.0, 0.8, 0.5, 0.2, 0.1], [1.0] * 5, [1.0] * 5])
    found = level_correlation(values, LEVELS, True, n_boot=300, seed=0)
    assert found.interval_method == "percentile" and np.isfinite(found.ci_low) and found.ci_low <= found.ci_high


def test_an_interval_on_the_expected_side_does_not_rank_a_rho_of_the_other_sign(monkeypatch):
    """A degenerate interval (too few resamples) on the expected side of 0 while rho itself is on the other side
    does not count as ranking the known order."""
    import itermask.core.sanity_statistics as module

    monkeypatch.setattr(module, "_interval", lambda *a: (-0.5, -0.2, "BCa", np.array([-0.3])))
    rising = level_correlation(-np.tile(FALLING, (4, 1)), LEVELS, higher_is_more_faithful=True, n_boot=100)
    assert rising.rho == pytest.approx(0.7651, abs=1e-4) and rising.expected_sign == -1  # pooled over examples
    assert not rising.ranks_known_order
    assert rising.reason == "rho +0.765 is not below 0, although its 95 % interval [-0.500, -0.200] is"
