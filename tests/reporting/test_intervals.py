"""Intervals over bounded quantities stay inside their bounds (itermask.reporting.intervals), on constructed
data at and near the bounds, and cover at about their nominal rate on a simulated case."""

import math

import numpy as np
import pytest

from itermask.core.metrics import metric_info
from itermask.reporting.bounds import measure_bounds, score_bounds
from itermask.reporting.intervals import (
    bounded_t_interval,
    difference_bounds,
    welch_bounded_interval,
    wilson_interval,
    within_bounds,
)
from itermask.reporting.seeds import seed_share
from itermask.reporting.statistics import compare_samples, seed_interval

UNIT = (0.0, 1.0)
NEAR_ONE = [0.99, 0.995, 1.0, 0.999, 0.992]  # e.g. an AUROC over five seeds
NEAR_ZERO = [0.0, 0.004, 0.012, 0.001, 0.0]  # e.g. an ECE
CASES = {
    "near one": NEAR_ONE,
    "near zero": NEAR_ZERO,
    "two values": [0.999, 1.0],
    "at zero": [0.0, 0.0, 0.0],
    "at one": [1.0, 1.0, 1.0, 1.0],
    "all equal": [0.37] * 5,
    "single seed": [0.999],
    "spread": [0.01, 0.99, 0.5],
}


def _inside(low, high, bounds=UNIT):
    return math.isnan(low) and math.isnan(high) or bounds[0] <= low <= high <= bounds[1]


