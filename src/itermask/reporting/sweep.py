"""Loading a multirun folder (its ``results.json`` files, the failed jobs' ``failed.json``, the jobs'
Hydra overrides and the sweep's ``multirun.yaml``) and grouping the runs: one group per (model, dataset,
saliency, masking), split by swept settings, refusing runs mixed by accident."""

from __future__ import annotations

import functools
import itertools
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from itermask.formatting import program
from itermask.storage.cache import config_hash
from itermask.storage.failures import read_failure
from itermask.storage.files import read_json
from itermask.storage.keys import SCHEMA_VERSION, Fingerprint, fixes, keyed_config

log = logging.getLogger(__name__)

REQUIRED_KEYS = ("seed", "model", "dataset", "saliency", "masking", "accuracy", "scores", "config")
FILES = "report_files"


class ReportError(ValueError):
    """A multirun folder that cannot be reported: nothing finished, mixed configurations, bad files."""


class NoRunsError(ReportError):
    """A multirun folder without a finished run (:func:`load_sweep`)."""


__all__ = [
    "ReportError",
    "NoRunsError",
    "Run",
    "Sweep",
    "load_sweep",
    "sweep_jobs",
    "group_runs",
    "swept_subtrees",
    "flatten",
    "run_contexts",
    "REQUIRED_KEYS",
    "FILES",
]


@dataclass
class Run:
    """One finished job: its ``results.json`` and the Hydra overrides of its job folder (if present)."""

    path: Path
    result: dict
    overrides: list[str] | None = None
    # swept settings (Hydra overrides such as ``train.masking_augmentation.enabled=True``) that set this run
    # apart from others with the same model/dataset/saliency/masking; set by the grouping
    variant: tuple[str, ...] = ()
    # every override key swept within its group, also those left out of ``variant`` (an analysis switch swept
    # beside a training setting); set by the grouping
    swept: tuple[str, ...] = ()

    @property
    def label(self) -> tuple[str, str, str, str]:
        """(model, dataset, saliency, masking); the model carries the run's variant, e.g.
        ``minilm[train.masking_augmentation.enabled=True]``."""
        saliency = self.result["saliency"]
        name = saliency.get("name") if isinstance(saliency, dict) else saliency
        model = str(self.result["model"]) + (f"[{', '.join(self.variant)}]" if self.variant else "")
        return (model, str(self.result["dataset"]), str(name), str(self.result["masking"]))

    @property
    def seed(self) -> int:
        return int(self.result["seed"])

    @property
    def job(self) -> str:
        return self.path.parent.name

    def per_example(self, table: str) -> Path:
        """The path of the job's per-example table ``table`` (``"scores"``..., :mod:`itermask.storage.per_example`)."""
        from itermask.storage.per_example import FOLDER

        return self.path.parent / FOLDER / f"{table}.parquet"


@dataclass
class Sweep:
    """What a multirun folder holds: finished runs, failed jobs (``failed.json``: job folder, overrides,
    marker), job folders without a result, and (for Hydra's basic sweeper, from ``multirun.yaml``) the jobs
    that were expected but never started."""

    root: Path
    runs: list[Run]
    unfinished: list[tuple[str, list[str] | None]] = field(default_factory=list)
    not_started: list[list[str]] = field(default_factory=list)
    n_expected: int | None = None
    meta: dict = field(default_factory=dict)
    failed: list[tuple[str, list[str] | None, dict]] = field(default_factory=list)

    def missing_lines(self) -> list[str]:
        lines = [f"job folder {job} has no results.json (overrides: {_fmt_overrides(o)})" for job, o in self.unfinished]
        lines += [f"job never started (overrides: {_fmt_overrides(o)})" for o in self.not_started]
        return lines

    def failed_lines(self) -> list[str]:
        """One line per failed job: its folder, overrides and error (the traceback is in its folder)."""
        return [
            f"job {job} failed (overrides: {_fmt_overrides(o)}): {marker['error']}" for job, o, marker in self.failed
        ]


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
    import yaml
    from omegaconf import OmegaConf

    try:
        cfg = OmegaConf.load(path)
    except (yaml.YAMLError, ValueError) as error:  # a damaged file: one line, not the parser's traceback
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ReportError(
            f"{path} cannot be read ({first}): it is written by Hydra when the multirun starts; restore it, or "
            "move it aside to report the finished jobs without the list of expected ones"
        ) from None
    meta = {"task_name": OmegaConf.select(cfg, "task_name", default=None)}
    logger = OmegaConf.select(cfg, "logger", default=None)
    if logger is not None:
        meta["logger"] = {
            k: OmegaConf.select(logger, k, default=None, throw_on_resolution_failure=False)
            for k in ("_target_", "project", "group", "mode")
        }
    return sweep_jobs(cfg, str(path)), meta


