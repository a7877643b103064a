"""One Hydra job whose failure is recorded instead of ending the multirun (:func:`run_job`).

A job that raises (or whose objective is NaN) leaves its traceback in the job's log (``<job folder>/<task>.log``),
a failure marker ``<job folder>/failed.json`` (:data:`FAILURE_FILE`: error, traceback, overrides) and its tracker
run finished as failed. In a multirun it then *returns* a :class:`JobFailed` instead of raising: Hydra's basic
sweeper would raise before the multirun-end callbacks run, so the report (:class:`itermask.callbacks.ReportCallback`,
listing the failed jobs) is still written, then :class:`itermask.callbacks.FailedJobsCallback` exits with status 1;
the Optuna sweeper tells the trial as failed (``float()`` of it raises :class:`JobFailedError`) and goes on
(``hydra_plugins.itermask_sweepers``). A single run (no ``-m``) re-raises after recording, so Hydra reports the
error and exits non-zero as usual.
"""

from __future__ import annotations

import importlib
import logging
import math
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from itermask.context import JobContext
from itermask.problems import ConfigError, is_config_error
from itermask.progress import clear as clear_progress
from itermask.progress import finished as finished_steps
from itermask.progress import resumable
from itermask.storage.failures import FAILURE_FILE, write_failure

log = logging.getLogger(__name__)

__all__ = [
    "JobFailed",
    "JobFailedError",
    "AllTrialsFailedError",
    "run_job",
    "INTERRUPTED_EXIT",
    "TERMINATED_EXIT",
    "Terminated",
]


class JobFailedError(RuntimeError):
    """Raised by ``float(JobFailed)``: the objective of a failed job (a sweeper reading it records the
    trial as failed)."""


class AllTrialsFailedError(RuntimeError):
    """Every trial of a search failed, so it has no best value (raised by itermask's Optuna sweeper,
    ``hydra_plugins.itermask_sweepers``)."""


class JobFailed:
    """What a failed job of a multirun returns instead of raising (picklable, so it also crosses process
    launchers such as joblib and submitit).

    Attributes:
        error: ``"<exception type>: <message>"``.
        output_dir: the job's folder, holding :data:`FAILURE_FILE`.
    """

    def __init__(self, error: str, output_dir: str) -> None:
        self.error = error
        self.output_dir = output_dir

    def __float__(self) -> float:
        raise JobFailedError(f"job {self.output_dir} failed: {self.error}")

    def __repr__(self) -> str:
        return f"JobFailed({self.error!r}, {self.output_dir!r})"


def _tell_rank_zero(output_dir: Path, error: BaseException) -> None:
    """In a DDP process other than rank 0 (:mod:`itermask.training.distributed`), add a line naming this
    process's error and log to rank 0's job log: Lightning stops rank 0 without a word (SIGKILL) when another
    process exits with an error, so its log would otherwise end mid-way."""
    from itermask.training.distributed import process_rank

    rank = process_rank()
    if rank == 0:
        return
    own = output_dir / f"train_ddp_process_{rank}.log"
    line = (
        f"[{time.strftime('%Y-%m-%d %H:%M:%S')}][{__name__}][ERROR] - DDP process of rank {rank} failed: "
        f"{type(error).__name__}: {error} (traceback in {own}); Lightning stops the other processes\n"
    )
    try:
        with open(output_dir / f"{Path(sys.argv[0]).stem}.log", "a") as handle:
            handle.write(line)
    except OSError:
        pass


def _task(task: Callable[[Any, JobContext], Any] | str) -> Callable[[Any, JobContext], Any]:
    """``task``, or the function a ``"module:function"`` string names (imported now)."""
    if callable(task):
        return task
    module, _, name = task.partition(":")
    return getattr(importlib.import_module(module), name)


