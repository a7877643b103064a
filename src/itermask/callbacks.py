"""Hydra callbacks (configured under ``hydra.callbacks``): the report after an evaluation multirun
(``conf/evaluate.yaml``) and the failed jobs' exit status after any multirun (``conf/train.yaml``)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

__all__ = ["ReportCallback", "FailedJobsCallback"]


class ReportCallback(Callback):
    """At the end of a multirun, write ``report.md``/``report.html`` (and plots, CSV tables) into the sweep
    folder (:mod:`itermask.reporting`) and, if the jobs log to W&B, a summary run in the sweep's W&B group.

    Args:
        wandb: log the W&B summary run; ``None``: when the jobs' logger is W&B (``logger._target_``).
        confidence: coverage of the intervals (0.95).
        interval: ``"t"`` or ``"bootstrap"``.
        test: ``"welch"`` or ``"permutation"`` for model comparisons.
        claims: the "Claims" section's settings (:class:`itermask.reporting.claims.ClaimSettings`, e.g.
            ``experiment=paper``); ``None``: no Claims section.

    A folder that cannot be reported (no finished run, mixed configs) is logged as a warning: the
    multirun's own results stay as they are.
    """

    def __init__(
        self,
        wandb: bool | None = None,
        confidence: float = 0.95,
        interval: str = "t",
        test: str = "welch",
        claims: Any = None,
    ) -> None:
        self.wandb = wandb
        if isinstance(claims, DictConfig):
            claims = OmegaConf.to_container(claims)
        self.claims = None if claims is None else dict(claims)
        self.confidence = confidence
        self.interval = interval
        self.test = test

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from itermask import reporting
        from itermask.tracking import group_name

        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            built = reporting.build_report(sweep_dir, self.confidence, self.interval, self.test)
            if self.claims is not None:
                built.settings["claims"] = self.claims
        except reporting.ReportError as error:
            log.warning("no report for %s: %s", sweep_dir, error)
            _failures_only_report(sweep_dir)
            return
        written = reporting.write_report(built)
        for line in built.sweep.missing_lines():
            log.warning("missing: %s", line)
        log.info("report: %s (%d runs)", written["report.md"], len(built.sweep.runs))
        logger = OmegaConf.select(config, "logger")
        use_wandb = self.wandb
        if use_wandb is None:
            use_wandb = logger is not None and "Wandb" in str(OmegaConf.select(logger, "_target_", default=""))
        if use_wandb:
            group = OmegaConf.select(logger, "group", default=None) if logger is not None else None
            folder = reporting.log_report_to_wandb(
                built,
                written,
                project=(OmegaConf.select(logger, "project", default=None) if logger is not None else None)
                or "itermask",
                group=group or group_name(config.task_name, sweep_dir),
                mode=(OmegaConf.select(logger, "mode", default=None) if logger is not None else None) or "offline",
                save_dir=sweep_dir,
                init_timeout=OmegaConf.select(logger, "init_timeout", default=None) if logger is not None else None,
            )
            if folder:
                log.info("W&B summary run: %s", folder)


def _failures_only_report(sweep_dir: Path) -> Path | None:
    """When no job of the multirun finished but some failed, ``report.md`` lists the failed jobs (their
    overrides and errors; tracebacks in their ``failed.json``) instead of leaving no report; returns it."""
    from itermask.jobs import failed_jobs
    from itermask.storage.files import write_text_atomic

    failures = failed_jobs(sweep_dir)
    if not failures:
        return None
    lines = [
        f"# itermask report: `{sweep_dir}`",
        "",
        f"No finished run: all {len(failures)} job(s) that ran failed, so there are no scores to report.",
        "",
        "## Failed jobs",
        "",
        "Each folder holds `failed.json` with the traceback (also in the job's log).",
        "",
    ]
    for job, marker in failures:
        overrides = marker.get("overrides")
        shown = "unknown" if overrides is None else (" ".join(overrides) or "none")
        lines.append(f"- job `{job}` failed (overrides: {shown}): {marker['error']}")
    path = write_text_atomic(sweep_dir / "report.md", "\n".join(lines) + "\n")
    log.info("report (failed jobs only): %s", path)
    return path


class FailedJobsCallback(Callback):
    """At the end of a multirun, name the jobs that failed (their ``failed.json``, :mod:`itermask.jobs`)
    and, if any did, end the process with exit status 1.

    It is the first entry of ``hydra.callbacks``: Hydra calls the multirun-end callbacks in reverse order,
    so this one runs after the others (the report is written first).

    Args:
        exit_nonzero: end with exit status 1 when a job failed (``false`` for searches whose failed trials
            are part of the search, e.g. ``hparams_search=optuna``: the failures are still logged).
    """

    def __init__(self, exit_nonzero: bool = True) -> None:
        self.exit_nonzero = exit_nonzero

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from itermask.jobs import failed_jobs

        sweep_dir = Path(config.hydra.sweep.dir)
        failures = failed_jobs(sweep_dir)
        if not failures:
            return
        for job, marker in failures:
            log.error("job %s failed: %s (traceback in %s)", job, marker["error"], sweep_dir / job / "failed.json")
        if self.exit_nonzero:
            log.error("%d job(s) of the multirun in %s failed; exiting with status 1", len(failures), sweep_dir)
            sys.exit(1)
