"""The report logged as a W&B summary run in the sweep's group: its tables, plots, summary numbers and the
runs' shared config (:func:`log_report_to_wandb`)."""

from __future__ import annotations

import contextlib
import json
import logging
import math
from pathlib import Path
from typing import Any

from itermask.reporting.model import GROUP, TABLES, Report, records
from itermask.reporting.sweep import flatten

log = logging.getLogger(__name__)

__all__ = ["log_report_to_wandb", "shared_config", "summary_values", "measure_key", "SUMMARY_COLUMNS"]


def _unflatten(flat: dict[str, Any]) -> dict:
    nested: dict = {}
    for dotted, value in flat.items():
        *parents, leaf = dotted.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def shared_config(configs: list[dict]) -> tuple[dict, dict[str, list]]:
    """What the runs' configs share and what sets them apart: ``(shared, swept)``. ``shared`` is the
    clean config (:func:`itermask.tracking.clean_config`) restricted to the settings equal in every run,
    nested as in a job run's config; ``swept`` maps each dotted setting that differs (the seed, a swept
    model or saliency method, a swept training setting) to its sorted distinct values."""
    from itermask.tracking import clean_config

    flats = [flatten(clean_config(config)) for config in configs]
    keys = sorted(set().union(*flats)) if flats else []
    shared, swept = {}, {}
    for key in keys:
        values = {flat.get(key, "null") for flat in flats}
        if len(values) == 1:
            shared[key] = json.loads(values.pop())
        else:
            swept[key] = [json.loads(v) for v in sorted(values)]
    return _unflatten(shared), swept


#: the summary run's statistics of a measure: ``{frame: {column: key suffix}}`` (a mean and its interval; the seed
#: share of variance and its interval)
SUMMARY_COLUMNS = {
    "summary": {"mean": "mean", "ci_low": "ci_low", "ci_high": "ci_high"},
    "seed_sensitivity": {"share": "seed_share", "ci_low": "seed_share_ci_low", "ci_high": "seed_share_ci_high"},
}


def measure_key(row) -> str:
    """The summary run's key of a report row's measure: ``<model>/<dataset>/<saliency>/<masking>/<role>/<schedule>/
    <score>``, the explanation by its role in its group (:func:`itermask.tracking.role`: the group's method as
    ``explained``, its difference to random as ``explained_minus_random``; ``random`` and the others by name), so the
    method's name is written once and every group has its own ``random``."""
    from itermask.tracking import metric_key, role

    method = row.saliency
    first, minus, second = str(row.explanation).partition(" - ")
    explanation = f"{role(first, method)}{minus}{role(second, method)}" if minus else role(first, method)
    return metric_key(*[getattr(row, g) for g in GROUP], explanation, row.schedule, row.score)


def summary_values(report: Report) -> dict[str, float]:
    """The summary run's numbers: ``n_runs``, ``n_missing``, ``n_failed`` and, per measure (:func:`measure_key`),
    ``<key>/mean`` with its interval ``<key>/ci_low``, ``<key>/ci_high`` (the report's ``confidence`` and
    ``interval`` method) and ``<key>/seed_share`` with its interval (:data:`SUMMARY_COLUMNS`). A value that is not a
    finite number (an interval of one seed, a share that cannot be computed: the report's tables say why) is left
    out.

    Raises:
        ValueError: if two measures of a table would share a key (an explanation besides the group's method
            named ``explained``), before anything is logged."""
    sweep = report.sweep
    summary = {"n_runs": len(sweep.runs), "n_missing": len(sweep.missing_lines()), "n_failed": len(sweep.failed)}
    for table, columns in SUMMARY_COLUMNS.items():
        seen: set[str] = set()
        for row in records(getattr(report, table)):
            base = measure_key(row)
            if base in seen:
                raise ValueError(f"two measures of the report's {table} table share the W&B key {base!r}")
            seen.add(base)
            summary.update({f"{base}/{suffix}": getattr(row, column) for column, suffix in columns.items()})
    return {k: v for k, v in summary.items() if isinstance(v, (int, float)) and math.isfinite(v)}


