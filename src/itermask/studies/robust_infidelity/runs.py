"""Reading the claims' runs from the report's sweep: a run's fine-tuning :func:`variant` (from its results
config), one row per run and explanation (:func:`run_table`), per-example scores and OOD AUROC curves."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import pandas as pd

from itermask.reporting.sweep import Run
from itermask.studies.robust_infidelity.settings import ADVERSARIAL, MASKED, OOD_STATISTIC, STANDARD, ClaimSettings

__all__ = ["variant", "method_of", "run_table", "per_example_scores", "ood_curves", "select", "value"]

#: the columns of :func:`run_table`
COLUMNS = ["model", "variant", "seed", "method", "job", "score", "minus_random", "accuracy", "success_rate"]


def select(frame: pd.DataFrame, mask: Any) -> pd.DataFrame:
    """``frame[mask]`` typed as a frame (pandas' stubs cannot tell a boolean mask from a column key)."""
    return cast(pd.DataFrame, frame[mask])


def variant(result: dict) -> str:
    """``standard``, ``masked`` or ``adversarial`` fine-tuning of a result (``masked+adversarial`` for both)."""
    train = (result.get("config") or {}).get("train") or {}
    masked = bool((train.get("masking_augmentation") or {}).get("enabled"))
    adversarial = bool((train.get("adversarial_augmentation") or {}).get("enabled"))
    return "+".join(n for n, on in ((MASKED, masked), (ADVERSARIAL, adversarial)) if on) or STANDARD


def method_of(result: dict) -> str:
    """The saliency method of a result."""
    saliency = result["saliency"]
    return str(saliency.get("name") if isinstance(saliency, dict) else saliency)


def value(x: Any) -> float:
    """``x`` as a float, NaN for ``None``."""
    return math.nan if x is None else float(x)


def _success_rate(result: dict, method: str) -> float:
    entry = ((result.get("attack") or {}).get("methods") or {}).get(method) or {}
    return value((entry.get("summary") or {}).get("success_rate"))


def run_table(runs: Sequence[Run], s: ClaimSettings) -> pd.DataFrame:
    """One row per run and explanation (its method and ``random``): ``model, variant, seed, method, job,
    score, minus_random, accuracy, success_rate``; ``random`` rows repeated across a model's method jobs
    with one seed (the same seeded explanation) are kept once."""
    out = []
    for run in runs:
        r, method = run.result, method_of(run.result)
        model, kind, accuracy = str(r["model"]), variant(r), value(r["accuracy"].get("test"))
        relative = ((r.get("relative_to_random") or {}).get(s.schedule) or {}).get(s.score)
        for explanation in (method, "random"):
            summary = (r["scores"].get(explanation) or {}).get(s.schedule) or {}
            minus_random = value(relative) if explanation == method else math.nan
            rate, score = _success_rate(r, explanation), value(summary.get(s.score))
            out.append([model, kind, run.seed, explanation, run.job, score, minus_random, accuracy, rate])
    frame = pd.DataFrame(out, columns=COLUMNS)
    return frame.drop_duplicates(["model", "variant", "seed", "method"]).reset_index(drop=True)


def per_example_scores(runs: Sequence[Run], method: str, s: ClaimSettings) -> dict[tuple[str, int], pd.Series]:
    """``{(model, seed): per-example score of method}`` from the runs' ``per_example/scores.parquet``."""
    out = {}
    for run in runs:
        if (run.result["model"], run.seed) in out or method not in (method_of(run.result), "random"):
            continue
        path = run.per_example("scores")
        if not path.is_file():
            continue
        frame = pd.read_parquet(path)
        mine = frame[(frame.saliency == method) & (frame.schedule == s.schedule)]
        if s.score in mine:
            out[(str(run.result["model"]), run.seed)] = mine.set_index("example_id")[s.score].astype(float)
    return out


def ood_curves(
    runs: Sequence[Run], base: str, method: str, s: ClaimSettings
) -> dict[str, dict[int, tuple[list, list]]]:
    """``{variant: {seed: (fractions, OOD AUROC per step)}}`` of the base model's runs of ``method`` (the
    masked inputs of its ranking; one run per seed)."""
    out: dict[str, dict[int, tuple[list, list]]] = {}
    for run in runs:
        r = run.result
        if str(r["model"]) != base or method_of(r) != method:
            continue
        stats = ((((r.get("ood") or {}).get("statistics") or {}).get(method_of(r)) or {}).get(s.schedule)) or {}
        values = (stats.get("values") or {}).get(OOD_STATISTIC)
        if values is None:
            continue
        out.setdefault(variant(r), {}).setdefault(run.seed, (list(stats["fraction"]), [value(v) for v in values]))
    return out
