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

import contextlib
import importlib
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from itermask import progress
from itermask.context import JobContext
from itermask.formatting import typed_command
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
    "run_entry",
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


def _job_name() -> str:
    """Hydra's job name (its log is ``<job dir>/<name>.log``), else the entry script's name."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().job.name if HydraConfig.initialized() else Path(sys.argv[0]).stem


def _tell_rank_zero(output_dir: Path, error: BaseException) -> None:
    """In a DDP process other than rank 0 (:mod:`itermask.training.distributed`), add a line naming this
    process's error and log to rank 0's job log: Lightning stops rank 0 without a word (SIGKILL) when another
    process exits with an error, so its log would otherwise end mid-way."""
    from itermask.training.distributed import process_rank

    rank = process_rank()
    if rank == 0:
        return
    own = output_dir / f"train_ddp_process_{rank}.log"
    _append_to_job_log(
        output_dir,
        f"DDP process of rank {rank} failed: {type(error).__name__}: {error} (traceback in {own}); Lightning stops "
        "the other processes",
    )


def _append_to_job_log(output_dir: Path, message: str) -> None:
    """Add an ERROR line in the job logger's format to ``<output_dir>/<job>.log`` without printing it (a line
    another process, or Hydra, shows on the console); an unwritable log is passed over."""
    line = f"[{time.strftime('%Y-%m-%d %H:%M:%S')}][{__name__}][ERROR] - {message}\n"
    try:
        with open(output_dir / f"{_job_name()}.log", "a") as handle:
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
    global _stopped_worker
    if _stopped_worker is not None:  # an earlier job of this worker process was interrupted: start no other
        raise SystemExit(_stopped_worker)
    context = context if context is not None else JobContext.from_hydra()
    if not context.multirun:
        _warn_sweep_without_multirun()
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
        if _in_worker():  # loky catches every error of a job, SystemExit too, and hands the worker the next one
            _stopped_worker = 128 + signum
        raise SystemExit(128 + signum) from None
    except Exception as error:
        return _failed(error, output_dir, context)
    finally:
        stop_watching()
        if pool is not None:
            pool.release()


def _warn_sweep_without_multirun() -> None:
    """A preset that sets a sweep (its own sweeper: ``experiment=paper``'s grid union; or the basic sweeper's
    ``params``: ``experiment=masked_vs_standard``) run without ``-m`` is a single job with the preset's defaults,
    not the sweep: say so (a warning, not an error: one job of a preset is a fair thing to run).
    ``hparams_search=optuna`` sets ``hydra.mode: MULTIRUN`` itself, so it is never a single run."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return
    hydra_cfg = HydraConfig.get()
    sweeper = str(hydra_cfg.sweeper.get("_target_", "") or "").rsplit(".", 1)[-1]
    if not sweeper or (sweeper == "BasicSweeper" and not hydra_cfg.sweeper.get("params")):
        return
    chosen = [f"{group}={name}" for group, name in hydra_cfg.runtime.choices.items() if group in SWEEP_PRESETS and name]
    log.warning(
        "%s sets a sweep (%s) that runs only as a multirun: without -m this is one job with its default settings; "
        "add -m to run the whole sweep",
        " ".join(chosen) or "this config",
        sweeper,
    )


#: config groups whose options set a sweeper of their own (named in :func:`_warn_sweep_without_multirun`)
SWEEP_PRESETS = ("experiment", "hparams_search")


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
    if config_error and not context.multirun:  # Hydra prints it on the console; the job's log would stay empty
        _append_to_job_log(output_dir, f"bad setting: {error}")
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
        redelivered = seen.pop("deferred", None) == signum
        if seen["signal"] is not None and _in_worker() and not redelivered:
            return  # a worker gets Ctrl-C twice: from the terminal and forwarded by the launcher (run_entry)
        seen["signal"] = signum
        if _deferred(signum, frame):
            seen["deferred"] = signum
            return
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


#: Seconds after which a signal that arrived inside a finalizer is sent again (:func:`_deferred`).
REDELIVERY_S = 0.05