def sweep_jobs(cfg: Any, where: str = "the multirun") -> list[list[str]] | None:
    """The override lists of every job of a multirun config (``multirun.yaml``, or the config a Hydra
    callback gets before the sweep) with Hydra's basic or the grid-union sweeper, in launch order; ``None`` for
    another sweeper or a sweep the plain parser cannot expand (logged, naming ``where``)."""
    from omegaconf import OmegaConf

    sweeper = OmegaConf.select(cfg, "hydra.sweeper._target_", default="") or ""
    if not sweeper.endswith(("BasicSweeper", "GridUnionSweeper")):
        return None
    task = [str(x) for x in OmegaConf.select(cfg, "hydra.overrides.task", default=[]) or []]
    params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None)
    if sweeper.endswith("GridUnionSweeper"):  # a union of grids (experiment=paper)
        from itermask.grids import grid_jobs

        grids = OmegaConf.select(cfg, "hydra.sweeper.grids", default=None)
        plain = [OmegaConf.to_container(node) if node is not None else None for node in (params, grids)]
        expand, arguments = functools.partial(grid_jobs, plain[0], plain[1]), task  # pyright: ignore[reportArgumentType]
    else:
        expand, arguments = _expand, [f"{k}={v}" for k, v in (params or {}).items()] + task
    try:
        return expand(arguments)
    except Exception as error:  # an override the plain parser cannot expand: report what was found
        log.warning("could not expand the sweep of %s (%s)", where, error)
        return None


