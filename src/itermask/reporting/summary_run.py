"""The report as a W&B summary run in the sweep's group."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from itermask.reporting.aggregate import GROUP, Report

log = logging.getLogger(__name__)

__all__ = ["log_report_to_wandb"]


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
    """A W&B summary run in ``group`` (the sweep's group) holding the report's tables (``wandb.Table``:
    summary, per seed, comparisons, headline, seed sensitivity, rank stability) and the plots
    (``wandb.Image``). Returns the run's local folder, or ``None``
    if W&B failed (a warning is logged; the local report files stay as written)."""
    try:
        import wandb

        run = wandb.init(
            project=project, group=group, name=name or f"{group or 'itermask'}-report", job_type="report",
            mode=mode, dir=str(save_dir or report.sweep.root), config={"report": report.settings,
                                                                        "multirun_dir": str(report.sweep.root)},
        )
        tables = ("summary", "per_seed", "comparisons", "headline", "seed_sensitivity", "rank_stability")
        payload = {f"report/{n}": wandb.Table(dataframe=getattr(report, n).astype(object).where(
            getattr(report, n).notna(), None)) for n in tables}
        payload.update({f"plots/{k[:-4]}": wandb.Image(str(p)) for k, p in written.items() if k.endswith(".png")})
        run.log(payload)
        summary = {"n_runs": len(report.sweep.runs), "n_missing": len(report.sweep.missing_lines())}
        for row in report.summary.itertuples():
            base = "/".join(str(x) for x in (*[getattr(row, g) for g in GROUP], row.explanation, row.schedule, row.score) if x)
            summary[f"{base}/mean"] = row.mean
        for row in report.seed_sensitivity.itertuples():
            base = "/".join(str(x) for x in (*[getattr(row, g) for g in GROUP], row.explanation, row.schedule, row.score) if x)
            summary[f"{base}/seed_share"] = row.share
        run.summary.update({k: v for k, v in summary.items() if isinstance(v, (int, float)) and math.isfinite(v)})
        folder = run.dir
        run.finish()
        return str(Path(folder).parent)
    except Exception as error:
        log.warning("W&B summary run failed (%s: %s); the report files are kept in %s",
                    type(error).__name__, error, report.sweep.root)
        return None
