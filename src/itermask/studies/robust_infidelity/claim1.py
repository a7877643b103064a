"""Claim 1's statistics, *do faithfulness scores differ between comparable models?*, over the standard
fine-tuning runs of ``claims.models`` (what is computed: :mod:`itermask.studies.robust_infidelity`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from itermask.reporting.sweep import Run
from itermask.studies.robust_infidelity.comparisons import accuracy_rows, mixed_differences, with_holm
from itermask.studies.robust_infidelity.encoders import encoder_tables
from itermask.studies.robust_infidelity.runs import per_example_scores, select, variant
from itermask.studies.robust_infidelity.settings import STANDARD, ClaimSettings
from itermask.studies.robust_infidelity.statistics import COMPONENTS, kendall_w, nested_components_ci
from itermask.studies.robust_infidelity.verdicts import verdict1

if TYPE_CHECKING:
    from itermask.studies.robust_infidelity.claims import Claims

__all__ = ["claim1"]


def _method_components(
    per_example: dict[tuple[str, int], pd.Series], models: list[str], method: str, s: ClaimSettings, conf: float
) -> list[dict]:
    """The variance-component rows of one method, or one row saying why they are not computed."""
    seeds = sorted(set.intersection(*({sd for m2, sd in per_example if m2 == m} for m in models)))
    if len(models) < 2 or len(seeds) < 2:
        why = f"needs 2 models and 2 common seeds with per-example scores, got {len(models)} and {len(seeds)}"
        return [{"method": method, "component": None, "why": why}]
    series = [per_example[(m, sd)] for m in models for sd in seeds]
    common = sorted(set.intersection(*(set(x.dropna().index) for x in series)))
    if len(common) < 2:
        return [{"method": method, "component": None, "why": f"fewer than 2 examples with a {s.score} in every run"}]
    y = np.array([[per_example[(m, sd)].loc[common].to_numpy() for sd in seeds] for m in models])
    result = nested_components_ci(y, conf, s.n_resamples)
    sizes = {"n_models": len(models), "n_seeds": len(seeds), "n_examples": len(common)}
    rows = []
    for name in COMPONENTS:
        share = result[f"{name}_share"]
        shares = {"share": share["estimate"], "share_ci_low": share["ci_low"], "share_ci_high": share["ci_high"]}
        rows.append({"method": method, "component": name, **sizes, **result[name], **shares, "why": None})
    return rows


def _per_example(claims: Claims, runs: Sequence[Run], models: list[str], methods: list[str]) -> dict:
    """``{method: {(model, seed): per-example score}}`` of the standard fine-tuning runs of ``models``."""
    std_runs = [r for r in runs if variant(r.result) == STANDARD and str(r.result["model"]) in models]
    return {method: per_example_scores(std_runs, method, claims.settings) for method in methods}


def _components(claims: Claims, per_example: dict, models: list[str]) -> pd.DataFrame:
    """The nested variance components of every method's per-example score across ``models``."""
    out = []
    for method, scores in per_example.items():
        out += _method_components(scores, models, method, claims.settings, claims.confidence)
    return pd.DataFrame(out)


def claim1(claims: Claims, runs: Sequence[Run], table: pd.DataFrame) -> None:
    """Fill in claim 1's tables and verdict (module docstring)."""
    s, conf = claims.settings, claims.confidence
    standard = select(table, table.variant == STANDARD)
    models = [m for m in (s.models or sorted(set(standard.model))) if m in set(standard.model)]
    methods = ["random", *sorted(set(standard.method) - {"random"})]
    claims.conditions["models"] = models
    pairs = list(itertools.combinations(models, 2))
    sub = select(standard, standard.model.isin(models))
    claims.accuracy = accuracy_rows(sub, pairs, "model", s.accuracy_margin)
    per_example = _per_example(claims, runs, models, methods)
    claims.model_differences = with_holm(mixed_differences(per_example, pairs, conf), claims.accuracy)
    means = sub.groupby(["model", "method"]).score.mean().unstack("method").reindex(index=models, columns=methods)
    claims.concordance = {"methods": methods, "models": models, **kendall_w(means.to_numpy(dtype=float))}
    claims.components = _components(claims, per_example, models)
    claims.encoder_pairs, claims.mlm_accuracy, claims.encoder_notes = encoder_tables(runs, models, s.encoder_texts)
    claims.verdicts[1] = verdict1(claims)
