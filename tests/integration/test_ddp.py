"""Lightning DDP on two CPU processes (gloo): fine-tuning and the masking evaluation finish, only rank 0 owns
the checkpoint cache, and the evaluation gives one process's examples and scores, with an odd number of
examples and uneven final batches (Lightning's DistributedSampler repeats an example to even out the ranks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import tiny_bert_config
from transformers import BertForSequenceClassification

from itermask.data.files import shipped_source

ROOT = Path(__file__).resolve().parents[2]


def _tiny_job(tmp_path: Path, tokenizer) -> list[str]:
    """A tiny random BERT classifier and a small CSV dataset (23 test examples, evaluated in batches of 4:
    each rank gets 12, one of them repeated, in batches of 4, 4 and 4 -> the last of rank 1's repeats)."""
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_bert_config(tokenizer, initializer_range=0.5))
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    files = shipped_source().files
    for split, n in (("train", 48), ("validation", 16), ("test", 23)):
        frame = pd.read_csv(files[split], keep_default_na=False)[["text", "label"]].head(n)
        frame.to_csv(tmp_path / f"{split}.csv", index=False)
    return [
        "model.name=tiny",
        "dataset=csv",
        *(f"dataset.source.{split}={tmp_path / split}.csv" for split in ("train", "validation", "test")),
        "model.finetune.max_epochs=1",
        "model.finetune.batch_size=8",
        "train.checkpoint_every_n_steps=null",
        "logger=csv",
        "evaluation.n_examples=null",
        "data.eval_batch_size=4",
        "evaluation.fractions=[0.0,0.2,0.5,1.0]",
        "evaluation.aopc_bins=[0.2,0.5]",
        "ood=none",
        "attack=none",
    ]


def _evaluate(tmp_path: Path, name: str, *args: str) -> dict:
    env = {
        **os.environ,
        "ITERMASK_CACHE": str(tmp_path / "cache"),
        "PYTHONPATH": str(ROOT / "src"),
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "offline",
    }
    out = subprocess.run(
        [sys.executable, "evaluate.py", *args, f"hydra.run.dir={tmp_path / name}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    return json.loads((tmp_path / name / "results.json").read_text())


def _scores(result: dict) -> dict[str, float]:
    return {
        f"{method}/{schedule}/{name}": value
        for method, schedules in result["scores"].items()
        for schedule, summary in schedules.items()
        for name, value in summary.items()
        if name.startswith("aopc") and value is not None
    }


@pytest.mark.slow
def test_ddp_fine_tunes_and_evaluates_like_one_process(tmp_path, tokenizer):
    job = _tiny_job(tmp_path, tokenizer)
    ddp = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2"]
    # 1. fine-tuning and evaluation on two processes, empty cache (this deadlocked on the cache lock)
    fine_tuned = _evaluate(tmp_path, "ddp_fine_tune", f"model.pretrained={tmp_path / 'model'}", *job, *ddp)
    entries = [p for p in (tmp_path / "cache").iterdir() if p.is_dir() and p.name not in ("results", "derived")]
    assert len(entries) == 1 and (entries[0] / "meta.json").is_file()
    meta = json.loads((entries[0] / "meta.json").read_text())
    assert meta["config"]["processes"] == 2  # the effective batch is two batches: its own checkpoint key
    log1 = (tmp_path / "ddp_fine_tune" / "train_ddp_process_1.log").read_text()
    assert "joining rank 0's fine-tuning" in log1
    # 2. evaluation on two processes of the cached checkpoint (rank 1 left before the masking evaluation)
    cached = _evaluate(
        tmp_path, "ddp_cached", f"model.pretrained={tmp_path / 'model'}", *job, *ddp, "reuse_results=false"
    )
    assert "fine-tuning tiny" not in (tmp_path / "ddp_cached" / "evaluate.log").read_text()
    # 3. the same weights evaluated by one process (the exported classifier, as a given classifier)
    single = _evaluate(tmp_path, "one_process", f"model.pretrained={entries[0] / 'model'}", *job, "train.enabled=false")
    for name, result in (("ddp_fine_tune", fine_tuned), ("ddp_cached", cached), ("one_process", single)):
        assert result["n_evaluated"] == 23 and result["n_skipped_no_maskable"] == 0 and result["n_test"] == 23
        assert sorted(result["example_ids"]) == list(range(23))  # each example once: none repeated, none dropped
        assert result["example_ids"] == single["example_ids"]
        assert result["accuracy"]["test"] == pytest.approx(single["accuracy"]["test"], abs=1e-9)
        per_example = pd.read_parquet(tmp_path / name / "per_example" / "scores.parquet")
        assert sorted(set(per_example["example_id"])) == list(range(23))
        assert len(per_example) == len(per_example.drop_duplicates(["saliency", "schedule", "example_id"]))
    expected = _scores(single)
    assert expected and all(abs(v) > 1e-4 for v in expected.values())  # the tiny model's scores are not ~0
    for result in (fine_tuned, cached):
        assert _scores(result) == pytest.approx(expected, abs=1e-6)
