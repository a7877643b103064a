"""The Claims section's statistics on constructed data with known answers: nested variance components,
Kendall's W with ties, and TOST."""

import math

import numpy as np
import pytest

from itermask.studies.robust_infidelity.statistics import (
    equivalence_margin,
    kendall_w,
    nested_components,
    nested_components_ci,
    tost_welch,
)


def _design(a, b, c):
    """``y[m, s, e] = a[m] + b[m][s] + c[e]``: no interaction, no residual."""
    a, b, c = np.asarray(a, float), np.asarray(b, float), np.asarray(c, float)
    return a[:, None, None] + b[:, :, None] + c[None, None, :]


def test_nested_components_of_an_exact_design_are_the_effects_sample_variances():
    # effects that sum to 0 (within each model for the seeds), by hand: MS_model = S E sum a^2 / (M - 1)
    # = 2 * 3 * 2 = 12, MS_seed = E sum b^2 / (M (S - 1)) = 3 * 1 / 2 = 1.5, MS_example = M S sum c^2 /
    # (E - 1) = 4 * 8 / 2 = 16, no interaction or residual. Seeds: 1.5 / E = 0.5 (the ddof-1 variance of
    # (0.5, -0.5)); examples: 16 / (M S) = 4; model: (12 - 1.5) / (S E) = 1.75 (the variance 2 of the
    # model means less the seeds' expected share 0.5 / S)
    y = _design([1.0, -1.0], [[0.5, -0.5], [-0.5, 0.5]], [2.0, -2.0, 0.0])
    out = nested_components(y)
    assert float(out["model"]) == pytest.approx(1.75)
    assert float(out["seed_within_model"]) == pytest.approx(0.5)
    assert float(out["example"]) == pytest.approx(4.0)
    assert float(out["model_x_example"]) == pytest.approx(0.0, abs=1e-12)
    assert float(out["residual"]) == pytest.approx(0.0, abs=1e-12)
    assert float(out["total"]) == pytest.approx(6.25)
    assert float(out["model_share"]) == pytest.approx(1.75 / 6.25)


def test_nested_components_recover_simulated_variances():
    rng = np.random.default_rng(0)
    m, s, e = 40, 6, 60
    # true components: model 1.0, seed within model 0.25, example 4.0, model x example 0.09, residual 0.16
    y = (
        rng.normal(0, 1.0, (m, 1, 1))
        + rng.normal(0, 0.5, (m, s, 1))
        + rng.normal(0, 2.0, (1, 1, e))
        + rng.normal(0, 0.3, (m, 1, e))
        + rng.normal(0, 0.4, (m, s, e))
    )
    out = nested_components(y)
    assert float(out["residual"]) == pytest.approx(0.16, rel=0.05)
    assert float(out["model_x_example"]) == pytest.approx(0.09, rel=0.15)
    assert float(out["seed_within_model"]) == pytest.approx(0.25, rel=0.2)
    assert float(out["model"]) == pytest.approx(1.0, rel=0.4)
    assert float(out["example"]) == pytest.approx(4.0, rel=0.4)


def test_nested_components_match_the_anova_table_of_statsmodels():
    pytest.importorskip("statsmodels")
    import pandas as pd
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    rng = np.random.default_rng(1)
    y = rng.normal(size=(3, 4, 5))
    frame = pd.DataFrame(
        [(m, s, e, y[m, s, e]) for m in range(3) for s in range(4) for e in range(5)],
        columns=["model", "seed", "example", "y"],
    )
    # seeds nested in models: C(model):C(seed); the balanced design makes the sequential table exact
    formula = "y ~ C(model) + C(example) + C(model):C(example) + C(model):C(seed)"
    ms = anova_lm(smf.ols(formula, frame).fit())["mean_sq"]
    out = nested_components(y)
    assert float(out["residual"]) == pytest.approx(ms["Residual"])
    assert float(out["seed_within_model"]) == pytest.approx(max((ms["C(model):C(seed)"] - ms["Residual"]) / 5, 0))
    assert float(out["model_x_example"]) == pytest.approx(max((ms["C(model):C(example)"] - ms["Residual"]) / 4, 0))
    expected_model = (ms["C(model)"] - ms["C(model):C(example)"] - ms["C(model):C(seed)"] + ms["Residual"]) / 20
    assert float(out["model"]) == pytest.approx(max(expected_model, 0))
    assert float(out["example"]) == pytest.approx(max((ms["C(example)"] - ms["C(model):C(example)"]) / 12, 0))


