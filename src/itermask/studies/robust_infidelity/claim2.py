"""Claim 2's statistics, *are masked inputs out of distribution, and does masked fine-tuning change that?*,
over the base model's standard and masked fine-tuning runs (:mod:`itermask.studies.robust_infidelity`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from itermask.reporting.intervals import UNIT_INTERVAL  # an OOD AUROC: its intervals stay inside [0, 1]
from itermask.reporting.statistics import compare_samples, seed_interval
from itermask.reporting.sweep import Run
from itermask.studies.robust_infidelity.comparisons import accuracy_rows, differences, few_seeds
from itermask.studies.robust_infidelity.runs import method_of, ood_curves, select, variant
from itermask.studies.robust_infidelity.settings import MASKED, STANDARD
from itermask.studies.robust_infidelity.verdicts import verdict2

if TYPE_CHECKING:
    from itermask.studies.robust_infidelity.claims import Claims

__all__ = ["claim2"]


def _ood_steps(curves: dict, conf: float) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """The OOD AUROC per variant and masking step with an interval over seeds, and per variant each seed's
    mean over the masked steps (fraction > 0)."""
    out = []
    grid = next(iter(curves[STANDARD].values()))[0]
    per_seed_mean = {}
    for v in (STANDARD, MASKED):
        matrix = np.array([curves[v][sd][1] for sd in sorted(curves[v])], dtype=float)
        masked_steps = [j for j, f in enumerate(grid) if f > 0]
        per_seed_mean[v] = np.nanmean(matrix[:, masked_steps], axis=1)
        for j, fraction in enumerate(grid):
            agg = seed_interval(matrix[:, j], conf, bounds=UNIT_INTERVAL)
            out.append({"variant": v, "fraction": fraction, **agg})
    return pd.DataFrame(out), per_seed_mean


def claim2(claims: Claims, runs: Sequence[Run], table: pd.DataFrame, base: str | None) -> None:
    """Fill in claim 2's tables and verdict (module docstring)."""
    s, conf = claims.settings, claims.confidence
    masked_runs = [r for r in runs if str(r.result["model"]) == base and variant(r.result) == MASKED]
    method = method_of(masked_runs[0].result) if masked_runs else None
    curves = ood_curves(runs, base, method, s) if base and method else {}
    if not base or STANDARD not in curves or MASKED not in curves:
        claims.verdicts[2] = verdict2(claims, base, None)
        return
    claims.ood_steps, per_seed_mean = _ood_steps(curves, conf)
    sub = select(table, (table.model == base) & table.variant.isin([STANDARD, MASKED]))
    claims.ood_summary = {
        "standard": seed_interval(per_seed_mean[STANDARD], conf, bounds=UNIT_INTERVAL),
        "masked": seed_interval(per_seed_mean[MASKED], conf, bounds=UNIT_INTERVAL),
        "difference": compare_samples(per_seed_mean[STANDARD], per_seed_mean[MASKED], conf, bounds=UNIT_INTERVAL),
        "accuracy": accuracy_rows(sub, [(STANDARD, MASKED)], "variant", s.accuracy_margin),
        "score": differences(sub, [(STANDARD, MASKED)], "variant", [method], ["score"], conf),
        "method": method,
    }
    claims.verdicts[2] = verdict2(claims, base, few_seeds(sub, STANDARD, MASKED))
