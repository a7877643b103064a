"""Experiment tracking: building the Lightning logger from config and logging evaluation results.

W&B (default; offline unless ``WANDB_MODE`` or ``logger.mode`` says otherwise, or when the server does not
answer: :func:`with_offline_fallback`) or ``logger=csv`` (Lightning's ``CSVLogger``). Each Hydra job is its own
run, logging the per-step curves as history metrics (:func:`curve_history`) and as one ``masking_curves`` Table
(:func:`curve_table`), the scalar scores in the run summary (:func:`metric_key`) and the analyses' artifacts
(:func:`log_artifacts`), the saliency method under study under the role ``explained`` (:func:`role`). Every W&B
call is guarded: a tracker failure is a warning and never fails a job whose result file is written.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from pytorch_lightning.loggers import CSVLogger, Logger, WandbLogger

from itermask.storage.keys import component_settings

__all__ = [
    "curve_table",
    "curve_history",
    "metric_key",
    "role",
    "role_key",
    "explained_method",
    "EXPLAINED",
    "clean_config",
    "group_name",
    "start",
    "with_offline_fallback",
    "log_config",
    "log_summary",
    "log_evaluation",
    "log_artifacts",
    "finish",
    "STEP_METRICS",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: the W&B step metric of the curves, by the evaluation's kind of steps
STEP_METRICS = {"fraction": "masked_fraction", "count": "masked_tokens"}
#: top-level settings that name folders on this machine or the tracker itself, not the experiment
MACHINE_KEYS = ("output_dir", "cache_dir", "logger")
OFFLINE_MODES = ("offline", "dryrun", "disabled")
# process-wide: the error of the first online start that failed; later runs of the process go offline at once
_unreachable: dict[str, str] = {}

ID_COLUMNS = ("curve", "saliency", "schedule")
#: the tracker's name of the saliency method under study, in place of the method's own name
EXPLAINED = "explained"


def explained_method(result: dict) -> str | None:
    """The name of the saliency method a result explains with (``result["saliency"]["name"]``, else the
    config's ``saliency.name``), ``None`` if it names none."""
    saliency = result.get("saliency")
    if isinstance(saliency, dict) and saliency.get("name"):
        return str(saliency["name"])
    if isinstance(saliency, str):
        return saliency
    node = (result.get("config") or {}).get("saliency")
    return str(node["name"]) if isinstance(node, dict) and node.get("name") else None


def role(explanation: str, method: str | None) -> str:
    """The tracker's name of an explanation: :data:`EXPLAINED` for ``method`` (the method under study),
    its own name otherwise (``random``, the baseline)."""
    return EXPLAINED if method is not None and explanation == method else explanation


def role_key(key: str, method: str | None) -> str:
    """``key`` with the method's name, as its first or second ``/`` part (``gradient/one_shot/...``,
    ``ood/gradient/...``), replaced by :data:`EXPLAINED`."""
    if method is None:
        return key
    parts = key.split("/")
    for i in range(min(2, len(parts) - 1)):
        if parts[i] == method:
            parts[i] = EXPLAINED
            return "/".join(parts)
    return key


def curve_table(scores: dict) -> tuple[list[str], list[list[Any]]]:
    """The masking curves as one table ``(columns, rows)``, a row per (saliency, schedule, step): columns
    ``curve``, ``saliency``, ``schedule`` and every per-step series of the summaries ``scores[saliency][schedule]``
    (:func:`itermask.core.metrics.summarize`; ``None`` where a summary lacks one)."""
    series = []
    for by_schedule in scores.values():
        for summary in by_schedule.values():
            steps = len(summary["fraction"])
            for key, value in summary.items():
                if isinstance(value, list) and len(value) == steps and key not in series:
                    series.append(key)
    columns = [*ID_COLUMNS, *series]
    rows = []
    for saliency, by_schedule in scores.items():
        for schedule, summary in by_schedule.items():
            for i in range(len(summary["fraction"])):
                values = [summary[key][i] if key in summary else None for key in series]
                rows.append([f"{saliency}/{schedule}", saliency, schedule, *values])
    return columns, rows


def metric_key(*parts: Any) -> str:
    """A tracker key from ``parts`` joined by ``/``, without spaces or other characters that W&B keys
    should not hold: ``"gradient - random"`` becomes ``gradient_minus_random``, any other run of characters
    outside letters, digits and ``_ . - = + @ /`` one ``_``."""
    text = "/".join(str(p) for p in parts if p not in (None, ""))
    text = re.sub(r"[^A-Za-z0-9_.=+@/-]+", "_", text.replace(" - ", "_minus_"))
    return re.sub(r"_*/_*", "/", text).strip("_")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def curve_history(scores: dict, prefix: str = "curves", method: str | None = None) -> list[dict[str, float]]:
    """The masking curves as history rows sorted by step: one row per masking step, holding the step (under its
    step metric, :data:`STEP_METRICS`) and every per-step series of every (saliency, schedule) of ``scores``
    (:func:`~itermask.core.metrics.summarize` summaries, or any dict with ``steps``, the grid ``x`` and one list
    per series) as ``<prefix>/<role>/<schedule>/<series>`` (``<role>``: :func:`role`). The grid (``x``, and
    ``fraction`` for fraction steps) is the step, not a series; missing and non-finite values are left out."""
    rows: dict[tuple[str, float], dict[str, float]] = {}
    for saliency, by_schedule in scores.items():
        for schedule, summary in by_schedule.items():
            steps = summary.get("steps", "fraction")
            step_metric = STEP_METRICS[steps]
            grid = summary.get("x", summary.get("fraction"))
            for name, values in summary.items():
                is_grid = name == "x" or (name == "fraction" and steps == "fraction")
                if is_grid or not isinstance(values, list) or len(values) != len(grid):
                    continue
                for x, value in zip(grid, values):
                    if _number(value):
                        row = rows.setdefault((step_metric, float(x)), {step_metric: x})
                        row[metric_key(prefix, role(saliency, method), schedule, name)] = value
    return [rows[key] for key in sorted(rows)]


def _scalars(result: dict) -> dict[str, float]:
    method = explained_method(result)
    out = {f"accuracy/{k}": v for k, v in result["accuracy"].items() if v is not None}
    for saliency, by_schedule in result["scores"].items():
        for schedule, summary in by_schedule.items():
            for key, value in summary.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out[metric_key(role(saliency, method), schedule, key)] = value
    for schedule, deltas in result.get("relative_to_random", {}).items():
        for key, value in deltas.items():
            out[metric_key("relative_to_random", schedule, key)] = value
    out.update({key: result[key] for key in ("n_evaluated", "n_skipped_no_maskable")})
    if "model_check" in result:  # 0: the classifier learnt nothing, its scores mean nothing (the problems: results)
        out["model_check/meaningful"] = float(bool(result["model_check"].get("meaningful", True)))
    # a value that could not be computed (None, NaN: the results file says why) is not a summary number; left out
    # so that a fresh job and one reusing its stored result (where NaN reads back as None) log the same keys
    return {key: value for key, value in out.items() if _number(value)}


def clean_config(config: dict) -> dict:
    """The config a run records: a copy of ``config`` without Hydra's instantiation keys (at any depth,
    :func:`~itermask.storage.keys.component_settings`) and without :data:`MACHINE_KEYS`."""
    return component_settings({k: v for k, v in config.items() if k not in MACHINE_KEYS})


def group_name(task_name: str, sweep_dir: str | Path | None) -> str:
    """The W&B group of a job: ``<task>-<parent folder>-<sweep folder>`` in a multirun (``<task>-<date>-<time>``
    with the default sweep dir), ``<task>-single`` otherwise."""
    if sweep_dir is None:
        return f"{task_name}-single"
    path = Path(sweep_dir)
    return f"{task_name}-{path.parent.name}-{path.name}" if path.parent.name else f"{task_name}-{path.name}"


def with_offline_fallback(open_run: Callable[[str], T], mode: str | None) -> T:
    """``open_run(mode)`` (``None``: ``WANDB_MODE``), and ``open_run("offline")`` if that fails in an online mode
    (no server, no credentials, ``logger.init_timeout`` passed), as do all later calls of the process.

    Raises:
        Exception: whatever the offline start raises (or the online start, for an offline ``mode``)."""
    mode = mode or default_wandb_mode()
    if mode in OFFLINE_MODES:
        return open_run(mode)
    if _unreachable:
        log.warning("W&B: logging offline (the server did not answer earlier: %s)", _unreachable["error"])
        return open_run("offline")
    try:
        return open_run(mode)
    except Exception as error:  # wandb raises many types (CommError, UsageError, timeouts)
        _unreachable["error"] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        log.warning(
            "W&B run could not start online (%s); logging offline instead (upload later with "
            "`wandb sync <run folder>`)",
            _unreachable["error"],
        )
        return open_run("offline")


def start(make_logger: Callable[..., Logger | None], mode: str | None = None) -> Logger | None:
    """Build the job's logger with ``make_logger(**overrides)`` and start its run now (W&B: in the configured
    ``mode``, falling back to offline logging, :func:`with_offline_fallback`). If W&B cannot start at all, a
    warning is logged and ``None`` returned: the job goes on without a logger."""
    logger = make_logger()
    if not isinstance(logger, WandbLogger):
        return logger
    configured = mode or default_wandb_mode()

    def open_run(run_mode: str) -> WandbLogger:
        # the configured logger is W&B's, so is one of the same configuration in another mode
        built = logger if run_mode == configured else cast(WandbLogger, make_logger(mode=run_mode))
        _drop_unset_anonymous(built)
        one_line = run_mode == "offline" and _quiet_offline(built)
        run = built.experiment  # creates the run
        if one_line:
            log.info("W&B run saved offline in %s (upload it with `wandb sync <that folder>`)", run.sync_dir)
        return built

    try:
        return with_offline_fallback(open_run, configured)
    except Exception as error:
        log.warning("W&B run could not start (%s: %s); continuing without W&B logging", type(error).__name__, error)
        return None


def _quiet_offline(logger: WandbLogger) -> bool:
    """While the console is quiet (``WANDB_QUIET``, set by :func:`itermask.console.configure` unless
    ``verbose=true``, or by the user), an offline run starts silent (W&B's ``silent`` setting): its three-line
    banner (offline syncing, the run's folder, ``wandb leet``) becomes one itermask line with the folder. Not when
    the user set ``WANDB_SILENT`` or gave the logger a ``settings`` object of W&B's own. Returns whether it did."""
    init = getattr(logger, "_wandb_init", None)
    quiet = os.environ.get("WANDB_QUIET", "").lower() in ("true", "1")
    if not quiet or "WANDB_SILENT" in os.environ or not isinstance(init, dict):
        return False
    if not isinstance(init.get("settings") or {}, dict):
        return False
    init["settings"] = {**(init.get("settings") or {}), "silent": True}
    return True


def _drop_unset_anonymous(logger: WandbLogger) -> None:
    """Leave ``anonymous`` out of Lightning's ``wandb.init`` arguments (its private ``_wandb_init``) while it is
    ``None``: W&B 0.19+ warns "The anonymous setting has no effect" on every run when it is passed at all."""
    init = getattr(logger, "_wandb_init", None)
    if isinstance(init, dict) and "anonymous" in init and init["anonymous"] is None:
        del init["anonymous"]


def log_config(logger: Logger | None, config: dict) -> None:
    """Record the resolved config (:func:`clean_config`) as the run's config / hyperparameters."""
    if logger is None:
        return
    try:
        logger.log_hyperparams(clean_config(config))
    except Exception as error:
        log.warning("logging the run config failed (%s: %s)", type(error).__name__, error)


def log_summary(logger: Logger | None, values: dict[str, float]) -> None:
    """Final values of a run (W&B run summary, e.g. ``best_val_acc`` for sweeps; a last CSV row otherwise)."""
    if logger is None:
        return
    try:
        if isinstance(logger, WandbLogger):
            logger.experiment.summary.update(values)
        else:
            logger.log_metrics(values)
            logger.save()
    except Exception as error:
        log.warning("logging the run summary failed (%s: %s)", type(error).__name__, error)


def log_evaluation(logger: Logger | None, result: dict) -> None:
    """Log the curves (W&B: history metrics against the masking step and the ``masking_curves`` Table;
    CSV: per-step metrics) and the scalar scores (summary). A tracker failure is a warning."""
    if logger is None:
        return
    scalars = _scalars(result)
    try:
        if isinstance(logger, WandbLogger):
            _log_wandb(logger, result, scalars)
        else:
            columns, rows = curve_table(result["scores"])
            for step, row in enumerate(rows):
                values = dict(zip(columns, row))
                logger.log_metrics(
                    {f"curve/{row[0]}/{c}": v for c, v in values.items() if c not in ID_COLUMNS and v is not None},
                    step=step,
                )
            logger.log_metrics(scalars, step=len(rows))
            logger.save()
    except Exception as error:  # the result file is already written; keep the job alive
        log.warning(
            "logging the evaluation failed (%s: %s); the local result file is kept", type(error).__name__, error
        )


def _log_history(run, history: list[dict[str, float]]) -> None:
    """Log :func:`curve_history` rows to the W&B ``run``, each series defined against its step metric and
    kept out of the summary (a curve's last point is not a score)."""
    step_of = {key: step for row in history for step in row if step in STEP_METRICS.values() for key in row}
    for step in set(step_of.values()):
        run.define_metric(step, summary="none")
    for key, step in step_of.items():  # exact names: they win over Lightning's "*" -> trainer/global_step
        if key != step:
            run.define_metric(key, step_metric=step, summary="none")
    for row in history:
        run.log(row)


def _log_wandb(logger: WandbLogger, result: dict, scalars: dict) -> None:
    import wandb

    run = logger.experiment
    _log_history(run, curve_history(result["scores"], method=explained_method(result)))
    columns, rows = curve_table(result["scores"])
    run.log({"masking_curves": wandb.Table(columns=columns, data=rows)})  # pyright: ignore[reportArgumentType] (wandb's invariant list types)
    run.summary.update(scalars)


def log_artifacts(logger: Logger | None, artifacts, method: str | None = None) -> None:
    """Log an analysis's :class:`~itermask.analyses.Artifacts`: W&B: the curves as history metrics
    (:func:`curve_history` with each curves prefix), tables as ``wandb.Table``, figures as ``wandb.Image`` and
    the summary values in the run summary, ``method``'s keys under its role (:func:`role_key`); CSV: the
    summary values as metrics. A tracker failure is a warning."""
    if logger is None or not (artifacts.tables or artifacts.images or artifacts.summary or artifacts.curves):
        return
    try:
        if isinstance(logger, WandbLogger):
            import wandb

            for prefix, curves in artifacts.curves.items():
                _log_history(logger.experiment, curve_history(curves, prefix, method))
            payload = {
                name: wandb.Table(columns=list(columns), data=_html_cells(rows))  # pyright: ignore[reportArgumentType] (wandb's invariant list types)
                for name, (columns, rows) in artifacts.tables.items()
            }
            payload.update({name: wandb.Image(str(path)) for name, path in artifacts.images.items()})
            _log_media_tables(logger.experiment, payload)
            logger.experiment.log(payload)
            logger.experiment.summary.update({role_key(k, method): v for k, v in artifacts.summary.items()})
        elif artifacts.summary:
            logger.log_metrics(artifacts.summary)
            logger.save()
    except Exception as error:
        log.warning(
            "logging the analyses' artifacts failed (%s: %s); the local files are kept", type(error).__name__, error
        )


def _html_cells(rows: list[list[Any]]) -> list[list[Any]]:
    """``rows`` with every :class:`itermask.views.Html` cell as a ``wandb.Html`` (shown as HTML in the
    table; the fragment is self-contained, so W&B's stylesheet is not injected)."""
    import wandb

    from itermask.views import Html

    return [
        [wandb.Html(str(cell), inject=False, data_is_not_path=True) if isinstance(cell, Html) else cell for cell in row]
        for row in rows
    ]


def _log_media_tables(run, payload: dict) -> None:
    """Add every table of ``payload`` that holds ``wandb.Html`` cells to a run artifact (type ``examples``)
    before it is logged: W&B serializes the media of a table only through an artifact, which an offline run
    stages outside its folder (``~/.local/share/wandb/artifacts/staging``) until ``wandb sync``. So the same
    views also go into ``payload`` as one page, ``<name>_views`` (a ``wandb.Html`` media the run writes under its
    own ``files/media/html/``): a copied offline run folder keeps them, and W&B shows the page as an HTML panel."""
    import wandb

    for name, table in list(payload.items()):
        if isinstance(table, wandb.Table) and any(isinstance(c, wandb.Html) for row in table.data for c in row):
            artifact = wandb.Artifact(f"run-{run.id}-{name}", type="examples")
            artifact.add(table, name)
            run.log_artifact(artifact)
            payload[f"{name}_views"] = wandb.Html(_views_page(table), inject=False, data_is_not_path=True)


def _views_page(table) -> str:
    """One self-contained HTML page of a table's ``wandb.Html`` cells, in row order, each under the row's first
    cell (the example id)."""
    import html

    import wandb

    parts = []
    for row in table.data:
        views = [cell.html for cell in row if isinstance(cell, wandb.Html)]
        if views:
            parts.append(f"<h3>example {html.escape(str(row[0]))}</h3>" + "".join(views))
    return '<!doctype html><html><head><meta charset="utf-8"></head><body>' + "".join(parts) + "</body></html>"


def finish(logger: Logger | None, failed: bool = False, error: str | None = None) -> None:
    """End the run (``wandb.finish()`` for W&B), so every multirun job is its own run. ``failed=True`` (the job
    raised) marks it failed: W&B exit code 1 and the ``error`` in the run summary, CSV status ``"failed"``."""
    if isinstance(logger, WandbLogger):
        import wandb

        if wandb.run is not None:
            try:
                if error is not None:
                    wandb.run.summary["error"] = error
                wandb.finish(exit_code=1 if failed else 0)
            except Exception as finish_error:
                log.warning(
                    "W&B run did not finish cleanly (%s: %s); its local files are kept in %s",
                    type(finish_error).__name__,
                    finish_error,
                    logger.save_dir,
                )
    elif isinstance(logger, CSVLogger):
        logger.finalize("failed" if failed else "success")


def default_wandb_mode() -> str:
    """``WANDB_MODE`` if the user set it, else ``"offline"``."""
    return os.environ.get("WANDB_MODE", "offline")
