"""SIGTERM stops a job as Ctrl-C does (:func:`itermask.jobs.run_job`): what finished and how to resume are logged,
nothing is half-written, and the process exits 143 (128 + SIGTERM), in a single run and in a multirun, also inside
Lightning's loops (whose own SIGTERM handling would end the job with status 0 and no result)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import save_tiny_bert
from omegaconf import OmegaConf
from results_helpers import ROOT

from itermask.jobs import TERMINATED_EXIT, run_job
from itermask.progress import note_progress
from itermask.storage.failures import FAILURE_FILE


def _sigterm_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)  # the handler raises during the sleep; reaching the end means it did not


def test_sigterm_reports_what_was_finished_and_exits_143(tmp_path, caplog):
    before = signal.getsignal(signal.SIGTERM)

    def task(cfg, context):
        note_progress("the fine-tuned checkpoint /cache/abc")
        _sigterm_self()

    cfg = OmegaConf.create({"output_dir": str(tmp_path / "job"), "verbose": False})
    with caplog.at_level("WARNING"), pytest.raises(SystemExit) as exit_:
        run_job(task, cfg)
    assert exit_.value.code == TERMINATED_EXIT == 143
    assert "interrupted (SIGTERM): job in " + str(tmp_path / "job") in caplog.text
    assert "finished: the fine-tuned checkpoint /cache/abc" in caplog.text
    assert "to resume, run the same command again" in caplog.text
    assert not (tmp_path / "job" / FAILURE_FILE).exists()  # an interruption is not a failure
    assert signal.getsignal(signal.SIGTERM) is before  # the former handler is back


class _SigtermOnFinalize:
    """Sends this process SIGTERM from its ``__del__``, as when a garbage collection runs a finalizer (here
    ``regex``'s ``Group.__del__``, loading a tokenizer) at the moment the signal comes: the handler then runs inside
    the finalizer, whose exception Python prints as "Exception ignored in ..." and drops."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)  # the handler runs here, inside __del__


def test_sigterm_inside_a_finalizer_still_stops_the_job_with_143(tmp_path, capsys):
    """Without the re-delivery (``jobs._deferred``) the job below ran to its end and the multirun went on (a CI
    run of 5 December 2026: the signal came while a finalizer ran)."""
    ran: list[str] = []

    def task(cfg, context):
        _SigtermOnFinalize()  # dropped at once: __del__ runs here
        ran.append("after the finalizer")
        time.sleep(5)  # the re-delivered signal (jobs.REDELIVERY_S later) raises here
        ran.append("to the end")

    cfg = OmegaConf.create({"output_dir": str(tmp_path / "job"), "verbose": False})
    started = time.monotonic()
    with pytest.raises(SystemExit) as exit_:
        run_job(task, cfg)
    assert exit_.value.code == 143 and ran == ["after the finalizer"]
    assert time.monotonic() - started < 4
    assert "Exception ignored" not in capsys.readouterr().err  # the handler returned; nothing was dropped


def test_sigterm_in_lightnings_test_loop_stops_at_once_with_143(tmp_path):
    """Lightning's signal connector chains the job's handler, which stops the loop in the batch that got the
    signal; without it, Lightning stops after that batch with ``SIGTERMException`` (status 0)."""
    import pytorch_lightning as pl

    steps: list[int] = []

    class Module(pl.LightningModule):
        def test_step(self, batch, batch_idx):
            steps.append(batch_idx)
            if batch_idx == 1:
                _sigterm_self()

    def task(cfg, context):
        trainer = pl.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
        trainer.test(
            Module(), dataloaders=torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(4, 1)))
        )

    cfg = OmegaConf.create({"output_dir": str(tmp_path / "job"), "verbose": False})
    with pytest.raises(SystemExit) as exit_:
        run_job(task, cfg)
    assert exit_.value.code == 143 and steps == [0, 1]


TINY = [
    "model.max_length=32",
    "train.max_train_examples=96",
    "+trainer.limit_val_batches=2",
    "+trainer.limit_test_batches=2",
    "evaluation.n_examples=6",
    "evaluation.fractions=[0,0.5,1.0]",
    "evaluation.aopc_bins=[0.5]",
    "analyses=[]",
    "logger=csv",
    "trainer.accelerator=cpu",
]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, vocab_file):
    """A tiny random BERT classifier and its tokenizer saved as a local ``model.pretrained`` folder."""
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), vocab_file)


