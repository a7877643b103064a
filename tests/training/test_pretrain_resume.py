"""Exact resume of continued MLM pretraining: a tiny pretraining interrupted after its step checkpoint, or while it
exports the encoder, and run again ends with the bytes-for-bytes weights and held-out accuracies of an
uninterrupted one (fast: a 2-layer, hidden-32 BERT, 48 texts)."""

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import Killed, killer, plan_of, tiny_bert_config
from hydra import compose, initialize_config_dir
from safetensors.torch import load_file
from transformers import BertModel

from itermask.engine.prepare import bind
from itermask.storage.cache import CheckpointCache
from itermask.training import pretraining

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tokenizer):
    """A tiny random encoder folder (no MLM head, like the packaged MiniLM) and a 60-row CSV (48 training texts)."""
    folder = tmp_path_factory.mktemp("pretrain-resume")
    torch.manual_seed(0)
    BertModel(tiny_bert_config(tokenizer)).save_pretrained(folder / "encoder")
    tokenizer.save_pretrained(folder / "encoder")
    rows = pd.read_csv(ROOT / "src/itermask/resources/rt_snippets/validation.csv", keep_default_na=False).head(60)
    rows.to_csv(folder / "small.csv", index=False)
    return folder / "encoder", folder / "small.csv"


def _pretrain(cache: Path, inputs, kill_at: int | None = None) -> tuple[dict, dict]:
    """Pretrain (or reuse) under ``cache``: 10 head steps then 10 joint steps of 8 texts (6 batches an epoch),
    checkpoints at step 10 (mid-epoch, at the switch from the frozen to the joint phase) and 20 (the last step).
    Returns the exported weights and ``meta.json``."""
    encoder, csv = inputs
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "pretrain",
            overrides=[
                "output_dir=/tmp/unused",
                f"cache_dir={cache}",
                f"model.pretrained={encoder}",
                "model.max_length=32",
                "model.pretrain.head_steps=10",
                "model.pretrain.joint_steps=10",
                "model.pretrain.batch_size=8",
                "model.pretrain.heldout_examples=10",
                "dataset=csv",
                f"dataset.source.path={csv}",
                "~logger",
                "+trainer.enable_progress_bar=false",
                "trainer.accelerator=cpu",
            ],
        )
    resources = bind(plan_of(cfg))
    assert resources.keys is not None and resources.keys.pretrain is not None
    settings, make = resources.keys.pretrain, resources.make_trainer
    kill = [killer(kill_at)] if kill_at is not None else []
    folder = pretraining.get_or_pretrain(
        settings, resources.tokenizer, lambda **kw: make(**{**kw, "callbacks": [*kw["callbacks"], *kill]})
    )
    return load_file(str(folder / "model.safetensors")), json.loads((folder.parent / "meta.json").read_text())


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


def _entry(cache: Path) -> Path:
    (entry,) = [p for p in (cache / "pretrain").iterdir() if p.is_dir()]
    return entry


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, inputs):
    weights, meta = _pretrain(tmp_path_factory.mktemp("cache"), inputs)
    assert meta["resumed"] is None
    return weights, meta


def _assert_same_run(got: tuple[dict, dict], expected: tuple[dict, dict]) -> None:
    assert _same(got[0], expected[0])
    for name in ("mlm_acc_head_only", "mlm_acc_joint", "heldout_masked_tokens"):
        assert got[1][name] == expected[1][name], name


def test_a_pretraining_killed_after_its_checkpoint_resumes_to_the_same_weights(tmp_path, inputs, uninterrupted):
    with pytest.raises(Killed):
        _pretrain(tmp_path, inputs, kill_at=13)
    entry = _entry(tmp_path)
    assert (entry / "checkpoints" / "last.ckpt").is_file() and not (entry / "meta.json").exists()
    resumed = _pretrain(tmp_path, inputs)
    # step 10 is batch 4 of the second epoch (6 batches an epoch), and the frozen phase's score is still to take
    assert resumed[1]["resumed"]["global_step"] == 10 and resumed[1]["resumed"]["batches_into_epoch"] == 4
    _assert_same_run(resumed, uninterrupted)
    assert 0 <= uninterrupted[1]["mlm_acc_head_only"] <= 1


