"""Hydra callbacks (configured under ``hydra.callbacks``): the report after an evaluation multirun
(``conf/evaluate.yaml``), every job's settings checked before a multirun launches any, the failed jobs' exit
status after any multirun, and the multirun's folder for an interruption's message (``conf/train.yaml``)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, cast

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

__all__ = ["ReportCallback", "FailedJobsCallback", "InterruptCallback", "SettingsCheckCallback"]


class ReportCallback(Callback):
    """At the end of a multirun, write ``report.md``/``report.html`` (and plots, CSV tables) into the sweep
    folder (:mod:`itermask.reporting`) and, if the jobs log to W&B, a summary run in the sweep's W&B group.

    Args:
        wandb: log the W&B summary run; ``None``: when the jobs' logger is W&B (``logger._target_``).
        confidence: coverage of the intervals (0.95).
        interval: ``"t"`` or ``"bootstrap"``.
        test: ``"welch"`` or ``"permutation"`` for model comparisons.
        sections: report sections by name (:mod:`itermask.reporting.sections`): each a config node whose
            ``_target_`` names the section's class, its other keys the section's settings, e.g. ``claims``
            (``experiment=paper``: :class:`itermask.studies.robust_infidelity.RobustInfidelity`); ``None``:
            none of that name. The nodes stay plain settings (``_recursive_: false`` in ``conf/evaluate.yaml``)
            and are built when the report is written, first in it.

    A folder that cannot be reported (mixed configs, results of an older schema) ends the multirun with exit
    status 1 and the reason (the jobs' own results stay as they are); one whose jobs all failed gets a report
    listing them.

    Raises:
        ValueError: a section node without a ``_target_``.
        SystemExit: (from :meth:`on_multirun_start`, before any job) a bad setting of a section, built here.
    """

    def __init__(
        self,
        wandb: bool | None = None,
        confidence: float = 0.95,
        interval: str = "t",
        test: str = "welch",
        **sections: Any,
    ) -> None:
        self.wandb = wandb
        self.sections = {}
        for name, node in sections.items():
            if isinstance(node, DictConfig):
                node = OmegaConf.to_container(node)
            if node is None:
                continue
            built = hasattr(node, "figures") and hasattr(node, "markdown")  # a section already built
            if not built and not (isinstance(node, dict) and "_target_" in node):
                raise ValueError(
                    f"hydra.callbacks.report.{name} is not a report section node: it needs a _target_ naming "
                    "its class (itermask.reporting.sections); the report's own settings are wandb, confidence, "
                    "interval and test"
                )
            self.sections[name] = node
        from itermask.reporting.sections import build_section

        # each section built now, and a bad setting kept for on_multirun_start to stop the multirun with before
        # any job runs (raised here, Hydra would wrap it in a traceback-like message of several lines)
        self._built: dict[str, Any] = {}
        self._problems: list[str] = []
        for name, node in self.sections.items():
            try:
                self._built[name] = build_section(name, node)
            except ValueError as error:
                self._problems.append(str(error))
        self.confidence = confidence
        self.interval = interval
        self.test = test

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Check the sections against the jobs the sweep will launch (``check_sweep(models)`` of a section
        that has it, e.g. claims naming a model no job runs); a problem ends the multirun (exit status 1)
        before any job: Hydra turns a callback's exception into a warning, so it is a ``SystemExit``."""
        from itermask.reporting.sweep import sweep_jobs

        if self._problems:
            raise SystemExit("error: " + "\nerror: ".join(self._problems))
        jobs = sweep_jobs(config)
        if jobs is None:
            return
        default = OmegaConf.select(config, "model.name", default=None)
        models = set()
        for job in jobs:  # a conf/model/ option is named as its model.name
            named = [o.split("=", 1)[1] for o in job if o.split("=", 1)[0] in ("model", "model.name")]
            models.add(named[-1] if named else default)
        for section in self._built.values():
            try:
                getattr(section, "check_sweep", lambda models: None)(sorted(str(m) for m in models if m))
            except ValueError as error:
                raise SystemExit(f"error: {error}") from error

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Write the report; when none can be written (and no failed-jobs report either), end with exit status
        1 saying why (a ``SystemExit``: Hydra turns a callback's exception into a warning and exits 0)."""
        if self._problems:
            raise SystemExit("error: " + "\nerror: ".join(self._problems))
        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            self._report(config, sweep_dir)
        except Exception as error:
            from itermask.reporting.sweep import NoRunsError, ReportError

            if isinstance(error, NoRunsError) and _failures_only_report(sweep_dir) is not None:
                return  # no finished run: the failed jobs' report, and FailedJobsCallback's exit status 1
            log.error("no report for %s: %s", sweep_dir, error, exc_info=not isinstance(error, ReportError))
            raise SystemExit(f"error: no report for {sweep_dir}: {type(error).__name__}: {error}") from error

    def _report(self, config: DictConfig, sweep_dir: Path) -> None:
        from itermask.reporting import build_report, log_report_to_wandb, write_report
        from itermask.tracking import group_name

        built = build_report(sweep_dir, self.confidence, self.interval, self.test)
        built.settings.update(self.sections)
        written = write_report(built)
        for line in built.sweep.missing_lines():
            log.warning("missing: %s", line)
        # the page to open last: the token views are only in report.html (report.md has the same tables)
        n = len(built.sweep.runs)
        log.info(
            "report: %s (%d run%s; Markdown: %s)",
            written["report.html"],
            n,
            "" if n == 1 else "s",
            written["report.md"],
        )
        logger = OmegaConf.select(config, "logger")

        def option(name: str) -> Any:
            return OmegaConf.select(logger, name, default=None) if logger is not None else None

        use_wandb = self.wandb if self.wandb is not None else "Wandb" in str(option("_target_") or "")
        if use_wandb:
            folder = log_report_to_wandb(
                built,
                written,
                project=option("project") or "itermask",
                group=option("group") or group_name(config.task_name, sweep_dir),
                mode=option("mode") or "offline",
                save_dir=sweep_dir,
                init_timeout=option("init_timeout"),
            )
            if folder:
                log.info("W&B summary run: %s", folder)


def _failures_only_report(sweep_dir: Path) -> Path | None:
    """When no job of the multirun finished but some failed, ``report.md`` lists the failed jobs (their
    overrides and errors, escaped: :func:`~itermask.formatting.md_escape`; tracebacks in their ``failed.json``)
    instead of leaving no report; returns it."""
    from itermask.formatting import md_escape
    from itermask.storage.failures import failed_jobs
    from itermask.storage.files import write_text_atomic

    failures = failed_jobs(sweep_dir)
    if not failures:
        return None
    lines = [
        f"# itermask report: {md_escape(sweep_dir)}",
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
        lines.append("- " + md_escape(f"job {job} failed (overrides: {shown}): {marker['error']}"))
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
        from itermask.storage.failures import failed_jobs

        sweep_dir = Path(config.hydra.sweep.dir)
        failures = failed_jobs(sweep_dir)
        if not failures:
            return
        for job, marker in failures:
            log.error("job %s failed: %s (traceback in %s)", job, marker["error"], sweep_dir / job / "failed.json")
        if self.exit_nonzero:
            log.error("%d job(s) of the multirun in %s failed; exiting with status 1", len(failures), sweep_dir)
            sys.exit(1)


class InterruptCallback(Callback):
    """At the start of a multirun, note its folder for the message of a launching process stopped by SIGTERM or
    Ctrl-C (:func:`itermask.jobs.run_entry`)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from itermask import progress

        progress.sweep_dir = Path(config.hydra.sweep.dir)


class SettingsCheckCallback(Callback):
    """Before a multirun launches its first job, compose every job's config as Hydra's launcher will
    (``load_sweep_config``) and check its settings with the command's own plan function: a bad value in any job
    ends the multirun (exit status 1) before any job runs, naming the problem and the jobs that have it. Without
    this, ``-m seed=0,abc`` ran job 0 in full before job 1 was refused, and ``-m experiment=paper
    naopc.max_examples=0`` failed 27 jobs one by one and then fine-tuned the 6 jobs where NAOPC is off.

    Only the problems the plan marks as bad settings (:func:`itermask.problems.is_config_error`) stop the
    multirun; any other error in the check is left for the job itself to report. Sweepers whose jobs are not
    known beforehand (Optuna) are not checked (:func:`itermask.reporting.sweep.sweep_jobs` gives ``None``).
    The jobs check their settings again when they run. A single run is checked the same way before Hydra makes
    its folder (``on_run_start``): a bad value ends it with the message the job would give, exit status 1, and
    nothing written.

    Args:
        plan: the dotted path of the command's settings stage, called as ``plan(cfg, context)`` on each
            job's composed config without its ``hydra`` node (``itermask.settings.evaluation_plan`` for
            ``evaluate.py``, ``itermask.settings.training_plan`` for ``train.py`` and ``pretrain.py``).
    """

    def __init__(self, plan: str) -> None:
        self.plan = plan

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Raises:
        SystemExit: (status 1) listing each bad setting once, with the numbers of the jobs that have it."""
        from itermask.reporting.sweep import sweep_jobs

        _warn_overrides(config)
        if (problem := _launcher_problem(config)) is not None:
            raise SystemExit(f"error: the multirun was not started: {problem}")
        jobs = sweep_jobs(config)
        if not jobs:
            return
        found: dict[str, list[int]] = {}
        for number, problem in self._problems(config, jobs):
            found.setdefault(problem, []).append(number)
        if found:
            lines = [f"{problem} ({_jobs_text(numbers, jobs)})" for problem, numbers in found.items()]
            bad = len({n for numbers in found.values() for n in numbers})
            raise SystemExit(
                f"error: the multirun was not started: {bad} of its {len(jobs)} jobs {'has' if bad == 1 else 'have'} a "
                "bad setting\nerror: " + "\nerror: ".join(lines)
            )

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A single run: its settings checked the same way before Hydra makes the job's folder, so a bad value
        ends the run with the job's own message (``bad setting: ...``, every problem named) and nothing written
        (no folder, no ``failed.json``).

        Raises:
            SystemExit: (status 1) naming each bad setting."""
        import copy

        from omegaconf import open_dict, read_write

        from itermask.context import JobContext

        _warn_overrides(config)
        composed = copy.deepcopy(config)
        with read_write(composed.hydra.runtime), open_dict(composed.hydra.runtime):  # as run_job will set it
            composed.hydra.runtime.output_dir = str(Path(str(config.hydra.run.dir)).absolute())
        overrides = tuple(OmegaConf.select(config, "hydra.overrides.task") or ())
        command = _command(config)
        error = self._bad_setting(composed, JobContext(False, overrides, command=command), "the single run")
        if error is not None:  # the text the job itself would give (itermask.problems.ConfigError)
            raise SystemExit(f"bad setting: {error}")

    def _problems(self, config: DictConfig, jobs: list[list[str]]):
        """``(job number, problem)`` for every bad setting of every job."""
        from hydra.core.global_hydra import GlobalHydra
        from omegaconf import open_dict, read_write

        from itermask.context import JobContext
        from itermask.validation import SettingsError

        loader = GlobalHydra.instance().config_loader()
        sweep_dir = str(config.hydra.sweep.dir)
        command = _command(config)
        for number, overrides in enumerate(jobs):
            try:
                composed = loader.load_sweep_config(config, list(overrides))
            except Exception as error:  # the launcher would fail on it too, with Hydra's several lines
                yield number, _composition_problem(error)
                continue
            with open_dict(composed):  # as Hydra's launcher and run_job set them
                composed.hydra.job.id = str(number)
                composed.hydra.job.num = number
                subdir = str(OmegaConf.select(composed, "hydra.sweep.subdir"))
                with read_write(composed.hydra.runtime):
                    composed.hydra.runtime.output_dir = str(Path(sweep_dir, subdir).absolute())
            context = JobContext(True, tuple(overrides), str(number), sweep_dir, command)
            error = self._bad_setting(composed, context, f"job {number}")
            if error is not None:
                for problem in error.problems if isinstance(error, SettingsError) else [str(error)]:
                    yield number, problem

    def _bad_setting(self, composed: DictConfig, context, label: str) -> Exception | None:
        """The error of the bad settings the command's plan finds in one job's ``composed`` config (with Hydra's
        config of the job current meanwhile, as in the job), or ``None``; an error that is not a bad setting is
        left to the job (``None``)."""
        import copy

        from hydra.core.hydra_config import HydraConfig
        from hydra.utils import get_method
        from omegaconf import open_dict, read_write

        from itermask.problems import config_errors, is_config_error

        hydra_config = HydraConfig.instance()
        before = hydra_config.cfg
        hydra_config.set_config(composed)
        task = copy.deepcopy(composed)
        with read_write(task), open_dict(task):
            del task["hydra"]
        try:
            with config_errors():
                get_method(self.plan)(task, context)
        except Exception as error:
            if is_config_error(error):
                return error
            log.debug("settings check of %s left to the job: %s", label, error)
        finally:
            hydra_config.cfg = before
        return None


def _warn_overrides(config: DictConfig) -> None:
    """Print a warning, once per command, for each key the command line gives twice
    (:func:`itermask.overrides.repeated_key_warnings`; a multirun's jobs see the sweeper's de-duplicated overrides,
    so the command line is read here) and for each key forced in with ``++`` that nothing reads (``++train.lr=1``,
    ``++foo=1``: what :func:`itermask.validation.check_added_keys` refuses of ``+``; ``++`` adds it as asked)."""
    from itermask.overrides import repeated_key_warnings
    from itermask.validation import SettingsError, check_added_keys

    task = [str(o) for o in OmegaConf.select(config, "hydra.overrides.task") or ()]
    lines = repeated_key_warnings(task)
    # the ++ keys that are not there without them (++ also sets an existing key)
    if forced := [o[1:] for o in task if o.startswith("++") and not o[2:].startswith("model.pretrain")]:
        forced = _absent_keys(config, task, forced)
    if forced:
        body = cast(dict, OmegaConf.to_container(config, resolve=False))
        body.pop("hydra", None)
        command = _command(config)
        try:
            check_added_keys(forced, body, command=command, forced=True)
        except SettingsError as error:
            lines += error.problems
    for line in lines:
        print(f"warning: {line}", file=sys.stderr)


def _command(config: DictConfig) -> str:
    """The entry point's config name (``evaluate``, ``train``, ``pretrain``), which messages name as ``<name>.py``."""
    return str(OmegaConf.select(config, "hydra.job.config_name", default="evaluate"))


def _absent_keys(config: DictConfig, task: list[str], forced: list[str]) -> list[str]:
    """The ``+key=value`` of ``forced`` whose key the command's config lacks when composed without the ``++``
    overrides (and without a multirun's sweeps, which Hydra cannot compose as one config); none if that fails."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    absent = object()
    try:
        kept = [str(o.input_line) for o in OverridesParser.create().parse_overrides(task) if not o.is_sweep_override()]
        base = GlobalHydra.instance().config_loader().load_sweep_config(config, [o for o in kept if o[:2] != "++"])
    except Exception as error:  # noqa: BLE001 (a warning only: the jobs' own checks still run)
        log.debug("the ++ keys were not checked: %s", error)
        return []
    return [o for o in forced if OmegaConf.select(base, o[1:].split("=", 1)[0], default=absent) is absent]


def _launcher_problem(config: DictConfig) -> str | None:
    """The joblib launcher's job count 0, which joblib refuses only when it launches (its traceback, after the sweep
    folder was made); its config types ``n_jobs`` as an integer or null, so 0 is the one bad value left."""
    target = str(OmegaConf.select(config, "hydra.launcher._target_", default="") or "")
    if "joblib" not in target or OmegaConf.select(config, "hydra.launcher.n_jobs", default=None) != 0:
        return None
    return (
        "hydra.launcher.n_jobs=0: give the number of jobs run at once, a whole number >= 1 "
        "(-1: one per CPU, joblib's convention)"
    )


def _composition_problem(error: Exception) -> str:
    """One line for an error of composing a job's config (Hydra's ``ConfigCompositionException`` or OmegaConf's,
    several lines with ``full_key``/``object_type`` details): its first line and its cause's first line. A key
    that the job's config lacks ("Could not override 'saliency.n_samples'", whose advice to add it with ``+``
    would not help: the job's component does not take it) is named as such."""
    import re

    from itermask.console import schema_refusal

    if (refusal := schema_refusal(error)) is not None:  # worded as a single run's (itermask.console.value_problems)
        return refusal
    cause = error.__cause__ or error.__context__
    detail = str(cause).strip().splitlines()[0] if cause is not None and str(cause).strip() else ""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if (missing := re.match(r"Could not override '([^']+)'", first)) is not None:
        key = missing.group(1)
        return (
            f"{key} is not a setting of these jobs' {key.split('.')[0]} ({detail or first}): a key that only some "
            "options of a group take cannot be set for all of them; run those options in a multirun of their own"
        )
    return f"{first.rstrip('.')}: {detail}" if detail and detail not in first else first


def _jobs_text(numbers: list[int], jobs: list[list[str]]) -> str:
    """``"job 1: seed=abc"`` for one job, ``"jobs 0-26 of 33"`` (runs of consecutive numbers) for several."""
    if len(numbers) == 1:
        return f"job {numbers[0]}: {' '.join(jobs[numbers[0]]) or 'no overrides'}"
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    spans = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return f"jobs {spans} of {len(jobs)}"
