"""Across saliency methods: is a more faithful explanation also a more efficient attack ranking?

For each (model, dataset, masking) of a multirun whose runs carry an ``attack`` section (``attack=...``),
every saliency method that was both evaluated and attacked gives two seed means from the report's summary:
its faithfulness, AOPC comprehensiveness (ERASER bins, the attack's ranking schedule), and its attack
efficiency, the attack's success rate (higher: more efficient) or the mean perturbed fraction of its
successful attacks (lower: more efficient). :func:`faithfulness_vs_attack` gives Spearman's rank correlation
of the two across the methods (:func:`scipy.stats.spearmanr`), with the exact two-sided permutation
p-value over all ``n!`` pairings (:func:`scipy.stats.permutation_test`, ``permutation_type="pairings"``).

With few methods the test is weak: rho takes few values and the smallest two-sided p-value is ``2 / n!``
(``n = 4``: 0.083), so no result with four methods is significant at 5 %.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pandas as pd
from scipy import stats

from itermask.core.metrics import ScoreKey

__all__ = ["faithfulness_vs_attack", "spearman_exact", "EFFICIENCY", "COLUMNS", "caveat"]

#: attack efficiency measures (report score names) and whether higher means more efficient
EFFICIENCY = {"attack success_rate": True, "attack perturbed_fraction": False}
COLUMNS = (
    *("model", "dataset", "masking", "schedule", "faithfulness", "efficiency", "n_methods", "methods"),
    *("faithfulness_means", "efficiency_means", "spearman_rho", "p_value"),
)


def caveat(n_methods: int) -> str:
    """The smallest two-sided p-value of Spearman's rho over ``n_methods`` methods, in words."""
    return (
        f"with {n_methods} methods the smallest possible two-sided p-value is 2/{n_methods}! = "
        f"{2 / math.factorial(n_methods):.3g}: a weak test"
        if n_methods >= 2
        else "fewer than 2 methods"
    )


def _means(summary: pd.DataFrame) -> dict[tuple, dict[tuple[str, str, str], float]]:
    """``{(model, dataset, masking): {(explanation, schedule, score): seed mean}}``; an explanation met in
    several groups (``random`` beside each method) keeps the value of the group where it is the saliency
    method under study, else of the first group."""
    out: dict[tuple, dict] = {}
    row: Any  # a named tuple of the summary's columns
    for row in summary.itertuples():
        key, measure = (row.model, row.dataset, row.masking), (row.explanation, row.schedule, row.score)
        own = row.explanation == row.saliency
        table = out.setdefault(key, {})
        if measure not in table or own:
            table[measure] = row.mean
    return out


def spearman_exact(x: list[float], y: list[float]) -> tuple[float, float]:
    """Spearman's rho and its exact two-sided permutation p-value (every pairing of ``y`` with ``x``)."""
    rho = float(stats.spearmanr(x, y).statistic)  # pyright: ignore[reportAttributeAccessIssue] (scipy's result bunch)
    result = stats.permutation_test(
        (x, y),
        lambda a, b: stats.spearmanr(a, b).statistic,  # pyright: ignore[reportAttributeAccessIssue]
        permutation_type="pairings",
        n_resamples=math.inf,  # pyright: ignore[reportArgumentType] (scipy takes inf: every permutation)
        alternative="two-sided",
    )
    return rho, float(result.pvalue)


def _aopc_comprehensiveness(score: str) -> bool:
    """Whether ``score`` is an AOPC comprehensiveness (over the ERASER bins, on either quantity)."""
    key = ScoreKey.parse(score)
    return key is not None and key.metric == "comprehensiveness" and key.aggregate == "aopc"


def faithfulness_vs_attack(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows of :data:`COLUMNS` (module docstring), per (model, dataset, masking), schedule and efficiency of
    :data:`EFFICIENCY`; empty without attack rows. ``spearman_rho``/``p_value`` are NaN with fewer than 3
    methods or when either side is constant.

    Args:
        summary: the report's summary table (:class:`~itermask.reporting.aggregate.Report`).
    """
    rows = []
    for (model, dataset, masking), means in _means(summary).items():
        for schedule in sorted({schedule for (_, schedule, score) in means if score in EFFICIENCY}):
            faithfulness = sorted(
                {score for (_, s, score) in means if s == schedule and _aopc_comprehensiveness(score)}
            )
            for faith, efficiency in itertools.product(faithfulness[:1], EFFICIENCY):
                measured = [e for (e, s, score) in means if (s, score) == (schedule, efficiency)]
                methods = sorted(
                    e
                    for e in measured
                    if not math.isnan(means[(e, schedule, efficiency)])
                    and not math.isnan(means.get((e, schedule, faith), math.nan))
                )
                x = [means[(m, schedule, faith)] for m in methods]
                y = [means[(m, schedule, efficiency)] for m in methods]
                rho = p = math.nan
                if len(methods) >= 3 and len(set(x)) > 1 and len(set(y)) > 1:
                    rho, p = spearman_exact(x, y)
                rows.append([model, dataset, masking, schedule, faith, efficiency, len(methods), methods, x, y, rho, p])
    return pd.DataFrame(rows, columns=list(COLUMNS))
