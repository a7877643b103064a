"""The statistics of the Claims section (:mod:`itermask.studies.robust_infidelity`): nested variance components
(model / seed within model / example), Kendall's W with tie correction across models, an equivalence test (TOST) of
accuracies, Holm's step-down correction (:func:`holm`), claim 1's mixed-model differences
(:func:`mixed_model_differences`) and the smallest effect a design detects (:func:`detectable_effect`).
numpy/scipy/pandas/statsmodels: no torch, no project imports.

**Nested variance components.** ``y[m, s, e]``: one score for model ``m``, fine-tuning seed ``s`` of that
model (seeds nested in models) and evaluation example ``e`` (crossed with both): the ANOVA estimates of
:func:`itermask.reporting.variance.anova_components` (formulas and sources there; the one estimator, also of the
seed sensitivity), checked for at least 2 models by :func:`nested_components`. Their intervals
(:func:`nested_components_ci`) are percentile bootstraps that resample the seeds within each model and the
examples, both with replacement (the models are few and fixed: they are not resampled, so the model component's
interval reflects seed and example noise only).

**Kendall's W** of ``m`` raters (models) ranking ``k`` objects (saliency methods), with ties given mid ranks:
``W = 12 sum_j (R_j - m (k + 1) / 2)^2 / (m^2 (k^3 - k) - m sum_i T_i)``, ``R_j`` the rank sum of object ``j`` and
``T_i = sum over tie groups of rater i of (t^3 - t)`` (Kendall & Babington Smith 1939, *Ann. Math. Statist.* 10:275;
tie correction: Kendall, *Rank Correlation Methods*, Sec. 6.7). Its p-values: the chi-square approximation
``m (k - 1) W ~ chi2(k - 1)`` and a permutation test that shuffles each rater's ranks independently. One
estimator serves the claims and the report's rank stability: :func:`itermask.reporting.seeds.kendall_w`.

**TOST.** Two one-sided Welch t-tests (Schuirmann 1987, *J. Pharmacokinet. Biopharm.* 15:657) that the
difference of two independent means lies within ``(-margin, margin)``; the p-value is the larger of the
two, and equivalence at level ``alpha`` is the same as the ``1 - 2 alpha`` Welch interval lying inside the
margin. The two tests are statsmodels' ``ttost_ind(usevar="unequal")``; with no spread in either sample the
difference is exact and decided here (statsmodels would divide by 0).

**Mixed model** (claim 1's between-model differences, :func:`mixed_model_differences`). Every model sees the same
examples, so the differences are estimated from every example of every seed, not from seed means: the linear mixed
model ``y_mse = mu_m + c_e + (mc)_me + b_s(m) + eps_mse`` with the model means ``mu_m`` fixed and random
intercepts ``c_e ~ N(0, s2_e)`` for the example (crossed with the models), ``(mc)_me`` for the model x example
interaction and ``b_s(m) ~ N(0, s2_s)`` for the seed within model, fitted by REML on the examples every run
scored. That design is balanced in the examples and REML has a closed form there (:func:`_balanced_reml`);
until 5 December 2026 statsmodels' ``MixedLM`` fitted it, and near a seed variance of 0 it failed or converged
to a wrong optimum (*Why not statsmodels*, below). ``a - b`` is the
contrast of the fixed effects, with the Wald standard error from their covariance. Its reference distribution is
Student's t with the containment degrees of freedom of the seed term (runs minus models, 6 for 3 x 3 runs; the
"containment" method of SAS PROC MIXED), not the normal: the example effect cancels in the contrast, so its
variance is mostly the seed variance, estimated from that few runs; on simulated data of the preset's design
the normal reference rejected a true null 12.7 % of the time at 5 % (``bench/mixed_model_check.py``). Since 6
December 2026 the contrast also carries the pair's **model x example** variance (:func:`_contrast`: how
differently the two models react to each example, which averages over the examples but not over the seeds),
estimated from the spread of the per-example differences of the two models' seed means, with Satterthwaite's
degrees of freedom when it is positive. Without it (the model until then) the contrast's variance was
underestimated by the factor ``1 + S s2_me / (E s2_s + s2_r)`` with ``S`` seeds per model and ``E`` examples,
which does not shrink with more examples when the seed variance is small: on simulated data with 25 examples,
seed sd 0.05 and model x example sd 1 the 5 % test rejected a true null 11.0 % of 2,000 times without the
term and 4.5 % with it, and the 95 % interval covered an effect of 0.5 95.5 % of the time
(``bench/mixed_model_check.py --examples 25 --reps 2000 --sd-seed 0.05 --sd-model-example 1``). On the preset's
three-seed run the factor was 1.00 for gradient's AOPC comprehensiveness minus random (the ANOVA's ``s2_me`` is
0, over the three encoders and between the twins) and 1.10 for its raw score over the three encoders.

**Why not statsmodels** (:func:`_balanced_reml`). statsmodels' ``MixedLM`` (REML, its default optimizers) fails or
stops at a wrong optimum with a seed variance near 0. On 20 simulated datasets of the preset's design with no seed
variance (the model without the model x example term, at 9efcb21: ``python bench/mixed_model_check.py
--examples 200 --reps 20 --sd-seed 0 --against-statsmodels``) 2 fits did not converge and 3 of those it
called converged had a contrast standard error up to 26 % off. With the term (two models, where it is one
variance; ``--examples 50 --reps 20 --sd-seed 0 --against-statsmodels``, 6 December 2026) 9 of 20 did not
converge and 8 of the other 11 had a standard error more than 0.1 % off (up to 4.5 times). On the preset's
three-seed run it failed for the random explanation's AOPC and, reporting convergence, put gradient's seed
variance at 3.6e-4 instead of 7.9e-5 (its intervals twice too wide).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import TTestIndPower, TTestPower

from itermask.reporting.intervals import welch_se_df
from itermask.reporting.seeds import kendall_w
from itermask.reporting.variance import COMPONENTS, anova_components

__all__ = [
    "nested_components",
    "nested_components_ci",
    "COMPONENTS",
    "kendall_w",
    "tost_welch",
    "TOST_ALPHA",
    "holm",
    "detectable_effect",
    "equivalence_margin",
    "mixed_model_differences",
]

#: the level of each one-sided test of :func:`tost_welch` (claim 1's and claim 3's accuracy equivalence)
TOST_ALPHA = 0.05


def nested_components(values: np.ndarray) -> dict[str, np.ndarray]:
    """ANOVA variance components of ``values`` ``[..., M, S, E]`` (models x seeds within model x examples,
    any leading batch dimensions): :func:`itermask.reporting.variance.anova_components` (the formulas there),
    for the claims' design of at least 2 models.

    Returns:
        ``{component: array of the leading shape}`` for :data:`COMPONENTS` (variances, in the score's unit
        squared), plus ``"total"`` and ``"<component>_share"`` (the component over the total; NaN where the
        total is 0).

    Raises:
        ValueError: with fewer than 2 models, 2 seeds per model or 2 examples, or NaN values.
    """
    y = np.asarray(values, dtype=np.float64)
    if y.ndim >= 3 and y.shape[-3] < 2:
        raise ValueError(f"nested variance components need at least 2 models, got {y.shape[-3]}")
    return anova_components(y)


def nested_components_ci(
    values: np.ndarray, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> dict[str, dict[str, float]]:
    """:func:`nested_components` of ``values`` ``[M, S, E]`` with percentile bootstrap intervals that
    resample the seeds within each model and the examples (module docstring).

    Returns:
        ``{name: {"estimate", "ci_low", "ci_high"}}`` for every key of :func:`nested_components`.
    """
    y = np.asarray(values, dtype=np.float64)
    point = nested_components(y)
    n_models, n_seeds, n_examples = y.shape
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, n_seeds, size=(n_resamples, n_models, n_seeds))
    examples = rng.integers(0, n_examples, size=(n_resamples, n_examples))
    models = np.arange(n_models)[None, :, None, None]
    resampled = y[models, seeds[..., None], examples[:, None, None, :]]  # [B, M, S, E]
    boot = nested_components(resampled)
    alpha = (1 - confidence) / 2
    out = {}
    for name, estimate in point.items():
        low, high = (float(q) for q in np.nanquantile(boot[name], [alpha, 1 - alpha]))
        out[name] = {"estimate": float(estimate), "ci_low": low, "ci_high": high}
    return out


def tost_welch(a, b, margin: float, alpha: float = TOST_ALPHA) -> dict:
    """Equivalence of two independent means (``mean(a) - mean(b)`` within ``(-margin, margin)``) by two
    one-sided Welch t-tests (module docstring).

    Args:
        a, b: values per seed (NaN dropped), at least 2 each.
        margin: the equivalence margin, in the values' unit (e.g. 0.02 = 2 accuracy points), ``> 0``.
        alpha: level of each one-sided test; the reported interval has coverage ``1 - 2 alpha``.

    Returns:
        ``{"difference", "ci_low", "ci_high", "p_lower", "p_upper", "p_value", "equivalent", "margin", "se",
        "df", "why"}``: ``p_lower`` tests ``diff <= -margin``, ``p_upper`` tests ``diff >= margin``, ``p_value``
        is the larger; ``equivalent`` is ``p_value < alpha``; ``se`` and ``df`` the Welch standard error and
        degrees of freedom (for :func:`equivalence_margin`). NaN and a reason with fewer than 2 values a side.
        With no spread in either sample the difference is exact: equivalent iff it lies inside the margin.

    Raises:
        ValueError: for ``margin <= 0`` or ``alpha`` outside (0, 0.5).
    """
    if not margin > 0:
        raise ValueError(f"the equivalence margin must be > 0, got {margin}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    x = np.asarray([v for v in a if v is not None and not math.isnan(v)], dtype=float)
    y = np.asarray([v for v in b if v is not None and not math.isnan(v)], dtype=float)
    out: dict = dict.fromkeys(
        ("difference", "ci_low", "ci_high", "p_lower", "p_upper", "p_value", "se", "df"), math.nan
    )
    out |= {"equivalent": False, "margin": float(margin), "why": None}
    if len(x) < 2 or len(y) < 2:
        out["why"] = f"TOST needs at least 2 values per group, got {len(x)} and {len(y)}"
        return out
    d = float(x.mean() - y.mean())
    out["difference"] = d
    out["se"], out["df"] = welch_se_df(x, y)
    if out["se"] == 0:
        inside = -margin < d < margin
        out.update(ci_low=d, ci_high=d, p_lower=0.0 if d > -margin else 1.0, p_upper=0.0 if d < margin else 1.0)
        out.update(p_value=0.0 if inside else 1.0, equivalent=inside)
        return out
    from statsmodels.stats.weightstats import ttost_ind

    # the two one-sided Welch tests: H0 d <= -margin (p_lower) and H0 d >= margin (p_upper)
    _, (_, p_lower, df), (_, p_upper, _) = ttost_ind(x, y, -margin, margin, usevar="unequal")
    p_lower, p_upper = float(p_lower), float(p_upper)
    half = float(stats.t.ppf(1 - alpha, df)) * out["se"]  # the 1 - 2 alpha Welch interval
    p = max(p_lower, p_upper)
    out.update(ci_low=d - half, ci_high=d + half, p_lower=p_lower, p_upper=p_upper, p_value=p, equivalent=p < alpha)
    return out


def equivalence_margin(se: float, df: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest equivalence margin ``m`` that a TOST at level ``alpha`` (:func:`tost_welch`) shows with
    probability ``power`` when the true difference is 0: ``(t_{1 - alpha, df} + t_{1 - (1 - power)/2, df}) se``.
    This is the usual TOST sample-size relation for a zero true difference (Chow, Shao & Wang 2008, *Sample Size
    Calculations in Clinical Research*, 2nd ed., sec. 3.2.3: ``z_alpha + z_{beta/2}``), with Student's t on the
    Welch ``df`` in place of the normal quantiles. A margin narrower than this is unlikely to be shown even for
    identical models: failing TOST then says "too few seeds", not "not equivalent". statsmodels has TOST tests
    but no TOST power, hence this.

    Args:
        se: the standard error of the difference (Welch), in the values' unit.
        df: its degrees of freedom (Welch–Satterthwaite), ``>= 1``.

    Returns:
        The margin in the values' unit; NaN when ``se`` or ``df`` is not finite or ``df < 1``.
    """
    if not (math.isfinite(se) and math.isfinite(df) and df >= 1):
        return math.nan
    return float((stats.t.ppf(1 - alpha, df) + stats.t.ppf(1 - (1 - power) / 2, df)) * se)


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979, "A simple sequentially rejective multiple test
    procedure", Scand. J. Statist. 6, 65-70), by statsmodels' ``multipletests(method="holm")`` over the p-values
    that are not NaN: NaN stays NaN and does not count in ``m`` (statsmodels alone would count it: ``[0.01, nan,
    0.04]`` would give ``[0.03, nan, 0.08]`` instead of ``[0.02, nan, 0.04]``). Rejecting where the adjusted value
    is below ``alpha`` keeps the family-wise error rate at ``alpha``.

    Args:
        p_values: ``[m]`` p-values in ``[0, 1]`` (NaN allowed).

    Returns:
        ``[m]`` float adjusted p-values, in the input order.
    """
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    valid = ~np.isnan(p)
    if valid.any():
        out[valid] = multipletests(p[valid], method="holm")[1]
    return out


def detectable_effect(
    design: str, n_a: float, n_b: int | None = None, sd: float = 1.0, alpha: float = 0.05, power: float = 0.8
) -> tuple[float, str | None]:
    """The smallest true effect a two-sided test of this design detects with probability ``power``.

    - ``"two_sample"``: a difference of two independent means over ``n_a`` and ``n_b`` values (seeds), in
      the values' unit: statsmodels' ``TTestIndPower().solve_power(effect_size=None, nobs1=n_a,
      ratio=n_b / n_a, alpha, power)`` (Cohen's d of the pooled-variance t-test; for Welch's test at these
      equal or near-equal group sizes the same to first order) times ``sd``, the pooled standard deviation.
    - ``"one_sample"``: a mean's distance from a fixed value (e.g. AUROC from 0.5) over ``n_a`` values:
      ``TTestPower().solve_power(...)`` times ``sd``, the sample standard deviation.
    - ``"rank_correlation"``: Spearman's rho over ``n_a`` objects (``sd`` unused), by the Fisher-z
      approximation ``tanh((z_{1 - alpha/2} + z_power) * sqrt(1.06 / (n - 3)))`` with Spearman's variance
      ``1.06 / (n - 3)`` of Fieller, Hartley & Pearson (1957, *Biometrika* 44:470); ``n >= 4``.
    - ``"wald_t"``: an estimate with standard error ``sd`` whose Wald statistic is read on Student's t with
      ``n_a`` degrees of freedom (claim 1's mixed-model contrasts): ``(t_{1 - alpha/2, df} + t_{power, df}) *
      se``, the minimum detectable effect of Bloom (1995, *Evaluation Review* 19:547, eq. 1), in the
      estimate's unit; ``n_a >= 1``.

    Returns:
        ``(effect, why)``: ``effect`` in the unit above (a difference, a distance, or a rho in (0, 1)), or
        NaN and ``why`` when the design cannot detect anything (too few values, no spread: ``sd`` 0 or NaN).

    Raises:
        ValueError: unknown ``design``, ``alpha`` or ``power`` outside (0, 1).
    """
    if design not in ("two_sample", "one_sample", "rank_correlation", "wald_t"):
        raise ValueError(f"design must be two_sample, one_sample, rank_correlation or wald_t, got {design!r}")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha} and {power}")
    if design == "wald_t":
        if n_a < 1 or not (math.isfinite(sd) and sd > 0):
            return math.nan, f"a Wald t needs df >= 1 and a positive standard error, got df {n_a} and se {sd}"
        return float((stats.t.ppf(1 - alpha / 2, n_a) + stats.t.ppf(power, n_a)) * sd), None
    if design == "rank_correlation":
        if n_a < 4:
            return math.nan, f"a rank correlation over {n_a} objects has no Fisher-z power (needs 4)"
        z = (stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * math.sqrt(1.06 / (n_a - 3))
        return float(np.tanh(z)), None
    n_b = int(n_a) if n_b is None else n_b
    if min(n_a, n_b) < 2:
        return math.nan, f"a t-test needs 2 values per group, got {n_a} and {n_b}"
    if not (math.isfinite(sd) and sd > 0):
        return math.nan, f"no spread over seeds (sd = {sd}) to scale the effect by"
    if design == "one_sample":
        d = TTestPower().solve_power(effect_size=None, nobs=n_a, alpha=alpha, power=power)
    else:
        d = TTestIndPower().solve_power(effect_size=None, nobs1=n_a, ratio=n_b / n_a, alpha=alpha, power=power)
    return float(np.asarray(d).item()) * sd, None


# a contrast that cannot be computed: every number NaN (the row's reason says why)
_NO_CONTRAST = dict.fromkeys(("estimate", "ci_low", "ci_high", "p_value", "se", "df"), math.nan)


def mixed_model_differences(scores, model, seed, example, pairs, confidence: float = 0.95) -> list[dict]:
    """Between-model differences ``a - b`` of a per-example score from one linear mixed model fitted by REML
    to every example of every seed: one mean per model, with random intercepts for the example (crossed with
    the models: every model sees the same examples) and for the seed within model (module docstring, *Mixed
    model*). The fit uses the examples that every run scored (all of them when nothing is missing), which makes
    the design balanced in the examples, and there REML has a closed form (:func:`_balanced_reml`).

    Args:
        scores, model, seed, example: ``[n]`` arrays, one entry per (model, seed, example) observation: the
            score (any unit; the differences are in it), the model's name, its fine-tuning seed (seeds of two
            models are different runs), the example's id.
        pairs: ``(a, b)`` model names; each difference is a contrast of the one fit.
        confidence: coverage of the Wald intervals, in (0, 1).

    Returns:
        One dict per pair: ``a, b, estimate, ci_low, ci_high, p_value, se, df, converged, n_examples,
        n_seeds`` (``se``: the contrast's standard error; ``df``: the t's degrees of freedom; ``n_seeds``: the
        fewer seeds of ``a`` and ``b``; ``n_examples``: the examples every run scored; ``converged``: the REML
        solution exists), the fit's variance components ``var_example, var_seed, var_residual`` (the score's
        unit squared; a component on the boundary is 0) and ``reason`` (``None``, or why the numbers are NaN:
        fewer than 2 seeds of a model or 2 common examples, no residual variation (scores that are run plus
        example effects exactly, where REML has no maximum), no finite positive standard error).

    Raises:
        ValueError: arrays of different lengths or not 1-D, a non-finite score, two observations of one
            example in one run, ``confidence`` outside (0, 1), or a pair naming a model without observations.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    frame, levels = _mixed_frame(scores, model, seed, example, pairs)
    table = frame.pivot(index="run", columns="example", values="score").dropna(axis=1)
    run_model = frame.groupby("run")["model"].first().reindex(table.index).to_numpy()
    n_seeds = np.bincount(run_model, minlength=len(levels))
    n_examples = table.shape[1]
    sizes = [
        {
            "a": a,
            "b": b,
            "n_examples": n_examples,
            "n_seeds": int(min(n_seeds[levels.index(a)], n_seeds[levels.index(b)])),
        }
        for a, b in pairs
    ]
    if (fewest := int(n_seeds.min())) < 2 or n_examples < 2:
        why = (
            "the mixed model needs 2 seeds of every model and 2 examples scored by every run, "
            f"got {fewest} and {n_examples}"
        )
        return [{**row, **_NO_CONTRAST, "converged": False, "reason": why} for row in sizes]
    fit = _balanced_reml(y := table.to_numpy(), run_model)
    # scores that are run plus example effects exactly (to round-off): the REML likelihood grows without bound
    if fit["var_residual"] <= 1e-12 * float(np.var(y)) and fit["var_run_mean"] > 0:
        why = "no run x example variation beyond the example effects: REML has no maximum"
        return [{**row, **_NO_CONTRAST, "converged": False, "reason": why} for row in sizes]
    return [
        _contrast(fit, y, run_model, row, [levels.index(row["a"]), levels.index(row["b"])], confidence) for row in sizes
    ]