def _cut_short_in_write_model(self, key, model, tokenizer, **options):
    model.save_pretrained(self.entry(key) / "model.tmp", **options)
    raise Killed("killed while writing the encoder")


def _cut_short_in_finish(self, key, meta):
    raise Killed("killed before meta.json")


@pytest.mark.parametrize(
    "kill, left, resumed_at",
    [(_cut_short_in_write_model, ("model.tmp", "checkpoints/last.ckpt"), 20), (_cut_short_in_finish, ("model",), None)],
)
def test_a_pretraining_killed_while_exporting_ends_with_the_same_weights(
    tmp_path, inputs, uninterrupted, monkeypatch, kill, left, resumed_at
):
    """Killed with the encoder half written (the last step's checkpoint still there: resumed from it, with nothing
    left to train but the held-out scores to take) or written with the checkpoints deleted but the entry not
    finished (started over); either way the same encoder and scores."""
    with monkeypatch.context() as patch:
        patch.setattr(CheckpointCache, kill.__name__.removeprefix("_cut_short_in_"), kill)
        with pytest.raises(Killed):
            _pretrain(tmp_path, inputs)
    entry = _entry(tmp_path)
    assert all((entry / path).exists() for path in left) and not (entry / "meta.json").exists()
    assert (entry / "checkpoints").exists() == (resumed_at is not None)
    again = _pretrain(tmp_path, inputs)
    assert (again[1]["resumed"] or {}).get("global_step") == resumed_at
    _assert_same_run(again, uninterrupted)


def test_draws_that_depend_on_the_process_history_would_change_the_resumed_weights(tmp_path, inputs, monkeypatch):
    """The control: each step seeded by a count of the steps its process ran (as the masks drawn from the global
    generator's history were) instead of (seed, step): the same comparison sees the resumed run differ."""

    def history_seeded():  # a fresh count per run, as a fresh process's
        calls = itertools.count()
        monkeypatch.setattr(pretraining, "step_seed", lambda seed, step: next(calls))

    history_seeded()
    reference = _pretrain(tmp_path / "a", inputs)
    history_seeded()
    with pytest.raises(Killed):
        _pretrain(tmp_path / "b", inputs, kill_at=13)
    history_seeded()
    resumed = _pretrain(tmp_path / "b", inputs)
    assert resumed[1]["resumed"]["global_step"] == 10 and not _same(resumed[0], reference[0])


@pytest.mark.slow
def test_pretrain_py_killed_at_its_checkpoint_or_in_export_ends_with_the_uninterrupted_encoder(tmp_path, inputs):
    """The real thing (``bench/pretrain_resume.py``): ``pretrain.py`` killed by SIGKILL right after writing its
    step-10 ``last.ckpt``, or after writing the encoder's ``model/`` folder (the checkpoint not yet deleted, no
    ``meta.json``), then run again: both resume at step 10 and export the uninterrupted run's encoder, bit for bit,
    with its held-out accuracies."""
    encoder, csv = inputs
    settings = ["model.pretrain.head_steps=4", "model.pretrain.joint_steps=12", "model.pretrain.batch_size=4"]
    done = subprocess.run(
        [sys.executable, "bench/pretrain_resume.py", "--out", str(tmp_path), "model=minilm_mlm", *settings]
        + [f"model.pretrained={encoder}", "model.max_length=32", "model.pretrain.heldout_examples=10"]
        + ["dataset=csv", f"dataset.source.path={csv}", "trainer.accelerator=cpu"],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    runs = json.loads(done.stdout)
    assert [r["resumed_from_step"] for r in runs.values()] == [None, 10, 10]
    assert [(r["max_abs_weight_difference"], r["bit_identical"]) for r in runs.values()] == [(0.0, True)] * 3
    assert len({(r["mlm_acc_head_only"], r["mlm_acc_joint"]) for r in runs.values()}) == 1
