"""The derived-values store: a value computed once per classifier and fingerprint, read back bit for bit,
never read when its fingerprint, weights or file differ."""

import logging
import threading
import time
from types import SimpleNamespace

import pytest
import torch
from filelock import FileLock

from itermask.analyses.base import EvaluationContext
from itermask.storage.derived import DerivedStore, token_digest


def test_token_digest_tells_apart_ids_row_boundaries_and_columns():
    base = token_digest([[[101, 7, 8, 102], [101, 9, 102]], [0, 1]])
    assert base == token_digest([[[101, 7, 8, 102], [101, 9, 102]], [0, 1]])
    assert base != token_digest([[[101, 7, 8, 102], [101, 5, 102]], [0, 1]])  # one id
    assert base != token_digest([[[101, 7, 8], [102, 101, 9, 102]], [0, 1]])  # the same ids, other rows
    assert base != token_digest([[[101, 7, 8, 102], [101, 9, 102]], [1, 1]])  # one label
    assert base != token_digest([[[101, 7, 8, 102], [101, 9, 102]]])  # no labels


def test_computed_once_then_read_back_equal(tmp_path):
    calls = []
    value = {"features": torch.randn(4, 3), "labels": torch.tensor([0, 1, 1, 0]), "none": None}

    def compute():
        calls.append(1)
        return value

    first = DerivedStore(tmp_path).get_or_compute("ckpt", "ood_fit_representations", {"fit": "abc"}, compute)
    second = DerivedStore(tmp_path).get_or_compute("ckpt", "ood_fit_representations", {"fit": "abc"}, compute)
    assert calls == [1]
    assert first is value and second["none"] is None
    assert torch.equal(second["features"], value["features"]) and torch.equal(second["labels"], value["labels"])
    (path,) = (tmp_path / "derived" / "ckpt").iterdir()
    assert path.name.startswith("ood_fit_representations-") and path.suffix == ".pt"


def test_another_fingerprint_kind_or_model_is_computed_anew(tmp_path):
    store = DerivedStore(tmp_path)
    store.put("ckpt", "test_accuracy", {"inputs": "a"}, 0.75)
    assert store.get("ckpt", "test_accuracy", {"inputs": "a"}) == 0.75
    assert store.get("ckpt", "test_accuracy", {"inputs": "b"}) is None
    assert store.get("other", "test_accuracy", {"inputs": "a"}) is None
    assert store.get("ckpt", "ood_fit_representations", {"inputs": "a"}) is None


@pytest.mark.parametrize("damage", [b"", b"\x00" * 64, b"not a torch file"])
def test_a_damaged_file_is_moved_aside_and_recomputed(tmp_path, caplog, damage):
    store = DerivedStore(tmp_path)
    path = store.put("ckpt", "test_accuracy", {"inputs": "a"}, 0.75)
    path.write_bytes(damage)
    with caplog.at_level(logging.WARNING):
        assert store.get_or_compute("ckpt", "test_accuracy", {"inputs": "a"}, lambda: 0.5) == 0.5
    assert "is damaged" in caplog.text and "test_accuracy" in caplog.text
    assert len(list((tmp_path / "derived" / "damaged").iterdir())) == 1
    assert store.get("ckpt", "test_accuracy", {"inputs": "a"}) == 0.5  # the recomputed value replaced it


def test_a_file_holding_another_fingerprint_is_not_used(tmp_path, caplog):
    """A file whose name matches but whose recorded fingerprint differs (copied or renamed by hand) is refused."""
    store = DerivedStore(tmp_path)
    wrong = store.put("ckpt", "test_accuracy", {"inputs": "b"}, 0.25)
    wrong.rename(store.path("ckpt", "test_accuracy", {"inputs": "a"}))
    with caplog.at_level(logging.WARNING):
        assert store.get("ckpt", "test_accuracy", {"inputs": "a"}) is None
    assert "not this value" in caplog.text


def test_the_context_keys_values_by_checkpoint_and_weight_files(tmp_path):
    store = DerivedStore(tmp_path)
    trained = SimpleNamespace(key="k1", meta={"files": {"model.safetensors": {"sha256": "aa", "size": 3}}})
    context = EvaluationContext(None, trained, None, None, derived=store)
    assert context.reuse("test_accuracy", {"inputs": "x"}, lambda: 0.8) == 0.8
    assert context.reuse("test_accuracy", {"inputs": "x"}, lambda: pytest.fail("recomputed")) == 0.8
    retrained = SimpleNamespace(key="k1", meta={"files": {"model.safetensors": {"sha256": "bb", "size": 3}}})
    assert (
        EvaluationContext(None, retrained, None, None, derived=store).reuse(
            "test_accuracy", {"inputs": "x"}, lambda: 0.6
        )
        == 0.6
    )
    # the attention methods' eager attention rounds otherwise than sdpa: not the same value
    eager = SimpleNamespace(config=SimpleNamespace(_attn_implementation="eager"))
    assert (
        EvaluationContext(None, trained, eager, None, derived=store).reuse(
            "test_accuracy", {"inputs": "x"}, lambda: 0.7
        )
        == 0.7
    )
    # without a store every call computes
    assert EvaluationContext(None, trained, None, None).reuse("test_accuracy", {"inputs": "x"}, lambda: 0.1) == 0.1


