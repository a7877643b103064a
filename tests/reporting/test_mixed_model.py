"""Claim 1's mixed-model differences (statistics.mixed_model_differences): a balanced case checked against the
ANOVA solution by hand, against statsmodels' MixedLM where it converges well, against a direct maximisation of
the REML likelihood on the boundary (seed variance 0), the input errors, and the simulation check of
bench/mixed_model_check.py (false-positive rate and coverage of the 5 % test / 95 % interval on the preset's
design)."""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, stats

from itermask.studies.robust_infidelity.statistics import mixed_model_differences

BENCH = Path(__file__).resolve().parents[2] / "bench" / "mixed_model_check.py"


def _bench():
    spec = importlib.util.spec_from_file_location("mixed_model_check", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_balanced_difference_matches_the_anova_solution():
    """In a balanced design REML equals the ANOVA estimates when those are positive (Searle, Casella & McCulloch
    1992, Sec. 6.7), so ``se(a - b)^2 = 2 MS_seed / (S E)`` with ``MS_seed = E sum_ms (y_ms. - y_m..)^2 /
    (M (S - 1))``, and the interval uses t with M (S - 1) = 6 df."""
    y, model, seed, example = _bench().simulate(np.random.default_rng(3), 25, 0.7)
    (row,) = mixed_model_differences(y, model, seed, example, [("m0", "m1")])
    cells = y.reshape(3, 3, 25).mean(axis=-1)  # [model, seed]
    means = cells.mean(axis=1)
    ms_seed = 25 * ((cells - means[:, None]) ** 2).sum() / (3 * 2)
    se = math.sqrt(2 * ms_seed / (3 * 25))
    assert row["estimate"] == pytest.approx(means[0] - means[1], abs=1e-9)
    assert (row["ci_high"] - row["estimate"]) / stats.t.ppf(0.975, 6) == pytest.approx(se, rel=1e-3)
    assert row["p_value"] == pytest.approx(2 * stats.t.sf(abs(means[0] - means[1]) / se, 6), rel=1e-3)
    assert (row["converged"], row["reason"], row["n_seeds"], row["n_examples"]) == (True, None, 3, 25)


def test_agrees_with_statsmodels_where_statsmodels_converges_well():
    """Two models of 3 seeds with a clear seed and model x example variance: the contrast, its standard error and
    the variance components equal statsmodels' REML fit of the same model (the example, the run and the model x
    example cell as variance components) within 1e-3 (its optimizer's tolerance); with two models the pair's
    model x example variance is the model's."""
    y, model, seed, example = _bench().simulate(np.random.default_rng(4), 30, 0.4, n_models=2, sd_model_example=0.7)
    fit = _bench().statsmodels_fit(y, model, seed, example, model_example=True)
    assert fit.converged
    (row,) = mixed_model_differences(y, model, seed, example, [("m0", "m1")])
    cov = np.asarray(fit.cov_params())
    assert row["estimate"] == pytest.approx(fit.fe_params.iloc[0] - fit.fe_params.iloc[1], abs=1e-9)
    assert row["se"] == pytest.approx(math.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]), rel=1e-3)
    assert row["var_residual"] == pytest.approx(fit.scale, rel=1e-3)
    vcomp = dict(zip(fit.model.exog_vc.names, fit.vcomp))
    assert row["var_seed"] == pytest.approx(vcomp["seed"], rel=1e-3)
    assert row["var_model_example"] == pytest.approx(vcomp["model_example"], rel=1e-3)
    assert row["var_model_example"] > 0.2  # the term is in use: the df are Satterthwaite's, not the 6 - 2 runs'
    assert row["n_seeds"] == 3 and 4 < row["df"] < 29


def test_without_a_model_example_variance_the_contrast_is_the_seed_ones():
    """Unequal seeds (3, 2, 3) and no model x example variance in the pair's per-example differences beyond the
    residual's share: the standard error is ``sqrt(var_run_mean (1/3 + 1/2))`` and the t has runs - models df,
    as without the term."""
    y, model, seed, example = _bench().simulate(np.random.default_rng(5), 30, 0.4)
    keep = ~((model == "m1") & (seed == 2))
    y, model, seed, example = y[keep], model[keep], seed[keep], example[keep]
    (row,) = mixed_model_differences(y, model, seed, example, [("m0", "m1")])
    assert row["var_model_example"] == 0.0  # this draw's pair has none (checked: MS_z below k s2_r)
    cells = {m: np.stack([y[(model == m) & (seed == s)] for s in np.unique(seed[model == m])]) for m in ("m0", "m2")}
    cells["m1"] = np.stack([y[(model == "m1") & (seed == s)] for s in (0, 1)])
    ms_seed = sum(30 * ((c.mean(axis=1) - c.mean()) ** 2).sum() for c in cells.values()) / (8 - 3)
    assert row["se"] == pytest.approx(math.sqrt(ms_seed / 30 * (1 / 3 + 1 / 2)), rel=1e-12)
    assert (row["n_seeds"], row["df"]) == (2, 8 - 3)