def run_job(
    task: Callable[[Any, JobContext], Any] | str,
    cfg,
    check: Callable[[Any, JobContext], None] | None = None,
    context: JobContext | None = None,
) -> Any:
    """Run ``task(cfg, context)`` as one Hydra job (see the module docstring) and return its value; ``context``
    defaults to :meth:`JobContext.from_hydra`. A stale marker of an earlier run in the job folder is removed first.

    ``check(cfg, context)`` runs first (the entry points pass :func:`itermask.validation.check_composed` and name
    their task ``"module:function"``, e.g. ``"itermask.pipeline:run_evaluate"``, imported only after the check: a
    bad setting answers before torch, transformers and Lightning are imported), then the console is set up
    (:func:`itermask.console.configure`: quiet unless ``cfg.verbose``). A NaN objective counts as a failure
    (:class:`FloatingPointError`). A config error (:func:`is_config_error`) is logged as one line (its traceback
    is in :data:`FAILURE_FILE`); a single run raises it as a :class:`ConfigError`, whose message Hydra prints alone.

    Raises:
        ConfigError: a bad setting, in a single run.
        Exception: the task's error, in a single run (after it is logged and recorded).
        SystemExit: on Ctrl-C (:data:`INTERRUPTED_EXIT`) or SIGTERM (:data:`TERMINATED_EXIT`), after logging what
            the job finished and how to resume; no failure marker (an interruption is not a failure).
    """
    context = context if context is not None else JobContext.from_hydra()
    output_dir = Path(str(cfg.output_dir))
    (output_dir / FAILURE_FILE).unlink(missing_ok=True)
    pool = None
    clear_progress()
    interrupted, stop_watching = _watch_interrupts()
    try:
        if check is not None:
            check(cfg, context)
        from itermask.console import configure

        configure(verbose=bool(cfg.get("verbose", False)))
        pool = _job_resources(cfg)
        value = _task(task)(cfg, context)
        if isinstance(value, float) and math.isnan(value):
            raise FloatingPointError("the job's objective is NaN (e.g. a diverged fine-tuning); counted as failed")
        return value
    except (KeyboardInterrupt, SystemExit) as error:
        if isinstance(error, SystemExit) and interrupted() is None:
            raise
        signum = interrupted() or (signal.SIGTERM if isinstance(error, Terminated) else signal.SIGINT)
        _report_interrupt(output_dir, context, signum)
        raise SystemExit(128 + signum) from None
    except Exception as error:
        return _failed(error, output_dir, context)
    finally:
        stop_watching()
        if pool is not None:
            pool.release()


def _failed(error: Exception, output_dir: Path, context: JobContext) -> JobFailed:
    """Log and record a failed job (:func:`write_failure`); in a multirun return its :class:`JobFailed`.

    Raises:
        ConfigError: a bad setting, in a single run.
        Exception: ``error`` itself, in a single run."""
    config_error = is_config_error(error)
    given = " ".join(context.overrides) or "none"
    if not config_error:
        log.exception("job failed (overrides: %s): %s: %s", given, type(error).__name__, error)
    elif context.multirun:  # a single run's config error is printed once, by Hydra (below)
        log.error("job failed (overrides: %s): bad setting: %s", given, error)
    try:
        marker = write_failure(output_dir, error, list(context.overrides), context.number)
        if not config_error:
            log.error("failure recorded in %s", marker)
    except OSError as write_error:  # the job's error matters more than the marker's
        log.error("could not write %s (%s)", output_dir / FAILURE_FILE, write_error)
    _tell_rank_zero(output_dir, error)
    if not context.multirun:
        if config_error and not isinstance(error, ConfigError):
            raise ConfigError(f"bad setting: {error}") from error
        raise error
    return JobFailed(f"{type(error).__name__}: {error}", str(output_dir))


