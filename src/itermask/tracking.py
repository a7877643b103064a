"""Experiment tracking: building the Lightning logger from config and logging evaluation results.

W&B (default) runs offline unless ``WANDB_MODE`` or ``logger.mode`` says otherwise. Each Hydra job is
its own W&B run; the runs of one multirun share a group (the sweep folder's name, unless
``logger.group`` is set). Masking curves go to W&B as a Table plus line plots keyed by masking
fraction, scores as summary values, the resolved config as the run config. ``logger=csv`` writes the
same numbers with Lightning's ``CSVLogger``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from pytorch_lightning.loggers import CSVLogger, Logger, WandbLogger

from itermask.core.metrics import metric_info

__all__ = ["curve_table", "group_name", "start", "log_config", "log_summary", "log_evaluation", "log_artifacts", "finish"]

log = logging.getLogger(__name__)

ID_COLUMNS = ("curve", "saliency", "schedule")


def curve_table(scores: dict) -> tuple[list[str], list[list[Any]]]:
    """The masking curves as one table: a row per (saliency, schedule, step).

    Columns are ``curve``, ``saliency``, ``schedule`` and every per-step series of the summaries
    ``scores[saliency][schedule]`` (:func:`itermask.core.metrics.summarize`): ``fraction``, ``mean_k``,
    ``target_<q>``, ``accuracy``, ``flip_rate``, ``comprehensiveness_<q>``, ``sufficiency_<q>`` (``None`` for
    the recursive schedule), ... with ``<q>`` the quantity the scores were computed on.

    Returns:
        ``(columns, rows)``.
    """
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
                row = [f"{saliency}/{schedule}", saliency, schedule]
                row += [summary[key][i] if key in summary else None for key in series]
                rows.append(row)
    return columns, rows


def _plot_columns(columns: list[str]) -> list[str]:
    """The per-step series charted against the masking step: every registered per-step metric's that is
    not a description of the grid (:data:`itermask.core.metrics.METRICS`)."""
    charted = []
    for column in columns:
        info = metric_info(column)
        if info is not None and info.per_step and info.higher_is_more_faithful is not None:
            charted.append(column)
    return charted


def _scalars(result: dict) -> dict[str, float]:
    out = {f"accuracy/{k}": v for k, v in result["accuracy"].items() if v is not None}
    for saliency, by_schedule in result["scores"].items():
        for schedule, summary in by_schedule.items():
            for key, value in summary.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out[f"{saliency}/{schedule}/{key}"] = value
    for schedule, deltas in result.get("relative_to_random", {}).items():
        for key, value in deltas.items():
            out[f"relative_to_random/{schedule}/{key}"] = value
    out["n_evaluated"] = result["n_evaluated"]
    out["n_skipped_no_maskable"] = result["n_skipped_no_maskable"]
    return out


def group_name(task_name: str, sweep_dir: str | Path | None) -> str:
    """The W&B group of a job: ``<task>-<parent folder>-<sweep folder>`` in a multirun (with the default
    sweep dir ``multirun/<task>/<date>/<time>`` that is ``<task>-<date>-<time>``, unique per sweep), and
    ``<task>-single`` otherwise."""
    if sweep_dir is None:
        return f"{task_name}-single"
    path = Path(sweep_dir)
    return f"{task_name}-{path.parent.name}-{path.name}" if path.parent.name else f"{task_name}-{path.name}"


def start(logger: Logger | None) -> Logger | None:
    """Start the logger's run now (``wandb.init`` for W&B). If that fails (no server, bad credentials) the
    job goes on without a logger: a warning is logged and ``None`` returned; results are written locally."""
    if isinstance(logger, WandbLogger):
        try:
            logger.experiment  # noqa: B018 (creates the run)
        except Exception as error:  # wandb raises many types (CommError, UsageError, timeouts)
            log.warning("W&B run could not start (%s: %s); continuing without W&B logging", type(error).__name__, error)
            return None
    return logger


def log_config(logger: Logger | None, config: dict) -> None:
    """Record the resolved config as the run's config / hyperparameters."""
    if logger is not None:
        logger.log_hyperparams(config)


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
    """Log curves (Table + line plots for W&B, per-step metrics for CSV) and scalar scores."""
    if logger is None:
        return
    columns, rows = curve_table(result["scores"])
    scalars = {k: v for k, v in _scalars(result).items() if v is not None}
    if isinstance(logger, WandbLogger):
        import wandb

        try:
            _log_wandb(logger, wandb, columns, rows, scalars)
        except Exception as error:  # the result file is already written; keep the job alive
            log.warning("W&B logging failed (%s: %s); the local result file is kept", type(error).__name__, error)
    else:
        for step, row in enumerate(rows):
            values = dict(zip(columns, row))
            logger.log_metrics(
                {f"curve/{row[0]}/{c}": v for c, v in values.items() if c not in ID_COLUMNS and v is not None},
                step=step,
            )
        logger.log_metrics(scalars, step=len(rows))
        logger.save()


def log_artifacts(logger: Logger | None, artifacts) -> None:
    """Log an analysis's :class:`~itermask.analyses.Artifacts`: W&B: tables as ``wandb.Table``, figures as
    ``wandb.Image`` and the summary values in the run summary; CSV: the summary values as metrics. A
    tracker failure is logged as a warning (the result file is already written)."""
    if logger is None or not (artifacts.tables or artifacts.images or artifacts.summary):
        return
    try:
        if isinstance(logger, WandbLogger):
            import wandb

            payload = {name: wandb.Table(columns=list(columns), data=rows) for name, (columns, rows) in artifacts.tables.items()}
            payload.update({name: wandb.Image(str(path)) for name, path in artifacts.images.items()})
            logger.experiment.log(payload)
            logger.experiment.summary.update(artifacts.summary)
        elif artifacts.summary:
            logger.log_metrics(artifacts.summary)
            logger.save()
    except Exception as error:
        log.warning("logging the analyses' artifacts failed (%s: %s); the local files are kept", type(error).__name__, error)


def _log_wandb(logger: WandbLogger, wandb, columns: list[str], rows: list, scalars: dict) -> None:
    table = wandb.Table(columns=columns, data=rows)
    payload = {"masking_curves": table}
    for column in _plot_columns(columns):
        payload[f"plots/{column}"] = wandb.plot.line(
            table, "x", column, stroke="curve", title=f"{column} vs masking step"
        )
    logger.experiment.log(payload)
    logger.experiment.summary.update(scalars)


def finish(logger: Logger | None, failed: bool = False) -> None:
    """End the run (``wandb.finish()`` for W&B), so every multirun job is its own run.

    ``failed=True`` (the job raised) marks the run as failed: W&B exit code 1, CSV status ``"failed"``."""
    if isinstance(logger, WandbLogger):
        import wandb

        if wandb.run is not None:
            try:
                wandb.finish(exit_code=1 if failed else 0)
            except Exception as error:
                log.warning("W&B run did not finish cleanly (%s: %s); its local files are kept in %s",
                            type(error).__name__, error, logger.save_dir)
    elif isinstance(logger, CSVLogger):
        logger.finalize("failed" if failed else "success")


def default_wandb_mode() -> str:
    """``WANDB_MODE`` if the user set it, else ``"offline"``."""
    return os.environ.get("WANDB_MODE", "offline")