def _direct_reml_se(y, model, seed, example) -> tuple[float, list[float]]:
    """The ``m0 - m1`` standard error at the maximum of the REML log-likelihood, maximised numerically over the
    four variances (each >= 0) with the dense covariance ``V = s2_r I + s2_e Z_e Z_e' + s2_s Z_s Z_s' + s2_me
    Z_me Z_me'`` (``Z_me``: the model x example cells): ``-2 l = log|V| + log|X' V^-1 X| + r' V^-1 r`` (Harville
    1977, *JASA* 72:320, eq. 3.4), several starts."""
    x = (model[:, None] == np.unique(model)[None, :]).astype(float)
    z_e = (example[:, None] == np.unique(example)[None, :]).astype(float)
    runs = np.array([f"{m}/{s}" for m, s in zip(model, seed)])
    z_s = (runs[:, None] == np.unique(runs)[None, :]).astype(float)
    cells = np.array([f"{m}/{e}" for m, e in zip(model, example)])
    z_me = (cells[:, None] == np.unique(cells)[None, :]).astype(float)

    def parts(v):
        cov = v[0] * np.eye(len(y)) + v[1] * z_e @ z_e.T + v[2] * z_s @ z_s.T + v[3] * z_me @ z_me.T
        inv = np.linalg.inv(cov)
        info = x.T @ inv @ x
        beta = np.linalg.solve(info, x.T @ inv @ y)
        r = y - x @ beta
        value = np.linalg.slogdet(cov)[1] + np.linalg.slogdet(info)[1] + r @ inv @ r
        return value, np.linalg.inv(info)

    starts = [[1.0, 1.0, 1.0, 1.0], [1.0, 0.1, 0.0, 0.5], [0.5, 1.0, 0.01, 0.1]]
    bounds = [(1e-6, None), (0.0, None), (0.0, None), (0.0, None)]
    best = min(
        (optimize.minimize(lambda v: parts(v)[0], s0, bounds=bounds, method="L-BFGS-B") for s0 in starts),
        key=lambda r: r.fun,
    )
    cov = parts(best.x)[1]
    return float(np.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])), list(best.x)


def test_seed_variance_on_the_boundary_is_the_reml_maximum():
    """No seed variance in the data (the random explanation's case in the preset's three-seed run, where
    statsmodels' MixedLM did not converge), two models that react differently to the examples: the seed mean
    square falls below the residual one, REML puts the seed variance at 0 and pools the two strata, the
    contrast's variance is then the per-example differences' mean square over E, and the standard error equals
    the one at the numerically maximised dense REML likelihood (within 1e-3)."""
    y, model, seed, example = _bench().simulate(
        np.random.default_rng(1), 12, 0.0, n_models=2, sd_seed=0.0, sd_model_example=0.7
    )
    (row,) = mixed_model_differences(y, model, seed, example, [("m0", "m1")])
    cells = y.reshape(2, 3, 12)
    run_means = cells.mean(axis=-1)
    ms_seed = 12 * ((run_means - run_means.mean(axis=1, keepdims=True)) ** 2).sum() / 4
    resid = cells - run_means[..., None] - cells.mean(axis=1, keepdims=True) + cells.mean(axis=(1, 2))[:, None, None]
    ss_res = (resid**2).sum()
    assert ms_seed < ss_res / (4 * 11)  # the constructed case is on the boundary
    pooled = (4 * ms_seed + ss_res) / (4 + 4 * 11)
    z = cells[0].mean(axis=0) - cells[1].mean(axis=0)
    assert row["var_seed"] == 0.0
    assert row["var_residual"] == pytest.approx(pooled, rel=1e-12)
    assert row["var_model_example"] == pytest.approx((z.var(ddof=1) - 2 / 3 * pooled) / 2, rel=1e-12)
    assert row["se"] == pytest.approx(math.sqrt(z.var(ddof=1) / 12), rel=1e-12)
    assert row["df"] == pytest.approx(11)
    se, variances = _direct_reml_se(y, model, seed, example)
    assert variances[2] == pytest.approx(0.0, abs=1e-4)
    assert row["se"] == pytest.approx(se, rel=1e-3)


