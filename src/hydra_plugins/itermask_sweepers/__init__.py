"""itermask's sweepers: the grid-union sweeper (``hydra/sweeper=grid_union``, :mod:`.grid_union`, used by
``experiment=paper``) and the Optuna sweeper (``hparams_search=optuna``): hydra-optuna-sweeper's, going on
past failed trials.

It lives in the ``hydra_plugins`` namespace package because Hydra instantiates sweepers only from there. Hydra
imports every ``hydra_plugins`` module when it starts, so without the optional hydra-optuna-sweeper
(``pip install -e '.[sweeps]'``) this module defines nothing and stays quiet.

hydra-optuna-sweeper 1.3 reads each trial's objective as ``float(job_return.return_value)``: a job that raised
re-raises there, which ends the search beyond ``max_failure_rate`` (default 0); a NaN objective is refused by
Optuna 2.10 ("The value nan is not acceptable") on the sweeper's ``COMPLETE`` and then its ``FAIL`` path, which
ends the search. A failed job of :func:`itermask.jobs.run_job` (it raised, or its objective is NaN) returns a
:class:`~itermask.jobs.JobFailed`, whose ``float()`` raises: the sweeper tells the trial ``FAIL`` without values and
counts a failure, and ``max_failure_rate: 1.0`` (``conf/hparams_search/optuna.yaml``) lets the search go on. This
subclass adds a clear error when every trial failed, where the base sweeper ends with Optuna's "No trials are
completed yet." from ``study.best_trial``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra_plugins.itermask_sweepers.grid_union import GridUnionSweeper, GridUnionSweeperConf
from itermask.jobs import AllTrialsFailedError
from itermask.storage.failures import FAILURE_FILE, failed_jobs

try:
    from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper as _OptunaSweeper
except ImportError:  # the optional hydra-optuna-sweeper is not installed
    _OptunaSweeper = None

__all__ = ["GridUnionSweeper", "GridUnionSweeperConf"]

if _OptunaSweeper is not None:
    __all__ += ["OptunaSweeper"]

    class OptunaSweeper(_OptunaSweeper):
        """hydra-optuna-sweeper's ``OptunaSweeper`` (same settings) whose search goes on past failed trials
        and that ends with :class:`~itermask.jobs.AllTrialsFailedError` (naming the trials' errors) when
        none finished."""

        def sweep(self, arguments: list[str]) -> Any:
            try:
                return super().sweep(arguments)
            except ValueError as error:
                sweep_dir = Path(self.sweeper.sweep_dir)
                failures = failed_jobs(sweep_dir)
                launched = self.sweeper.job_idx
                if not launched or len(failures) < launched:
                    raise
                errors = "; ".join(f"trial {job}: {marker['error']}" for job, marker in failures[:5])
                more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
                raise AllTrialsFailedError(
                    f"all {launched} trial(s) of the Optuna search failed, so it has no best value: {errors}{more}. "
                    f"Each trial's traceback is in {sweep_dir}/<trial>/{FAILURE_FILE} and its log."
                ) from error
