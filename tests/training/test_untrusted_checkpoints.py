"""A cache or model folder holds data, never code: a planted pickle (an object whose unpickling would create a
marker folder, as it could run any command) in a resumable ``last.ckpt`` or a model's ``pytorch_model.bin`` is
never unpickled. The checkpoint is moved aside with a warning and the training starts over; the weights file is
refused before any model work. Lightning's own resume reads with ``weights_only=True`` too
(``tests/training/test_resume.py``); the real entry points: ``tests/integration/test_untrusted_cache.py``."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from conftest import tiny_bert_config
from pickle_helpers import MKDIR, plant
from transformers import BertForSequenceClassification

from itermask.models.loading import load_classifier, load_tokenizer
from itermask.storage.cache import CheckpointCache
from itermask.storage.files import foreign_objects
from itermask.training.resume import checkpoint_problem, resume_checkpoint


def test_the_planted_pickle_runs_code_when_unpickled(tmp_path):
    """The control: loaded as before (``weights_only=False``), the planted file creates the marker."""
    torch.load(plant(tmp_path / "last.ckpt", tmp_path / "marker"), weights_only=False)
    assert (tmp_path / "marker").is_dir()


def test_foreign_objects_are_named_without_being_built(tmp_path):
    marker = tmp_path / "marker"
    assert foreign_objects(plant(tmp_path / "planted.ckpt", marker)) == [MKDIR]
    torch.save({"w": torch.ones(3), "o": OrderedDict(a=torch.zeros(1)), "n": [1, 2.5, "x", None]}, tmp_path / "ok.pt")
    assert foreign_objects(tmp_path / "ok.pt") == []  # tensors and plain values: torch's own allow-list
    (tmp_path / "text.ckpt").write_bytes(b"not a checkpoint")
    assert foreign_objects(tmp_path / "text.ckpt") == []  # no zip archive: nothing to name (and nothing loaded)
    assert not marker.exists()


def test_checkpoint_problem_refuses_a_planted_checkpoint_unread(tmp_path):
    marker = tmp_path / "marker"
    problem = checkpoint_problem(plant(tmp_path / "last.ckpt", marker))
    assert problem == (
        f"holds Python objects that a checkpoint never holds ({MKDIR}), which itermask does not unpickle"
    )
    assert not marker.exists()


def test_a_planted_last_ckpt_is_moved_aside_with_a_warning_and_not_resumed(tmp_path, caplog):
    cache, marker = CheckpointCache(tmp_path / "cache"), tmp_path / "marker"
    last = plant(cache.entry("abc") / "checkpoints" / "last.ckpt", marker)
    with caplog.at_level("WARNING"):
        assert resume_checkpoint(cache, "abc", what="continued pretraining") is None
    assert f"cannot resume from {last}: it holds Python objects that a checkpoint never holds ({MKDIR})" in caplog.text
    assert "and continued pretraining from the start" in caplog.text
    (moved,) = (tmp_path / "cache" / "damaged").iterdir()
    assert moved.name.startswith("abc-checkpoints-") and [p.name for p in moved.iterdir()] == ["last.ckpt"]
    assert not last.parent.exists() and not marker.exists()


# -- a model folder with pickled weights (pytorch_model.bin, no model.safetensors) ---------------------------


def _bin_only_classifier(folder: Path, tokenizer) -> dict:
    """A tiny classifier saved with its weights as ``pytorch_model.bin`` only; returns its state dict."""
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_bert_config(tokenizer))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "model.safetensors").unlink()
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    return model.state_dict()


def test_pickled_weights_of_tensors_only_load_safely(tmp_path, tokenizer):
    """transformers reads a ``pytorch_model.bin`` with ``torch.load(weights_only=True)``: the same weights."""
    saved = _bin_only_classifier(tmp_path / "m", tokenizer)
    loaded = load_classifier(str(tmp_path / "m"), 2).state_dict()
    assert all(torch.equal(loaded[name], saved[name]) for name in saved)


def test_pickled_weights_naming_other_objects_are_refused_before_any_model_work(tmp_path, tokenizer):
    _bin_only_classifier(tmp_path / "m", tokenizer)
    marker = tmp_path / "marker"
    plant(tmp_path / "m" / "pytorch_model.bin", marker)
    expected = rf"model.pretrained={tmp_path / 'm'}: pytorch_model.bin holds Python objects besides tensors \({MKDIR}\)"
    with pytest.raises(ValueError, match=expected):
        load_tokenizer(str(tmp_path / "m"))  # the first thing a job loads
    with pytest.raises(ValueError, match=expected):
        load_classifier(str(tmp_path / "m"), 2)
    assert not marker.exists()


def test_pickled_weights_that_are_no_torch_save_archive_are_refused_before_any_model_work(tmp_path, tokenizer):
    """A plain pickle (not torch.save's zip archive) cannot be inspected unrun: refused by name, never loaded."""
    import pickle

    _bin_only_classifier(tmp_path / "m", tokenizer)
    (tmp_path / "m" / "pytorch_model.bin").write_bytes(pickle.dumps({"weight": [0.0]}))
    expected = rf"model.pretrained={tmp_path / 'm'}: pytorch_model.bin is not a torch.save archive but a plain pickle"
    for load in (load_tokenizer, lambda folder: load_classifier(folder, 2)):
        with pytest.raises(ValueError, match=expected):
            load(str(tmp_path / "m"))
