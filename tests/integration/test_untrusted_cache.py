"""End to end: a planted pickle (unpickled, it would create a marker folder) as the cached fine-tuning's
``last.ckpt`` (``evaluate.py``) and as the continued pretraining's (``pretrain.py``) is never unpickled: the
checkpoints are moved into ``<cache>/damaged/`` with a warning naming the file and the object, and the job
trains from the start. Tiny random BERT models on 100 shipped examples keep each run short."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import compose_config, tiny_bert_config, training_key_of
from pickle_helpers import MKDIR, plant
from transformers import BertForSequenceClassification, BertModel

ROOT = Path(__file__).resolve().parents[2]
SMALL = [
    "logger=csv",
    "dataset=csv",
    "model.max_length=32",
    "train.max_train_examples=null",
    "+trainer.enable_progress_bar=false",
    "trainer.accelerator=cpu",
]


@pytest.fixture
def small_csv(tmp_path) -> Path:
    rows = pd.read_csv(ROOT / "src/itermask/resources/rt_snippets/validation.csv", keep_default_na=False).head(100)
    rows.to_csv(tmp_path / "small.csv", index=False)
    return tmp_path / "small.csv"


def _run(script: str, overrides: list[str], cache: Path) -> str:
    """Run ``script`` with ``overrides`` on the cache ``cache``; returns its output (it must succeed)."""
    env = {**os.environ, "ITERMASK_CACHE": str(cache), "OMP_NUM_THREADS": "1", "WANDB_SILENT": "true"}
    out = subprocess.run(
        [sys.executable, script, *overrides], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    return out.stdout + out.stderr


def _moved_aside(cache: Path, key: str, last: Path, output: str, what: str) -> None:
    assert f"cannot resume from {last}: it holds Python objects that a checkpoint never holds ({MKDIR})" in output
    assert f"and {what} from the start" in output
    (moved,) = (cache / "damaged").iterdir()
    assert moved.name.startswith(f"{key}-checkpoints-") and (moved / "last.ckpt").is_file()
    meta = json.loads((cache / key / "meta.json").read_text())
    assert meta["resumed"] is None  # recomputed from the start


@pytest.mark.slow
def test_evaluate_py_never_unpickles_a_planted_fine_tuning_checkpoint(tmp_path, tokenizer, small_csv):
    torch.manual_seed(0)
    BertForSequenceClassification(tiny_bert_config(tokenizer)).save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    overrides = [
        *SMALL,
        f"model.pretrained={tmp_path / 'tiny'}",
        f"dataset.source.path={small_csv}",
        "model.finetune.max_epochs=1",
        "evaluation.n_examples=4",
        "evaluation.fractions=[0.0,0.5]",
        "evaluation.aopc_bins=[0.5]",
        "ood.n_fit_examples=40",
    ]
    key, _ = training_key_of(compose_config(*overrides))
    cache, marker = tmp_path / "cache", tmp_path / "marker"
    last = plant(cache / key / "checkpoints" / "last.ckpt", marker)
    output = _run("evaluate.py", [*overrides, f"hydra.run.dir={tmp_path / 'run'}"], cache)
    assert not marker.exists()
    _moved_aside(cache, key, last, output, "fine-tuning")
    assert json.loads((tmp_path / "run" / "results.json").read_text())["checkpoint_key"] == key


@pytest.mark.slow
def test_pretrain_py_never_unpickles_a_planted_pretraining_checkpoint(tmp_path, tokenizer, small_csv):
    from itermask.settings import build, plain
    from itermask.storage.keys import Fingerprint
    from itermask.training.pretraining import pretrain_settings

    torch.manual_seed(0)
    BertModel(tiny_bert_config(tokenizer)).save_pretrained(tmp_path / "encoder")
    tokenizer.save_pretrained(tmp_path / "encoder")
    overrides = [
        *SMALL,
        "model=minilm_cda",
        f"model.pretrained={tmp_path / 'encoder'}",
        f"dataset.source.path={small_csv}",
        "model.pretrain.head_steps=2",
        "model.pretrain.joint_steps=2",
        "model.pretrain.batch_size=8",
        "model.pretrain.heldout_examples=10",
    ]
    config = plain(compose_config(*overrides, name="pretrain"))
    source = build(config["dataset"]["source"], "dataset.source")
    encoder = str(tmp_path / "encoder")
    key = pretrain_settings(config, Fingerprint.of(source, encoder), source, encoder).key
    cache, marker = tmp_path / "cache", tmp_path / "marker"
    last = plant(cache / "pretrain" / key / "checkpoints" / "last.ckpt", marker)
    output = _run("pretrain.py", [*overrides, f"hydra.run.dir={tmp_path / 'run'}"], cache)
    assert not marker.exists()
    _moved_aside(cache / "pretrain", key, last, output, "continued pretraining")
    assert (cache / "pretrain" / key / "model" / "model.safetensors").is_file()