@pytest.mark.parametrize("method", ["t", "bootstrap"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_seed_intervals_stay_in_the_unit_interval(case, method):
    values = CASES[case]
    out = seed_interval(values, 0.95, method, n_resamples=999, bounds=UNIT)
    assert _inside(out["ci_low"], out["ci_high"]), out
    if len(values) >= 2:
        assert out["ci_low"] <= out["mean"] <= out["ci_high"]
    if case == "single seed":
        assert math.isnan(out["ci_low"]) and math.isnan(out["ci_high"])  # undefined, not out of range
    if case in ("at zero", "at one", "all equal"):
        assert out["ci_low"] == out["ci_high"] == out["mean"]


def test_the_plain_t_interval_leaves_the_range_and_the_bounded_one_does_not():
    plain = seed_interval(NEAR_ONE, 0.95)
    bounded = seed_interval(NEAR_ONE, 0.95, bounds=UNIT)
    assert plain["ci_high"] > 1  # the AUROC interval reaching 1.018
    assert bounded["ci_high"] < 1 and bounded["ci_low"] > 0.98
    assert seed_interval(NEAR_ZERO, 0.95)["ci_low"] < 0 <= seed_interval(NEAR_ZERO, 0.95, bounds=UNIT)["ci_low"]


def test_bounded_interval_is_the_plain_one_far_from_the_bounds():
    # in the middle of the range the transform is near-linear: nearly the same interval
    values = np.array([0.49, 0.5, 0.51, 0.505, 0.495])
    plain, bounded = seed_interval(values, 0.95), seed_interval(values, 0.95, bounds=UNIT)
    assert bounded["ci_low"] == pytest.approx(plain["ci_low"], abs=1e-4)
    assert bounded["ci_high"] == pytest.approx(plain["ci_high"], abs=1e-4)


@pytest.mark.parametrize(
    "bounds,values",
    [
        ((0.0, math.inf), [0.0, 0.01, 0.002]),  # a count or distance near 0
        ((-1.0, 1.0), [0.99, 1.0, 0.97]),  # a cosine or rank correlation near 1
        ((-1.0, 1.0), [-1.0, -0.99, -0.999]),
        ((-math.inf, 0.0), [-0.001, 0.0, -0.02]),
    ],
)
def test_other_ranges(bounds, values):
    low, high = bounded_t_interval(np.mean(values), np.std(values, ddof=1), len(values), 0.99, bounds)
    assert bounds[0] <= low <= np.mean(values) <= high <= bounds[1]


def test_extreme_confidence_still_inside():
    low, high = bounded_t_interval(0.999, 0.002, 2, 0.999999, UNIT)
    assert 0 <= low <= high <= 1


def test_values_outside_their_declared_range_are_an_error_float_noise_is_not():
    with pytest.raises(ValueError, match="outside their declared range"):
        seed_interval([0.5, 1.2], bounds=UNIT)
    assert within_bounds([1 + 1e-7, -1e-12], UNIT).tolist() == [1.0, 0.0]  # float32 noise
    with pytest.raises(ValueError, match="lo < hi"):
        bounded_t_interval(0.5, 0.1, 3, 0.95, (1.0, 0.0))


def test_differences_stay_in_the_range_of_a_difference():
    # method - random of an AUROC-like score: in [-1, 1]
    assert difference_bounds(UNIT) == (-1.0, 1.0)
    assert difference_bounds((0.0, math.inf)) is None
    a, b = [1.0, 0.999, 1.0], [0.0, 0.003, 0.001]
    for test in ("welch", "permutation"):
        out = compare_samples(a, b, 0.95, test, n_resamples=999, bounds=UNIT)
        assert -1 <= out["ci_low"] <= out["difference"] <= out["ci_high"] <= 1, (test, out)
    plain = compare_samples(a, b, 0.95)
    assert plain["ci_high"] > 1  # what the bounds prevent
    low, high = welch_bounded_interval(np.array(b), np.array(a), 0.95, UNIT)
    assert -1 <= low <= high <= 1
    # unbounded: the same as scipy's Welch interval
    x, y = [0.1, 0.5, 0.3, 0.2], [0.4, 0.45, 0.9]
    from scipy import stats

    ci = stats.ttest_ind(x, y, equal_var=False).confidence_interval(0.95)
    assert welch_bounded_interval(np.array(x), np.array(y), 0.95, None) == pytest.approx((ci.low, ci.high))


@pytest.mark.parametrize("k,n", [(0, 1), (0, 10), (10, 10), (1, 1), (5, 10), (1, 200), (199, 200)])
def test_wilson_is_inside_and_not_degenerate(k, n):
    low, high = wilson_interval(k, n, 0.95)
    assert 0 <= low <= k / n <= high <= 1
    assert high > low  # unlike the Wald interval at 0 and n
    if k == 0:
        assert low == 0
    if k == n:
        assert high == 1
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_wilson_matches_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    for k, n in [(0, 7), (3, 7), (7, 7), (40, 100)]:
        assert wilson_interval(k, n, 0.9) == pytest.approx(proportion_confint(k, n, 0.1, method="wilson"))


def test_seed_share_interval_is_a_share():
    rng = np.random.default_rng(0)
    for scale in (0.0, 1e-6, 10.0):  # no, tiny and overwhelming seed effect
        values = rng.normal(size=(3, 20)) + scale * rng.normal(size=(3, 1))
        out = seed_share(values, 0.95, n_resamples=500)
        assert 0 <= out["ci_low"] <= out["ci_high"] <= 1


def test_coverage_near_the_bound_is_about_nominal():
    """Means of Beta(19, 1) values (mean 0.95, mass piled near 1) over 5 and 20 "seeds": the bounded
    t-interval covers the true mean at about 95 %, and never leaves [0, 1]."""
    rng = np.random.default_rng(1)
    true = 19 / 20
    for n in (5, 20):
        samples = rng.beta(19, 1, size=(4000, n))
        hits = 0
        for row in samples:
            low, high = bounded_t_interval(row.mean(), row.std(ddof=1), n, 0.95, UNIT)
            assert 0 <= low <= high <= 1
            hits += low <= true <= high
        assert 0.92 <= hits / len(samples) <= 0.975, (n, hits / len(samples))
    # a proportion: Wilson's coverage at p = 0.02, n = 100 is near nominal
    k = rng.binomial(100, 0.02, size=4000)
    covered = [lo <= 0.02 <= hi for lo, hi in (wilson_interval(int(x), 100) for x in k)]
    assert 0.9 <= np.mean(covered) <= 0.99


def test_bounds_come_from_the_declarations():
    assert metric_info("flip_rate").bounds == (0.0, 1.0)
    assert metric_info("aopc_comprehensiveness_prob").bounds == (-1.0, 1.0)
    assert metric_info("aopc_comprehensiveness_logit").bounds is None
    assert metric_info("target_logit").bounds is None and metric_info("target_prob").bounds == (0.0, 1.0)
    assert metric_info("log_odds_drop").bounds is None
    assert metric_info("first_flip_count").bounds == (0.0, math.inf)
    assert metric_info("auc_prob").bounds == (0.0, math.inf)
    assert score_bounds("accuracy_test") == (0.0, 1.0)
    assert score_bounds("ood final/auroc_mahalanobis @90%") == (0.0, 1.0)
    assert score_bounds("ood ece @10%") == (0.0, 1.0)
    assert score_bounds("ood masf_flagged @50%") == (0.0, 1.0)
    assert score_bounds("ood final/mahalanobis @50%") == (0.0, math.inf)
    assert score_bounds("attack success_rate") == (0.0, 1.0)
    assert score_bounds("attack spearman_tokens_to_flip") == (-1.0, 1.0)
    assert score_bounds("racu_without_retraining_prob") is None
    assert measure_bounds("gradient - random", "one_shot", "aopc_comprehensiveness_prob") == (-2.0, 2.0)
    assert measure_bounds("gradient - random", "one_shot", "auc_prob") is None
    assert measure_bounds("model", "", "accuracy_validation") == (0.0, 1.0)


def test_report_intervals_of_auroc_and_ece_stay_in_range(tmp_path):
    """The issue's case: over 3 seeds an OOD AUROC near 1 and an ECE near 0; the report's t-intervals of
    both (and of the flip rate curve's band) lie in [0, 1], where the plain t-interval left it."""
    from results_helpers import make_result, write_sweep

    from itermask.reporting import build_report

    aurocs, eces = [0.995, 0.97, 1.0], [0.004, 0.03, 0.0]
    results = []
    for seed, (auroc, ece) in enumerate(zip(aurocs, eces)):
        result = make_result(seed)
        result["ood"] = {
            "statistics": {
                "gradient": {
                    "one_shot": {
                        "fraction": [0.0, 0.5, 1.0],
                        "values": {"final/auroc_mahalanobis": [0.5, 0.9, auroc], "ece": [0.01, 0.02, ece]},
                    }
                }
            }
        }
        result["config"]["ood"] = {"plots": {"umap_fractions": [1.0]}}
        results.append(result)
    report = build_report(write_sweep(tmp_path / "sweep", results))
    s = report.summary
    for score, values in (("ood final/auroc_mahalanobis @100%", aurocs), ("ood ece @100%", eces)):
        row = s[s.score == score].iloc[0]
        assert row["mean"] == pytest.approx(np.mean(values))
        assert 0 <= row["ci_low"] <= row["mean"] <= row["ci_high"] <= 1, (score, row)
        plain = seed_interval(values, 0.95)
        assert plain["ci_low"] < 0 or plain["ci_high"] > 1  # what the plain t-interval did
    assert ((s.ci_low >= 0) | s.ci_low.isna() | ~s.score.str.contains("auroc|ece|accuracy|rate")).all()