def test_nested_components_ci_brackets_the_estimate_and_rejects_too_small_designs():
    rng = np.random.default_rng(2)
    y = _design([1.0, -1.0, 0.0], rng.normal(0, 0.3, (3, 4)), rng.normal(0, 1, 20)) + rng.normal(0, 0.1, (3, 4, 20))
    out = nested_components_ci(y, n_resamples=300)
    for name in ("model", "seed_within_model", "example", "residual"):
        assert out[name]["ci_low"] <= out[name]["estimate"] + 1e-9 <= out[name]["ci_high"] + 2e-9 or name == "model"
    with pytest.raises(ValueError, match="at least 2 models, got 1"):
        nested_components(np.zeros((1, 3, 4)))
    with pytest.raises(ValueError, match="a value for every"):
        nested_components(np.full((2, 2, 2), np.nan))


def test_kendall_w_is_one_for_identical_rankings():
    scores = np.array([[0.1, 0.5, 0.3, 0.9], [1.0, 5.0, 3.0, 9.0], [0.2, 0.4, 0.3, 0.8]])
    out = kendall_w(scores, n_permutations=999)
    assert out["w"] == pytest.approx(1.0)
    # chi2 = m (k - 1) W = 3 * 3 = 9 on 3 df
    assert out["chi2"] == pytest.approx(9.0)
    assert out["p_chi2"] == pytest.approx(0.029291, abs=1e-5)
    # exact: 6 of the 24^3 rank patterns... at most (k!)^{m-1} = 576 patterns reach W = 1 -> p ~ 24/13824
    assert out["p_permutation"] < 0.01


def test_kendall_w_hand_computed_with_ties():
    # 3 raters, 3 objects; rater 3 ties objects 2 and 3.
    # ranks: r1 = (1, 2, 3), r2 = (1, 3, 2), r3 = (1, 2.5, 2.5); sums R = (3, 7.5, 7.5), mean 6
    # S = 9 + 2.25 + 2.25 = 13.5; T = 2^3 - 2 = 6; W = 12 S / (m^2 (k^3 - k) - m T) = 162 / (216 - 18)
    scores = np.array([[1.0, 2.0, 3.0], [1.0, 3.0, 2.0], [0.0, 5.0, 5.0]])
    out = kendall_w(scores, n_permutations=999)
    assert out["w"] == pytest.approx(162 / 198)
    assert out["chi2"] == pytest.approx(3 * 2 * 162 / 198)
    # without ties the same formula gives scipy's Friedman-based W (itermask.reporting.seeds)
    from itermask.reporting.seeds import kendalls_w

    no_ties = np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 1.0, 4.0, 3.0], [1.0, 3.0, 2.0, 4.0]])
    assert kendall_w(no_ties)["w"] == pytest.approx(kendalls_w(no_ties)["w"])


def test_kendall_w_says_why_it_cannot_be_computed():
    assert "at least 2 raters" in kendall_w(np.array([[1.0, 2.0]]))["why"]
    assert math.isnan(kendall_w(np.array([[1.0, 1.0], [2.0, 2.0]]))["w"])


def test_tost_on_constructed_data():
    a = [0.80, 0.81, 0.82, 0.80, 0.81]
    b = [0.805, 0.815, 0.81, 0.80, 0.815]
    out = tost_welch(a, b, margin=0.02)
    assert out["difference"] == pytest.approx(np.mean(a) - np.mean(b))
    assert out["equivalent"] and out["p_value"] < 0.05
    assert -0.02 < out["ci_low"] < out["ci_high"] < 0.02
    # a difference of 5 points is not equivalent within 2
    far = tost_welch([x + 0.05 for x in a], b, margin=0.02)
    assert not far["equivalent"] and far["p_value"] > 0.5
    # no spread: exact
    assert tost_welch([0.8, 0.8], [0.81, 0.81], 0.02)["equivalent"]
    assert not tost_welch([0.8, 0.8], [0.83, 0.83], 0.02)["equivalent"]
    assert "at least 2" in tost_welch([0.8], [0.8, 0.81], 0.02)["why"]
    with pytest.raises(ValueError, match="margin"):
        tost_welch(a, b, 0.0)


