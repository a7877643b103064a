"""Exact resume: a tiny fine-tuning interrupted after a step checkpoint and resumed ends with the same weights
as an uninterrupted one, and its meta.json says that it resumed (fast: a 2-layer BERT, ~80 examples)."""

import pickle
from pathlib import Path

import pandas as pd
import pytest
import pytorch_lightning as pl
import torch
from conftest import Killed, bound, killer, save_tiny_bert
from hydra import compose, initialize_config_dir
from safetensors.torch import load_file

from itermask.engine import prepare
from itermask.training import resume
from itermask.training.finetune import get_or_train

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, vocab_file):
    """A tiny random BERT encoder and its tokenizer saved as a local ``model.pretrained`` directory."""
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), vocab_file)


@pytest.fixture(scope="module")
def small_csv(tmp_path_factory):
    rows = pd.read_csv(ROOT / "src/itermask/resources/rt_snippets/validation.csv", keep_default_na=False).head(100)
    path = tmp_path_factory.mktemp("data") / "small.csv"
    rows.to_csv(path, index=False)
    return path


def _settings(cache, model_dir, csv, *overrides):
    """81 training examples in batches of 8: 11 steps per epoch, 2 epochs, a step checkpoint every 3 steps."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                "output_dir=/tmp/unused",
                f"cache_dir={cache}",
                f"model.pretrained={model_dir}",
                "model.max_length=32",
                "model.finetune.batch_size=8",
                "model.finetune.max_epochs=2",
                "dataset=csv",
                f"dataset.source.path={csv}",
                "train.max_train_examples=null",
                "train.checkpoint_every_n_steps=3",
                "~logger",
                "+trainer.enable_progress_bar=false",
                "trainer.accelerator=cpu",
                *overrides,
            ],
        )
    return bound(cfg)


class FinalWeights(pl.Callback):
    """Keeps the weights at the end of training (the exported model is the best epoch's, and which checkpoint
    file Lightning writes last differs after a resume)."""

    def __init__(self) -> None:
        self.weights = None

    def on_train_end(self, trainer, pl_module):
        self.weights = {name: value.detach().clone() for name, value in pl_module.state_dict().items()}


def _train(settings, kill_at=None):
    """Fine-tune (or reuse); returns the cache entry and the weights at the end of training (``None`` when none
    happened)."""
    final = FinalWeights()
    extra = [final] + ([killer(kill_at)] if kill_at is not None else [])
    plan, resources = settings
    make_trainer = resources.make_trainer
    resources.make_trainer = lambda **kw: make_trainer(**{**kw, "callbacks": [*kw.get("callbacks", []), *extra]})
    prepare.load_data(plan, resources)
    trained = get_or_train(prepare.fine_tuning(plan, resources), resources.loaded_data)
    trained.final_weights = final.weights  # pyright: ignore[reportAttributeAccessIssue]
    return trained


def _key(settings) -> str:
    """The checkpoint key of ``(plan, resources)``."""
    return settings[1].keys.training


def _weights(trained):
    return trained.final_weights


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tiny_model_dir, small_csv):
    return _train(_settings(tmp_path_factory.mktemp("cache"), tiny_model_dir, small_csv))


@pytest.mark.parametrize("kill_at, checkpoint_step, into_epoch", [(5, 3, 3), (17, 15, 4)])
def test_a_fine_tuning_killed_after_a_step_checkpoint_resumes_to_the_same_weights(
    tmp_path, tiny_model_dir, small_csv, uninterrupted, kill_at, checkpoint_step, into_epoch
):
    settings = _settings(tmp_path / "cache", tiny_model_dir, small_csv)
    with pytest.raises(Killed):
        _train(settings, kill_at=kill_at)
    entry = tmp_path / "cache" / _key(settings)
    assert (entry / "checkpoints" / "last.ckpt").is_file() and not (entry / "meta.json").exists()

    resumed = _train(_settings(tmp_path / "cache", tiny_model_dir, small_csv))
    assert resumed.key == uninterrupted.key
    assert _same(_weights(uninterrupted), _weights(resumed))
    exported = [load_file(str(t.model_dir / "model.safetensors")) for t in (uninterrupted, resumed)]
    assert _same(*exported) and resumed.meta["val_acc"] == uninterrupted.meta["val_acc"]
    assert uninterrupted.meta["resumed"] is None
    record = resumed.meta["resumed"]
    assert record["exact"] and record["checkpoint"].endswith("last.ckpt")
    # step 15 is batch 4 of the second epoch (11 steps per epoch): 4 batches in, counting from 0 at step 11
    assert record["global_step"] == checkpoint_step and record["batches_into_epoch"] == into_epoch


def test_without_the_restored_generators_the_resumed_model_differs(
    tmp_path, tiny_model_dir, small_csv, uninterrupted, monkeypatch
):
    """The control: the comparison above sees a resume that loses the random state (as before exact resume)."""
    settings = _settings(tmp_path / "cache", tiny_model_dir, small_csv)
    with pytest.raises(Killed):
        _train(settings, kill_at=17)
    monkeypatch.setattr(resume, "set_rng_states", lambda states, module=None: None)
    resumed = _train(_settings(tmp_path / "cache", tiny_model_dir, small_csv))
    assert not _same(_weights(uninterrupted), _weights(resumed))


ADVERSARIAL = (
    "train.adversarial_augmentation.enabled=true",
    "train.adversarial_augmentation.candidates.min_similarity=-1",
)


def test_adversarial_fine_tuning_resumes_to_the_same_weights(tmp_path, tiny_model_dir, small_csv, monkeypatch):
    """Adversarial fine-tuning draws which batches to attack from its own generator: it is recorded and
    restored with the others, so a resumed run repeats the interrupted one; without it (the control) the
    resumed run attacks other batches and ends elsewhere."""
    reference = _train(_settings(tmp_path / "a", tiny_model_dir, small_csv, *ADVERSARIAL))
    assert reference.meta["resumed"] is None
    for cache, restored in ((tmp_path / "b", resume.AUGMENTATIONS), (tmp_path / "c", ("masking_augmentation",))):
        monkeypatch.setattr(resume, "AUGMENTATIONS", resume.AUGMENTATIONS)
        with pytest.raises(Killed):
            _train(_settings(cache, tiny_model_dir, small_csv, *ADVERSARIAL), kill_at=17)
        last = next(cache.glob("*/checkpoints/last.ckpt"))
        assert resume.checkpoint_problem(last, ("masking_augmentation",)) is not None  # not enabled, not recorded
        monkeypatch.setattr(resume, "AUGMENTATIONS", restored)
        resumed = _train(_settings(cache, tiny_model_dir, small_csv, *ADVERSARIAL))
        assert resumed.key == reference.key and resumed.meta["resumed"]["global_step"] == 15
        assert _same(_weights(reference), _weights(resumed)) == ("adversarial_augmentation" in restored)


def test_a_checkpoint_without_an_enabled_augmentations_generator_is_refused(tmp_path, tiny_model_dir, small_csv):
    settings = _settings(tmp_path / "cache", tiny_model_dir, small_csv, *ADVERSARIAL)
    with pytest.raises(Killed):
        _train(settings, kill_at=5)
    last = tmp_path / "cache" / _key(settings) / "checkpoints" / "last.ckpt"
    assert resume.checkpoint_problem(last, ("adversarial_augmentation",)) is None
    checkpoint = torch.load(last, weights_only=True)
    del checkpoint["callbacks"][resume.ExactResume.STATE_KEY]["rng"]["adversarial_augmentation"]
    torch.save(checkpoint, last)  # as written before adversarial fine-tuning recorded its generator
    assert "no state of the generator of adversarial_augmentation" in resume.checkpoint_problem(
        last, ("adversarial_augmentation",)
    )
    trained = _train(_settings(tmp_path / "cache", tiny_model_dir, small_csv, *ADVERSARIAL))
    assert trained.meta["resumed"] is None  # started over rather than resumed inexactly


def test_a_checkpoint_that_cannot_resume_exactly_is_moved_aside(
    tmp_path, tiny_model_dir, small_csv, uninterrupted, caplog
):
    settings = _settings(tmp_path / "cache", tiny_model_dir, small_csv)
    with pytest.raises(Killed):
        _train(settings, kill_at=5)
    last = tmp_path / "cache" / _key(settings) / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])  # cut in half
    with caplog.at_level("WARNING"):
        trained = _train(_settings(tmp_path / "cache", tiny_model_dir, small_csv))
    assert f"cannot resume from {last}: it cannot be read" in caplog.text
    assert trained.meta["resumed"] is None
    assert [p.name.startswith(f"{_key(settings)}-checkpoints-") for p in (tmp_path / "cache/damaged").iterdir()] == [
        True
    ]
    assert _same(_weights(uninterrupted), _weights(trained))  # started over: the same model


def test_a_real_checkpoint_holds_only_tensors_and_plain_values_and_lightning_resumes_weights_only(
    tmp_path, tiny_model_dir, small_csv, monkeypatch
):
    """The ``last.ckpt`` of a fine-tuning with both augmentations names no object beyond torch's weights-only
    allow-list, so nothing is added to it. Lightning's own resume reads weights-only too: a planted checkpoint
    that got past the check (bypassed here), with torch told to unpickle (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``,
    which applies where a caller passes no ``weights_only``), is refused and runs nothing."""
    from pickle_helpers import plant

    from itermask.storage.files import foreign_objects

    augmented = (*ADVERSARIAL, "train.masking_augmentation.enabled=true")
    settings = _settings(tmp_path / "cache", tiny_model_dir, small_csv, *augmented)
    with pytest.raises(Killed):
        _train(settings, kill_at=5)
    last = tmp_path / "cache" / _key(settings) / "checkpoints" / "last.ckpt"
    assert foreign_objects(last) == [] and resume.checkpoint_problem(last, resume.AUGMENTATIONS) is None
    plant(last, tmp_path / "marker")
    monkeypatch.setattr(resume, "checkpoint_problem", lambda *args: None)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        _train(_settings(tmp_path / "cache", tiny_model_dir, small_csv, *augmented))
    assert not (tmp_path / "marker").exists()


@pytest.mark.slow
def test_train_py_killed_with_sigkill_after_a_step_checkpoint_resumes_to_the_same_model(tmp_path, tiny_model_dir):
    """The real thing: ``train.py`` killed (SIGKILL) right after its first step checkpoint, run again, ends with
    the model of an uninterrupted run (one epoch: the exported model is the final one)."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    rows = pd.read_csv(ROOT / "src/itermask/resources/rt_snippets/validation.csv", keep_default_na=False).head(240)
    rows.to_csv(tmp_path / "d.csv", index=False)
    args = [
        sys.executable,
        "train.py",
        f"model.pretrained={tiny_model_dir}",
        "model.max_length=32",
        "model.finetune.batch_size=4",
        "model.finetune.max_epochs=1",
        "dataset=csv",
        f"dataset.source.path={tmp_path / 'd.csv'}",
        "train.max_train_examples=null",
        "train.checkpoint_every_n_steps=5",
        "logger=csv",
        "trainer.accelerator=cpu",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}

    def train(cache, run, kill=False):
        command = [*args, f"hydra.run.dir={tmp_path / run}"]
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**env, "ITERMASK_CACHE": str(cache)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while kill and process.poll() is None and not list(cache.glob("*/checkpoints/last.ckpt")):
            time.sleep(0.02)
        if kill:
            process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=900) == (-signal.SIGKILL if kill else 0)
        return next(p for p in cache.iterdir() if p.is_dir() and len(p.name) == 16)

    reference = train(tmp_path / "a", "a")
    entry = train(tmp_path / "b", "b1", kill=True)
    assert (entry / "checkpoints" / "last.ckpt").is_file() and not (entry / "meta.json").exists()
    entry = train(tmp_path / "b", "b2")
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["resumed"]["exact"] and meta["resumed"]["global_step"] % 5 == 0
    assert json.loads((reference / "meta.json").read_text())["resumed"] is None
    expected, got = (load_file(str(e / "model" / "model.safetensors")) for e in (reference, entry))
    assert _same(expected, got)


def test_an_accumulating_fine_tuning_resumes_to_the_same_weights(tmp_path, tiny_model_dir, small_csv):
    """With ``trainer.accumulate_grad_batches=2`` (11 batches of 8 per epoch: 6 optimizer steps, the last of
    one batch) a step checkpoint falls between groups of batches, and the resumed run repeats the
    uninterrupted one."""
    accumulate = "trainer.accumulate_grad_batches=2"
    reference = _train(_settings(tmp_path / "a", tiny_model_dir, small_csv, accumulate))
    with pytest.raises(Killed):
        _train(_settings(tmp_path / "b", tiny_model_dir, small_csv, accumulate), kill_at=5)
    resumed = _train(_settings(tmp_path / "b", tiny_model_dir, small_csv, accumulate))
    assert resumed.key == reference.key and reference.meta["resumed"] is None
    # step 3 is after batch 6 of the first epoch (batches 0-5 in groups of 2)
    assert resumed.meta["resumed"]["global_step"] == 3 and resumed.meta["resumed"]["batches_into_epoch"] == 6
    assert _same(_weights(reference), _weights(resumed))
