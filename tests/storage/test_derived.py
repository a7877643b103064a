"""The derived-values store: a value computed once per classifier and fingerprint, read back bit for bit,
never read when its fingerprint, weights or file differ."""

import logging
from types import SimpleNamespace

import pytest
import torch

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