def _contrast(fit: dict, y: np.ndarray, run_model: np.ndarray, row: dict, pair: list[int], confidence: float) -> dict:
    """``row`` with the contrast ``a - b`` of :func:`_balanced_reml`'s ``fit`` of ``y`` ``[R, E]`` (``run_model``
    ``[R]``; ``pair``: the two models' indices): estimate, t interval and p-value, standard error, degrees of
    freedom, the variance components and the pair's model x example variance.

    The pair's model x example term: ``z_e`` = a's seed mean minus b's on example ``e`` has the mean square
    ``MS_z`` (``E - 1`` df) with expectation ``v_me + k s2_r`` (``k = 1/S_a + 1/S_b``; ``v_me`` the variance of the
    two models' example-specific deviations' difference, ``2 s2_me`` for a common ``s2_me``; the seed and example
    effects are constant over the examples or cancel). ``v_me = max(0, MS_z - k s2_r)``, and the contrast's
    variance is ``k var_run_mean + v_me / E``. With ``v_me`` 0 the t has the containment df of the seed term
    (runs minus models, as before 6 December 2026); otherwise Satterthwaite's (1946, *Biometrics Bulletin* 2:110)
    for that sum of mean squares."""
    components = {k: fit[k] for k in ("var_example", "var_seed", "var_residual")}
    ia, ib = pair
    in_a, in_b = run_model == ia, run_model == ib
    k = 1 / in_a.sum() + 1 / in_b.sum()
    z = y[in_a].mean(axis=0) - y[in_b].mean(axis=0)
    n_examples = y.shape[1]
    ms_z = float(z.var(ddof=1))
    v_me = max(0.0, ms_z - k * fit["var_residual"])
    estimate = float(z.mean())
    variance = k * fit["var_run_mean"] + v_me / n_examples
    se = math.sqrt(variance)
    components["var_model_example"] = v_me / 2
    if not (math.isfinite(se) and se > 0):
        why = f"no finite positive standard error of {row['a']} - {row['b']} (se = {se})"
        return {**row, **_NO_CONTRAST, **components, "converged": True, "reason": why}
    if v_me == 0:
        df = float(len(run_model) - int(run_model.max()) - 1)
    elif fit["var_seed"] == 0:  # seed stratum pooled: k s2_r / E + (MS_z - k s2_r) / E = MS_z / E
        df = float(n_examples - 1)
    else:  # E * variance = k MS_seed + MS_z - k s2_r: Satterthwaite over the three mean squares
        terms = [(k * fit["ms_seed"], fit["df_seed"]), (ms_z, n_examples - 1)]
        terms += [(-k * fit["var_residual"], fit["df_residual"])]
        df = (variance * n_examples) ** 2 / sum(term**2 / d for term, d in terms)
    quantile = float(stats.t.ppf(0.5 + confidence / 2, df))
    p = float(2 * stats.t.sf(abs(estimate) / se, df))
    ci = {"ci_low": estimate - quantile * se, "ci_high": estimate + quantile * se}
    return {**row, "estimate": estimate, **ci, "p_value": p, "se": se, "df": df, **components} | {
        "converged": True,
        "reason": None,
    }


