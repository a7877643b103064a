"""Aggregate a multirun's ``results.json`` files over seeds and compare models: tables with confidence
intervals, masking curves with a band over seeds, and a Markdown + HTML report in the sweep folder.

Run it on demand with ``python -m itermask.report <multirun dir> [--bootstrap] [--permutation] [--wandb]``;
the Hydra callback :class:`itermask.callbacks.ReportCallback` runs it after every ``evaluate.py -m``.

What it computes, for every (model, dataset, saliency, masking) group of runs that differ only in the seed:

- per measure (test and validation accuracy; every scalar score of ``result["scores"][method][schedule]``;
  every ``result["relative_to_random"][schedule]`` difference) the number of seeds ``n``, the mean, the
  sample standard deviation (``ddof=1``) and a confidence interval for the mean over seeds: Student's
  t-interval ``mean ± t_{(1+c)/2, n-1} · s / sqrt(n)`` by default, or a percentile bootstrap
  (:func:`scipy.stats.bootstrap`);
- the *seed-spread ratio* ``s(score) / s(test accuracy)``: how much more (> 1) or less (< 1) a faithfulness
  score moves between fine-tuning seeds than the model's test accuracy does (both are fractions in [0, 1]
  for probability scores, so the ratio compares like with like). This quantifies the first claim of
  Crothers, Viktor & Japkowicz, "Robust Infidelity" (arXiv 2308.06795, Sec. 4): faithfulness scores vary
  widely between otherwise comparable classifiers;
- for two groups that differ only in the model (``model=roberta,fairberta``): the difference of the means,
  a confidence interval for it and a test whether it is zero: Welch's unequal-variance t-test
  (:func:`scipy.stats.ttest_ind` with ``equal_var=False``; interval ``diff ± t_{df} · sqrt(s_a²/n_a +
  s_b²/n_b)`` with Welch–Satterthwaite ``df``) or a two-sided permutation test of the mean difference
  (:func:`scipy.stats.permutation_test`, interval by bootstrap).

Nothing here trains or evaluates: it reads result files. Every file is written atomically.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from itermask.cache import config_hash
from itermask.results import read_json, write_bytes_atomic, write_text_atomic
from itermask.store import results_config

log = logging.getLogger(__name__)

__all__ = [
    "ReportError",
    "Run",
    "Sweep",
    "Report",
    "seed_interval",
    "compare_samples",
    "spread_ratio",
    "load_sweep",
    "build_report",
    "write_report",
    "log_report_to_wandb",
    "main",
]

GROUP = ("model", "dataset", "saliency", "masking")
MEASURE = ("explanation", "schedule", "score")
ACCURACY = ("test", "validation")
REFERENCE = ("model", "", "accuracy_test")  # the measure the seed-spread ratio divides by
REQUIRED_KEYS = ("seed", "model", "dataset", "saliency", "masking", "accuracy", "scores", "config")
FILES = "report_files"


class ReportError(ValueError):
    """A multirun folder that cannot be reported: nothing finished, mixed configurations, bad files."""


# ------------------------------------------------------------------------------------------------
# statistics


def seed_interval(
    values: Sequence[float],
    confidence: float = 0.95,
    method: str = "t",
    n_resamples: int = 9999,
    seed: int = 0,
) -> dict[str, float]:
    """Mean over seeds with a confidence interval.

    Args:
        values: one value per seed; NaN (or ``None``) values are dropped and not counted.
        confidence: coverage of the interval, e.g. 0.95.
        method: ``"t"`` (Student's t-interval ``mean ± t_{(1+c)/2, n-1} · s/sqrt(n)``) or ``"bootstrap"``
            (percentile bootstrap of the mean, :func:`scipy.stats.bootstrap`, ``n_resamples`` resamples drawn
            with ``seed``).

    Returns:
        ``{"n", "mean", "std", "ci_low", "ci_high"}``; ``std`` is the sample standard deviation (ddof=1).
        With one value ``std`` and the interval are NaN; with zero spread the interval is ``[mean, mean]``.

    Raises:
        ValueError: unknown ``method`` or ``confidence`` outside (0, 1).
    """
    if method not in ("t", "bootstrap"):
        raise ValueError(f"interval method must be 't' or 'bootstrap', got {method!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    v = _clean(values)
    n = len(v)
    out = {"n": n, "mean": math.nan, "std": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    if n == 0:
        return out
    out["mean"] = float(v.mean())
    if n < 2:
        return out
    std = 0.0 if np.ptp(v) == 0 else float(v.std(ddof=1))  # identical values: exactly 0, not 1e-18
    out["std"] = std
    if std == 0:
        low = high = out["mean"]
    elif method == "t":
        low, high = stats.t.interval(confidence, n - 1, loc=out["mean"], scale=std / math.sqrt(n))
    else:
        res = stats.bootstrap(
            (v,), np.mean, confidence_level=confidence, n_resamples=n_resamples, method="percentile",
            rng=np.random.default_rng(seed),
        )
        low, high = res.confidence_interval
    out["ci_low"], out["ci_high"] = float(low), float(high)
    return out


def _mean_difference(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def compare_samples(
    a: Sequence[float],
    b: Sequence[float],
    confidence: float = 0.95,
    test: str = "welch",
    n_resamples: int = 9999,
    seed: int = 0,
) -> dict[str, float]:
    """Difference of the means ``mean(a) - mean(b)`` of two independent samples (e.g. one score over the
    seeds of two models), with a confidence interval and a two-sided test of "no difference".

    Args:
        a, b: values per seed; NaN/``None`` dropped.
        test: ``"welch"``: Welch's t-test (:func:`scipy.stats.ttest_ind`, ``equal_var=False``), interval
            ``diff ± t_{(1+c)/2, df} · sqrt(s_a²/n_a + s_b²/n_b)`` with the Welch–Satterthwaite ``df``
            (Welch 1947); ``"permutation"``: permutation test of the mean difference over all (or
            ``n_resamples`` random) relabellings (:func:`scipy.stats.permutation_test`), interval by
            percentile bootstrap of the difference.

    Returns:
        ``{"n_a", "n_b", "mean_a", "mean_b", "difference", "ci_low", "ci_high", "statistic", "p_value"}``
        (``statistic``: Welch's t, or the mean difference for the permutation test). NaN where a sample has
        fewer than 2 values. If neither sample varies, the interval is the difference itself, the statistic
        NaN and ``p_value`` 1 (equal) or 0 (different).

    Raises:
        ValueError: unknown ``test``.
    """
    if test not in ("welch", "permutation"):
        raise ValueError(f"test must be 'welch' or 'permutation', got {test!r}")
    x, y = _clean(a), _clean(b)
    out = {
        "n_a": len(x), "n_b": len(y),
        "mean_a": float(x.mean()) if len(x) else math.nan,
        "mean_b": float(y.mean()) if len(y) else math.nan,
        "difference": math.nan, "ci_low": math.nan, "ci_high": math.nan, "statistic": math.nan, "p_value": math.nan,
    }
    if len(x) == 0 or len(y) == 0:
        return out
    out["difference"] = out["mean_a"] - out["mean_b"]
    if len(x) < 2 or len(y) < 2:
        return out
    if np.ptp(x) == 0 and np.ptp(y) == 0:  # no spread in either sample: the difference is exact
        out.update(ci_low=out["difference"], ci_high=out["difference"], p_value=1.0 if out["difference"] == 0 else 0.0)
        return out
    if test == "welch":
        with warnings.catch_warnings():  # scipy warns of precision loss when a sample is (nearly) constant
            warnings.simplefilter("ignore", RuntimeWarning)
            res = stats.ttest_ind(x, y, equal_var=False)
        ci = res.confidence_interval(confidence)
        out.update(statistic=float(res.statistic), p_value=float(res.pvalue), ci_low=float(ci.low), ci_high=float(ci.high))
    else:
        res = stats.permutation_test(
            (x, y), _mean_difference, permutation_type="independent", vectorized=True, n_resamples=n_resamples,
            alternative="two-sided", rng=np.random.default_rng(seed),
        )
        boot = stats.bootstrap(
            (x, y), _mean_difference, confidence_level=confidence, n_resamples=n_resamples, method="percentile",
            vectorized=True, rng=np.random.default_rng(seed),
        )
        out.update(statistic=float(res.statistic), p_value=float(res.pvalue),
                   ci_low=float(boot.confidence_interval.low), ci_high=float(boot.confidence_interval.high))
    return out


def spread_ratio(score_std: float, accuracy_std: float) -> float:
    """``score_std / accuracy_std``: the seed spread of a score relative to the seed spread of test
    accuracy (both sample standard deviations over the same seeds). NaN if either is NaN or accuracy did
    not vary (``accuracy_std == 0``)."""
    if not (math.isfinite(score_std) and math.isfinite(accuracy_std)) or accuracy_std == 0:
        return math.nan
    return score_std / accuracy_std


def _clean(values: Iterable[Any]) -> np.ndarray:
    v = np.array([math.nan if x is None else float(x) for x in values], dtype=float)
    return v[~np.isnan(v)]


# ------------------------------------------------------------------------------------------------
# loading a multirun folder


@dataclass
class Run:
    """One finished job: its ``results.json`` and the Hydra overrides of its job folder (if present)."""

    path: Path
    result: dict
    overrides: list[str] | None = None
    # swept settings (Hydra overrides such as ``train.masking_augmentation.enabled=True``) that set this run
    # apart from others with the same model/dataset/saliency/masking; set by the grouping
    variant: tuple[str, ...] = ()

    @property
    def label(self) -> tuple[str, str, str, str]:
        """(model, dataset, saliency, masking); the model carries the run's variant, e.g.
        ``minilm[train.masking_augmentation.enabled=True]``."""
        saliency = self.result["saliency"]
        name = saliency.get("name") if isinstance(saliency, dict) else saliency
        model = str(self.result["model"]) + (f"[{', '.join(self.variant)}]" if self.variant else "")
        return (model, str(self.result["dataset"]), str(name), str(self.result["masking"]))

    @property
    def variant_keys(self) -> tuple[str, ...]:
        return tuple(_override_key(o) for o in self.variant)

    @property
    def seed(self) -> int:
        return int(self.result["seed"])

    @property
    def job(self) -> str:
        return self.path.parent.name


@dataclass
class Sweep:
    """What a multirun folder holds: finished runs, job folders without a result, and (for Hydra's basic
    sweeper, from ``multirun.yaml``) the jobs that were expected but never started."""

    root: Path
    runs: list[Run]
    unfinished: list[tuple[str, list[str] | None]] = field(default_factory=list)
    not_started: list[list[str]] = field(default_factory=list)
    n_expected: int | None = None
    meta: dict = field(default_factory=dict)

    def missing_lines(self) -> list[str]:
        lines = [f"job folder `{job}` has no results.json (overrides: {_fmt_overrides(o)})" for job, o in self.unfinished]
        lines += [f"job never started (overrides: {_fmt_overrides(o)})" for o in self.not_started]
        return lines


def _fmt_overrides(overrides: list[str] | None) -> str:
    return "unknown" if overrides is None else (" ".join(overrides) or "none")


def _read_overrides(job_dir: Path) -> list[str] | None:
    path = job_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return None
    import yaml

    return [str(x) for x in (yaml.safe_load(path.read_text()) or [])]


def _skip(path: Path, root: Path) -> bool:
    return any(part in ("wandb", FILES, ".hydra") for part in path.relative_to(root).parts[:-1])


def _expected_jobs(root: Path) -> tuple[list[list[str]] | None, dict]:
    """The override lists of every job of a basic-sweeper multirun, from ``<root>/multirun.yaml``
    (``None`` if absent or another sweeper), and a few fields of it (task name, logger) for W&B."""
    path = root / "multirun.yaml"
    if not path.is_file():
        return None, {}
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(path)
    meta = {"task_name": OmegaConf.select(cfg, "task_name", default=None)}
    logger = OmegaConf.select(cfg, "logger", default=None)
    if logger is not None:
        meta["logger"] = {k: OmegaConf.select(logger, k, default=None, throw_on_resolution_failure=False)
                          for k in ("_target_", "project", "group", "mode")}
    sweeper = OmegaConf.select(cfg, "hydra.sweeper._target_", default="") or ""
    if not sweeper.endswith("BasicSweeper"):
        return None, meta
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    task = [str(x) for x in OmegaConf.select(cfg, "hydra.overrides.task", default=[]) or []]
    params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None)
    arguments = [f"{k}={v}" for k, v in (params or {}).items()] + task
    try:
        overrides = OverridesParser.create().parse_overrides(arguments)
        return BasicSweeper.split_arguments(overrides, None)[0], meta
    except Exception as error:  # an override the plain parser cannot expand: report what was found
        log.warning("could not expand the sweep of %s (%s)", path, error)
        return None, meta


def load_sweep(root: str | Path) -> Sweep:
    """Find the finished runs (``results.json``) under ``root`` and what is missing.

    Raises:
        ReportError: ``root`` is not a folder, holds no finished run (the message lists the job folders
            found, their overrides and the jobs expected from ``multirun.yaml``), or a result file is not an
            itermask result.
    """
    root = Path(root)
    if not root.is_dir():
        raise ReportError(f"{root} is not a folder (expected a Hydra multirun folder holding <job>/results.json)")
    runs = []
    for path in sorted(root.rglob("results.json")):
        if _skip(path, root):
            continue
        try:
            result = read_json(path)
        except (OSError, json.JSONDecodeError) as error:
            raise ReportError(f"{path} cannot be read as JSON ({error})") from error
        missing = [k for k in REQUIRED_KEYS if not isinstance(result, dict) or k not in result]
        if missing:
            raise ReportError(f"{path} is not an itermask result file: missing {', '.join(missing)}")
        runs.append(Run(path, result, _read_overrides(path.parent)))
    finished = {run.path.parent for run in runs}
    job_dirs = sorted(
        (p.parent for p in root.rglob(".hydra") if p.is_dir() and p.parent != root and not _skip(p, root)),
        key=lambda p: (len(p.parts), _natural(p.name)),
    )
    unfinished = [(str(d.relative_to(root)), _read_overrides(d)) for d in job_dirs if d not in finished]
    expected, meta = _expected_jobs(root)
    seen = {frozenset(o) for o in (_read_overrides(d) for d in job_dirs) if o is not None}
    not_started = [o for o in expected or [] if frozenset(o) not in seen]
    runs.sort(key=lambda r: (r.label, r.seed, _natural(r.job)))
    sweep = Sweep(root, runs, unfinished, not_started, len(expected) if expected is not None else None, meta)
    if not runs:
        found = f"{len(job_dirs)} job folder(s), none with a results.json"
        if job_dirs:
            found += ": " + "; ".join(f"{j} ({_fmt_overrides(o)})" for j, o in unfinished)
        if expected is not None:
            found += f". multirun.yaml expects {len(expected)} job(s)"
            if not_started:
                found += f"; never started: {'; '.join(_fmt_overrides(o) for o in not_started)}"
        elif not job_dirs:
            found += " (and no multirun.yaml: is this a Hydra multirun folder?)"
        raise ReportError(f"no finished runs under {root}: found {found}")
    return sweep


def _natural(text: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


# ------------------------------------------------------------------------------------------------
# grouping


def _flatten(node: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(node, dict) and node:
        out = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: json.dumps(node, sort_keys=True, default=str)}


def _contexts(runs: list[Run], drop: Sequence[str] = ()) -> list[dict[str, str]]:
    """Each run's results-relevant config (flattened) without the seed, keys derived from the seed (equal to
    it in every run, like ``saliency.seed: ${seed}``) and the subtrees in ``drop``."""
    flats = [_flatten(results_config(run.result["config"])) for run in runs]
    keys = set().union(*flats) if flats else set()
    seedlike = {k for k in keys if all(f.get(k) == json.dumps(r.seed) for f, r in zip(flats, runs))}
    out = []
    for flat in flats:
        out.append({k: v for k, v in flat.items()
                     if k != "seed" and k not in seedlike and not any(k == d or k.startswith(d + ".") for d in drop)})
    return out


def _override_key(override: str) -> str:
    """``a.b`` of the Hydra override ``a.b=v`` (also ``+a.b=v``, ``++a.b=v``, ``~a.b``)."""
    return override.split("=", 1)[0].lstrip("+~")


def _swept_variants(members: list[Run], keys: list[str]) -> list[tuple[str, ...]] | None:
    """Each run's swept overrides (other than the seed) that explain the differing config ``keys``, or
    ``None`` when some differing key was not swept (the runs are mixed by accident)."""
    if any(run.overrides is None for run in members):
        return None
    by_key = [{_override_key(o): o for o in run.overrides if _override_key(o) != "seed"} for run in members]
    swept = sorted(k for k in set().union(*by_key) if len({b.get(k) for b in by_key}) > 1)
    if not swept or any(k not in b for k in swept for b in by_key):  # a sweep sets its keys in every job
        return None
    if not all(any(k == s or k.startswith(s + ".") for s in swept) for k in keys):
        return None
    return [tuple(b[k] for k in swept) for b in by_key]


def _group(runs: list[Run]) -> dict[tuple, list[Run]]:
    """Runs by (model, dataset, saliency, masking). Runs with one such label whose configs differ in
    settings swept by the multirun (e.g. ``train.masking_augmentation.enabled=false,true``) form one group
    per value, the model name carrying the swept overrides (see :attr:`Run.label`).

    Raises:
        ReportError: runs with one label differ in a setting other than the seed that the multirun did not
            sweep (the message names the differing settings and the runs of each variant), or one seed
            appears twice in a group.
    """
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.label, []).append(run)
    split: dict[tuple, list[Run]] = {}
    problems = []
    for label, members in groups.items():
        contexts = _contexts(members)
        variants: dict[str, list[int]] = {}
        for i, ctx in enumerate(contexts):
            variants.setdefault(config_hash(ctx), []).append(i)
        name = "/".join(label)
        keys = sorted(k for k in set().union(*contexts) if len({c.get(k) for c in contexts}) > 1)
        swept = _swept_variants(members, keys) if len(variants) > 1 else None
        if swept is not None:
            for run, variant in zip(members, swept):
                run.variant = variant
                split.setdefault(run.label, []).append(run)
            continue
        split[label] = members
        if len(variants) > 1:
            parts = []
            for idx in variants.values():
                settings = ", ".join(f"{k}={contexts[idx[0]].get(k, '<absent>')}" for k in keys[:8])
                runs_text = ", ".join(f"{members[i].path.parent.name} (seed {members[i].seed})" for i in idx)
                parts.append(f"[{settings}] in {runs_text}")
            more = f" (+{len(keys) - 8} more settings)" if len(keys) > 8 else ""
            problems.append(f"{name}: runs from {len(variants)} different configs are mixed; they differ in "
                            f"{', '.join(keys[:8])}{more}: " + "; ".join(parts))
            continue
    for label, members in split.items():
        seeds: dict[int, list[Run]] = {}
        for run in members:
            seeds.setdefault(run.seed, []).append(run)
        for seed, dupes in seeds.items():
            if len(dupes) > 1:
                problems.append(f"{'/'.join(label)}: seed {seed} appears in {len(dupes)} runs "
                                f"({', '.join(str(d.path) for d in dupes)}): report one multirun folder at a time")
    if problems:
        raise ReportError("cannot aggregate over seeds:\n  " + "\n  ".join(problems))
    return split


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
    out.update(_ood_measures(result))
    return out


# OOD statistics (itermask.embedding_stats, under "ood" in results.json) reported at a few masking fractions
OOD_STATISTICS = ("final/auroc_mahalanobis", "final/auroc_knn_distance", "auroc_masf", "masf_flagged",
                  "auroc_max_softmax", "ece")


def _ood_measures(result: dict) -> dict[tuple[str, str, str], float]:
    """``ood <statistic> @<p>%`` for the statistics in :data:`OOD_STATISTICS` at the fractions of the run's
    ``ood.plots.umap_fractions`` (default 10/50/90 %) that are on its masking grid; missing values are NaN."""
    ood = result.get("ood") or {}
    config = (result.get("config") or {}).get("ood") or {}
    fractions = ((config.get("plots") or {}).get("umap_fractions")) or [0.1, 0.5, 0.9]
    out = {}
    for method, by_schedule in (ood.get("statistics") or {}).items():
        for schedule, stats in by_schedule.items():
            grid = stats.get("fraction") or []
            for name in OOD_STATISTICS:
                values = stats.get("values", {}).get(name)
                if values is None:
                    continue
                for fraction in fractions:
                    step = next((i for i, f in enumerate(grid) if abs(f - fraction) < 1e-9), None)
                    if step is not None:
                        value = values[step]
                        out[(method, schedule, f"ood {name} @{fraction * 100:g}%")] = (
                            math.nan if value is None else float(value))
    return out


def _measure_order(label: tuple, key: tuple[str, str, str]):
    explanation, schedule, score = key
    saliency = label[2]
    rank = 0 if explanation == "model" else 1 if explanation == saliency else 3 if explanation.endswith(" - random") else 2
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
    score, n, mean, std, ci_low, ci_high, spread_ratio``. ``per_seed``: ``... , seed, job, value``.
    ``comparisons``: ``dataset, saliency, masking, model_a, model_b, explanation, schedule, score, n_a, n_b,
    mean_a, mean_b, difference, ci_low, ci_high, statistic, p_value``.
    """

    sweep: Sweep
    groups: dict[tuple, list[Run]]
    summary: pd.DataFrame
    per_seed: pd.DataFrame
    comparisons: pd.DataFrame
    settings: dict


def build_report(
    root: str | Path,
    confidence: float = 0.95,
    interval: str = "t",
    test: str = "welch",
    n_resamples: int = 9999,
    seed: int = 0,
) -> Report:
    """Load the multirun folder ``root`` and aggregate it (see the module docstring for the formulas).

    Raises:
        ReportError: see :func:`load_sweep` and the mixed-configuration check (runs of one model, dataset,
            saliency and masking that differ in another setting).
        ValueError: unknown ``interval`` or ``test``.
    """
    if interval not in ("t", "bootstrap"):
        raise ValueError(f"interval must be 't' or 'bootstrap', got {interval!r}")
    if test not in ("welch", "permutation"):
        raise ValueError(f"test must be 'welch' or 'permutation', got {test!r}")
    sweep = load_sweep(root)
    groups = _group(sweep.runs)
    summary_rows, seed_rows = [], []
    values: dict[tuple, dict[tuple, list[float]]] = {}
    for label, members in groups.items():
        per_run = [_measures(run.result) for run in members]
        keys = sorted(set().union(*per_run), key=lambda k: _measure_order(label, k))
        values[label] = {k: [m.get(k, math.nan) for m in per_run] for k in keys}
        reference = seed_interval(values[label].get(REFERENCE, []), confidence, interval, n_resamples, seed)
        for key in keys:
            agg = seed_interval(values[label][key], confidence, interval, n_resamples, seed)
            ratio = spread_ratio(agg["std"], reference["std"]) if key[0] != "model" else math.nan
            summary_rows.append({**dict(zip(GROUP, label)), **dict(zip(MEASURE, key)), **agg, "spread_ratio": ratio})
            for run, value in zip(members, values[label][key]):
                seed_rows.append({**dict(zip(GROUP, label)), "seed": run.seed, "job": run.job,
                                  **dict(zip(MEASURE, key)), "value": value})
    comparison_rows = []
    for label_a, label_b in _model_pairs(groups):
        shared = [k for k in values[label_a] if k in values[label_b]]
        for key in shared:
            diff = compare_samples(values[label_a][key], values[label_b][key], confidence, test, n_resamples, seed)
            comparison_rows.append({
                "dataset": label_a[1], "saliency": label_a[2], "masking": label_a[3],
                "model_a": label_a[0], "model_b": label_b[0], **dict(zip(MEASURE, key)), **diff,
            })
    summary = pd.DataFrame(summary_rows, columns=[*GROUP, *MEASURE, "n", "mean", "std", "ci_low", "ci_high", "spread_ratio"])
    per_seed = pd.DataFrame(seed_rows, columns=[*GROUP, "seed", "job", *MEASURE, "value"])
    comparisons = pd.DataFrame(comparison_rows, columns=[
        "dataset", "saliency", "masking", "model_a", "model_b", *MEASURE, "n_a", "n_b", "mean_a", "mean_b",
        "difference", "ci_low", "ci_high", "statistic", "p_value"])
    settings = {"confidence": confidence, "interval": interval, "test": test, "n_resamples": n_resamples, "seed": seed}
    return Report(sweep, groups, summary, per_seed, comparisons, settings)


def _model_pairs(groups: dict[tuple, list[Run]]) -> list[tuple[tuple, tuple]]:
    """Pairs of groups whose runs differ only in the model or in swept settings (see :func:`_group`; e.g.
    standard vs masked fine-tuning) and the seed, sorted by label."""
    labels = sorted(groups)
    context = {}
    swept = tuple(sorted({k for members in groups.values() for run in members for k in run.variant_keys}))
    for label in labels:
        ctx = _contexts(groups[label], drop=("model", *swept))
        context[label] = config_hash(ctx[0])
    pairs = []
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            if a[0] != b[0] and a[1:] == b[1:] and context[a] == context[b]:
                pairs.append((a, b))
    return pairs


# ------------------------------------------------------------------------------------------------
# plots


def _curve_band(runs: list[Run], key: tuple[str, str], series: str, confidence: float, interval: str,
                n_resamples: int, seed: int):
    rows = [_curves(r.result).get(key, {}) for r in runs]
    rows = [r for r in rows if series in r and "fraction" in r]
    if not rows:
        return None
    fraction = np.asarray(rows[0].get("x", rows[0]["fraction"]), dtype=float)  # the step grid
    matrix = np.array([[math.nan if x is None else x for x in r[series]] for r in rows], dtype=float)
    aggs = [seed_interval(matrix[:, j], confidence, interval, n_resamples, seed) for j in range(matrix.shape[1])]
    mean = np.array([a["mean"] for a in aggs])
    low = np.array([a["ci_low"] for a in aggs])
    high = np.array([a["ci_high"] for a in aggs])
    return fraction, mean, low, high


def _panels(runs: list[Run]) -> list[str]:
    """The per-step series to plot: the usual ones first, then any other (``x``, ``fraction`` and
    ``mean_k`` describe the grid and are not plotted)."""
    names: list[str] = []
    for run in runs:
        for series in _curves(run.result).values():
            names += [n for n in series if n not in names]
    order = ["target_prob", "target_logit", "comprehensiveness_prob", "comprehensiveness_logit",
             "sufficiency_prob", "sufficiency_logit", "flip_rate", "accuracy"]
    grid = ("x", "fraction", "mean_k")
    return [n for n in order if n in names] + [n for n in names if n not in order and n not in grid]


def _x_label(runs: list[Run]) -> str:
    steps = {s.get("steps", "fraction") for r in runs for by in r.result["scores"].values() for s in by.values()}
    return "tokens masked" if steps == {"count"} else "masking fraction"


def _plot(lines: list[tuple[str, list[Run], tuple[str, str], dict]], title: str, report: Report) -> bytes:
    """A PNG: one panel per curve series, one line per (legend, runs, (explanation, schedule), matplotlib
    style), band = the confidence interval over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = report.settings
    panels = _panels([r for _, runs, _, _ in lines for r in runs])
    x_label = _x_label([r for _, runs, _, _ in lines for r in runs])
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.3 * nrows + 0.6), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, series in zip(axes.flat, panels):
        for legend, runs, key, style in lines:
            band = _curve_band(runs, key, series, s["confidence"], s["interval"], s["n_resamples"], s["seed"])
            if band is None:
                continue
            fraction, mean, low, high = band
            (line,) = ax.plot(fraction, mean, marker="o", markersize=3, label=f"{legend} (n={len(runs)})", **style)
            if np.isfinite(low).any():
                ax.fill_between(fraction, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_xlabel(x_label)
        ax.set_title(series)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{title}\n(mean over seeds; band: {int(round(s['confidence'] * 100))} % "
                 f"{'t' if s['interval'] == 't' else 'bootstrap'} interval)", fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _slug(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "_".join(p for p in parts if p)).strip("-")


# ------------------------------------------------------------------------------------------------
# writing


def _num(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{value:.{digits}f}"


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _ci(row) -> str:
    return f"[{_num(row['ci_low'])}, {_num(row['ci_high'])}]"


def main_table(report: Report, label: tuple) -> str:
    """The Markdown table of one group: each measure's n, mean, std, CI and seed-spread ratio."""
    rows = report.summary[(report.summary[list(GROUP)] == pd.Series(dict(zip(GROUP, label)))).all(axis=1)]
    pct = int(round(report.settings["confidence"] * 100))
    header = ["explanation", "schedule", "score", "n", "mean", "std", f"{pct} % CI", "spread ratio"]
    return _md_table(header, [
        [r.explanation, r.schedule or "-", r.score, _num(r.n), _num(r.mean), _num(r.std), _ci(r._asdict()),
         _num(r.spread_ratio, 2)] for r in rows.itertuples()
    ])


def _seed_table(report: Report, label: tuple) -> str:
    rows = report.per_seed[(report.per_seed[list(GROUP)] == pd.Series(dict(zip(GROUP, label)))).all(axis=1)]
    order = list(dict.fromkeys(zip(*(rows[c] for c in MEASURE))))
    wide = rows.set_index([*MEASURE, "seed"])["value"].unstack("seed").reindex(order)
    seeds = list(wide.columns)
    return _md_table(["explanation", "schedule", "score", *[f"seed {s}" for s in seeds]], [
        [e, s or "-", sc, *[_num(v) for v in values]] for (e, s, sc), values in zip(wide.index, wide.to_numpy())
    ])


def _comparison_table(report: Report, frame: pd.DataFrame) -> str:
    pct = int(round(report.settings["confidence"] * 100))
    name = "Welch t" if report.settings["test"] == "welch" else "mean diff."
    return _md_table(
        ["explanation", "schedule", "score", "n a/b", "mean a", "mean b", "a - b", f"{pct} % CI", name, "p"],
        [[r.explanation, r.schedule or "-", r.score, f"{r.n_a}/{r.n_b}", _num(r.mean_a), _num(r.mean_b),
          _num(r.difference), _ci(r._asdict()), _num(r.statistic, 3), _num(r.p_value, 4)]
         for r in frame.itertuples()])


def render_markdown(report: Report, images: dict[str, str]) -> str:
    """The report as Markdown; ``images`` maps image keys to paths relative to the report."""
    s = report.settings
    sweep = report.sweep
    pct = int(round(s["confidence"] * 100))
    interval = ("Student's t-interval over seeds" if s["interval"] == "t"
                else f"percentile bootstrap over seeds ({s['n_resamples']} resamples)")
    out = [f"# itermask report: `{sweep.root}`", ""]
    expected = f" of {sweep.n_expected} expected" if sweep.n_expected is not None else ""
    out += [f"{len(sweep.runs)} finished run(s){expected} in {len(report.groups)} group(s). "
            f"Mean, sample standard deviation and {pct} % confidence interval ({interval}) of each measure. "
            "*Spread ratio*: standard deviation over seeds of the score divided by that of test accuracy "
            "(> 1: the score varies more between seeds than the model's accuracy does). "
            "`<method> - random`: the score minus that of the seeded random explanation of the same run.", ""]
    missing = sweep.missing_lines()
    if missing:
        out += ["## Missing", "", *[f"- {line}" for line in missing], ""]
    for label, members in report.groups.items():
        title = " / ".join(label)
        out += [f"## {title}", "", f"Seeds: {', '.join(str(r.seed) for r in members)} "
                f"(jobs {', '.join(r.job for r in members)}).", "", main_table(report, label), ""]
        for key, path in images.items():
            if key.startswith(f"curves::{title}::"):
                out += [f"![masking curves {title} {key.rsplit('::', 1)[1]}]({path})", ""]
        out += ["<details><summary>per seed</summary>", "", _seed_table(report, label), "", "</details>", ""]
    if not report.comparisons.empty:
        test = ("Welch's t-test (unequal variances)" if s["test"] == "welch"
                else f"permutation test of the mean difference ({s['n_resamples']} resamples), bootstrap interval")
        out += ["## Model comparisons", "", f"Difference of the means over seeds (a - b), {pct} % confidence "
                f"interval and two-sided p-value of {test}.", ""]
        for (a, b), frame in report.comparisons.groupby(["model_a", "model_b"], sort=False):
            for (dataset, saliency, masking), sub in frame.groupby(["dataset", "saliency", "masking"], sort=False):
                title = f"{a} vs {b}: {dataset} / {saliency} / {masking}"
                out += [f"### {title}", "", _comparison_table(report, sub), ""]
                key = f"compare::{a}::{b}::{dataset}::{saliency}::{masking}"
                if key in images:
                    out += [f"![{title}]({images[key]})", ""]
    return "\n".join(out)


HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; }}
table {{ border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }}
th, td {{ border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }}
th {{ background: #f3f3f3; }} td:nth-child(-n+3) {{ text-align: left; }}
img {{ max-width: 100%; }} code {{ background: #f3f3f3; }}
</style></head><body>
{body}
</body></html>
"""


def render_html(markdown: str, title: str) -> str:
    """HTML from the report's Markdown (markdown-it-py, CommonMark with tables; raw HTML kept)."""
    from html import escape

    from markdown_it import MarkdownIt

    return HTML.format(title=escape(title), body=MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))


def write_report(report: Report, out_dir: str | Path | None = None) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and, under ``report_files/``, the PNG plots and the CSV tables
    (``summary.csv``, ``per_seed.csv``, ``comparisons.csv``), all atomically, into ``out_dir`` (default:
    the multirun folder). Returns the written paths by name."""
    out = Path(out_dir) if out_dir is not None else report.sweep.root
    files = out / FILES
    written: dict[str, Path] = {}
    images: dict[str, str] = {}
    for label, members in report.groups.items():
        title = " / ".join(label)
        schedules = sorted({k[1] for r in members for k in _curves(r.result)})
        for schedule in schedules:
            methods = sorted({k[0] for r in members for k in _curves(r.result) if k[1] == schedule},
                             key=lambda m: (m != label[2], m))
            lines = [(m, members, (m, schedule), {"color": f"C{i}"}) for i, m in enumerate(methods)]
            name = f"curves_{_slug(*label, schedule)}.png"
            written[name] = write_bytes_atomic(files / name, _plot(lines, f"{title} ({schedule})", report))
            images[f"curves::{title}::{schedule}"] = f"{FILES}/{name}"
    for label_a, label_b in _model_pairs(report.groups):
        schedules = sorted({k[1] for r in report.groups[label_a] for k in _curves(r.result)})
        lines = [(f"{lab[0]} {s}", report.groups[lab], (label_a[2], s), {"color": f"C{i}", "linestyle": ("-", "--", ":")[j % 3]})
                 for j, s in enumerate(schedules) for i, lab in enumerate((label_a, label_b))]
        name = f"compare_{_slug(label_a[0], 'vs', label_b[0], *label_a[1:])}.png"
        written[name] = write_bytes_atomic(
            files / name, _plot(lines, f"{label_a[0]} vs {label_b[0]}: {' / '.join(label_a[1:])}", report))
        images[f"compare::{label_a[0]}::{label_b[0]}::{'::'.join(label_a[1:])}"] = f"{FILES}/{name}"
    for name in ("summary", "per_seed", "comparisons"):
        written[f"{name}.csv"] = write_text_atomic(files / f"{name}.csv", getattr(report, name).to_csv(index=False))
    markdown = render_markdown(report, images)
    written["report.md"] = write_text_atomic(out / "report.md", markdown + "\n")
    written["report.html"] = write_text_atomic(out / "report.html", render_html(markdown, f"itermask report {report.sweep.root}"))
    return written


def log_report_to_wandb(
    report: Report,
    written: dict[str, Path],
    *,
    project: str = "itermask",
    group: str | None = None,
    mode: str = "offline",
    save_dir: str | Path | None = None,
    name: str | None = None,
) -> str | None:
    """A W&B summary run in ``group`` (the sweep's group) holding the summary, per-seed and comparison
    tables (``wandb.Table``) and the plots (``wandb.Image``). Returns the run's local folder, or ``None``
    if W&B failed (a warning is logged; the local report files stay as written)."""
    try:
        import wandb

        run = wandb.init(
            project=project, group=group, name=name or f"{group or 'itermask'}-report", job_type="report",
            mode=mode, dir=str(save_dir or report.sweep.root), config={"report": report.settings,
                                                                        "multirun_dir": str(report.sweep.root)},
        )
        payload = {f"report/{n}": wandb.Table(dataframe=getattr(report, n).astype(object).where(
            getattr(report, n).notna(), None)) for n in ("summary", "per_seed", "comparisons")}
        payload.update({f"plots/{k[:-4]}": wandb.Image(str(p)) for k, p in written.items() if k.endswith(".png")})
        run.log(payload)
        summary = {"n_runs": len(report.sweep.runs), "n_missing": len(report.sweep.missing_lines())}
        for row in report.summary.itertuples():
            base = "/".join(str(x) for x in (*[getattr(row, g) for g in GROUP], row.explanation, row.schedule, row.score) if x)
            summary[f"{base}/mean"] = row.mean
            summary[f"{base}/spread_ratio"] = row.spread_ratio
        run.summary.update({k: v for k, v in summary.items() if isinstance(v, (int, float)) and math.isfinite(v)})
        folder = run.dir
        run.finish()
        return str(Path(folder).parent)
    except Exception as error:
        log.warning("W&B summary run failed (%s: %s); the report files are kept in %s",
                    type(error).__name__, error, report.sweep.root)
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m itermask.report <multirun dir>``: write the report; exit code 2 on a :class:`ReportError`."""
    parser = argparse.ArgumentParser(prog="python -m itermask.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("multirun_dir", help="a Hydra multirun folder (holding <job>/results.json)")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--bootstrap", action="store_true", help="percentile-bootstrap intervals instead of t")
    parser.add_argument("--permutation", action="store_true", help="permutation test instead of Welch's t-test")
    parser.add_argument("--n-resamples", type=int, default=9999)
    parser.add_argument("--wandb", action="store_true", help="also log a W&B summary run in the sweep's group")
    parser.add_argument("--wandb-mode", default=None, help="W&B mode (default: WANDB_MODE or offline)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        report = build_report(args.multirun_dir, args.confidence, "bootstrap" if args.bootstrap else "t",
                              "permutation" if args.permutation else "welch", args.n_resamples)
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    written = write_report(report)
    for line in report.sweep.missing_lines():
        log.warning("missing: %s", line)
    print(f"wrote {written['report.md']} and {written['report.html']} ({len(report.sweep.runs)} runs)")
    if args.wandb:
        from itermask.tracking import default_wandb_mode, group_name

        meta = report.sweep.meta
        logger = meta.get("logger") or {}
        group = logger.get("group") or group_name(meta.get("task_name") or "evaluate", report.sweep.root)
        folder = log_report_to_wandb(report, written, project=logger.get("project") or "itermask", group=group,
                                     mode=args.wandb_mode or default_wandb_mode())
        if folder:
            print(f"W&B summary run: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
