"""Confidence intervals that stay inside the range of the quantity they are about.

A plain Student's t-interval ``mean ± t · s / sqrt(n)`` ignores the range of the values: over a few seeds an
AUROC of 0.99 gets an upper end above 1, an ECE of 0.01 a lower end below 0. The methods here respect a
declared range ``bounds = (lo, hi)`` by construction (never by clipping the interval):

- :func:`bounded_t_interval`: the t-interval for a mean computed on a scale on which the range is the whole
  real line and mapped back: the scaled logit ``log((m - lo) / (hi - m))`` for a range with two finite ends
  (for ``(0, 1)`` the logit; for a symmetric range ``(-w, w)`` of differences it is ``2 atanh(m / w)``, the
  Fisher-z form), ``log(m - lo)`` or ``log(hi - m)`` for a range with one finite end, no transform for an
  unbounded one. The standard error on the new scale is the delta method's ``se · |g'(m)|`` (e.g. Agresti &
  Coull 1998 and Newcombe 1998 for transformed intervals of proportions; Casella & Berger, *Statistical
  Inference*, 2nd ed., Sec. 5.5.4 for the delta method). The back-transform is monotone and maps the real
  line into ``(lo, hi)``, so both ends lie inside the range (up to float rounding onto a bound) whatever
  ``n`` and the spread.
- :func:`wilson_interval`: Wilson's score interval for a binomial proportion (Wilson 1927, JASA 22:209).
- percentile bootstrap (:func:`scipy.stats.bootstrap` with ``method="percentile"``, used by
  :func:`itermask.reporting.statistics.seed_interval`): the quantiles of resampled means lie between the
  smallest and largest value, hence inside any range the values respect.

Plain numpy/scipy: no torch, no project imports. :mod:`itermask.reporting.bounds` says which range each
report measure has (read from where the measure is declared).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = [
    "Bounds",
    "UNIT_INTERVAL",
    "check_bounds",
    "difference_bounds",
    "within_bounds",
    "bounded_t_interval",
    "welch_bounded_interval",
    "wilson_interval",
]

#: ``(lo, hi)``, either end may be infinite; ``None`` where a quantity is unbounded
Bounds = tuple[float, float]
#: probabilities, AUROC, ECE, rates and shares
UNIT_INTERVAL: Bounds = (0.0, 1.0)

#: values this far outside their range (relative to its width, or absolute for half-open ranges) are float
#: noise (float32 cosines and probabilities are off by ~1e-7) and are moved onto the bound before the
#: interval is computed; further out is an error
_TOLERANCE = 1e-6


def check_bounds(bounds: Bounds | None) -> Bounds | None:
    """``bounds`` as a pair of floats (``None`` or ``(-inf, inf)``: ``None``).

    Raises:
        ValueError: if ``lo >= hi`` or an end is NaN.
    """
    if bounds is None:
        return None
    lo, hi = float(bounds[0]), float(bounds[1])
    if math.isnan(lo) or math.isnan(hi) or not lo < hi:
        raise ValueError(f"bounds must be (lo, hi) with lo < hi, got {bounds!r}")
    if math.isinf(lo) and math.isinf(hi):
        return None
    return lo, hi


def difference_bounds(bounds: Bounds | None) -> Bounds | None:
    """The range of a difference ``a - b`` of two quantities in ``bounds``: ``(lo - hi, hi - lo)``
    (``None`` when ``bounds`` is not finite at both ends: the difference is then unbounded)."""
    bounds = check_bounds(bounds)
    if bounds is None or not all(math.isfinite(b) for b in bounds):
        return None
    width = bounds[1] - bounds[0]
    return -width, width


def within_bounds(values, bounds: Bounds | None) -> np.ndarray:
    """``values`` as a float array with float noise at the bounds (within ``1e-6`` of the range's width)
    moved onto them; NaN kept.

    Raises:
        ValueError: if a value lies further outside ``bounds`` (the range is declared wrongly, or the values
            are not the quantity).
    """
    v = np.asarray(values, dtype=float)
    bounds = check_bounds(bounds)
    if bounds is None:
        return v
    lo, hi = bounds
    width = hi - lo if math.isfinite(hi - lo) else 1.0
    tol = _TOLERANCE * width
    finite = v[~np.isnan(v)]
    if finite.size and (finite.min() < lo - tol or finite.max() > hi + tol):
        raise ValueError(f"values in [{finite.min():g}, {finite.max():g}] lie outside their declared range {bounds}")
    return np.where(np.isnan(v), v, np.clip(v, lo, hi))


def _transform(bounds: Bounds | None):
    """``(g, g_prime, g_inverse)`` of the scale on which ``bounds`` is the whole real line."""
    if bounds is None:
        return (lambda m: m), (lambda m: 1.0), (lambda z: z)
    lo, hi = bounds
    if math.isfinite(lo) and math.isfinite(hi):
        width = hi - lo
        return (
            lambda m: math.log((m - lo) / (hi - m)),
            lambda m: width / ((m - lo) * (hi - m)),
            lambda z: lo + width * float(stats.logistic.cdf(z)),  # expit, exact at large |z|
        )
    if math.isfinite(lo):
        return (lambda m: math.log(m - lo)), (lambda m: 1.0 / (m - lo)), (lambda z: lo + math.exp(z))
    return (lambda m: math.log(hi - m)), (lambda m: 1.0 / (hi - m)), (lambda z: hi - math.exp(z))


def bounded_t_interval(
    mean: float, std: float, n: int, confidence: float = 0.95, bounds: Bounds | None = None
) -> tuple[float, float]:
    """A t-interval for a mean whose values lie in ``bounds``, computed on the transformed scale of the
    module docstring (delta method) and mapped back: ``g⁻¹(g(m) ± t_{(1+c)/2, n-1} · |g'(m)| · s / sqrt(n))``.

    Args:
        mean: the sample mean ``m``, inside ``bounds``.
        std: the sample standard deviation ``s`` (ddof=1), ``>= 0``.
        n: the number of values; fewer than 2 gives ``(nan, nan)``.
        confidence: coverage, in (0, 1).
        bounds: ``(lo, hi)`` of the values (either end may be infinite), or ``None``: the plain t-interval.

    Returns:
        ``(low, high)`` with ``lo <= low <= mean <= high <= hi``: ``(mean, mean)`` when ``std`` is 0 or the
        mean sits on a bound (then every value does), ``(nan, nan)`` for ``n < 2`` or a NaN mean/std.

    Raises:
        ValueError: for ``confidence`` outside (0, 1), invalid ``bounds``, or a mean outside them.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    bounds = check_bounds(bounds)
    if n < 2 or math.isnan(mean) or math.isnan(std):
        return math.nan, math.nan
    mean = float(within_bounds([mean], bounds)[0])
    if std == 0 or (bounds is not None and mean in bounds):
        return mean, mean
    g, g_prime, g_inverse = _transform(bounds)
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * abs(g_prime(mean)) * std / math.sqrt(n)
    ends = g_inverse(g(mean) - half), g_inverse(g(mean) + half)
    return min(ends), max(ends)  # g decreases for a range bounded above only


def welch_se_df(x, y) -> tuple[float, float]:
    """The standard error of ``mean(x) - mean(y)`` of two independent samples, ``sqrt(s_x²/n_x + s_y²/n_y)``,
    and its Welch–Satterthwaite degrees of freedom (Welch 1947); ``(0, nan)`` when neither sample varies.

    Args:
        x, y: 1-D samples, at least 2 values each, NaN-free."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    if va + vb == 0:
        return 0.0, math.nan
    return math.sqrt(va + vb), float((va + vb) ** 2 / (va**2 / (len(x) - 1) + vb**2 / (len(y) - 1)))


def welch_bounded_interval(x, y, confidence: float = 0.95, bounds: Bounds | None = None) -> tuple[float, float]:
    """A Welch interval for ``mean(x) - mean(y)`` of two independent samples whose values lie in ``bounds``:
    the difference lies in :func:`difference_bounds` ``(lo - hi, hi - lo)``; the interval is computed on the
    scaled-logit scale of that range (delta method; Welch–Satterthwaite degrees of freedom) and mapped back,
    so it stays inside it. Unbounded (``bounds`` ``None`` or half-open): the plain Welch interval.

    Args:
        x, y: 1-D samples, at least 2 values each, NaN-free.

    Returns:
        ``(low, high)``; ``(d, d)`` when neither sample varies.

    Raises:
        ValueError: for fewer than 2 values in a sample or values outside ``bounds``.
    """
    x, y = within_bounds(x, bounds), within_bounds(y, bounds)
    if len(x) < 2 or len(y) < 2:
        raise ValueError("a Welch interval needs at least 2 values per sample")
    d = float(x.mean() - y.mean())
    se, df = welch_se_df(x, y)
    if se == 0:
        return d, d
    diff_bounds = difference_bounds(bounds)
    g, g_prime, g_inverse = _transform(diff_bounds)
    if diff_bounds is not None and d in diff_bounds:
        return d, d
    half = float(stats.t.ppf((1 + confidence) / 2, df)) * abs(g_prime(d)) * se
    ends = g_inverse(g(d) - half), g_inverse(g(d) + half)
    return min(ends), max(ends)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion ``successes / n`` (Wilson 1927), by scipy's
    ``binomtest(k, n).proportion_ci(method="wilson")``: the ``p`` with ``|p̂ - p| <= z · sqrt(p (1 - p) / n)``. It
    lies in ``[0, 1]`` and is not degenerate at 0 or ``n`` (there its lower, or upper, end is exactly 0, or 1).

    Args:
        successes: ``k``, ``0 <= k <= n``.
        n: trials; 0 gives ``(nan, nan)``.
        confidence: coverage, in (0, 1).

    Raises:
        ValueError: for ``k`` outside ``[0, n]``, negative ``n`` or ``confidence`` outside (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return math.nan, math.nan
    interval = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    low = 0.0 if successes == 0 else float(interval.low)  # exactly 0 (1) at k = 0 (k = n), free of float rounding
    high = 1.0 if successes == n else float(interval.high)
    return low, high
