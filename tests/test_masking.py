"""Masked positions for hand-made examples under each strategy and schedule."""

import pytest
import torch

from itermask.masking import Delete, MaskToken, OneShot, Recursive, masked_counts, to_source_positions, top_k_mask
from itermask.tokens import TokenBatch, maskable_positions

# [CLS]=1 [SEP]=2 [MASK]=3 [UNK]=4 [PAD]=0; words are ids >= 5
BATCH = TokenBatch(
    input_ids=torch.tensor([[1, 5, 6, 7, 8, 9, 2], [1, 10, 4, 11, 2, 0, 0]]),
    attention_mask=torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]]),
    token_type_ids=torch.zeros(2, 7, dtype=torch.long),
)
SPECIAL = [0, 1, 2, 3, 4]


def test_maskable_excludes_special_ids_and_padding():
    maskable = maskable_positions(BATCH, SPECIAL)
    assert maskable.tolist() == [
        [False, True, True, True, True, True, False],
        [False, True, False, True, False, False, False],  # [UNK] is a special id
    ]


def test_masked_counts_round_half_up():
    n = torch.tensor([5, 2, 50, 1])
    k = masked_counts(n, [0.0, 0.01, 0.1, 0.3, 0.5, 1.0])
    assert k.tolist() == [
        [0, 0, 0, 0],
        [0, 0, 1, 0],  # 0.01 * 50 + 0.5 = 1.0
        [1, 0, 5, 0],  # 0.1 * 5 + 0.5 = 1.0; 0.1 * 2 + 0.5 = 0.7
        [2, 1, 15, 0],  # 0.3 * 5 + 0.5 = 2.0; 0.3 * 1 + 0.5 = 0.8
        [3, 1, 25, 1],  # 0.5 * 5 + 0.5 = 3.0
        [5, 2, 50, 1],
    ]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        masked_counts(n, [1.5])


def test_top_k_breaks_ties_by_position():
    scores = torch.tensor([[9.0, 1.0, 3.0, 3.0, 1.0, 3.0, 9.0]])
    cand = torch.tensor([[False, True, True, True, True, True, False]])
    assert top_k_mask(scores, cand, torch.tensor([2])).nonzero()[:, 1].tolist() == [2, 3]
    assert top_k_mask(scores, cand, torch.tensor([4])).nonzero()[:, 1].tolist() == [1, 2, 3, 5]
    assert top_k_mask(scores, cand, torch.tensor([99])).sum() == 5


def test_one_shot_masks_exact_k_highest_first():
    maskable = maskable_positions(BATCH, SPECIAL)
    saliency = torch.tensor([[100.0, 1, 5, 3, 4, 2, 100], [100.0, 1, 100, 2, 100, 100, 100]])
    k = masked_counts(maskable.sum(1), [0.0, 0.2, 0.5, 1.0])  # n = 5 and 2
    masks = OneShot().masks(saliency, maskable, k, None)
    assert masks.sum(-1).tolist() == k.tolist() == [[0, 0], [1, 0], [3, 1], [5, 2]]  # 0.2 * 2 + 0.5 = 0.9 -> 0
    assert masks[1, 0].nonzero().flatten().tolist() == [2]
    assert masks[2, 0].nonzero().flatten().tolist() == [2, 3, 4]
    assert masks[2, 1].nonzero().flatten().tolist() == [3]
    assert masks[1, 1].sum() == 0
    assert not (masks & ~maskable).any()  # special tokens and padding never masked


def _two_left_masked_saliency(batch_ids):
    """Earlier tokens first, but a token whose neighbour two to the left is [MASK] jumps the queue."""
    positions = torch.arange(batch_ids.shape[1], dtype=torch.float).expand(batch_ids.shape)
    bonus = torch.zeros_like(positions)
    bonus[:, 2:] = (batch_ids[:, :-2] == 3).float() * 100
    return -positions + bonus


