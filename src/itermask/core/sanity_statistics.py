"""The statistic of the degraded-explainer sanity benchmark (:mod:`itermask.analyses.sanity`): does a
faithfulness measure rank explanations degraded by known amounts in the known order?

For one measure, ``values[e, j]`` is its value on example ``e`` for the explanation degraded by ``levels[j]``
(:class:`itermask.core.degrade.DegradedSaliency`). A measure that rewards faithful explanations must get worse as
the level grows: lower for a measure where higher is more faithful (expected Spearman rho < 0), higher for one
where lower is (rho > 0). Spearman's rank correlation is ``scipy.stats.spearmanr``; the bootstrap over examples
is a plain loop over resampled example indices (``scipy.stats.bootstrap`` resamples observations, not the
examples that group them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

__all__ = ["ALPHA", "RULE", "LevelCorrelation", "example_correlations", "level_correlation"]

#: the one-sided significance level of the rule
ALPHA = 0.05
#: the rule that names a measure that cannot rank a known order
RULE = (
    "a measure ranks the known order when Spearman's rho between the degradation level and its value over all "
    f"(example, level) pairs is significantly in its expected direction (one-sided p < {ALPHA}); otherwise it "
    "cannot rank a known order"
)
#: why an example has no per-example rho
CONSTANT = "the measure has the same value at every level"
MISSING = "the measure is undefined (NaN) at some level"


@dataclass(frozen=True)
class LevelCorrelation:
    """One measure's rank correlation with the degradation level.

    Attributes:
        rho, p_value: Spearman's rho over all (example, level) pairs with a value, and its two-sided p-value
            (NaN when undefined: fewer than three pairs, or a constant measure).
        p_one_sided: the one-sided p-value in the expected direction.
        ci_low, ci_high: percentile bootstrap interval (95 %) of ``rho`` over examples resampled with replacement.
        expected_sign: ``-1`` (higher is more faithful: degrading lowers it) or ``+1`` (lower is more faithful).
        ranks_known_order: whether ``p_one_sided < ALPHA`` (:data:`RULE`).
        mean_example_rho: the mean of the per-example rhos that are defined (NaN when none is).
        n_examples: examples; ``n_constant`` / ``n_missing``: those without a per-example rho (:data:`CONSTANT`,
            :data:`MISSING`).
        reason: why the measure cannot rank a known order (``None`` when it can).
    """

    rho: float
    p_value: float
    p_one_sided: float
    ci_low: float
    ci_high: float
    expected_sign: int
    ranks_known_order: bool
    mean_example_rho: float
    n_examples: int
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


def example_correlations(values: np.ndarray, levels: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per example, Spearman's rho between ``levels`` (``[K]``) and ``values`` (``[E, K]``): ``([E] rho,
    [E] reason)``, rho NaN with the reason :data:`CONSTANT` or :data:`MISSING` where it is undefined (reason
    ``""`` elsewhere).

    Raises:
        ValueError: for mismatched shapes or repeated levels."""
    values, grid = np.asarray(values, dtype=np.float64), np.asarray(levels, dtype=np.float64)
    _check(values, grid)
    rho, reason = np.full(len(values), np.nan), np.full(len(values), "", dtype=object)
    for e, row in enumerate(values):
        if not np.isfinite(row).all():
            reason[e] = MISSING
        elif np.ptp(row) == 0:
            reason[e] = CONSTANT
        else:
            rho[e] = float(stats.spearmanr(grid, row).statistic)  # pyright: ignore[reportAttributeAccessIssue]
    return rho, reason


def _pooled_rho(values: np.ndarray, grid: np.ndarray, alternative: str = "two-sided") -> tuple[float, float]:
    """Spearman's rho and p-value over the finite (example, level) pairs; NaN when undefined."""
    x, y = np.broadcast_to(grid, values.shape).ravel(), values.ravel()
    keep = np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(y) < 3 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    result = stats.spearmanr(x, y, alternative=alternative)
    return float(result.statistic), float(result.pvalue)  # pyright: ignore[reportAttributeAccessIssue]


def _bootstrap(values: np.ndarray, grid: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """The finite pooled rhos of ``n_boot`` resamples of the examples (rows of ``values``) with replacement.
    Without NaN values all resamples at once: Spearman's rho is Pearson's r of the average ranks
    (``scipy.stats.rankdata`` along each resample); with NaN values (dropped per resample) one at a time."""
    if n_boot == 0:
        return np.empty(0)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), (n_boot, len(values)))
    if not np.isfinite(values).all():
        draws = np.asarray([_pooled_rho(values[p], grid)[0] for p in picks])
        return draws[np.isfinite(draws)]
    y = stats.rankdata(values[picks].reshape(n_boot, -1), axis=1)
    x = stats.rankdata(np.broadcast_to(grid, (n_boot, len(values), len(grid))).reshape(n_boot, -1), axis=1)
    x, y = x - x.mean(axis=1, keepdims=True), y - y.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant resample: 0/0, left out below
        draws = (x * y).sum(axis=1) / np.sqrt((x * x).sum(axis=1) * (y * y).sum(axis=1))
    return draws[np.isfinite(draws)]


def level_correlation(
    values: np.ndarray,
    levels: Sequence[float] | np.ndarray,
    higher_is_more_faithful: bool,
    n_boot: int = 1000,
    seed: int = 0,
) -> LevelCorrelation:
    """The :class:`LevelCorrelation` of one measure's ``[E, K]`` ``values`` at the ``[K]`` degradation
    ``levels``; ``n_boot`` bootstrap resamples of the examples drawn from ``numpy.random.default_rng(seed)``
    (0: no interval).

    Raises:
        ValueError: for mismatched shapes, repeated levels or a negative ``n_boot``."""
    values, grid = np.asarray(values, dtype=np.float64), np.asarray(levels, dtype=np.float64)
    _check(values, grid)
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    sign = -1 if higher_is_more_faithful else 1
    rho, p_value = _pooled_rho(values, grid)
    p_one = _pooled_rho(values, grid, "less" if sign < 0 else "greater")[1]
    finite = _bootstrap(values, grid, n_boot if len(values) > 1 else 0, seed)
    low, high = np.percentile(finite, [2.5, 97.5]) if len(finite) else (np.nan, np.nan)
    per_example, reasons = example_correlations(values, grid)
    ranks = bool(np.isfinite(p_one) and p_one < ALPHA)
    if ranks:
        reason = None
    elif not np.isfinite(rho):
        reason = "no correlation can be computed: " + ("constant over every level" if len(values) else "no example")
    else:
        reason = f"rho {rho:+.3f} is not significantly {'below' if sign < 0 else 'above'} 0 (one-sided p {p_one:.3g})"
    defined = per_example[np.isfinite(per_example)]
    return LevelCorrelation(
        rho=rho,
        p_value=p_value,
        p_one_sided=p_one,
        ci_low=float(low),
        ci_high=float(high),
        expected_sign=sign,
        ranks_known_order=ranks,
        mean_example_rho=float(defined.mean()) if len(defined) else float("nan"),
        n_examples=len(values),
        n_constant=int((reasons == CONSTANT).sum()),
        n_missing=int((reasons == MISSING).sum()),
        reason=reason,
    )
