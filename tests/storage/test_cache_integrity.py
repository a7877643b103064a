"""Cache integrity: cached checkpoints and stored results carry checksums; a damaged one (cut, emptied,
deleted, overwritten with zeros) is moved aside with a warning naming it and recomputed, never used and
never a crash."""

import json
import logging
from types import SimpleNamespace

import pytest

from itermask.storage.cache import CheckpointCache
from itermask.storage.files import file_manifest, manifest_problems
from itermask.storage.store import ResultStore, result_checksum
from itermask.training import finetune

WEIGHTS = bytes(range(256)) * 64  # 16 KiB standing for model.safetensors


def _entry(cache: CheckpointCache, key: str = "k") -> None:
    """A finished cache entry as training.finetune._export writes it (weights, config, tokenizer, then meta.json)."""
    model = cache.entry(key) / "model"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(WEIGHTS)
    (model / "config.json").write_text(json.dumps({"num_labels": 2, "id2label": {"0": "neg", "1": "pos"}}))
    (model / "tokenizer.json").write_text('{"version": "1.0"}')
    cache.finish(key, {"val_acc": 0.75})


def _cut(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _zero(path):
    data = bytearray(path.read_bytes())
    data[100:164] = bytes(64)  # same size, 64 bytes overwritten with zeros
    path.write_bytes(bytes(data))


DAMAGE = {
    "weights cut in half": ("model/model.safetensors", _cut, "has 8192 bytes, 16384 were written"),
    "weights deleted": ("model/model.safetensors", lambda p: p.unlink(), "model/model.safetensors is missing"),
    "weights zeroed": ("model/model.safetensors", _zero, "does not match the checksum recorded"),
    "config cut in half": ("model/config.json", _cut, "model/config.json has"),
    "config deleted": ("model/config.json", lambda p: p.unlink(), "model/config.json is missing"),
    "meta.json cut in half": ("meta.json", _cut, "meta.json cannot be read (JSONDecodeError"),
    "meta.json emptied": ("meta.json", lambda p: p.write_bytes(b""), "meta.json cannot be read"),
    "meta.json without checksums": ("meta.json", lambda p: p.write_text('{"val_acc": 0.75}'), "records no checksums"),
}


def test_a_finished_entry_records_and_matches_its_checksums(tmp_path):
    cache = CheckpointCache(tmp_path)
    _entry(cache)
    meta = cache.reusable("k")
    assert meta["val_acc"] == 0.75 and sorted(meta["files"]) == [
        "model/config.json",
        "model/model.safetensors",
        "model/tokenizer.json",
    ]
    assert meta["files"]["model/model.safetensors"]["bytes"] == len(WEIGHTS)
    assert manifest_problems(cache.entry("k"), meta["files"]) == []
    assert file_manifest(cache.entry("k") / "model", cache.entry("k")) == meta["files"]
    assert cache.reusable("missing") is None and not (tmp_path / "damaged").exists()


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_checkpoint_is_moved_aside_with_a_warning(tmp_path, caplog, damage):
    name, spoil, message = DAMAGE[damage]
    cache = CheckpointCache(tmp_path)
    _entry(cache)
    spoil(cache.entry("k") / name)
    with caplog.at_level(logging.WARNING):
        assert cache.reusable("k") is None
    assert f"cached checkpoint {cache.entry('k')} is damaged" in caplog.text and message in caplog.text
    assert not cache.entry("k").exists()
    [moved] = (tmp_path / "damaged").iterdir()
    assert moved.name.startswith("k-") and (moved / "model").is_dir()  # kept for inspection
    _entry(cache)  # recomputed into the same place, and reusable again
    assert cache.reusable("k")["val_acc"] == 0.75


def test_get_or_train_fine_tunes_again_when_the_entry_is_damaged(tmp_path, monkeypatch, caplog):
    cache = CheckpointCache(tmp_path)
    _entry(cache)
    _zero(cache.entry("k") / "model" / "model.safetensors")
    fine_tuned = []

    def fine_tune(stage, data, cache, logger):
        fine_tuned.append(stage.key)
        _entry(cache)

    monkeypatch.setattr(finetune, "_fine_tune", fine_tune)
    stage = SimpleNamespace(key="k", cache_dir=tmp_path, lock_timeout=5.0, seed=0, name="m", dataset="d")
    with caplog.at_level(logging.WARNING):
        trained = finetune.get_or_train(stage, data=None)  # pyright: ignore[reportArgumentType]
    assert fine_tuned == ["k"] and trained.meta["val_acc"] == 0.75
    assert "does not match the checksum recorded when it was written" in caplog.text
    fine_tuned.clear()
    assert finetune.get_or_train(stage, data=None).meta["files"] and fine_tuned == []  # pyright: ignore[reportArgumentType]


RESULT = {
    "seed": 0,
    "scores": {"gradient": {"one_shot": {"aopc": 0.125, "curve": [0.0, 0.5, float("nan")]}}},
    "accuracy": {"test": 0.8},
}


def _spoil_result(path, how):
    if how == "cut in half":
        _cut(path)
    elif how == "emptied":
        path.write_bytes(b"")
    elif how == "a value changed":
        path.write_text(path.read_text().replace("0.125", "0.126"))
    elif how == "written without a checksum":
        path.write_text(json.dumps(RESULT))
    elif how == "zeroed":
        _zero(path)


@pytest.mark.parametrize("how", ["cut in half", "emptied", "a value changed", "written without a checksum", "zeroed"])
def test_a_damaged_stored_result_is_moved_aside_and_recomputed(tmp_path, caplog, how):
    store = ResultStore(tmp_path)
    store.put("k", RESULT)
    stored = json.loads(store.path("k").read_text())
    assert stored["sha256"] == result_checksum(stored["result"]) and store.get("k")["accuracy"] == {"test": 0.8}
    _spoil_result(store.path("k"), how)
    with caplog.at_level(logging.WARNING):
        assert store.reuse("k", tmp_path / "job") is None
    assert f"stored result {store.path('k')} is damaged" in caplog.text
    assert not store.path("k").exists() and not (tmp_path / "job").exists()
    [moved] = (tmp_path / "results" / "damaged").iterdir()
    assert moved.name.startswith("k.json-")
    store.put("k", RESULT)  # the recomputed result is stored and reused again
    assert store.reuse("k", tmp_path / "job")["scores"]["gradient"]["one_shot"]["curve"] == [0.0, 0.5, None]
