"""The statistic of the degraded-explainer sanity benchmark (:mod:`itermask.analyses.sanity`): does a
faithfulness measure rank explanations degraded by known amounts in the known order?

For one measure, ``values[e, j]`` is its value on example ``e`` for the explanation degraded by ``levels[j]``
(:class:`itermask.core.degrade.DegradedSaliency`). A measure that rewards faithful explanations must get worse as
the level grows: lower for a measure where higher is more faithful (expected Spearman rho < 0), higher for one
where lower is (rho > 0). The statistic is Spearman's rho over all (example, level) pairs with a value (the
Spearman correlation "overall" of issue 33). The examples are the independent units, the levels within one
example are not, so the verdict and the interval are one thing: ``scipy.stats.bootstrap`` over the example
indices (BCa, Efron & Tibshirani 1993, ch. 14; percentile where BCa is undefined) and the rule :data:`RULE`.
Values equal within ``TOLERANCE * max(1, max |value|)`` count as equal (float noise such as ``1e-17`` or ``-0.0``
does not make a measure vary).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

__all__ = ["CONFIDENCE", "RULE", "TOLERANCE", "LevelCorrelation", "example_correlations", "level_correlation"]

#: the confidence of the two-sided bootstrap interval
CONFIDENCE = 0.95
#: values whose spread is at most this times ``max(1, max |value|)`` are constant
TOLERANCE = 1e-12
#: the rule that names a measure that cannot rank a known order
RULE = (
    "a measure ranks the known order when the two-sided 95 % bootstrap interval (BCa; examples resampled, the "
    "levels of an example kept together) of Spearman's rho between the degradation level and its value over all "
    "(example, level) pairs lies entirely on the expected side of 0 (a one-sided test at 2.5 %); otherwise it "
    "cannot rank a known order"
)
#: why an example has no per-example rho
CONSTANT = "the measure has the same value at every level"
MISSING = "the measure is undefined (NaN) at some level"


@dataclass(frozen=True)
class LevelCorrelation:
    """One measure's rank correlation with the degradation level.

    Attributes:
        rho: Spearman's rho over all (example, level) pairs with a value (NaN when undefined, see ``reason``).
        ci_low, ci_high: two-sided 95 % bootstrap interval of ``rho``, ``n_boot`` resamples of the examples with
            replacement (``scipy.stats.bootstrap``); NaN without a bootstrap.
        interval_method: ``"BCa"``, or ``"percentile"`` where BCa is undefined (a resample or jackknife
            sample whose rho is undefined); ``None`` without a bootstrap.
        p_boot: one-sided bootstrap p: ``(1 + resamples whose rho is 0 or on the wrong side) / (1 + resamples)``
            (the percentile bootstrap's; the verdict reads the interval).
        expected_sign: ``-1`` (higher is more faithful: degrading lowers it) or ``+1`` (lower is more faithful).
        ranks_known_order: whether ``rho`` and ``[ci_low, ci_high]`` lie entirely on the ``expected_sign`` side of 0
            (:data:`RULE`).
        mean_example_rho: the mean of the per-example rhos that are defined (NaN when none is).
        n_examples: examples; ``n_pairs``: (example, level) pairs with a value; ``n_constant`` / ``n_missing``:
            examples without a per-example rho (:data:`CONSTANT`, :data:`MISSING`).
        reason: why the measure cannot rank a known order (``None`` when it can).
    """

    rho: float
    ci_low: float
    ci_high: float
    interval_method: str | None
    p_boot: float
    expected_sign: int
    ranks_known_order: bool
    mean_example_rho: float
    n_examples: int
    n_pairs: int
    n_constant: int
    n_missing: int
    reason: str | None

    def as_dict(self) -> dict:
        """JSON-ready (NaN as ``None``)."""
        return {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in asdict(self).items()}


def _check(values: np.ndarray, levels: np.ndarray) -> None:
    if values.ndim != 2 or levels.ndim != 1 or values.shape[1] != len(levels):
        raise ValueError(f"values must be [examples, levels] with {len(levels)} levels, got shape {values.shape}")
    if len(set(levels.tolist())) != len(levels):
        raise ValueError(f"the levels must be distinct, got {levels.tolist()}")


def _varies(values: np.ndarray) -> np.ndarray:
    """``[E]``: whether each row's finite values spread more than :data:`TOLERANCE` of the whole array's scale."""
    finite = np.isfinite(values)
    scale = max(1.0, float(np.abs(values[finite]).max())) if finite.any() else 1.0
    high, low = np.where(finite, values, -np.inf).max(axis=1), np.where(finite, values, np.inf).min(axis=1)
    return finite.any(axis=1) & (high - low > TOLERANCE * scale)


def example_correlations(values: np.ndarray, levels: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per example, Spearman's rho between ``levels`` (``[K]``) and ``values`` (``[E, K]``): ``([E] rho,
    [E] reason)``, rho NaN with the reason :data:`CONSTANT` (within :data:`TOLERANCE`) or :data:`MISSING` where
    it is undefined (reason ``""`` elsewhere).

    Raises:
        ValueError: for mismatched shapes or repeated levels."""
    values, grid = np.asarray(values, dtype=np.float64), np.asarray(levels, dtype=np.float64)
    _check(values, grid)
    rho, reason = np.full(len(values), np.nan), np.full(len(values), "", dtype=object)
    varies = _varies(values)
    for e, row in enumerate(values):
        if not np.isfinite(row).all():
            reason[e] = MISSING
        elif not varies[e]:
            reason[e] = CONSTANT
        else:
            rho[e] = float(stats.spearmanr(grid, row).statistic)  # pyright: ignore[reportAttributeAccessIssue]
    return rho, reason


def _pooled_rho(values: np.ndarray, grid: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """Spearman's rho over the finite (example, level) pairs of the examples ``picks`` (``[..., n]`` row
    indices): ``[...]``, NaN where fewer than 3 pairs or a constant side. Pearson's r of the average ranks
    (values: ``scipy.stats.rankdata``, NaN pairs omitted; levels: from their counts), vectorized over the
    leading axes for ``scipy.stats.bootstrap``."""
    finite = np.isfinite(values[picks])  # [..., n, K]
    y = values[picks].reshape(*picks.shape[:-1], -1)
    # the level side has K distinct values: its average rank from the counts of finite pairs per level (no sort)
    order = np.argsort(grid)
    counts = finite.sum(axis=-2)[..., order]
    ranks = np.empty(counts.shape)
    ranks[..., order] = np.cumsum(counts, axis=-1) - counts + (counts + 1) / 2
    rx = np.where(finite, ranks[..., None, :], np.nan).reshape(y.shape)
    ry = stats.rankdata(y, axis=-1, nan_policy="omit")
    # a resample without a finite pair has an empty mean (NaN, its rho NaN below): not a warning to the user
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):  # a constant side: 0/0, NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        rx, ry = rx - np.nanmean(rx, axis=-1, keepdims=True), ry - np.nanmean(ry, axis=-1, keepdims=True)
        r = np.nansum(rx * ry, axis=-1) / np.sqrt(np.nansum(rx * rx, axis=-1) * np.nansum(ry * ry, axis=-1))
    return np.where(np.isfinite(y).sum(axis=-1) >= 3, np.clip(r, -1.0, 1.0), np.nan)


def _interval(values: np.ndarray, grid: np.ndarray, n_boot: int, seed: int) -> tuple[float, float, str, np.ndarray]:
    """``(low, high, method, draws)``: the BCa interval of the pooled rho over ``n_boot`` resamples of the
    examples (``scipy.stats.bootstrap``, the example indices as the data); where BCa is undefined (NaN: a
    resample or jackknife sample without a rho) the percentile interval of the draws with a rho."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):  # NaN BCa: handled below
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        found = stats.bootstrap(
            (np.arange(len(values)),),
            lambda picks, axis=-1: _pooled_rho(values, grid, picks),
            n_resamples=n_boot,
            confidence_level=CONFIDENCE,
            method="BCa",
            vectorized=True,
            batch=max(1, 1_000_000 // values.size),  # about a million pairs per call: bounded memory
            rng=np.random.default_rng(seed),
        )
    draws = np.asarray(found.bootstrap_distribution)
    low, high = float(found.confidence_interval.low), float(found.confidence_interval.high)
    if np.isfinite(low) and np.isfinite(high):
        return low, high, "BCa", draws
    draws = draws[np.isfinite(draws)]
    if not len(draws):
        return float("nan"), float("nan"), "percentile", draws
    low, high = np.percentile(draws, [50 * (1 - CONFIDENCE), 100 - 50 * (1 - CONFIDENCE)])
    return float(low), float(high), "percentile", draws


def _undefined(values: np.ndarray, grid: np.ndarray, varies: np.ndarray, n_boot: int) -> str | None:
    """Why the pooled rho or its interval cannot be computed (``None`` when both can)."""
    finite = np.isfinite(values)
    if not len(values):
        return "no example"
    if not finite.any(axis=0).all():
        return f"undefined (NaN) for every example at level(s) {grid[~finite.any(axis=0)].tolist()}"
    if finite.sum() < 3:
        return "fewer than 3 (example, level) pairs with a value"
    if not varies.any():
        missing = int((~finite.any(axis=1)).sum())
        tail = f" with a value ({missing} of {len(values)} undefined (NaN) at every level)" if missing else ""
        return f"constant over every level in every example{tail}"
    if finite.any(axis=1).sum() < 2:
        return "fewer than 2 examples with a value: no bootstrap over examples"
    return "no bootstrap interval (n_boot=0), no verdict" if n_boot == 0 else None


def level_correlation(
    values: np.ndarray,
    levels: Sequence[float] | np.ndarray,
    higher_is_more_faithful: bool,
    n_boot: int = 1000,
    seed: int = 0,
) -> LevelCorrelation:
    """The :class:`LevelCorrelation` of one measure's ``[E, K]`` ``values`` (NaN: undefined) at the ``[K]``
    degradation ``levels``; ``n_boot`` bootstrap resamples of the examples drawn from
    ``numpy.random.default_rng(seed)`` (0: no interval and no verdict). ``rho`` is NaN with a reason when no
    example varies over the levels (within :data:`TOLERANCE`: a constant measure), a level has no value in any
    example, or fewer than 3 pairs have a value; the interval is NaN with a reason with fewer than 2 examples
    with a value.

    Raises:
        ValueError: for mismatched shapes, repeated levels or a negative ``n_boot``."""
    values, grid = np.asarray(values, dtype=np.float64), np.asarray(levels, dtype=np.float64)
    _check(values, grid)
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    sign = -1 if higher_is_more_faithful else 1
    per_example, reasons = example_correlations(values, grid)
    varies = _varies(values)
    reason = _undefined(values, grid, varies, n_boot)
    rho = low = high = p_boot = float("nan")
    method = None
    if reason is None or reason.startswith(("fewer than 2", "no bootstrap")):
        rho = float(_pooled_rho(values, grid, np.arange(len(values))))
    if reason is None:
        low, high, method, draws = _interval(values, grid, n_boot, seed)
        p_boot = float((1 + (sign * draws <= 0).sum()) / (1 + len(draws)))
    ranks = bool(reason is None and sign * rho > 0 and sign * low > 0 and sign * high > 0)
    if reason is None and not ranks:
        side = "below" if sign < 0 else "above"
        reason = f"the 95 % interval of rho [{low:+.3f}, {high:+.3f}] is not entirely {side} 0 (rho {rho:+.3f})"
        if sign * low > 0 and sign * high > 0:  # a degenerate interval off its own estimate
            reason = f"rho {rho:+.3f} is not {side} 0, although its 95 % interval [{low:+.3f}, {high:+.3f}] is"
    defined = per_example[np.isfinite(per_example)]
    return LevelCorrelation(
        rho=rho,
        ci_low=low,
        ci_high=high,
        interval_method=method,
        p_boot=p_boot,
        expected_sign=sign,
        ranks_known_order=ranks,
        mean_example_rho=float(defined.mean()) if len(defined) else float("nan"),
        n_examples=len(values),
        n_pairs=int(np.isfinite(values).sum()),
        n_constant=int((reasons == CONSTANT).sum()),
        n_missing=int((reasons == MISSING).sum()),
        reason=None if ranks else reason,
    )