def _expand(arguments: list[str]) -> list[list[str]]:
    """The jobs of a basic-sweeper multirun: the cartesian product of the overrides' values, each job as its
    list of ``key=value`` overrides, in the order Hydra's basic sweeper launches them (a later override of a
    key replaces an earlier one)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    values: dict[str, list[str]] = {}
    for override in OverridesParser.create().parse_overrides(arguments):
        key = override.get_key_element()
        if override.is_sweep_override():
            if not override.is_discrete_sweep():
                raise ValueError(f"the basic sweeper does not sweep {override.input_line!r}")
            values[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            values[key] = [f"{key}={override.get_value_element_as_str()}"]
    return [list(job) for job in itertools.product(*values.values())]


def _read_run(path: Path) -> Run:
    """The finished run of one ``results.json``.

    Raises:
        ReportError: the file cannot be read as JSON (with what to do), or is not an itermask result."""
    try:
        result = read_json(path)
    except (OSError, json.JSONDecodeError) as error:
        raise ReportError(
            f"{path} cannot be read as JSON ({error}): re-run the multirun's command, which writes that job's "
            "results.json again (from the cache, or recomputed), or move its folder out of the multirun folder"
        ) from error
    missing = [k for k in REQUIRED_KEYS if not isinstance(result, dict) or k not in result]
    if missing:
        raise ReportError(f"{path} is not an itermask result file: missing {', '.join(missing)}")
    return Run(path, result, _read_overrides(path.parent))


def load_sweep(root: str | Path) -> Sweep:
    """Find the finished runs (``results.json``) under ``root`` and what is missing.

    Raises:
        ReportError: ``root`` is not a folder, holds no finished run (the message lists the job folders
            found, their overrides and the jobs expected from ``multirun.yaml``), or a result file is not an
            itermask result.
    """
    root = Path(root)
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise ReportError(f"{root} {what} (expected a Hydra multirun folder holding <job>/results.json)")
    runs = []
    for path in sorted(root.rglob("results.json")):
        if _skip(path, root):
            continue
        runs.append(_read_run(path))
    _check_schemas(runs)
    _check_fixes(runs)
    finished = {run.path.parent for run in runs}
    job_dirs = sorted(
        (p.parent for p in root.rglob(".hydra") if p.is_dir() and p.parent != root and not _skip(p, root)),
        key=lambda p: (len(p.parts), _natural(p.name)),
    )
    markers = {d: read_failure(d) for d in job_dirs}
    failed = [(str(d.relative_to(root)), _read_overrides(d), m) for d, m in markers.items() if m is not None]
    failed_dirs = {root / job for job, _, _ in failed}
    unfinished = [
        (str(d.relative_to(root)), _read_overrides(d)) for d in job_dirs if d not in finished and d not in failed_dirs
    ]
    expected, meta = _expected_jobs(root)
    seen = {frozenset(o) for o in (_read_overrides(d) for d in job_dirs) if o is not None}
    not_started = [o for o in expected or [] if frozenset(o) not in seen]
    runs.sort(key=lambda r: (r.label, r.seed, _natural(r.job)))
    sweep = Sweep(root, runs, unfinished, not_started, len(expected) if expected is not None else None, meta, failed)
    if not runs and (root / ".hydra").is_dir() and not job_dirs:  # a single run's folder (no -m)
        marker = read_failure(root)
        state = f"the job failed: {marker['error']}" if marker else "no results.json: interrupted or still running"
        raise NoRunsError(
            f"{root} is a single job's folder, not a multirun's ({state}); the report reads a multirun folder "
            f"({program('evaluate')} -m ...); one job's examples: python -m itermask.views {root}"
        )
    if not runs:
        found = f"{len(job_dirs)} job folder(s), none with a results.json"
        if job_dirs:
            found += ": " + "; ".join([f"{j} ({_fmt_overrides(o)})" for j, o in unfinished] + sweep.failed_lines())
        if expected is not None:
            found += f". multirun.yaml expects {len(expected)} job(s)"
            if not_started:
                found += f"; never started: {'; '.join(_fmt_overrides(o) for o in not_started)}"
        elif not job_dirs:
            found += " (and no multirun.yaml: is this a Hydra multirun folder?)"
        raise NoRunsError(f"no finished runs under {root}: found {found}")
    return sweep


def _check_schemas(runs: list[Run]) -> None:
    """Refuse results of another schema than :data:`~itermask.storage.keys.SCHEMA_VERSION` (their numbers or
    warnings differ from this version's, see its history; no change so far can be migrated without recomputing,
    so none is), naming every schema found and its jobs.

    Raises:
        ReportError: some result is of another schema (or has none: written before schema 2)."""
    by_schema: dict[str, list[str]] = {}
    for run in runs:
        version = run.result.get("schema_version")
        by_schema.setdefault("none (before 2)" if version is None else str(version), []).append(run.job)
    if set(by_schema) - {str(SCHEMA_VERSION)}:
        found = "; ".join(f"schema {v} in job(s) {', '.join(jobs)}" for v, jobs in sorted(by_schema.items()))
        raise ReportError(
            f"results of schema {SCHEMA_VERSION} only can be reported (this itermask's), found {found}: re-run "
            "the older jobs (their results key holds the schema, so a re-run recomputes them)"
        )


def _check_fixes(runs: list[Run]) -> None:
    """Refuse results written before a fix that changed their numbers (:func:`~itermask.storage.keys.fixes` of
    their config, missing from their ``fixes``), naming the fix and the jobs.

    Raises:
        ReportError: some result lacks a fix its config needs."""
    stale: dict[str, list[str]] = {}
    for run in runs:
        config = run.result.get("config")
        for fix in fixes(config) if isinstance(config, dict) else []:
            if fix not in (run.result.get("fixes") or []):
                stale.setdefault(fix, []).append(run.job)
    if stale:
        found = "; ".join(f"{fix} in job(s) {', '.join(jobs)}" for fix, jobs in sorted(stale.items()))
        raise ReportError(
            f"results computed before a fix that changed their numbers: {found} (see CHANGELOG.md): re-run those "
            "jobs (their results key holds the fix, so a re-run recomputes them)"
        )


def _natural(text: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def flatten(node: Any, prefix: str = "") -> dict[str, str]:
    """``{dotted key: canonical JSON of the value}`` of the leaves of a nested dict (an empty dict is a leaf)."""
    if isinstance(node, dict) and node:
        out = {}
        for k, v in node.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: json.dumps(node, sort_keys=True, default=str)}


def run_contexts(runs: list[Run], drop: Sequence[str] = ()) -> list[dict[str, str]]:
    """Each run's results-relevant config (flattened, :func:`~itermask.storage.keys.keyed_config`) without the
    seed, keys derived from the seed (equal to it in every run, like ``saliency.seed: ${seed}``) and the subtrees
    in ``drop``."""
    # compared as the results key compares them: local paths by their files' contents, recorded in the result's
    # data_files (results written before it was recorded: by the paths as spelled)
    recorded = all(isinstance(run.result.get("data_files"), dict) for run in runs)
    prints = [Fingerprint.from_hashed(run.result["data_files"]) if recorded else None for run in runs]
    flats = [flatten(keyed_config(run.result["config"], fp)) for run, fp in zip(runs, prints)]
    keys = set().union(*flats) if flats else set()
    seedlike = {k for k in keys if all(f.get(k) == json.dumps(r.seed) for f, r in zip(flats, runs))}
    dropped = {k for k in keys if k == "seed" or k in seedlike or any(k == d or k.startswith(d + ".") for d in drop)}
    return [{k: v for k, v in flat.items() if k not in dropped} for flat in flats]


def _differing(contexts: list[dict[str, str]]) -> list[str]:
    """The settings whose value differs between ``contexts`` (:func:`run_contexts`), sorted."""
    return sorted(k for k in set().union(*contexts) if len({c.get(k) for c in contexts}) > 1)


def _override_key(override: str) -> str:
    """``a.b`` of the Hydra override ``a.b=v`` (also ``+a.b=v``, ``++a.b=v``, ``~a.b``)."""
    return override.split("=", 1)[0].lstrip("+~")


def swept_subtrees(key: str) -> tuple[str, ...]:
    """The config subtrees a swept override key accounts for: the key itself and, for an on/off switch
    ``<section>.enabled``, its whole section (a disabled section such as ``train.adversarial_augmentation``
    is left out of the results config, so its other settings appear only in the enabled runs)."""
    return (key, key[: -len(".enabled")]) if key.endswith(".enabled") else (key,)


def _swept_variants(members: list[Run], keys: list[str]) -> tuple[list[tuple[str, ...]], list[str]] | None:
    """Each run's swept overrides (other than the seed) that explain the differing config ``keys``, less the
    switches of analyses that other swept settings make redundant, and the keys of all swept overrides; or
    ``None`` when some differing key was not swept (the runs are mixed by accident)."""
    if any(run.overrides is None for run in members):
        return None
    by_key = [{_override_key(o): o for o in run.overrides or () if _override_key(o) != "seed"} for run in members]
    swept = sorted(k for k in set().union(*by_key) if len({b.get(k) for b in by_key}) > 1)
    if not swept or any(k not in b for k in swept for b in by_key):  # a sweep sets its keys in every job
        return None
    subtrees = [t for s in swept for t in swept_subtrees(s)]
    if not all(any(k == t or k.startswith(t + ".") for t in subtrees) for k in keys):
        return None
    # an analysis switched with another swept setting (experiment=paper: naopc.enabled=False beside masked
    # fine-tuning) is left out of the label where the other settings alone tell the same runs apart
    named = {a for run in members for a in run.result.get("config", {}).get("analyses") or ()}
    kept = [k for k in swept if not (k.endswith(".enabled") and k[: -len(".enabled")] in named)]
    n_variants = len({tuple(b[k] for k in swept) for b in by_key})
    shown = kept if kept and len({tuple(b[k] for k in kept) for b in by_key}) == n_variants else swept
    return [tuple(b[k] for k in shown) for b in by_key], swept


def _mixed(label: tuple, members: list[Run], contexts: list[dict[str, str]], keys: list[str]) -> str:
    """The message for runs of one group from different configs: the differing settings (``keys``) and the
    runs of each variant."""
    variants: dict[str, list[int]] = {}
    for i, ctx in enumerate(contexts):
        variants.setdefault(config_hash(ctx), []).append(i)
    parts = []
    for idx in variants.values():
        settings = ", ".join(f"{k}={contexts[idx[0]].get(k, '<absent>')}" for k in keys[:8])
        runs_text = ", ".join(f"{members[i].path.parent.name} (seed {members[i].seed})" for i in idx)
        parts.append(f"[{settings}] in {runs_text}")
    more = f" (+{len(keys) - 8} more settings)" if len(keys) > 8 else ""
    return (
        f"{'/'.join(label)}: runs from {len(variants)} different configs are mixed; they differ in "
        f"{', '.join(keys[:8])}{more}: " + "; ".join(parts)
    )


def group_runs(runs: list[Run]) -> dict[tuple, list[Run]]:
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
        contexts = run_contexts(members)
        keys = _differing(contexts)
        swept = _swept_variants(members, keys) if keys else None
        if swept is None:
            split[label] = members
            if keys:
                problems.append(_mixed(label, members, contexts, keys))
            continue
        variants, keys_swept = swept
        for run, variant in zip(members, variants):
            run.variant, run.swept = variant, tuple(keys_swept)
            split.setdefault(run.label, []).append(run)
        for variant_label in {run.label for run in members}:  # within a swept value every setting agrees
            variant_contexts = run_contexts(split[variant_label])
            if differing := _differing(variant_contexts):
                problems.append(_mixed(variant_label, split[variant_label], variant_contexts, differing))
    for label, members in split.items():
        seeds: dict[int, list[Run]] = {}
        for run in members:
            seeds.setdefault(run.seed, []).append(run)
        for seed, dupes in seeds.items():
            if len(dupes) > 1:
                problems.append(
                    f"{'/'.join(label)}: seed {seed} appears in {len(dupes)} runs "
                    f"({', '.join(str(d.path) for d in dupes)}): report one multirun folder at a time"
                )
    if problems:
        raise ReportError("cannot aggregate over seeds:\n  " + "\n  ".join(problems))
    return split
