"""Statistics over seeds: a confidence interval for a mean (:func:`seed_interval`: Student's t-interval or a
percentile bootstrap) and the comparison of two groups' means (:func:`compare_samples`: Welch's unequal-variance
t-test or a permutation test, each with an interval for the difference).

With ``bounds`` (the range of the values, see :mod:`itermask.reporting.bounds`) the t and Welch intervals
are computed on the transformed scale of :mod:`itermask.reporting.intervals` and stay inside the range (of
the values, or of a difference of two of them); the percentile bootstrap stays inside it by construction.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from scipy import stats

from itermask.reporting.intervals import Bounds, bounded_t_interval, welch_bounded_interval, welch_se_df, within_bounds

__all__ = ["seed_interval", "compare_samples"]


def seed_interval(
    values: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    method: str = "t",
    n_resamples: int = 9999,
    seed: int = 0,
    bounds: Bounds | None = None,
) -> dict[str, float]:
    """Mean over seeds with a confidence interval.

    Args:
        values: one value per seed; NaN (or ``None``) values are dropped and not counted.
        confidence: coverage of the interval, e.g. 0.95.
        method: ``"t"`` (Student's t-interval ``mean ± t_{(1+c)/2, n-1} · s/sqrt(n)``) or ``"bootstrap"``
            (percentile bootstrap of the mean, :func:`scipy.stats.bootstrap`, ``n_resamples`` resamples drawn
            with ``seed``).
        bounds: ``(lo, hi)`` the values lie in (either end may be infinite; ``None``: unbounded). The
            t-interval is then :func:`~itermask.reporting.intervals.bounded_t_interval` (on the scaled-logit
            or log scale, delta method), inside the bounds; the percentile bootstrap is inside them anyway.

    Returns:
        ``{"n", "mean", "std", "ci_low", "ci_high"}``; ``std`` is the sample standard deviation (ddof=1).
        With one value ``std`` and the interval are NaN; with zero spread the interval is ``[mean, mean]``.

    Raises:
        ValueError: unknown ``method``, ``confidence`` outside (0, 1), or values outside ``bounds``.
    """
    if method not in ("t", "bootstrap"):
        raise ValueError(f"interval method must be 't' or 'bootstrap', got {method!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    v = within_bounds(_clean(values), bounds)
    n = len(v)
    out = {"n": n, "mean": math.nan, "std": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    if n == 0:
        return out
    out["mean"] = float(v.mean())
    if n < 2:
        return out
    std = 0.0 if np.ptp(v) == 0 else float(v.std(ddof=1))  # identical values: exactly 0, not 1e-18
    out["std"] = std
    if std == 0:
        low = high = out["mean"]
    elif method == "t":
        low, high = bounded_t_interval(out["mean"], std, n, confidence, bounds)
    else:
        res = stats.bootstrap(
            (v,),
            np.mean,
            confidence_level=confidence,
            n_resamples=n_resamples,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
        low, high = res.confidence_interval
    out["ci_low"], out["ci_high"] = float(low), float(high)
    return out


def _mean_difference(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def _welch(x: np.ndarray, y: np.ndarray, confidence: float, bounds: Bounds | None) -> dict[str, float]:
    """Welch's t-test of two samples (2+ values each, some spread) and its interval (:func:`compare_samples`)."""
    with warnings.catch_warnings():  # scipy warns of precision loss when a sample is (nearly) constant
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.ttest_ind(x, y, equal_var=False)
    low, high = welch_bounded_interval(x, y, confidence, bounds)
    statistic, p_value = float(res.statistic), float(res.pvalue)  # pyright: ignore[reportAttributeAccessIssue] (scipy's result bunch)
    return {"statistic": statistic, "p_value": p_value, "ci_low": float(low), "ci_high": float(high)}


def _permutation(x: np.ndarray, y: np.ndarray, confidence: float, n_resamples: int, seed: int) -> dict[str, float]:
    """A permutation test of the mean difference with a percentile bootstrap interval (:func:`compare_samples`)."""
    res = stats.permutation_test(
        (x, y),
        _mean_difference,
        permutation_type="independent",
        vectorized=True,
        n_resamples=n_resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    boot = stats.bootstrap(
        (x, y),
        _mean_difference,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    low, high = boot.confidence_interval
    return {
        "statistic": float(res.statistic),
        "p_value": float(res.pvalue),
        "ci_low": float(low),
        "ci_high": float(high),
    }


def compare_samples(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    test: str = "welch",
    n_resamples: int = 9999,
    seed: int = 0,
    bounds: Bounds | None = None,
) -> dict[str, float]:
    """Difference of the means ``mean(a) - mean(b)`` of two independent samples (e.g. one score over the
    seeds of two models), with a confidence interval and a two-sided test of "no difference".

    Args:
        a, b: values per seed; NaN/``None`` dropped.
        test: ``"welch"``: Welch's t-test (:func:`scipy.stats.ttest_ind`, ``equal_var=False``), interval
            ``diff ± t_{(1+c)/2, df} · sqrt(s_a²/n_a + s_b²/n_b)`` with the Welch–Satterthwaite ``df``
            (Welch 1947); ``"permutation"``: permutation test of the mean difference over all (or
            ``n_resamples`` random) relabellings (:func:`scipy.stats.permutation_test`), interval by
            percentile bootstrap of the difference.
        bounds: ``(lo, hi)`` the values of both samples lie in (``None``: unbounded). The Welch interval is
            then :func:`~itermask.reporting.intervals.welch_bounded_interval`, inside ``(lo - hi, hi - lo)``;
            the test itself is unchanged.

    Returns:
        ``{"n_a", "n_b", "mean_a", "mean_b", "difference", "ci_low", "ci_high", "statistic", "p_value",
        "sd_pooled", "se", "df"}`` (``statistic``: Welch's t, or the mean difference for the permutation test;
        ``sd_pooled``: ``sqrt(((n_a - 1) s_a² + (n_b - 1) s_b²) / (n_a + n_b - 2))``; ``se`` and ``df``: the
        difference's Welch standard error and Welch–Satterthwaite degrees of freedom, whichever the test). NaN
        where a sample has fewer than 2 values. If neither sample varies, the interval is the difference itself,
        the statistic NaN and ``p_value`` 1 (equal) or 0 (different).

    Raises:
        ValueError: unknown ``test``, or values outside ``bounds``.
    """
    if test not in ("welch", "permutation"):
        raise ValueError(f"test must be 'welch' or 'permutation', got {test!r}")
    x, y = within_bounds(_clean(a), bounds), within_bounds(_clean(b), bounds)
    mean_a, mean_b = (float(v.mean()) if len(v) else math.nan for v in (x, y))
    out = {"n_a": len(x), "n_b": len(y), "mean_a": mean_a, "mean_b": mean_b}
    out |= dict.fromkeys(("difference", "ci_low", "ci_high", "statistic", "p_value", "sd_pooled", "se", "df"), math.nan)
    if len(x) == 0 or len(y) == 0:
        return out
    out["difference"] = out["mean_a"] - out["mean_b"]
    if len(x) < 2 or len(y) < 2:
        return out
    squares = (len(x) - 1) * x.var(ddof=1) + (len(y) - 1) * y.var(ddof=1)
    out["sd_pooled"] = math.sqrt(squares / (len(x) + len(y) - 2))
    out["se"], out["df"] = welch_se_df(x, y)
    if np.ptp(x) == 0 and np.ptp(y) == 0:  # no spread in either sample: the difference is exact
        out.update(ci_low=out["difference"], ci_high=out["difference"], p_value=1.0 if out["difference"] == 0 else 0.0)
        return out
    if test == "welch":
        out.update(_welch(x, y, confidence, bounds))
    else:
        out.update(_permutation(x, y, confidence, n_resamples, seed))
    return out


def _clean(values: Iterable[Any]) -> np.ndarray:
    v = np.array([math.nan if x is None else float(x) for x in values], dtype=float)
    return v[~np.isnan(v)]
