"""Model-backed subset outputs (itermask.core.subset_outputs) and the AOPC scores NAOPC normalises
(itermask.core.naopc_scores), on a tiny random BERT and on tables with hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from itermask.core.aopc_bounds import TableOutputs, aopc_bounds, exact_aopc_bounds, naopc
from itermask.core.masking import MaskToken
from itermask.core.measures import target_output
from itermask.core.naopc_scores import feature_ranks, grid_weights, ranking_aopc
from itermask.core.subset_outputs import MemoOutputs, ModelOutputs, feature_counts, feature_index, token_features
from itermask.core.tokens import TokenBatch, class_logits, maskable_positions


def _batch(tokenizer) -> TokenBatch:
    encoded = tokenizer(["a good film , and fun", "it is bad"], padding=True, return_tensors="pt")
    return TokenBatch(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])


def test_token_features_number_the_maskable_positions():
    maskable = torch.tensor([[False, True, True, False, True], [False, True, False, False, False]])
    assert token_features(maskable).tolist() == [[-1, 0, 1, -1, 2], [-1, 0, -1, -1, -1]]


def test_word_features_number_the_maskable_words_and_cover_their_pieces():
    # [CLS] fan ##tas ##tic film [SEP] | [CLS] bad [SEP] [PAD] ...: words 0 (three pieces) and 1; segment 1 of a
    # pair would be a word that is not maskable, here the second row's special tokens only
    ids = torch.tensor([[101, 7, 8, 9, 10, 102], [101, 11, 102, 0, 0, 0]])
    attention = (ids != 0).long()
    words = torch.tensor([[-1, 0, 0, 0, 1, -1], [-1, 0, -1, -1, -1, -1]])
    batch = TokenBatch(ids, attention, word_ids=words)
    maskable = maskable_positions(batch, [0, 101, 102])
    index = feature_index(batch, maskable, "word")
    assert index.tolist() == [[-1, 0, 0, 0, 1, -1], [-1, 0, -1, -1, -1, -1]]
    assert feature_counts(index).tolist() == [2, 1]
    # a word with an unmaskable piece (here "##tic", e.g. outside evaluation.segments) is no feature at all
    maskable[0, 3] = False
    assert feature_index(batch, maskable, "word").tolist()[0] == [-1, -1, -1, -1, 0, -1]
    assert feature_index(batch, maskable, "token").tolist()[0] == [-1, 0, 1, -1, 2, -1]


def test_model_outputs_mask_the_features_and_match_a_direct_forward(tokenizer, tiny_bert):
    batch = _batch(tokenizer)
    features = token_features(maskable_positions(batch, tokenizer.all_special_ids))
    target = torch.tensor([1, 0])
    strategy = MaskToken().bind(tokenizer)
    outputs = ModelOutputs(tiny_bert, batch, features, strategy, target, "probability", token_budget=64)
    assert outputs.n_features.tolist() == [6, 3]
    examples = np.array([0, 1, 0, 1, 1])
    masks = np.zeros((5, 6), dtype=bool)
    masks[0, [0, 5]] = True  # "a" and "fun" of the first text
    masks[2, [0, 5]] = True  # the same row again: computed once
    masks[3, 2] = True  # "bad"
    token_masks = outputs.token_masks(torch.as_tensor(examples), torch.as_tensor(masks))
    mask_id = tokenizer.mask_token_id
    first = batch.input_ids[0].tolist()
    assert strategy.apply(batch.index(torch.tensor([0])), token_masks[:1]).batch.input_ids[0].tolist() == [
        first[0],
        mask_id,
        *first[2:6],
        mask_id,
        first[7],
    ]
    values = outputs(examples, masks)
    expected_ids = strategy.apply(batch.index(torch.as_tensor(examples)), token_masks).batch
    with torch.inference_mode():
        direct = target_output(class_logits(tiny_bert, expected_ids), target[examples])
    np.testing.assert_allclose(values, direct.double().numpy(), atol=1e-5)
    assert values[0] == values[2] and values[1] == values[4]  # rows 1 and 4: the clean second text
    assert (outputs.forwards.stats.rows, outputs.forwards.stats.computed) == (5, 3)
    logit = ModelOutputs(tiny_bert, batch, features, strategy, target, "logit")(examples[:1], masks[:1])
    with torch.inference_mode():
        direct_logit = class_logits(tiny_bert, expected_ids.index(torch.tensor([0])))[0, 1]
    assert logit[0] == pytest.approx(float(direct_logit), abs=1e-5)
    with pytest.raises(ValueError, match="example 1 has 3 features; its mask goes beyond"):
        outputs(np.array([1]), np.eye(6, dtype=bool)[4:5])


def test_memo_outputs_pass_each_set_on_once():
    table = TableOutputs([np.arange(8.0), np.arange(4.0) * 10])
    memo = MemoOutputs(table)
    masks = np.array([[1, 0, 1], [1, 0, 1], [1, 0, 0], [1, 0, 0]], dtype=bool)
    assert memo(np.array([0, 0, 1, 1]), masks).tolist() == [5.0, 5.0, 10.0, 10.0]
    assert memo(np.array([0, 1]), masks[:2, :2]).tolist() == [1.0, 10.0]  # narrower masks, same sets
    assert (memo.asked, memo.passed, table.calls) == (6, 3, 2)


def test_ranking_aopc_and_naopc_on_a_table_by_hand():
    # 2 features; outputs by bitmask: clean 1.0, {0} 0.4, {1} 0.8, {0, 1} 0.1
    table = TableOutputs([np.array([1.0, 0.4, 0.8, 0.1])])
    # drops: {0} 0.6, {1} 0.2, both 0.9: order (0, 1) gives (0.6 + 0.9) / 2 = 0.75 (upper), (1, 0) 0.55 (lower)
    bounds = exact_aopc_bounds(table.tables[0])
    assert (bounds.upper, bounds.lower) == pytest.approx((0.75, 0.55)) and bounds.upper_order == (0, 1)
    scores = ranking_aopc(table, [np.array([1, 0])])  # feature 1 ranked first
    # comprehensiveness masks {1} then both: (0.2 + 0.9) / 2; sufficiency the bottom {0} then both
    assert scores["comprehensiveness"][0] == pytest.approx(0.55)
    assert scores["sufficiency"][0] == pytest.approx(0.75)
    assert naopc(scores["comprehensiveness"], bounds.upper, bounds.lower)[0] == pytest.approx(0.0)
    assert naopc(scores["sufficiency"], bounds.upper, bounds.lower)[0] == pytest.approx(1.0)
    assert np.isnan(naopc([0.3], [0.5], [0.5])[0])  # U == L: nothing to normalise by


def test_feature_ranks_order_the_features_by_their_tokens_rank():
    rank = torch.tensor([[-1, 2, 3, 1, -1], [-1, 1, -1, -1, -1]])
    features = torch.tensor([[-1, 0, 1, 2, -1], [-1, 0, -1, -1, -1]])
    assert [o.tolist() for o in feature_ranks(rank, features)] == [[2, 0, 1], [0]]


def test_grid_weights_put_sufficiency_at_n_minus_k():
    # ERASER bins on a 10-feature example: k = 0, 1, 1, 2, 5
    assert grid_weights([0, 1, 1, 2, 5], 10, "comprehensiveness").tolist() == [0.2, 0.4, 0.2, 0, 0, 0.2, 0, 0, 0, 0, 0]
    assert grid_weights([0, 1, 1, 2, 5], 10, "sufficiency").tolist() == [0, 0, 0, 0, 0, 0.2, 0, 0, 0.2, 0.4, 0.2]
    with pytest.raises(ValueError, match="0 <= k <= n=3"):
        grid_weights([4], 3, "comprehensiveness")
    # itermask's AOPC over the grid is the weighted functional: the bounds of a 2-step grid by hand
    table = TableOutputs([np.array([1.0, 0.4, 0.8, 0.1])])
    ((bounds, how),) = aopc_bounds(table, [2], weights=[grid_weights([1], 2, "comprehensiveness")])
    assert how == "exact" and (bounds.upper, bounds.lower) == pytest.approx((0.6, 0.2))