def _run(args: list[str], tmp_path, sigterm_after: str | None = None) -> tuple[int, str]:
    """Run ``evaluate.py args`` in a subprocess (its cache under ``tmp_path``); with ``sigterm_after``, send it
    SIGTERM as soon as its output matches that pattern. Returns the exit status and the output."""
    env = {**os.environ, "ITERMASK_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT / "src")}
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"})
    output = tmp_path / f"output-{time.monotonic_ns()}.txt"
    with open(output, "w") as sink:
        process = subprocess.Popen(
            [sys.executable, "evaluate.py", *args], cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
        while sigterm_after and process.poll() is None and not re.search(sigterm_after, output.read_text()):
            time.sleep(0.05)
        if sigterm_after and process.poll() is None:
            process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=600)
    return code, output.read_text()


@pytest.mark.slow
def test_sigterm_during_fine_tuning_exits_143_and_the_same_command_then_completes(tmp_path, tiny_model_dir):
    args = [f"model.pretrained={tiny_model_dir}", *TINY, f"hydra.run.dir={tmp_path / 'job'}"]
    code, output = _run(args, tmp_path, sigterm_after=r"fine-tuning \S+ on rt_snippets")
    assert code == 143, output[-3000:]
    assert f"interrupted (SIGTERM): job in {tmp_path / 'job'}" in output
    assert "to resume, run the same command again: python evaluate.py model.pretrained=" in output
    assert not (tmp_path / "job" / "results.json").exists() and not (tmp_path / "job" / FAILURE_FILE).exists()
    code, output = _run(args, tmp_path)
    assert code == 0, output[-3000:]
    assert (tmp_path / "job" / "results.json").is_file()


@pytest.mark.slow
def test_sigterm_during_a_multiruns_first_job_stops_the_multirun_with_143(tmp_path, tiny_model_dir):
    sweep = tmp_path / "multi"
    args = ["-m", "seed=0,1", f"model.pretrained={tiny_model_dir}", *TINY, f"hydra.sweep.dir={sweep}"]
    code, output = _run(args, tmp_path, sigterm_after=r"fine-tuning \S+ on rt_snippets, seed 0")
    assert code == 143, output[-3000:]
    assert f"interrupted (SIGTERM): job 0 in {sweep / '0'}" in output
    assert "finished jobs of this multirun: none" in output
    assert not (sweep / "0" / "results.json").exists() and not (sweep / "1").exists()  # job 1 never started


def _loky_workers(pid: int) -> list[int]:
    """The joblib (loky) worker processes among ``pid``'s children, from ``/proc``."""
    workers = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in children.read_text().split():
            try:
                if b"popen_loky_posix" in Path(f"/proc/{child}/cmdline").read_bytes():
                    workers.append(int(child))
            except OSError:
                pass
    return workers


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_sigterm_to_a_joblib_multirun_stops_its_workers_jobs_and_exits_143(tmp_path, tiny_model_dir):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="the sweeps extra is not installed")
    sweep = tmp_path / "multi"
    args = ["-m", "seed=0,1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "ITERMASK_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT / "src")}
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"})
    output = tmp_path / "output.txt"
    logs = [sweep / job / "evaluate.log" for job in ("0", "1")]
    with open(output, "w") as sink:
        process = subprocess.Popen(
            # 5 epochs: both jobs still fine-tune when the second starts, also on a loaded machine
            [sys.executable, "evaluate.py", *args, f"model.pretrained={tiny_model_dir}", *TINY,
             "model.finetune.max_epochs=5"],
            cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
        started = r"fine-tuning \S+ on rt_snippets"  # both jobs' fine-tuning started, in their own logs
        while process.poll() is None and not all(p.is_file() and re.search(started, p.read_text()) for p in logs):
            time.sleep(0.05)
        workers = _loky_workers(process.pid)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=120)
    text = output.read_text()
    assert code == TERMINATED_EXIT, text[-3000:]
    assert len(workers) == 2, workers
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in workers)  # no worker survives its launcher
    assert f"interrupted (SIGTERM): the multirun in {sweep}" in text
    # a job that finished before the signal (a loaded machine can start the second job late) is listed as such
    done = [job for job in ("0", "1") if (sweep / job / "results.json").exists()]
    assert f"finished jobs of this multirun: {done or 'none'} (in {sweep})" in text and len(done) < 2
    assert "to resume, run the same command again: python evaluate.py -m seed=0,1 hydra/launcher=joblib" in text
    for job, log in zip(("0", "1"), logs):  # each worker's unfinished job stopped and said so in its own log
        if job not in done:
            assert f"interrupted (SIGTERM): job {job} in {sweep / job}" in log.read_text()
            assert not (sweep / job / "results.json").exists() and not (sweep / job / FAILURE_FILE).exists()