def _deferred(signum: int, frame) -> bool:
    """Whether the signal handler called at ``frame`` runs inside a finalizer (a ``__del__`` method, or a callback
    of :mod:`weakref`), whose exception Python only prints ("Exception ignored in ...") and drops: a garbage
    collection can run one at any allocation, so a SIGTERM that arrives then would be lost and the job would run to
    its end. If so, the signal is sent to this process again in :data:`REDELIVERY_S` s (from a timer thread; the
    handler then runs outside the finalizer) and the caller returns without raising."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or Path(code.co_filename).name == "weakref.py":
            timer = threading.Timer(REDELIVERY_S, os.kill, (os.getpid(), signum))
            timer.daemon = True
            timer.start()
            return True
        frame = frame.f_back
    return False


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
    for line in [*lines, _RESUME.format(command=typed_command())]:
        log.warning(line)


_RESUME = (
    "to resume, run the same command again: {command} -- a finished fine-tuning is reused, an interrupted one "
    "resumes from its last checkpoint (<cache>/<key>/checkpoints/last.ckpt) if it wrote one and starts over if not; "
    "finished jobs' results are reused (reuse_results=true)"
)
#: Set by :func:`run_entry` to the launching process's id: a job run in another process (a joblib worker) knows it.
_LAUNCHER = "ITERMASK_LAUNCHER_PID"
#: Seconds the launching process waits for its worker processes' jobs to stop after a signal (:func:`run_entry`).
WORKER_GRACE_S = 30.0
#: Exit status of this worker process's interrupted job: it starts no other job (:func:`run_job`).
_stopped_worker: int | None = None


def run_entry(main: Callable[[], Any], config_name: str | None = None) -> None:
    """Run an entry script's Hydra ``main`` (``evaluate.py``, ``train.py``, ``pretrain.py``) so that SIGTERM and
    Ctrl-C to the launching process stop a multirun whose jobs run in worker processes (``hydra/launcher=joblib``
    with ``n_jobs`` > 1) as they stop a single job: the signal is forwarded to the workers, whose jobs stop and log
    what they finished (:func:`run_job`) and start no other; once no worker runs a job (at most
    :data:`WORKER_GRACE_S` s), :class:`Terminated` (``KeyboardInterrupt`` on Ctrl-C) is raised here and joblib kills
    the workers (SIGKILL; results and checkpoints are written atomically). Hydra's ``run_and_report`` catches
    ``Exception`` only, so the interruption reaches this function, which logs the multirun's finished jobs and how
    to resume. Jobs run in this process (a single run, the basic launcher) stop as before, in :func:`run_job`.

    Raises:
        SystemExit: :data:`TERMINATED_EXIT` or :data:`INTERRUPTED_EXIT` on an interruption no job caught."""
    os.environ[_LAUNCHER] = str(os.getpid())
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _stop_workers)
    if _hint_unknown_keys(config_name):  # before Hydra, whose message would advise adding the typo with "+"
        raise SystemExit(2)
    _refuse_typed_values(config_name)
    try:
        main()
    except SystemExit:
        raise
    except KeyboardInterrupt as error:
        signum = signal.SIGTERM if isinstance(error, Terminated) else signal.SIGINT
        _report_launcher_interrupt(signum)
        raise SystemExit(128 + signum) from None


def _hint_unknown_keys(config_name: str | None) -> bool:
    """Print :func:`itermask.console.foreign_group_hints` and :func:`itermask.console.unknown_key_hints` for this
    command's config (``config_name``, default the entry script's name) among the package's configs, with what to
    do, or first :func:`itermask.console.missing_plugin_hints`; whether there was one. Composes the config only for
    a command line that overrides a dotted key or a top-level key the primary config lacks (about 0.5 s), and never
    for one Hydra would not compose either (a sweep over config groups, an unknown group: Hydra says what failed)."""
    from itermask.conf import CONF_DIR
    from itermask.console import foreign_group_hints, missing_plugin_hints, unknown_key_hints

    plugins, name = missing_plugin_hints(sys.argv[1:]), config_name or Path(sys.argv[0]).stem
    hints = plugins or foreign_group_hints(sys.argv[1:], CONF_DIR, name) + unknown_key_hints(
        sys.argv[1:], CONF_DIR, name
    )
    for line in hints:
        print(line, file=sys.stderr)
    if plugins:
        print("error: a plugin above is not installed: see its hint. Nothing was run.", file=sys.stderr)
    elif hints:
        print(
            "error: a setting above does not exist as given: see its hint (`--help` lists the groups; "
            "`--cfg job` prints every setting). Nothing was run.",
            file=sys.stderr,
        )
    return bool(hints)


def _refuse_typed_values(config_name: str | None) -> None:
    """Refuse a value the config's typed schema refuses in one line (:func:`itermask.console.value_problems`), as
    a bad setting (status 1, as Hydra's own four-line message exits).

    Raises:
        SystemExit: (status 1) ``bad setting: <key>=<value>: <why>``."""
    from itermask.conf import CONF_DIR
    from itermask.console import value_problems

    if problems := value_problems(sys.argv[1:], CONF_DIR, config_name or Path(sys.argv[0]).stem):
        raise SystemExit("bad setting: " + "; ".join(problems) + ". Nothing was run.")


def _stop_workers(signum: int, frame) -> None:
    """The launching process's handler of SIGINT and SIGTERM (:func:`run_entry`): forward the signal to joblib's
    worker processes, wait until none runs a job, then raise :class:`Terminated` or ``KeyboardInterrupt``."""
    if _deferred(signum, frame):
        return
    workers = _worker_pids()
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
    deadline = time.monotonic() + WORKER_GRACE_S
    while any(_runs_a_job(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    raise KeyboardInterrupt if signum == signal.SIGINT else Terminated


def _worker_pids() -> list[int]:
    """This process's joblib (loky: ``python -m ...popen_loky_posix``) worker processes, from ``/proc`` (Linux;
    elsewhere none, and joblib kills the workers when the launcher stops)."""
    pids = []
    for children in Path("/proc/self/task").glob("*/children"):
        for pid in children.read_text().split():
            try:
                if b"popen_loky_posix" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    pids.append(int(pid))
            except OSError:  # gone meanwhile
                pass
    return pids


def _runs_a_job(pid: int) -> bool:
    """Whether worker process ``pid`` is inside :func:`run_job`: only its handler catches SIGTERM in a worker
    (``SigCgt`` of ``/proc/<pid>/status``, a mask with bit ``n - 1`` for signal ``n``), put back on its way out."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


def _in_worker() -> bool:
    """Whether this process is a worker of a launching process (:func:`run_entry`), e.g. a joblib worker."""
    launcher = os.environ.get(_LAUNCHER)
    return launcher is not None and launcher != str(os.getpid())


def _report_launcher_interrupt(signum: int) -> None:
    """Log, in the launching process, the interruption by ``signum``, the multirun's finished jobs and how to
    resume (a job interrupted in this process has logged its own lines already)."""
    how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    sweep = progress.sweep_dir
    lines = [f"interrupted ({how}): the multirun in {sweep}" if sweep else f"interrupted ({how})"]
    if sweep is not None:
        done = sorted(p.parent.name for p in sweep.glob("*/results.json"))
        lines.append(f"finished jobs of this multirun: {done or 'none'} (in {sweep})")
    for line in [*lines, _RESUME.format(command=typed_command())]:
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