def _mixed_frame(scores, model, seed, example, pairs) -> tuple[pd.DataFrame, list]:
    """:func:`mixed_model_differences`' observations as a frame (``score``, ``model`` as an index into the
    sorted model names, ``example``, ``run`` = model/seed) and the sorted model names; its
    input checks (its Raises)."""
    y, m, s, e = (np.asarray(x) for x in (scores, model, seed, example))
    if not (y.ndim == m.ndim == s.ndim == e.ndim == 1 and len(y) == len(m) == len(s) == len(e)):
        raise ValueError(
            f"scores, model, seed and example must be 1-D of one length, got {[x.shape for x in (y, m, s, e)]}"
        )
    y = y.astype(np.float64)
    if not np.isfinite(y).all():
        raise ValueError("mixed-model differences need a finite score for every observation (drop the missing ones)")
    levels = sorted(set(m.tolist()))
    if missing := sorted({g for pair in pairs for g in pair} - set(levels)):
        raise ValueError(f"no observations of model(s) {missing} named in pairs")
    frame = pd.DataFrame({"score": y, "model": [levels.index(g) for g in m], "example": e})
    frame["run"] = frame["model"].astype(str) + "/" + pd.Series(s).astype(str)
    if (twice := frame.duplicated(["run", "example"])).any():
        first = frame[twice].iloc[0]
        name, run_seed = levels[int(first["model"])], first["run"].split("/", 1)[1]
        raise ValueError(
            f"example {np.asarray(first['example']).tolist()!r} is scored twice in run {name}, seed {run_seed} "
            "(one score per model, seed and example)"
        )
    return frame, levels


