"""Experiment tracking: building the Lightning logger from config and logging evaluation results.

W&B (default) runs offline unless ``WANDB_MODE`` or ``logger.mode`` says otherwise. Each Hydra job is
its own W&B run; the runs of one multirun share a group (the sweep folder's name, unless
``logger.group`` is set). Masking curves go to W&B as a Table plus line plots keyed by masking
fraction, scores as summary values, the resolved config as the run config. ``logger=csv`` writes the
same numbers with Lightning's ``CSVLogger``.
"""

from __future__ import annotations

import os
from typing import Any

from pytorch_lightning.loggers import CSVLogger, Logger, WandbLogger

__all__ = ["curve_rows", "CURVE_COLUMNS", "log_config", "log_evaluation", "ood_rows", "OOD_COLUMNS", "log_ood", "finish"]

CURVE_COLUMNS = (
    "curve",
    "saliency",
    "schedule",
    "fraction",
    "mean_k",
    "target_prob",
    "accuracy",
    "flip_rate",
    "comprehensiveness_prob",
    "sufficiency_prob",
)
CURVE_PLOTS = ("target_prob", "accuracy", "flip_rate", "comprehensiveness_prob")


def curve_rows(scores: dict) -> list[list[Any]]:
    """One row per (saliency, schedule, fraction) from ``scores[saliency][schedule]`` summaries
    (:func:`itermask.metrics.summarize`), in :data:`CURVE_COLUMNS` order (``None`` where undefined)."""
    rows = []
    for saliency, by_schedule in scores.items():
        for schedule, summary in by_schedule.items():
            for i, fraction in enumerate(summary["fraction"]):
                values = {
                    "curve": f"{saliency}/{schedule}",
                    "saliency": saliency,
                    "schedule": schedule,
                    "fraction": fraction,
                }
                for column in CURVE_COLUMNS[4:]:
                    series = summary.get(column)
                    values[column] = None if series is None else series[i]
                rows.append([values[c] for c in CURVE_COLUMNS])
    return rows


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


def log_config(logger: Logger | None, config: dict) -> None:
    """Record the resolved config as the run's config / hyperparameters."""
    if logger is not None:
        logger.log_hyperparams(config)


def log_evaluation(logger: Logger | None, result: dict) -> None:
    """Log curves (Table + line plots for W&B, per-step metrics for CSV) and scalar scores."""
    if logger is None:
        return
    rows = curve_rows(result["scores"])
    scalars = {k: v for k, v in _scalars(result).items() if v is not None}
    if isinstance(logger, WandbLogger):
        import wandb

        table = wandb.Table(columns=list(CURVE_COLUMNS), data=rows)
        payload = {"masking_curves": table}
        for column in CURVE_PLOTS:
            payload[f"plots/{column}"] = wandb.plot.line(
                table, "fraction", column, stroke="curve", title=f"{column} vs masking fraction"
            )
        logger.experiment.log(payload)
        logger.experiment.summary.update(scalars)
    else:
        for step, row in enumerate(rows):
            logger.log_metrics(
                {f"curve/{row[0]}/{c}": v for c, v in zip(CURVE_COLUMNS[3:], row[3:]) if v is not None}, step=step
            )
        logger.log_metrics(scalars, step=len(rows))
        logger.save()


OOD_COLUMNS = ("curve", "saliency", "schedule", "fraction", "statistic", "value")


def ood_rows(ood: dict) -> list[list[Any]]:
    """The per-step OOD statistics (``ood["statistics"][saliency][schedule]``, see
    :meth:`itermask.embedding_stats.OODCurves.to_dict`) in long format, :data:`OOD_COLUMNS` order."""
    rows = []
    for saliency, by_schedule in ood["statistics"].items():
        for schedule, stats in by_schedule.items():
            for key, series in stats["values"].items():
                for fraction, value in zip(stats["fractions"], series):
                    rows.append([f"{saliency}/{schedule}", saliency, schedule, fraction, key, value])
    return rows


def log_ood(logger: Logger | None, ood: dict, images: dict[str, Any]) -> None:
    """Log the OOD statistics (W&B: a long Table, the figures ``images`` ``{name: PNG path}`` as images
    and the AUROCs and MaSF share of the final-layer input and the model as summary values
    ``ood/<curve>/<statistic>@<fraction>``; CSV: those as metrics; per-layer values are in the table)."""
    if logger is None:
        return
    rows = ood_rows(ood)
    scalars = {
        f"ood/{curve}/{key}@{fraction:g}": value
        for curve, _, _, fraction, key, value in rows
        if ("auroc" in key or key == "masf_flagged") and not key.startswith("layer_")
    }
    if isinstance(logger, WandbLogger):
        import wandb

        payload = {"ood_statistics": wandb.Table(columns=list(OOD_COLUMNS), data=rows)}
        payload.update({name: wandb.Image(str(path)) for name, path in images.items()})
        logger.experiment.log(payload)
        logger.experiment.summary.update(scalars)
    else:
        logger.log_metrics(scalars)
        logger.save()


def finish(logger: Logger | None) -> None:
    """End the run (``wandb.finish()`` for W&B), so every multirun job is its own run."""
    if isinstance(logger, WandbLogger):
        import wandb

        if wandb.run is not None:
            wandb.finish()
    elif isinstance(logger, CSVLogger):
        logger.finalize("success")


def default_wandb_mode() -> str:
    """``WANDB_MODE`` if the user set it, else ``"offline"``."""
    return os.environ.get("WANDB_MODE", "offline")