def test_the_fit_uses_the_examples_every_run_scored():
    """One run lacks an example: the fit is the one on the other examples, and ``n_examples`` says so."""
    y, model, seed, example = _bench().simulate(np.random.default_rng(6), 8, 0.3)
    drop = (model == "m2") & (seed == 1) & (example == 3)
    (row,) = mixed_model_differences(y[~drop], model[~drop], seed[~drop], example[~drop], [("m0", "m1")])
    keep = example != 3
    (same,) = mixed_model_differences(y[keep], model[keep], seed[keep], example[keep], [("m0", "m1")])
    assert row["n_examples"] == 7
    assert {k: row[k] for k in ("estimate", "se", "p_value")} == pytest.approx(
        {k: same[k] for k in ("estimate", "se", "p_value")}, rel=1e-12
    )


def test_scores_without_residual_variation_are_a_reason_not_a_number():
    """Every score is its run's effect plus its example's, exactly: REML has no maximum (the residual variance
    goes to 0), so no contrast is given."""
    _, model, seed, example = _bench().simulate(np.random.default_rng(0), 6, 0.0)
    y = 0.1 * seed + 0.3 * (model == "m1") + 0.01 * example**2
    (row,) = mixed_model_differences(y, model, seed, example, [("m0", "m1")])
    assert math.isnan(row["estimate"]) and row["converged"] is False
    assert row["reason"] == "no run x example variation beyond the example effects: REML has no maximum"


def test_too_few_seeds_is_a_reason_not_a_number():
    y, model, seed, example = _bench().simulate(np.random.default_rng(0), 5, 0.0)
    keep = seed == 0
    (row,) = mixed_model_differences(y[keep], model[keep], seed[keep], example[keep], [("m0", "m2")])
    assert math.isnan(row["estimate"]) and math.isnan(row["p_value"])
    assert (
        row["reason"] == "the mixed model needs 2 seeds of every model and 2 examples scored by every run, got 1 and 5"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seed": [0]}, r"^scores, model, seed and example must be 1-D of one length"),
        ({"scores": "nan"}, r"^mixed-model differences need a finite score for every observation"),
        ({"pairs": [("m0", "m9")]}, r"^no observations of model\(s\) \['m9'\] named in pairs$"),
        ({"confidence": 1.0}, r"^confidence must be in \(0, 1\), got 1.0$"),
        (
            {"example": "twice"},
            r"^example 0 is scored twice in run m0, seed 0 \(one score per model, seed and example\)$",
        ),
    ],
)
def test_bad_input_is_named(change, message):
    y, model, seed, example = _bench().simulate(np.random.default_rng(0), 4, 0.0)
    args = {"scores": y, "model": model, "seed": seed, "example": example, "pairs": [("m0", "m1")]}
    args |= {"confidence": 0.95} | change
    if isinstance(args["example"], str):
        args["example"] = np.where(np.arange(len(y)) == 1, 0, example)
    if isinstance(args["scores"], str):
        args["scores"] = np.where(np.arange(len(y)) == 3, np.nan, y)
    with pytest.raises(ValueError, match=message):
        mixed_model_differences(**args)


def test_false_positive_rate_is_about_five_percent():
    """200 datasets of the preset's design (3 models x 3 seeds x 25 examples) with no model effect: the 5 %
    test rejects in [0.02, 0.09] of them (fixed seed; bench/mixed_model_check.py reports 400)."""
    out = _bench().check(25, 200, 0.0, seed=0)
    assert 0.02 <= out["false_positive_rate"] <= 0.09
    assert out["failed"] <= 10  # non-converged fits are counted, not scored


def test_interval_covers_a_known_difference_at_about_95_percent():
    out = _bench().check(25, 200, 0.5, seed=1)
    assert 0.91 <= out["coverage"] <= 0.98
    assert out["failed"] <= 10


def test_a_model_example_variance_keeps_the_false_positive_rate_at_five_percent():
    """A model x example variance and almost no seed variance (sd 1 and 0.05; 25 examples), where a model
    without the term rejected a true null about 11 % of the time (bench/mixed_model_check.py, 2,000 datasets):
    the 5 % test rejects in [0.02, 0.08] of 300 datasets."""
    out = _bench().check(25, 300, 0.0, seed=2, sd_model_example=1.0, sd_seed=0.05)
    assert 0.02 <= out["false_positive_rate"] <= 0.08 and out["failed"] == 0
