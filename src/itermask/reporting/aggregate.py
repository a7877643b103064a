"""Aggregating a loaded sweep: every group's measures over seeds (:class:`Report` tables) and the
comparisons of groups that differ only in the model or a swept setting."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from itermask.analyses import ANALYSES
from itermask.reporting.attack_link import faithfulness_vs_attack
from itermask.reporting.bounds import measure_bounds
from itermask.reporting.statistics import compare_samples, seed_interval
from itermask.reporting.sweep import Run, Sweep, _contexts, group_runs, load_sweep, swept_subtrees
from itermask.storage.cache import config_hash

GROUP = ("model", "dataset", "saliency", "masking")
MEASURE = ("explanation", "schedule", "score")
ACCURACY = ("test", "validation")

__all__ = ["Report", "build_report", "GROUP", "MEASURE"]


def _measures(result: dict) -> dict[tuple[str, str, str], float]:
    """Scalar measures of one result: accuracies, per-method scores, differences to random."""
    out = {}
    for name in ACCURACY:
        value = result["accuracy"].get(name)
        out[("model", "", f"accuracy_{name}")] = math.nan if value is None else float(value)
    for method, by_schedule in result["scores"].items():
        for schedule, summary in by_schedule.items():
            for key, value in summary.items():
                if key == "n_examples" or isinstance(value, (bool, str, list, dict)):
                    continue
                out[(method, schedule, key)] = math.nan if value is None else float(value)
    main = result["saliency"]["name"] if isinstance(result["saliency"], dict) else str(result["saliency"])
    for schedule, deltas in (result.get("relative_to_random") or {}).items():
        for key, value in deltas.items():
            out[(f"{main} - random", schedule, key)] = math.nan if value is None else float(value)
    out.update(_analysis_measures(result))
    return out


def _analysis_measures(result: dict) -> dict[tuple[str, str, str], float]:
    """The rows each analysis section of ``result`` adds (:meth:`itermask.analyses.Analysis.report_measures`
    of the analysis registered under the section's name)."""
    out = {}
    for name, analysis in ANALYSES.items():
        if name in result:
            out.update(analysis.report_measures(result))
    return out


def _measure_order(label: tuple, key: tuple[str, str, str]):
    explanation, schedule, score = key
    saliency = label[2]
    rank = (
        0 if explanation == "model" else 1 if explanation == saliency else 3 if explanation.endswith(" - random") else 2
    )
    return (rank, explanation, schedule, score)


def _curves(result: dict) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per (explanation, schedule): ``fraction`` and every per-step series of the summary."""
    out = {}
    for method, by_schedule in result["scores"].items():
        for schedule, summary in by_schedule.items():
            if "fraction" in summary:
                out[(method, schedule)] = {k: v for k, v in summary.items() if isinstance(v, list)}
    return out


# ------------------------------------------------------------------------------------------------
# the report


@dataclass
class Report:
    """Aggregated tables of one multirun folder (pandas DataFrames in long format).

    ``summary``: one row per group x measure: ``model, dataset, saliency, masking, explanation, schedule,
    score, n, mean, std, ci_low, ci_high``. ``per_seed``: ``... , seed, job, value``.
    ``comparisons``: ``dataset, saliency, masking, model_a, model_b, explanation, schedule, score, n_a, n_b,
    mean_a, mean_b, difference, ci_low, ci_high, statistic, p_value, difference_in_seed_sd``.
    ``seed_sensitivity``, ``headline``, ``rank_stability``: see :mod:`itermask.reporting.headline`.
    ``attack_links``: across saliency methods, the rank correlation of faithfulness and attack efficiency
    (:func:`~itermask.reporting.attack_link.faithfulness_vs_attack`; empty without attacks).
    ``notes``: warnings the report shows at its top (few seeds, missing per-example files).
    """

    sweep: Sweep
    groups: dict[tuple, list[Run]]
    summary: pd.DataFrame
    per_seed: pd.DataFrame
    comparisons: pd.DataFrame
    settings: dict
    seed_sensitivity: pd.DataFrame = field(default_factory=pd.DataFrame)
    headline: pd.DataFrame = field(default_factory=pd.DataFrame)
    rank_stability: pd.DataFrame = field(default_factory=pd.DataFrame)
    attack_links: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)


def build_report(
    root: str | Path,
    confidence: float = 0.95,
    interval: str = "t",
    test: str = "welch",
    n_resamples: int = 9999,
    seed: int = 0,
) -> Report:
    """Load the multirun folder ``root`` and aggregate it: every measure over seeds, the seed sensitivity
    of every per-example score, the headline, rank stability and comparisons (see the module docstrings of
    :mod:`itermask.reporting.statistics` and :mod:`itermask.reporting.seeds`).

    Raises:
        ReportError: see :func:`load_sweep` and the mixed-configuration check (runs of one model, dataset,
            saliency and masking that differ in another setting).
        ValueError: unknown ``interval`` or ``test``.
    """
    from itermask.reporting import headline

    if interval not in ("t", "bootstrap"):
        raise ValueError(f"interval must be 't' or 'bootstrap', got {interval!r}")
    if test not in ("welch", "permutation"):
        raise ValueError(f"test must be 'welch' or 'permutation', got {test!r}")
    settings = {"confidence": confidence, "interval": interval, "test": test, "n_resamples": n_resamples, "seed": seed}
    sweep = load_sweep(root)
    groups = group_runs(sweep.runs)
    values = {label: _group_values(label, members) for label, members in groups.items()}
    summary, per_seed = _summaries(groups, values, settings)
    report = Report(sweep, groups, summary, per_seed, _comparisons(groups, values, summary, settings), settings)
    headline.add_seed_statistics(report)
    report.attack_links = faithfulness_vs_attack(summary)
    return report


def _group_values(label: tuple, members: list[Run]) -> dict[tuple, list[float]]:
    """``{measure: [value per run]}`` of one group, measures in report order."""
    per_run = [_measures(run.result) for run in members]
    keys = sorted(set().union(*per_run), key=lambda k: _measure_order(label, k))
    return {k: [m.get(k, math.nan) for m in per_run] for k in keys}


def _summaries(groups: dict, values: dict, settings: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``summary`` and ``per_seed`` tables."""
    s = settings
    summary_rows, seed_rows = [], []
    for label, members in groups.items():
        for key, per_run in values[label].items():
            bounds = measure_bounds(*key)  # the measure's declared range: the interval stays inside it
            agg = seed_interval(per_run, s["confidence"], s["interval"], s["n_resamples"], s["seed"], bounds)
            summary_rows.append({**dict(zip(GROUP, label)), **dict(zip(MEASURE, key)), **agg})
            for run, value in zip(members, per_run):
                seed_rows.append(
                    {
                        **dict(zip(GROUP, label)),
                        "seed": run.seed,
                        "job": run.job,
                        **dict(zip(MEASURE, key)),
                        "value": value,
                    }
                )
    summary = pd.DataFrame(summary_rows, columns=[*GROUP, *MEASURE, "n", "mean", "std", "ci_low", "ci_high"])
    per_seed = pd.DataFrame(seed_rows, columns=[*GROUP, "seed", "job", *MEASURE, "value"])
    return summary, per_seed


def _comparisons(groups: dict, values: dict, summary: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """Every measure of each pair of groups that differ only in the model or a swept setting: the difference
    of the means, its interval and test (:func:`compare_samples`), and the difference in units of the
    within-group seed standard deviation (pooled: ``sqrt((s_a^2 + s_b^2) / 2)``)."""
    s = settings
    rows = []
    for label_a, label_b in _model_pairs(groups):
        for key in (k for k in values[label_a] if k in values[label_b]):
            diff = compare_samples(
                values[label_a][key],
                values[label_b][key],
                s["confidence"],
                s["test"],
                s["n_resamples"],
                s["seed"],
                measure_bounds(*key),  # the interval stays inside the range of a difference of two values
            )
            sds = [seed_interval(values[label][key])["std"] for label in (label_a, label_b)]
            pooled = math.sqrt((sds[0] ** 2 + sds[1] ** 2) / 2) if all(math.isfinite(x) for x in sds) else math.nan
            in_sd = diff["difference"] / pooled if pooled and math.isfinite(pooled) else math.nan
            rows.append(
                {
                    "dataset": label_a[1],
                    "saliency": label_a[2],
                    "masking": label_a[3],
                    "model_a": label_a[0],
                    "model_b": label_b[0],
                    **dict(zip(MEASURE, key)),
                    **diff,
                    "difference_in_seed_sd": in_sd,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "dataset",
            "saliency",
            "masking",
            "model_a",
            "model_b",
            *MEASURE,
            "n_a",
            "n_b",
            "mean_a",
            "mean_b",
            "difference",
            "ci_low",
            "ci_high",
            "statistic",
            "p_value",
            "difference_in_seed_sd",
        ],
    )


def _model_pairs(groups: dict[tuple, list[Run]]) -> list[tuple[tuple, tuple]]:
    """Pairs of groups whose runs differ only in the model or in swept settings (see :func:`~itermask.reporting.sweep.group_runs`; e.g.
    standard vs masked fine-tuning) and the seed, sorted by label."""
    labels = sorted(groups)
    context = {}
    swept = tuple(
        sorted(
            {t for members in groups.values() for run in members for k in run.variant_keys for t in swept_subtrees(k)}
        )
    )
    for label in labels:
        ctx = _contexts(groups[label], drop=("model", *swept))
        context[label] = config_hash(ctx[0])
    pairs = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            if a[0] != b[0] and a[1:] == b[1:] and context[a] == context[b]:
                pairs.append((a, b))
    return pairs