def test_equivalence_margin_is_the_margin_tost_shows_at_80_percent_power():
    from scipy import stats

    # by hand: (t_{0.95, 1} + t_{0.90, 1}) * 0.02 = (6.3138 + 3.0777) * 0.02
    assert equivalence_margin(0.02, 1.0) == pytest.approx((6.313752 + 3.077684) * 0.02, rel=1e-5)
    assert equivalence_margin(0.1, 1e6) == pytest.approx((stats.norm.ppf(0.95) + stats.norm.ppf(0.9)) * 0.1, rel=1e-4)
    assert math.isnan(equivalence_margin(0.02, 0.5)) and math.isnan(equivalence_margin(math.nan, 3.0))
    # simulated: two identical groups of 50 normal values (sd 1; Welch se 0.2, df 98): TOST at that margin
    # shows them equivalent in about 80 % of 2,000 draws (binomial sd 0.009; the t quantiles make it a little
    # conservative)
    rng = np.random.default_rng(0)
    margin = equivalence_margin(math.sqrt(2 / 50), 98.0)
    shown = [tost_welch(rng.normal(size=50), rng.normal(size=50), margin)["equivalent"] for _ in range(2000)]
    assert np.mean(shown) == pytest.approx(0.80, abs=0.03)
    out = tost_welch([0.1, 0.3], [0.2, 0.2001], 0.05)  # the Welch se and df it reports, by hand
    assert out["se"] == pytest.approx(math.sqrt(0.02 / 2 + 0.000000005 / 2))
    assert out["df"] == pytest.approx(out["se"] ** 4 / ((0.01**2) + (0.0000000025**2)), rel=1e-6)


def test_tost_matches_statsmodels():
    pytest.importorskip("statsmodels")
    from scipy import stats
    from statsmodels.stats.weightstats import ttost_ind

    rng = np.random.default_rng(3)
    a, b = rng.normal(0.8, 0.01, 5), rng.normal(0.805, 0.02, 4)
    p, lower, upper = ttost_ind(a, b, -0.02, 0.02, usevar="unequal")
    out = tost_welch(a, b, 0.02)
    assert out["p_value"] == pytest.approx(p)
    assert out["p_lower"] == pytest.approx(lower[1]) and out["p_upper"] == pytest.approx(upper[1])
    # and by hand: the Welch t of d + margin and d - margin on the Welch-Satterthwaite df (ttost_ind computes them)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    d, se = a.mean() - b.mean(), np.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    assert out["p_lower"] == pytest.approx(stats.t.sf((d + 0.02) / se, df))
    assert out["p_upper"] == pytest.approx(stats.t.cdf((d - 0.02) / se, df))
    half = stats.t.ppf(0.95, df) * se
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((d - half, d + half))


def test_holm_matches_statsmodels_and_keeps_nan():
    from statsmodels.stats.multitest import multipletests

    from itermask.studies.robust_infidelity.statistics import holm

    p = np.array([0.01, 0.04, 0.03, 0.005, 0.2, 0.04])
    assert np.allclose(holm(p), multipletests(p, method="holm")[1])
    # by hand: sorted 0.005, 0.01, 0.03, 0.04, 0.04, 0.2 times 6..1 = 0.03, 0.05, 0.12, 0.12, 0.08 -> 0.12, 0.2
    assert holm(p).tolist() == pytest.approx([0.05, 0.12, 0.12, 0.03, 0.2, 0.12])
    with_nan = holm([0.01, np.nan, 0.04])
    assert np.isnan(with_nan[1]) and with_nan[[0, 2]].tolist() == pytest.approx([0.02, 0.04])
    assert np.isnan(holm([np.nan])).all() and holm([0.6, 0.7]).tolist() == [1.0, 1.0]