def _close_failed_run() -> None:
    with contextlib.suppress(Exception):  # nothing more to do: the warning names the first error
        import wandb

        if wandb.run is not None:
            wandb.finish(exit_code=1)


def _cells(frame):
    """``frame`` with W&B-safe cells: NaN as ``None``, lists as text."""
    frame = frame.astype(object).where(frame.notna(), None)
    return frame.map(lambda v: ", ".join(str(x) for x in v) if isinstance(v, list) else v)


def _init_run(report: Report, project: str, group: str | None, mode: str, save_dir, name, init_timeout):
    """The summary run, started (with the offline fallback of :func:`itermask.tracking.with_offline_fallback`)."""
    import wandb

    from itermask.tracking import with_offline_fallback

    shared, swept = shared_config([run.result["config"] for run in report.sweep.runs])
    labels = {
        f"{g}:{run.label[i] if g != 'model' else run.result['model']}"
        for run in report.sweep.runs
        for i, g in enumerate(GROUP)
    }
    settings = {"init_timeout": float(init_timeout)} if init_timeout is not None else None
    return with_offline_fallback(
        lambda run_mode: wandb.init(
            project=project,
            group=group,
            name=name or f"{group or 'itermask'}-report",
            job_type="report",
            mode=run_mode,  # pyright: ignore[reportArgumentType] (a W&B mode name; wandb types it as a Literal)
            dir=str(save_dir or report.sweep.root),
            tags=sorted(labels) + ["report"],
            config={**shared, "swept": swept, "report": report.settings},
            settings=settings,
        ),
        mode,
    )


def _payload(report: Report, written: dict[str, Path]) -> dict[str, Any]:
    """What the summary run logs: the report's tables, the failed jobs and the plots."""
    import wandb

    payload: dict[str, Any] = {
        f"report/{n}": wandb.Table(dataframe=_cells(getattr(report, n)))
        for n in TABLES
        if not getattr(report, n).empty  # an empty table (one model: no comparisons) is not sent
    }
    if report.sweep.failed:
        payload["report/failed_jobs"] = wandb.Table(
            columns=["job", "overrides", "error"],
            data=[[job, " ".join(o or []), marker["error"]] for job, o, marker in report.sweep.failed],
        )
    payload.update({f"plots/{k[:-4]}": wandb.Image(str(p)) for k, p in written.items() if k.endswith(".png")})
    return payload


def log_report_to_wandb(
    report: Report,
    written: dict[str, Path],
    *,
    project: str = "itermask",
    group: str | None = None,
    mode: str = "offline",
    save_dir: str | Path | None = None,
    name: str | None = None,
    init_timeout: float | None = None,
) -> str | None:
    """A W&B summary run in ``group`` (the sweep's group, job type ``report``) holding the report's tables
    (``wandb.Table``: summary, per seed, comparisons, headline, seed sensitivity, rank stability), the failed jobs, the
    plots (``wandb.Image``), each measure's mean and seed share of variance in its summary (keys without spaces,
    :func:`itermask.tracking.metric_key`) and as config what the runs share plus the ``swept`` settings
    (:func:`shared_config`) and the report's settings. Online, it falls back to offline logging like the jobs' runs
    (``init_timeout`` seconds, :func:`itermask.tracking.with_offline_fallback`). Returns the run's local folder, or
    ``None`` if W&B failed (a warning is logged; the local report files stay as written)."""
    try:
        values = summary_values(report)  # its checks before the run starts: no half-written run
        run = _init_run(report, project, group, mode, save_dir, name, init_timeout)
        run.log(_payload(report, written))
        run.summary.update(values)
        folder = run.dir
        run.finish()
        return str(Path(folder).parent)
    except Exception as error:
        _close_failed_run()
        kind, root = type(error).__name__, report.sweep.root
        log.warning("W&B summary run failed (%s: %s); the report files are kept in %s", kind, error, root)
        return None