@pytest.mark.parametrize("strategy_cls", [MaskToken, Delete])
def test_recursive_reranks_on_masked_input_and_keeps_masks(strategy_cls, toy_tokenizer):
    strategy = strategy_cls(toy_tokenizer)
    batch = BATCH.index(slice(0, 1))
    maskable = maskable_positions(batch, SPECIAL)
    calls = []

    def saliency_fn(state, rows):
        masked = strategy.apply(batch.index(rows), state)
        if isinstance(strategy, MaskToken):
            scores = _two_left_masked_saliency(masked.batch.input_ids)
        else:  # deleted tokens leave no trace: rank by token id, highest first
            scores = masked.batch.input_ids.float()
        calls.append(state.clone())
        return to_source_positions(scores, masked, batch.input_ids.shape[1])

    clean = saliency_fn(torch.zeros_like(maskable), torch.tensor([0]))
    calls.clear()
    k = torch.arange(6)[:, None]  # one more token per step: 0..5 of n = 5
    masks = Recursive().masks(clean, maskable, k, saliency_fn)
    order = [int((masks[s] & ~masks[s - 1]).nonzero()[0, 1]) for s in range(1, 6)]
    if isinstance(strategy, MaskToken):
        assert order == [1, 3, 5, 2, 4]  # one-shot would be 1, 2, 3, 4, 5
        assert OneShot().masks(clean, maskable, k)[3, 0].nonzero().flatten().tolist() == [1, 2, 3]
    else:
        assert order == [5, 4, 3, 2, 1]  # ids 9, 8, 7, 6, 5 mapped back to clean positions
    assert all((masks[s] >= masks[s - 1]).all() for s in range(1, 6))  # masked tokens stay masked
    assert masks.sum(-1).flatten().tolist() == [0, 1, 2, 3, 4, 5]
    assert len(calls) == 4  # the first step reuses the clean saliency, the last needs none after it


def test_recursive_rejects_descending_counts():
    with pytest.raises(ValueError, match="ascending"):
        Recursive().masks(torch.zeros(1, 3), torch.ones(1, 3, dtype=torch.bool), torch.tensor([[2], [1]]), None)


def test_mask_token_strategy_replaces_only_masked(toy_tokenizer):
    masked = torch.zeros(2, 7, dtype=torch.bool)
    masked[0, [1, 4]] = True
    masked[1, 3] = True
    out = MaskToken(toy_tokenizer).apply(BATCH, masked)
    assert out.batch.input_ids.tolist() == [[1, 3, 6, 7, 3, 9, 2], [1, 10, 4, 3, 2, 0, 0]]
    assert torch.equal(out.batch.attention_mask, BATCH.attention_mask)
    assert out.source_positions.tolist() == [[0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 4, -1, -1]]


def test_delete_strategy_removes_ids_and_repads(toy_tokenizer):
    masked = torch.zeros(2, 7, dtype=torch.bool)
    masked[0, [1, 4]] = True
    masked[1, [1, 3]] = True
    out = Delete(toy_tokenizer).apply(BATCH, masked)
    assert out.batch.input_ids.tolist() == [[1, 6, 7, 9, 2, 0, 0], [1, 4, 2, 0, 0, 0, 0]]
    assert out.batch.attention_mask.tolist() == [[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0]]
    assert out.source_positions.tolist() == [[0, 2, 3, 5, 6, -1, -1], [0, 2, 4, -1, -1, -1, -1]]
    scores = torch.arange(7, dtype=torch.float).expand(2, 7) + 1
    back = to_source_positions(scores, out, 7)
    assert back[0].tolist() == [1, float("-inf"), 2, 3, float("-inf"), 4, 5]


def test_strategy_without_mask_token_fails_clearly(toy_tokenizer):
    class NoMask(type(toy_tokenizer)):
        mask_token_id = None

    with pytest.raises(ValueError, match="mask_token_id"):
        MaskToken(NoMask())
