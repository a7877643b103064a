"""Launchers: a joblib multirun computes what a sequential one does (the same torch thread count in every
worker), its parallel jobs on one classifier compute their shared values once, and the jobs of ``job_devices``
take turns on the listed devices, one job per device at a time (faked on CPU: the claim is made, the CPU
trainer left as it is)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from test_ddp import _tiny_job

from itermask.storage.keys import results_key
from itermask.training.distributed import DevicePool, apply_threads, assign_device

ROOT = Path(__file__).resolve().parents[2]


def test_device_pool_gives_each_running_job_its_own_device(tmp_path):
    first, second, third = (DevicePool([3, 5], tmp_path, poll=0.01) for _ in range(3))
    assert first.claim() == 3 and second.claim() == 5  # both busy now
    with pytest.raises(TimeoutError, match=r"every device of job_devices=\[3, 5\] stayed busy for 0.05 s"):
        third.claim(timeout=0.05)
    first.release()
    assert third.claim(timeout=1) == 3  # freed by the job that finished
    second.release()
    third.release()


def test_a_claimed_device_goes_into_a_gpu_trainer_only():
    gpu = OmegaConf.create({"accelerator": "gpu", "devices": 1})
    assert assign_device(gpu, 2) and list(gpu.devices) == [2]
    cpu = OmegaConf.create({"accelerator": "cpu", "devices": 1})
    assert not assign_device(cpu, 2) and cpu.devices == 1
    # the device a job got does not change its results key
    config = {"trainer": {"devices": 1}, "seed": 0}
    assert results_key(config) == results_key({"trainer": {"devices": [2]}, "seed": 0})
    assert results_key(config) != results_key({"trainer": {"devices": 2}, "seed": 0})


def test_apply_threads_sets_torchs_thread_count():
    import torch

    before = torch.get_num_threads()
    try:
        assert apply_threads(1) == 1 and torch.get_num_threads() == 1
        assert apply_threads(None) == len(os.sched_getaffinity(0)) == torch.get_num_threads()
        from threadpoolctl import threadpool_info

        assert {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"} == {
            len(os.sched_getaffinity(0))
        }
    finally:
        torch.set_num_threads(before)


def _multirun(tmp_path: Path, name: str, *args: str, sweep: str = "seed=0,1") -> list[dict]:
    env = {**os.environ, "ITERMASK_CACHE": str(tmp_path / f"cache-{name}"), "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "evaluate.py", "-m", sweep, *args, f"hydra.sweep.dir={tmp_path / name}"],
        cwd=ROOT,
        env={**env, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    return [json.loads((tmp_path / name / job / "results.json").read_text()) for job in ("0", "1")]


@pytest.mark.slow
def test_joblib_multirun_gives_the_numbers_of_a_sequential_one(tmp_path, tokenizer, sweeps_extra):
    job = [f"model.pretrained={tmp_path / 'model'}", *_tiny_job(tmp_path, tokenizer), "evaluation.n_examples=8"]
    sequential = _multirun(tmp_path, "sequential", *job)
    joblib = _multirun(
        tmp_path, "joblib", *job, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "job_devices=[0,1]"
    )
    for one, other in zip(sequential, joblib):
        assert one["environment"]["torch_threads"] == other["environment"]["torch_threads"]
        assert one["config_hash"] == other["config_hash"] and one["checkpoint_key"] == other["checkpoint_key"]
        assert one["accuracy"] == other["accuracy"]
        assert one["scores"] == other["scores"]  # bit for bit
    logs = [(tmp_path / "joblib" / job / "evaluate.log").read_text() for job in ("0", "1")]
    assert all("job_devices: this job holds device" in log for log in logs)
    assert all("a CPU run: the trainer is left as it is" in log for log in logs)


@pytest.mark.slow
def test_parallel_jobs_on_one_classifier_compute_its_shared_test_accuracy_once(tmp_path, tokenizer, sweeps_extra):
    """Two methods' jobs at once on one fine-tuning: one computes the test accuracy, the other reads it back,
    whether it waited on the value's lock or came after it was stored (:class:`DerivedStore`)."""
    job = [f"model.pretrained={tmp_path / 'model'}", *_tiny_job(tmp_path, tokenizer), "evaluation.n_examples=8"]
    sweep = "saliency=gradient,occlusion"
    results = _multirun(tmp_path, "joblib", *job, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", sweep=sweep)
    assert results[0]["checkpoint_key"] == results[1]["checkpoint_key"]
    assert results[0]["accuracy"]["test"] == results[1]["accuracy"]["test"]
    logs = [(tmp_path / "joblib" / job / "evaluate.log").read_text() for job in ("0", "1")]
    assert sum("reusing the test accuracy of this classifier" in log for log in logs) == 1