#: Exit status of a job stopped with Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED_EXIT = 130
#: Exit status of a job stopped with SIGTERM (128 + SIGTERM: ``timeout``, ``kill``, SLURM preemption).
TERMINATED_EXIT = 143


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM. A :class:`KeyboardInterrupt`, so everything that stops cleanly on
    Ctrl-C (Lightning's trainer among them) stops the same way."""


def _watch_interrupts() -> tuple[Callable[[], int | None], Callable[[], None]]:
    """Stop on Ctrl-C (SIGINT: ``KeyboardInterrupt``, as usual) and on SIGTERM (:class:`Terminated`) alike, noting
    which came. Returns a function giving the signal's number (``None`` before one), and one putting the former
    handlers back. Lightning turns a ``KeyboardInterrupt`` during ``fit`` or ``test`` into ``sys.exit(1)``, which
    this tells apart from other exits. Only in the main thread (a signal handler cannot be set elsewhere).

    Lightning's signal connector (pytorch-lightning 2.6) replaces the SIGTERM handler while its trainer runs and
    calls the one it found after its own, which only notes the signal (and passes it to DDP processes); its loops
    then raise ``SIGTERMException``, a ``SystemExit`` of status 0, after the batch under way (a masking batch can
    outlast a scheduler's grace period). Raising here, from the chained handler, stops at once instead, through
    Lightning's own ``KeyboardInterrupt`` path (``on_exception`` hooks, loggers finalized as failed)."""
    seen: dict[str, int | None] = {"signal": None}
    if threading.current_thread() is not threading.main_thread():
        return (lambda: seen["signal"]), (lambda: None)
    watched = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in watched}

    def handler(signum, frame):
        seen["signal"] = signum
        former = previous[signum]
        if callable(former) and former not in (signal.SIG_IGN, signal.SIG_DFL):
            former(signum, frame)
        raise KeyboardInterrupt if signum == signal.SIGINT else Terminated

    for signum in watched:
        signal.signal(signum, handler)

    def restore() -> None:
        for signum, former in previous.items():
            signal.signal(signum, former)

    return (lambda: seen["signal"]), restore


def _report_interrupt(output_dir: Path, context: JobContext, signum: int = signal.SIGINT) -> None:
    """Log what the job interrupted by ``signum`` (SIGINT or SIGTERM) finished and how to resume it."""
    multirun, job = context.multirun, context.number
    finished = finished_steps()
    finished += [
        f"fine-tuning up to its last checkpoint {last} (a re-run resumes there)"
        for last in resumable()
        if last.is_file()
    ]
    if (output_dir / "results.json").is_file():
        finished.append(f"its result {output_dir / 'results.json'}")
    how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    lines = [f"interrupted ({how}): job {job or ''} in {output_dir}".replace("job  in", "job in")]
    lines.append("finished: " + ("; ".join(finished) if finished else "nothing yet (settings and data only)"))
    if multirun:
        done = sorted(p.parent.name for p in output_dir.parent.glob("*/results.json"))
        lines.append(f"finished jobs of this multirun: {done or 'none'} (in {output_dir.parent})")
    lines.append(
        "to resume, run the same command again: "
        + " ".join(["python", *sys.argv])
        + " -- a finished fine-tuning is reused and an interrupted one resumes from its last checkpoint "
        "(<cache>/<key>/checkpoints/last.ckpt); finished jobs' results are reused (reuse_results=true)"
    )
    for line in lines:
        log.warning(line)


def _job_resources(cfg):
    """The job's torch threads (``threads``, :func:`~itermask.training.distributed.apply_threads`) and, with
    ``job_devices``, a claimed GPU (:class:`~itermask.training.distributed.DevicePool`, under
    ``<cache_dir>/devices``) put into ``cfg.trainer.devices``; returns the pool to release, or ``None``."""
    from itermask.training.distributed import DevicePool, apply_threads, assign_device, process_rank

    threads = cfg.get("threads")
    count = apply_threads(threads if isinstance(threads, int) and threads > 0 else None)
    devices = cfg.get("job_devices")
    if not devices or process_rank() != 0:
        log.debug("torch threads: %d", count)
        return None
    pool = DevicePool(list(devices), Path(str(cfg.cache_dir)).expanduser() / "devices")
    device = pool.claim()
    applied = assign_device(cfg.trainer, device)
    log.info(
        "job_devices: this job holds device %d of %s (%s); torch threads: %d",
        device,
        list(devices),
        f"trainer.devices=[{device}]" if applied else "a CPU run: the trainer is left as it is",
        count,
    )
    return pool
