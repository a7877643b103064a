"""Aggregating a loaded sweep: every group's measures over seeds (:class:`Report` tables) and the
comparisons of groups that differ only in the model or a swept setting."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pandas as pd

from itermask.reporting import headline
from itermask.reporting.attack_link import faithfulness_vs_attack
from itermask.reporting.bounds import measure_bounds
from itermask.reporting.model import GROUP, MEASURE, Report, measure_order, result_measures
from itermask.reporting.statistics import compare_samples, seed_interval
from itermask.reporting.sweep import Run, group_runs, load_sweep, run_contexts, swept_subtrees
from itermask.storage.cache import config_hash

__all__ = ["Report", "build_report", "model_pairs", "GROUP", "MEASURE"]


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
    if interval not in ("t", "bootstrap"):
        raise ValueError(f"interval must be 't' or 'bootstrap', got {interval!r}")
    if test not in ("welch", "permutation"):
        raise ValueError(f"test must be 'welch' or 'permutation', got {test!r}")
    settings = {"confidence": confidence, "interval": interval, "test": test, "n_resamples": n_resamples, "seed": seed}
    sweep = load_sweep(root)
    groups = group_runs(sweep.runs)
    values = {label: _group_values(label, members) for label, members in groups.items()}
    summary, per_seed = _summaries(groups, values, settings)
    report = Report(sweep, groups, summary, per_seed, _comparisons(groups, values, settings), settings)
    headline.add_seed_statistics(report)
    report.notes += _undefined_notes(groups, values)
    report.attack_links = faithfulness_vs_attack(summary)
    return report


def _group_values(label: tuple, members: list[Run]) -> dict[tuple, list[float]]:
    """``{measure: [value per run]}`` of one group, measures in report order."""
    per_run = [result_measures(run.result) for run in members]
    keys = sorted(set().union(*per_run), key=lambda k: measure_order(label, k))
    return {k: [m.get(k, math.nan) for m in per_run] for k in keys}


def _undefined_notes(groups: dict, values: dict) -> list[str]:
    """A note per group and set of seeds without a value (NaN) of measures that other seeds of the group have:
    those measures' mean, interval and ``n`` are over the seeds with a value only (a measure undefined in every
    seed, e.g. a first-flip fraction where nothing flips, has ``n`` 0 and needs no note)."""
    notes = []
    for label, by_measure in values.items():
        partial: dict[tuple[int, ...], list[str]] = {}
        for key, per_run in by_measure.items():
            missing = tuple(run.seed for run, v in zip(groups[label], per_run) if math.isnan(v))
            if missing and len(missing) < len(per_run):
                partial.setdefault(missing, []).append("/".join(part for part in key if part))
        for seeds, measures in partial.items():
            more = f" (+{len(measures) - 4} more)" if len(measures) > 4 else ""
            notes.append(
                f"{' / '.join(label)}: seed(s) {', '.join(map(str, seeds))} have no value (NaN) of "
                f"{', '.join(measures[:4])}{more}: their mean, interval and n are over the other seeds only"
            )
    return notes


def _summaries(groups: dict, values: dict, settings: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``summary`` and ``per_seed`` tables."""
    s = settings
    summary_rows, seed_rows = [], []
    for label, members in groups.items():
        group = dict(zip(GROUP, label))
        for key, per_run in values[label].items():
            bounds = measure_bounds(*key)  # the measure's declared range: the interval stays inside it
            agg = seed_interval(per_run, s["confidence"], s["interval"], s["n_resamples"], s["seed"], bounds)
            measure = dict(zip(MEASURE, key))
            summary_rows.append({**group, **measure, **agg})
            for run, value in zip(members, per_run):
                seed_rows.append({**group, "seed": run.seed, "job": run.job, **measure, "value": value})
    summary = pd.DataFrame(summary_rows, columns=[*GROUP, *MEASURE, "n", "mean", "std", "ci_low", "ci_high"])
    per_seed = pd.DataFrame(seed_rows, columns=[*GROUP, "seed", "job", *MEASURE, "value"])
    return summary, per_seed


#: the columns of the ``comparisons`` table
COMPARISON_COLUMNS = [
    *("dataset", "saliency", "masking", "model_a", "model_b", *MEASURE, "n_a", "n_b", "mean_a", "mean_b"),
    *("difference", "ci_low", "ci_high", "statistic", "p_value", "difference_in_seed_sd"),
]


def _comparisons(groups: dict, values: dict, settings: dict) -> pd.DataFrame:
    """Every measure of each pair of groups that differ only in the model or a swept setting: the difference
    of the means, its interval and test (:func:`compare_samples`), and the difference in units of the
    within-group seed standard deviation (pooled: ``sqrt((s_a^2 + s_b^2) / 2)``)."""
    s = settings
    rows = []
    for label_a, label_b in model_pairs(groups):
        pair = dict(zip(("dataset", "saliency", "masking"), label_a[1:]), model_a=label_a[0], model_b=label_b[0])
        for key in (k for k in values[label_a] if k in values[label_b]):
            a, b = values[label_a][key], values[label_b][key]
            # the interval stays inside the range of a difference of two values
            diff = compare_samples(a, b, s["confidence"], s["test"], s["n_resamples"], s["seed"], measure_bounds(*key))
            sds = [seed_interval(values[label][key])["std"] for label in (label_a, label_b)]
            pooled = math.sqrt((sds[0] ** 2 + sds[1] ** 2) / 2) if all(math.isfinite(x) for x in sds) else math.nan
            in_sd = diff["difference"] / pooled if pooled and math.isfinite(pooled) else math.nan
            rows.append({**pair, **dict(zip(MEASURE, key)), **diff, "difference_in_seed_sd": in_sd})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def model_pairs(groups: dict[tuple, list[Run]]) -> list[tuple[tuple, tuple]]:
    """Pairs of groups whose runs differ only in the model, or only in swept settings (see
    :func:`~itermask.reporting.sweep.group_runs`; e.g. standard vs masked fine-tuning of one model), and the
    seed, sorted by label. A pair that differs in both (one model's masked fine-tuning against another model's
    standard one) is left out: its difference cannot be put down to either. The on/off switches of analyses
    (``naopc.enabled``, named in ``analyses``) neither make nor break a pair: they add measures, not change
    the shared ones."""
    labels = sorted(groups)
    keys = {k for members in groups.values() for run in members for k in run.swept}
    swept = tuple(sorted({t for k in keys for t in swept_subtrees(k)}))
    context = {label: config_hash(run_contexts(groups[label], drop=("model", *swept))[0]) for label in labels}
    named = {
        a for members in groups.values() for run in members for a in run.result.get("config", {}).get("analyses") or ()
    }
    trees = [t for t in swept if t.removesuffix(".enabled") not in named]
    setting = {
        label: config_hash(
            {
                k: v
                for k, v in run_contexts(groups[label])[0].items()
                if any(k == t or k.startswith(t + ".") for t in trees)
            }
        )
        for label in labels
    }
    model = {label: str(groups[label][0].result["model"]) for label in labels}
    return [
        (a, b)
        for a, b in itertools.combinations(labels, 2)
        if a[0] != b[0]
        and a[1:] == b[1:]
        and context[a] == context[b]
        and (model[a] != model[b]) != (setting[a] != setting[b])
    ]
