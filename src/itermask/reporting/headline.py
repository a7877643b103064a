"""The statistics the report leads with (:mod:`itermask.reporting.seeds` from the jobs' per-example tables),
as tables added to a :class:`~itermask.reporting.aggregate.Report`:

- ``seed_sensitivity``: one row per group x (explanation, schedule, per-example score): ``n_seeds``,
  ``n_examples`` (used), ``n_dropped`` (undefined in some seed), the variance components, ``share`` with
  ``ci_low``/``ci_high``, ``friedman_statistic``/``friedman_p``, ``mean_spearman``, ``why``;
- ``headline``: one row per group x schedule x headline score (AOPC comprehensiveness and, where defined,
  sufficiency): ``difference`` (method - random, mean over seeds), its interval, ``p_value`` (paired t-test
  over seeds, :func:`scipy.stats.ttest_1samp` of the per-seed differences), ``n_better`` of ``n_seeds``
  (seeds where the method beats random in the score's faithful direction; ``n_seeds`` counts the seeds with a
  value, a NaN seed left out), the seed share and its interval;
- ``rank_stability``: one row per (model, dataset, masking, schedule, score) with at least 3 saliency
  methods: Kendall's W of the methods' mean scores across seeds and its p-value.
"""

from __future__ import annotations

import math
import warnings
from typing import cast

import numpy as np
import pandas as pd
from scipy import stats

from itermask.core.metrics import AGGREGATES, ScoreKey, metric_info
from itermask.reporting.bounds import measure_bounds
from itermask.reporting.model import GROUP, MEASURE, of_group, of_measure
from itermask.reporting.seeds import MIN_SEEDS, kendalls_w, seed_share
from itermask.reporting.statistics import seed_interval
from itermask.reporting.sweep import Run

__all__ = ["add_seed_statistics", "headline_scores", "HEADLINE_SCORES"]
#: the metrics the headline leads with, most important first (their AOPC on the run's quantity)
HEADLINE_SCORES = ("comprehensiveness", "sufficiency")
#: the columns of ``report.seed_sensitivity``
SEED_COLUMNS = [
    *(*GROUP, *MEASURE, "n_seeds", "n_examples", "n_dropped", "var_seed", "var_example", "var_residual", "share"),
    *("ci_low", "ci_high", "friedman_statistic", "friedman_p", "mean_spearman", "why"),
]
#: the keys of a row of ``report.rank_stability``: Kendall's W over the groups that share them
RANK_KEYS = ("model", "dataset", "masking", "schedule", "score")


def _per_example_scores(members: list[Run]) -> tuple[list[pd.DataFrame] | None, list[str]]:
    """Each run's ``per_example/scores.parquet`` (``None`` and the jobs without one if any is missing)."""
    missing = [run.job for run in members if not run.per_example("scores").is_file()]
    return (None if missing else [pd.read_parquet(run.per_example("scores")) for run in members]), missing


def _seed_rows(label: tuple, frames: list[pd.DataFrame], settings: dict) -> list[dict]:
    """Seed-sensitivity rows of one group: every per-example score (a registered metric, defined for the
    schedule) of every (explanation, schedule) present in all its runs, over the examples every run evaluated."""
    rows = []
    keys = set.intersection(*({tuple(k) for k in f[["saliency", "schedule"]].drop_duplicates().values} for f in frames))
    for explanation, schedule in sorted(keys):
        measure = {**dict(zip(GROUP, label)), "explanation": explanation, "schedule": schedule}
        parts = [f[(f.saliency == explanation) & (f.schedule == schedule)].set_index("example_id") for f in frames]
        examples = sorted(set.intersection(*(set(p.index) for p in parts)))
        scores = [c for c in parts[0].columns if c not in ("saliency", "schedule") and all(c in p for p in parts)]
        for score in scores:
            values = np.stack([p.loc[examples, score].to_numpy(dtype=float) for p in parts])
            if metric_info(score) is None or np.isnan(values).all():
                continue  # a diagnostic column, or a score the schedule does not define (recursive sufficiency)
            result = seed_share(values, settings["confidence"], n_resamples=2000, seed=settings["seed"])
            rows.append({**measure, "score": score, **result})
    return rows


def headline_scores(quantity: str, available) -> list[str]:
    """The headline's score keys among ``available``: the AOPC over ERASER's bins where computed (fraction
    steps), else the AOPC over every step."""
    keys = []
    for metric in HEADLINE_SCORES:
        candidates = (str(ScoreKey.of(metric, quantity, aggregate)) for aggregate in AGGREGATES)  # type: ignore[arg-type]
        key = next((k for k in candidates if k in available), None)
        if key is not None:
            keys.append(key)
    return keys


def _paired(differences: list[float], confidence: float, higher_is_better: bool | None, bounds=None) -> dict:
    """The mean per-seed difference (method - random) with a t-interval (inside ``bounds``, the range of a
    difference, see :func:`seed_interval`), the paired t-test's p-value and the number of seeds where the
    method is better."""
    d = np.array([x for x in differences if x is not None and math.isfinite(x)], dtype=float)
    agg = seed_interval(d, confidence, bounds=bounds)
    p = math.nan
    if len(d) >= 2:
        if np.ptp(d) == 0:
            p = 1.0 if d[0] == 0 else 0.0
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                p = float(stats.ttest_1samp(d, 0.0).pvalue)  # pyright: ignore[reportAttributeAccessIssue] (scipy's result bunch)
    better = int((d > 0).sum() if higher_is_better is not False else (d < 0).sum())
    out = {"difference": agg["mean"], "ci_low": agg["ci_low"], "ci_high": agg["ci_high"], "p_value": p}
    return {**out, "n_better": better}