def test_a_value_edited_in_place_is_not_used(tmp_path, caplog):
    """A file that still loads but whose value was changed after writing (its recorded checksum kept) is
    refused: it never reaches a result."""
    import io

    store = DerivedStore(tmp_path)
    path = store.put("ckpt", "test_accuracy", {"inputs": "a"}, 0.5953800082206726)
    payload = torch.load(path, weights_only=True)
    edited = io.BytesIO()
    torch.save(0.9123, edited)
    payload["value"] = torch.frombuffer(bytearray(edited.getvalue()), dtype=torch.uint8)
    torch.save(payload, path)
    with caplog.at_level(logging.WARNING):
        assert (
            store.get_or_compute("ckpt", "test_accuracy", {"inputs": "a"}, lambda: 0.5953800082206726)
            == 0.5953800082206726
        )
    assert "does not match the checksum" in caplog.text


def test_a_store_that_cannot_be_written_warns_and_computes(tmp_path, caplog):
    (tmp_path / "derived").write_text("a file where the folder should be")
    store = DerivedStore(tmp_path)
    calls = []
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            assert (
                store.get_or_compute("ckpt", "test_accuracy", {"inputs": "a"}, lambda: calls.append(1) or 0.75) == 0.75
            )
    assert calls == [1, 1] and "could not store the test accuracy" in caplog.text and "writable" in caplog.text


def test_a_damaged_file_that_cannot_be_moved_aside_is_still_not_used(tmp_path, caplog):
    store = DerivedStore(tmp_path)
    path = store.put("ckpt", "test_accuracy", {"inputs": "a"}, 0.75)
    path.write_bytes(b"")
    (tmp_path / "derived" / "damaged").write_text("a file")
    with caplog.at_level(logging.WARNING):
        assert store.get("ckpt", "test_accuracy", {"inputs": "a"}) is None
    assert "could not be moved aside" in caplog.text


def _job(tmp_path, results, name, compute, **store):
    results[name] = DerivedStore(tmp_path, **store).get_or_compute("ckpt", "naopc_bounds", {"x": 1}, compute)


def test_parallel_jobs_compute_a_missing_value_once(tmp_path, caplog):
    """Two jobs miss at once: the second waits on the first's file lock, then reads its value back (a file lock
    taken through another open file blocks in the same process too, so threads stand in for processes)."""
    calls, results, computing = [], {}, threading.Event()

    def first():
        calls.append("first")
        computing.set()
        deadline = time.monotonic() + 20  # hold the lock until the other job waits on it
        while "waiting for it" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.01)
        return torch.arange(3)

    with caplog.at_level(logging.INFO, logger="itermask.storage.derived"):
        a = threading.Thread(target=_job, args=(tmp_path, results, "a", first))
        a.start()
        assert computing.wait(20)
        b = threading.Thread(target=_job, args=(tmp_path, results, "b", lambda: calls.append("second") or None))
        b.start()
        a.join(30)
        b.join(30)
    assert calls == ["first"]
    assert torch.equal(results["a"], torch.arange(3)) and torch.equal(results["b"], torch.arange(3))
    assert "another job is computing the naopc bounds of this classifier" in caplog.text
    assert "computed by another job while this one waited" in caplog.text
    lock = DerivedStore(tmp_path).lock_path("ckpt", "naopc_bounds", {"x": 1})
    assert lock.parent == tmp_path / "derived" / "locks" and lock.name.startswith("ckpt-naopc_bounds-")


def test_a_job_that_waited_past_the_timeout_computes_the_value_itself(tmp_path, caplog):
    store = DerivedStore(tmp_path, lock_timeout=0.2)
    path = store.lock_path("ckpt", "naopc_bounds", {"x": 1})
    path.parent.mkdir(parents=True)
    held = FileLock(str(path))
    held.acquire()  # another job, still computing
    try:
        with caplog.at_level(logging.INFO):
            start = time.monotonic()
            assert store.get_or_compute("ckpt", "naopc_bounds", {"x": 1}, lambda: 7) == 7
            assert time.monotonic() - start >= 0.2
    finally:
        held.release()
    assert "waited 0.2 s for another job computing the naopc bounds" in caplog.text
    assert store.get("ckpt", "naopc_bounds", {"x": 1}) == 7  # stored all the same


def test_not_exclusive_never_waits(tmp_path):
    """A distributed run's ranks all run the computation (its collectives): none waits for a lock."""
    store = DerivedStore(tmp_path, lock_timeout=-1)
    path = store.lock_path("ckpt", "naopc_bounds", {"x": 1})
    path.parent.mkdir(parents=True)
    held = FileLock(str(path))
    held.acquire()
    try:
        assert store.get_or_compute("ckpt", "naopc_bounds", {"x": 1}, lambda: 7, exclusive=False) == 7
    finally:
        held.release()
