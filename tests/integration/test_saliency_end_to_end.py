"""End to end: evaluate.py with an attention method (the pipeline switches the SDPA-loaded classifier to
eager attention) and a sampling method, on the shipped data with the packaged MiniLM, offline."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = [
    "train.max_train_examples=100",
    "evaluation.n_examples=5",
    "data.eval_batch_size=256",
    "logger=csv",
    "evaluation.fractions=[0.0,0.1,0.5,1.0]",
    "evaluation.aopc_bins=[0.1,0.5]",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One checkpoint cache for both runs: the second reuses the first's fine-tuned model."""
    return tmp_path_factory.mktemp("cache")


@pytest.mark.slow
@pytest.mark.parametrize(
    "saliency",
    [["saliency=attention_rollout"], ["saliency=lime", "saliency.n_samples=16", "masking=delete"]],
    ids=["attention_rollout", "lime"],
)
def test_evaluate_with_attention_and_sampling_saliency(tmp_path, cache, saliency):
    env = {
        **os.environ,
        "ITERMASK_CACHE": str(cache),
        "WANDB_MODE": "offline",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    out = subprocess.run(
        [sys.executable, "evaluate.py", *saliency, *SMALL, f"hydra.run.dir={tmp_path}/run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    result = json.loads((tmp_path / "run/results.json").read_text())
    name = saliency[0].split("=")[1]
    assert result["saliency"]["name"] == name
    assert set(result["scores"]) == {name, "random"}
    for schedule in ("one_shot", "recursive"):
        curve = result["scores"][name][schedule]["target_prob"]
        assert len(curve) == 4 and all(0.0 <= p <= 1.0 for p in curve)
    if name == "lime":
        assert result["saliency"]["n_samples"] == 16 and result["saliency"]["seed"] == 0
