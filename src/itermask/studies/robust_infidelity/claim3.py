"""Claim 3's statistics, *does faithfulness track attack efficiency, and does adversarial fine-tuning change
faithfulness?*, per model of claim 1 and over the base model's standard and adversarial fine-tuning runs
(:mod:`itermask.studies.robust_infidelity`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from itermask.reporting.attack_link import spearman_exact
from itermask.reporting.sweep import Run
from itermask.studies.robust_infidelity.comparisons import accuracy_rows, differences
from itermask.studies.robust_infidelity.runs import method_of, select, variant
from itermask.studies.robust_infidelity.settings import ADVERSARIAL, STANDARD
from itermask.studies.robust_infidelity.verdicts import verdict3

if TYPE_CHECKING:
    from itermask.studies.robust_infidelity.claims import Claims

__all__ = ["claim3"]


def _spearman_ci(sub: pd.DataFrame, methods: list[str], n_resamples: int, confidence: float, seed: int = 0):
    """A percentile bootstrap interval of Spearman's rho of the methods' seed means (score vs success
    rate), resampling seeds (every method's values of a seed together: they share its fine-tuned model)."""
    from scipy import stats

    score = sub.pivot_table(index="seed", columns="method", values="score").reindex(columns=methods)
    rate = sub.pivot_table(index="seed", columns="method", values="success_rate").reindex(columns=methods)
    keep = score.notna().all(axis=1) & rate.notna().all(axis=1)
    x, y = score[keep].to_numpy(), rate[keep].to_numpy()
    if len(x) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    rhos = []
    for idx in rng.integers(0, len(x), size=(n_resamples, len(x))):
        a, b = x[idx].mean(axis=0), y[idx].mean(axis=0)
        if np.ptp(a) > 0 and np.ptp(b) > 0:
            rhos.append(float(stats.spearmanr(a, b).statistic))  # pyright: ignore[reportAttributeAccessIssue]
    if not rhos:
        return math.nan, math.nan
    alpha = (1 - confidence) / 2
    low, high = np.quantile(rhos, [alpha, 1 - alpha])
    return float(low), float(high)


def _degenerate(rho: float, low: float, high: float, n_seeds: int, n_methods: int) -> str | None:
    """Why the percentile interval of ``rho`` is not usable, or ``None``: it is when the estimate lies strictly
    inside it (or on it at rho = ±1, where every resample can agree). Over few seeds the bootstrap has few
    distinct resamples (``C(2S - 1, S)``: 10 for 3 seeds, the original one with probability ``S! / S^S``)
    and a rank correlation over few methods few values, so the estimate can sit on the interval's edge."""
    if math.isnan(low) or low < rho < high or (abs(rho) == 1 and low <= rho <= high):
        return None
    resamples = math.comb(2 * n_seeds - 1, n_seeds)
    return (
        f"the bootstrap interval [{low:.3f}, {high:.3f}] has the estimate at its edge ({n_seeds} seeds give "
        f"{resamples} distinct resamples, rho over {n_methods} methods takes few values)"
    )


def _link_why(methods: list[str], x: list[float], y: list[float]) -> str | None:
    """Why Spearman's rho of ``x`` and ``y`` over ``methods`` cannot be computed, or ``None``."""
    if len(methods) < 3:
        return f"{len(methods)} attacked method(s), rho needs 3"
    if len(set(x)) == 1:
        return "every method has the same mean score"
    return "every method has the same mean attack success rate" if len(set(y)) == 1 else None


def _attack_link(claims: Claims, table: pd.DataFrame) -> pd.DataFrame:
    """Per model of claim 1 with attacked standard runs: Spearman's rho across the methods of the mean
    score and the mean attack success rate (NaN and ``why`` with fewer than 3 methods or no spread;
    ``ci_why`` when its interval over seeds is degenerate, :func:`_degenerate`)."""
    out = []
    standard = select(table, (table.variant == STANDARD) & table.success_rate.notna())
    for model in [m for m in claims.conditions.get("models", []) if m in set(standard.model)]:
        sub = select(standard, standard.model == model)
        means = cast(pd.DataFrame, sub.groupby("method")[["score", "success_rate"]].mean()).dropna()
        methods = list(means.index)
        x, y = means.score.tolist(), means.success_rate.tolist()
        rho = p = low = high = math.nan
        why, ci_why = _link_why(methods, x, y), None
        if why is None:
            rho, p = spearman_exact(x, y)
            low, high = _spearman_ci(sub, methods, claims.settings.n_resamples, claims.confidence)
            ci_why = _degenerate(rho, low, high, int(sub.seed.nunique()), len(methods))
        row = {"model": model, "methods": methods, "score_means": x, "success_means": y, "rho": rho}
        out.append({**row, "ci_low": low, "ci_high": high, "p_value": p, "why": why, "ci_why": ci_why})
    return pd.DataFrame(out)


def claim3(claims: Claims, runs: Sequence[Run], table: pd.DataFrame, base: str | None) -> None:
    """Fill in claim 3's tables and verdict (module docstring)."""
    s, conf = claims.settings, claims.confidence
    claims.attack_link = _attack_link(claims, table)
    adv = select(table, (table.model == str(base)) & table.variant.isin([STANDARD, ADVERSARIAL]))
    method = next(
        (method_of(r.result) for r in runs if str(r.result["model"]) == base and variant(r.result) == ADVERSARIAL),
        None,
    )
    if method is not None:
        diffs = differences(adv, [(ADVERSARIAL, STANDARD)], "variant", [method], ["score", "success_rate"], conf)
        acc = accuracy_rows(adv, [(ADVERSARIAL, STANDARD)], "variant", s.accuracy_margin)
        claims.adversarial = pd.concat([diffs.assign(kind="difference"), acc.assign(kind="accuracy")])
    claims.verdicts[3] = verdict3(claims, base, method)