def _headline_rows(report, label: tuple, sensitivity: pd.DataFrame) -> list[dict]:
    members = report.groups[label]
    method, quantity = label[2], members[0].result.get("quantity", "probability")
    per_seed = of_group(report.per_seed, label)  # this group's runs only (groups may share a method)
    sensitivity = of_group(sensitivity, label)
    rows = []
    for schedule in members[0].result["scores"].get(method, {}):
        mine = per_seed[(per_seed.explanation == method) & (per_seed.schedule == schedule)]
        for score in headline_scores(quantity, set(mine.score)):
            info = metric_info(score, quantity)
            direction = info.higher_is_more_faithful if info is not None else None
            rel = of_measure(per_seed, f"{method} - random", schedule, score)
            bounds = measure_bounds(f"{method} - random", schedule, score, quantity)
            paired = _paired(rel.value.tolist(), report.settings["confidence"], direction, bounds) if len(rel) else {}
            own = cast(pd.DataFrame, mine[mine.score == score]).value
            share = of_measure(sensitivity, method, schedule, score)[["share", "ci_low", "ci_high"]]
            shares = [float(v) for v in share.iloc[0]] if len(share) else [math.nan] * 3
            row = {**dict(zip(GROUP, label)), "explanation": method, "schedule": schedule, "score": score}
            row |= {"unit": info.unit if info else "", "higher_is_more_faithful": direction}
            # n_seeds: the seeds the mean and difference average (a NaN seed is left out, and noted by the report)
            n_seeds = int(np.isfinite(rel.value.to_numpy(dtype=float)).sum()) if len(rel) else int(own.notna().sum())
            row |= {"mean": float(own.mean()) if len(own) else math.nan, "n_seeds": n_seeds}
            row |= {k: paired.get(k, math.nan) for k in ("difference", "ci_low", "ci_high", "p_value")}
            row |= {"n_better": paired.get("n_better")}
            rows.append(row | dict(zip(("seed_share", "share_ci_low", "share_ci_high"), shares)))
    return rows


def _rank_rows(report) -> list[dict]:
    """Kendall's W of the saliency methods' mean per-seed scores, per (model, dataset, masking, schedule,
    score), over the groups that share them (one method per group, plus ``random``)."""
    per_seed = report.per_seed
    scored = per_seed.score.map(lambda score: metric_info(score) is not None)
    methods = per_seed[scored & ~per_seed.explanation.str.contains(" - ") & (per_seed.explanation != "model")]
    rows = []
    for key, frame in methods.groupby(list(RANK_KEYS), sort=True):
        table = frame.drop_duplicates(["explanation", "seed"]).pivot(
            index="seed", columns="explanation", values="value"
        )
        if table.shape[1] < 3:
            continue
        result = kendalls_w(table.to_numpy(dtype=float))
        rows.append({**dict(zip(RANK_KEYS, key)), "methods": ", ".join(table.columns), **result})
    return rows


def add_seed_statistics(report) -> None:
    """Fill ``report.seed_sensitivity``, ``report.headline``, ``report.rank_stability`` and ``report.notes``."""
    rows, notes = [], []
    for label, members in report.groups.items():
        if any(run.result.get("fine_tuned") is False for run in members):
            notes.append(
                f"{' / '.join(label)}: evaluated without fine-tuning (train.enabled=false), so every seed "
                "evaluates the same classifier: the seeds vary only the evaluation's randomness (the "
                "seeded random explanation, random replacement tokens, seeded saliency methods), and "
                "the seed share of variance is that randomness's share, not the fine-tuning seed's"
            )
        frames, missing = _per_example_scores(members)
        if frames is None:
            notes.append(
                f"{' / '.join(label)}: no per-example results in job(s) {', '.join(missing)} (results "
                "written before itermask kept them): the seed share of variance is not computed"
            )
            continue
        rows += _seed_rows(label, frames, report.settings)
    report.seed_sensitivity = pd.DataFrame(rows, columns=SEED_COLUMNS)
    report.headline = pd.DataFrame(
        [r for label in report.groups for r in _headline_rows(report, label, report.seed_sensitivity)]
    )
    report.rank_stability = pd.DataFrame(_rank_rows(report))
    seeds = sorted({len(members) for members in report.groups.values()})
    if seeds and seeds[0] < MIN_SEEDS:
        tuned = any(run.result.get("fine_tuned", True) for members in report.groups.values() for run in members)
        notes.insert(
            0,
            f"only {seeds[0]} seed(s) per group: intervals over seeds are wide and the seed share rests "
            f"on {seeds[0]} {'fine-tunings' if tuned else 'evaluation seeds'}; use at least {MIN_SEEDS} "
            "seeds (e.g. seed=0,1,2,3,4) for firm conclusions",
        )
    report.notes = notes
