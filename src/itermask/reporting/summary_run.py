"""The report as a W&B summary run in the sweep's group."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from itermask.reporting.aggregate import GROUP, Report

log = logging.getLogger(__name__)

__all__ = ["log_report_to_wandb"]


def _cells(frame):
    """``frame`` with W&B-safe cells: NaN as ``None``, lists as text."""
    frame = frame.astype(object).where(frame.notna(), None)
    return frame.map(lambda v: ", ".join(str(x) for x in v) if isinstance(v, list) else v)


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
        payload = {f"report/{n}": wandb.Table(dataframe=_cells(getattr(report, n)))
                   for n in ("summary", "per_seed", "comparisons", "attack_links")
                   if not getattr(report, n).empty or n != "attack_links"}
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
