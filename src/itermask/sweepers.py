"""Hydra sweepers: the Optuna sweeper of ``hparams_search=optuna``, going on past failed trials.

hydra-optuna-sweeper 1.3 reads each trial's objective as ``float(job_return.return_value)`` and tells the
study. Two things end its sweep there:

- a trial whose job raised: reading ``return_value`` re-raises the job's error; the sweeper tells the trial
  failed, but re-raises unless the batch's failure rate is within ``max_failure_rate`` (default 0);
- a NaN objective: ``study.tell(state=COMPLETE, values=[nan])`` is refused by Optuna 2.10 ("The value nan
  is not acceptable"); the sweeper's error path then tells ``state=FAIL`` *with* the values, which Optuna
  refuses as well ("Values were told. Values cannot be specified when state is TrialState.PRUNED or
  TrialState.FAIL"): the trial stays RUNNING and the exception ends the sweep.

With :func:`itermask.jobs.run_job`, a failed job (it raised, or its objective is NaN) records its failure
and returns a :class:`~itermask.jobs.JobFailed`, whose ``float()`` raises: the sweeper takes its error
path with no values, tells the trial ``FAIL`` (which Optuna accepts) and counts a failure, and
``max_failure_rate: 1.0`` (``conf/hparams_search/optuna.yaml``) lets the sweep go on. This subclass adds a
clear error when every trial failed, where the base sweeper would end with Optuna's "No trials are
completed yet." from ``study.best_trial``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper as _OptunaSweeper

from itermask.jobs import FAILURE_FILE, failed_jobs

__all__ = ["OptunaSweeper", "AllTrialsFailedError"]


class AllTrialsFailedError(RuntimeError):
    """Every trial of an Optuna search failed: there is no best value."""


class OptunaSweeper(_OptunaSweeper):
    """hydra-optuna-sweeper's ``OptunaSweeper`` (same settings) whose search goes on past failed trials and
    that ends with :class:`AllTrialsFailedError` (naming each trial's error) when none finished."""

    def sweep(self, arguments: list[str]) -> Any:
        try:
            return super().sweep(arguments)
        except ValueError as error:
            sweep_dir = Path(self.sweeper.sweep_dir)
            failures = failed_jobs(sweep_dir)
            launched = self.sweeper.job_idx
            if not launched or len(failures) < launched:
                raise
            errors = "; ".join(f"trial {job}: {marker.get('error', 'unknown error')}" for job, marker in failures[:5])
            more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
            raise AllTrialsFailedError(
                f"all {launched} trial(s) of the Optuna search failed, so it has no best value: {errors}{more}. "
                f"Each trial's traceback is in {sweep_dir}/<trial>/{FAILURE_FILE} and its log."
            ) from error