def _balanced_reml(y: np.ndarray, run_model: np.ndarray) -> dict:
    """REML of ``y[r, e] = mu_m(r) + c_e + (mc)_m(r)e + b_r + eps_re`` for runs ``r`` (seeds nested in models)
    that all scored the same examples ``e``: ``y`` ``[R, E]``, ``run_model`` ``[R]`` (the model index of each
    run). The model x example term ``(mc)`` is estimated per pair of models, in :func:`_contrast`.

    Written here, not fitted with statsmodels' ``MixedLM``, which near a seed variance of 0 fails or stops at a
    wrong optimum (module docstring, *Why not statsmodels*); the tests hold it to ``MixedLM`` where that
    converges well and to a numerical maximisation of the REML likelihood on the boundary.

    The design is balanced in the examples, so the REML likelihood factors into independent strata (Searle,
    Casella & McCulloch 1992, *Variance Components*, Sec. 4.7 and 6.7): examples (``E - 1`` df, expected mean
    square ``s2_r + R s2_e``, plus a share of the model x example variance), seeds within models (``R - M`` df,
    ``s2_r + E s2_s``; the model x example term cancels within a model), models x examples (``(M - 1)(E - 1)``
    df; left to the contrasts) and seeds x examples within models (``(R - M)(E - 1)`` df, ``s2_r``; until 6
    December 2026 the residual was all runs x examples, ``(R - 1)(E - 1)`` df, the model x example term
    included). Without the constraints the estimates are the ANOVA ones; a variance that
    would be negative is 0 and its stratum is pooled with the residual one (the ordered-means solution for a
    simple tree order: the lowest mean squares join the residual while they are below the pooled value). Each
    model's mean is the average of its runs' means (every run mean has the variance ``s2_s + s2_r / E``; the
    example effects are common to all runs and cancel in a contrast).

    Returns:
        ``means`` ``[M]`` (the model means), ``var_run_mean`` (``s2_s + s2_r / E``, the variance of one run's
        mean about its model's), ``var_example``, ``var_seed``, ``var_residual`` (in ``y``'s unit squared),
        ``df_residual`` (of the residual stratum, pooled ones included), ``ms_seed`` and ``df_seed`` (the seed
        stratum's mean square and degrees of freedom).
    """
    n_runs, n_examples = y.shape
    n_models = int(run_model.max()) + 1
    run_means, example_means, grand = y.mean(axis=1), y.mean(axis=0), y.mean()
    runs_of = np.bincount(run_model, minlength=n_models)
    means = np.bincount(run_model, weights=run_means, minlength=n_models) / runs_of
    # each model's mean per example ([M, E]): the residual is the seed x example variation within a model, so a
    # model x example effect (cancelled within a model) stays out of it
    cell = np.stack([y[run_model == m].mean(axis=0) for m in range(n_models)])
    residual = y - run_means[:, None] - cell[run_model] + means[run_model][:, None]
    strata = {
        "residual": (float((residual**2).sum()), (n_runs - n_models) * (n_examples - 1)),
        "seed": (float(n_examples * ((run_means - means[run_model]) ** 2).sum()), n_runs - n_models),
        "example": (float(n_runs * ((example_means - grand) ** 2).sum()), n_examples - 1),
    }
    pooled = {"residual"}
    for name in sorted(("seed", "example"), key=lambda k: strata[k][0] / strata[k][1]):
        ss, df = (sum(strata[k][i] for k in pooled) for i in (0, 1))
        if strata[name][0] / strata[name][1] < ss / df:
            pooled.add(name)
    ss, df = (sum(strata[k][i] for k in pooled) for i in (0, 1))
    s2_r = ss / df
    extra = {k: 0.0 if k in pooled else strata[k][0] / strata[k][1] - s2_r for k in ("seed", "example")}
    s2_s, s2_e = extra["seed"] / n_examples, extra["example"] / n_runs
    return {
        "means": means,
        "var_run_mean": s2_s + s2_r / n_examples,
        "var_example": s2_e,
        "var_seed": s2_s,
        "var_residual": s2_r,
        "df_residual": df,
        "ms_seed": strata["seed"][0] / strata["seed"][1],
        "df_seed": strata["seed"][1],
    }
