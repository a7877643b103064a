"""Masked positions for hand-made examples under each strategy and schedule."""

import pytest
import torch
from conftest import AdditiveModel, Recorder, ToyTokenizer
from reference_forwards import StepMajorEvaluator

from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.masking import (
    AttentionOff,
    Delete,
    MaskToken,
    PadToken,
    RandomToken,
    ReplaceWithToken,
    UnkToken,
    to_source_positions,
)
from itermask.core.saliency import InputXGradientSaliency, RandomSaliency
from itermask.core.schedules import OneShot, Recursive, capped_counts, masked_counts, step_counts, top_k_mask
from itermask.core.tokens import TokenBatch, maskable_positions

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
    # the first step reuses the clean saliency; the last takes the only token left, which needs no ranking
    assert len(calls) == 3


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


class VocabTokenizer(ToyTokenizer):
    """The toy ids plus [UNK]=4 and a vocabulary of 16 ids (5..15 are words)."""

    unk_token_id = 4

    def __len__(self):
        return 16


MASKED = torch.zeros(2, 7, dtype=torch.bool)
MASKED[0, [1, 4]] = True
MASKED[1, 3] = True


@pytest.mark.parametrize(
    "strategy_cls, ids, attention",
    [
        (MaskToken, [[1, 3, 6, 7, 3, 9, 2], [1, 10, 4, 3, 2, 0, 0]], BATCH.attention_mask.tolist()),
        (UnkToken, [[1, 4, 6, 7, 4, 9, 2], [1, 10, 4, 4, 2, 0, 0]], BATCH.attention_mask.tolist()),
        # the pad id stays under attention
        (PadToken, [[1, 0, 6, 7, 0, 9, 2], [1, 10, 4, 0, 2, 0, 0]], BATCH.attention_mask.tolist()),
        (AttentionOff, BATCH.input_ids.tolist(), [[1, 0, 1, 1, 0, 1, 1], [1, 1, 1, 0, 1, 0, 0]]),
    ],
)
def test_fixed_strategies_exact_ids_and_attention(strategy_cls, ids, attention):
    segments = torch.tensor([[-1, 0, 0, 0, 1, 1, -1], [-1, 0, 0, 1, -1, -1, -1]])
    batch = TokenBatch(BATCH.input_ids, BATCH.attention_mask, BATCH.token_type_ids + 1, segments)
    out = strategy_cls(VocabTokenizer()).apply(batch, MASKED)
    assert out.batch.input_ids.tolist() == ids
    assert out.batch.attention_mask.tolist() == attention
    # token type ids and segment ids are carried along, unchanged, and positions map one to one
    assert torch.equal(out.batch.token_type_ids, batch.token_type_ids)
    assert torch.equal(out.batch.segment_ids, segments)
    assert out.source_positions.tolist() == [[0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 4, -1, -1]]
    assert "segment_ids" not in out.batch.model_inputs()


def test_token_replacements_share_one_class():
    assert all(issubclass(c, ReplaceWithToken) for c in (MaskToken, UnkToken, PadToken))
    assert [c.token_attribute for c in (MaskToken, UnkToken, PadToken)] == [
        "mask_token_id",
        "unk_token_id",
        "pad_token_id",
    ]
    assert "apply" not in vars(UnkToken) and "apply" not in vars(PadToken) and "apply" not in vars(MaskToken)
    with pytest.raises(ValueError, match="unk_token_id"):
        UnkToken(ToyTokenizer())  # the toy tokenizer has no unknown token


def test_delete_carries_segment_ids():
    segments = torch.tensor([[-1, 0, 0, 0, 1, 1, -1], [-1, 0, 0, 1, -1, -1, -1]])
    batch = TokenBatch(BATCH.input_ids, BATCH.attention_mask, BATCH.token_type_ids, segments)
    out = Delete(VocabTokenizer()).apply(batch, MASKED)
    assert out.batch.input_ids.tolist() == [[1, 6, 7, 9, 2, 0, 0], [1, 10, 4, 2, 0, 0, 0]]
    assert out.batch.segment_ids.tolist() == [[-1, 0, 0, 1, -1, -1, -1], [-1, 0, 0, -1, -1, -1, -1]]


def test_random_token_draws_non_special_ids_independent_of_batching_and_step():
    strategy = RandomToken(VocabTokenizer(), seed=3)
    out = strategy.apply(BATCH, MASKED)
    replaced = out.batch.input_ids[MASKED]
    assert ((replaced >= 5) & (replaced <= 15)).all()  # special ids 0..4 are never drawn
    assert torch.equal(out.batch.input_ids[~MASKED], BATCH.input_ids[~MASKED])
    assert torch.equal(out.batch.attention_mask, BATCH.attention_mask)
    full = strategy.replacements(BATCH)
    # another step masks more: the tokens masked before keep their replacement
    more = MASKED.clone()
    more[0, [2, 5]] = True
    stepped = strategy.apply(BATCH, more).batch.input_ids
    assert torch.equal(stepped[MASKED], out.batch.input_ids[MASKED])
    assert torch.equal(stepped[more], full[more])
    # the second example alone, trimmed to its length, or batched after other rows, padded further
    alone = strategy.replacements(BATCH.index(slice(1, 2)).trim())
    assert torch.equal(alone[0], full[1, :5])
    other = TokenBatch(torch.tensor([[1, 12, 13, 14, 15, 2, 0, 0, 0]]), torch.tensor([[1, 1, 1, 1, 1, 1, 0, 0, 0]]))
    padded = TokenBatch.concat([other, BATCH.index(slice(1, 2)).map(lambda t: torch.nn.functional.pad(t, (0, 2)))])
    assert torch.equal(strategy.replacements(padded)[1, :5], full[1, :5])
    # seeded: the same seed draws the same ids, another seed other ones
    assert torch.equal(RandomToken(VocabTokenizer(), seed=3).replacements(BATCH), full)
    assert not torch.equal(RandomToken(VocabTokenizer(), seed=4).replacements(BATCH), full)
    long_row = TokenBatch(torch.full((1, 300), 7), torch.ones(1, 300, dtype=torch.long))
    assert set(strategy.replacements(long_row).flatten().tolist()) == set(range(5, 16))  # every word, nothing else


def test_random_token_keeps_replacements_under_recursion():
    tokenizer = VocabTokenizer()
    model = Recorder(AdditiveModel({i: float(i % 3) - 1 for i in range(5, 16)}))
    batch = TokenBatch(torch.tensor([[1, 5, 6, 7, 8, 9, 10, 2]]), torch.ones(1, 8, dtype=torch.long))
    evaluator = StepMajorEvaluator(  # every step's row in one forward, in step order (the default de-duplicates)
        RandomSaliency(seed=1),
        RandomToken(tokenizer, seed=0),
        None,
        tokenizer.all_special_ids,
        schedules=["recursive"],
        steps="count",
        counts=[0, 1, 2, 3, 4, 5, 6],
        sufficiency=False,
    )
    curves = evaluator.evaluate(model, batch)["recursive"]
    assert curves.k.tolist() == [[0, 1, 2, 3, 4, 5, 6]]
    final = model.calls[-1]["input_ids"]  # the masked forward of every step, step-major
    assert final.shape[0] == 7
    replacements = RandomToken(tokenizer, seed=0).replacements(batch)[0]
    changed = final != batch.input_ids  # [7, 8]
    for step in range(1, 7):
        assert changed[step].sum() <= step
        assert (changed[step] >= changed[step - 1]).all()  # masked stays masked, never restored
        assert torch.equal(final[step][changed[step]], replacements[changed[step]])


def test_capped_counts_and_step_counts():
    n = torch.tensor([5, 2, 0])
    assert capped_counts(n, [0, 1, 2, 3, 10]).tolist() == [[0, 0, 0], [1, 1, 0], [2, 2, 0], [3, 2, 0], [5, 2, 0]]
    assert torch.equal(step_counts(n, [0.0, 0.5], "fraction"), masked_counts(n, [0.0, 0.5]))
    assert step_counts(n, [1, 4], "count").tolist() == [[1, 1, 0], [4, 2, 0]]
    with pytest.raises(ValueError, match="non-negative integers"):
        capped_counts(n, [1.5])
    with pytest.raises(ValueError, match="non-negative integers"):
        capped_counts(n, [-1])
    with pytest.raises(ValueError, match="kind of masking steps"):
        step_counts(n, [1], "percent")


def test_count_steps_mask_exact_tokens_one_shot_and_recursive(toy_tokenizer):
    # additive model: weights 3, 1, 2, -1, 0.5 for ids 5..9; input x gradient on the logit ranks them
    model = AdditiveModel({5: 3.0, 6: 1.0, 7: 2.0, 8: -1.0, 9: 0.5})
    batch = TokenBatch(
        torch.tensor([[1, 5, 6, 7, 8, 9, 2], [1, 7, 5, 2, 0, 0, 0]]), torch.tensor([[1] * 7, [1, 1, 1, 1, 0, 0, 0]])
    )
    evaluator = IterativeMaskingEvaluator(
        InputXGradientSaliency(output="logit"),
        MaskToken(toy_tokenizer),
        None,
        [0, 1, 2, 3, 4],
        steps="count",
        counts=[0, 1, 2, 3],
        target=1,
    )
    curves = evaluator.evaluate(model, batch)
    for schedule in ("one_shot", "recursive"):
        c = curves[schedule]
        assert c.steps == "count" and c.grid.tolist() == [0, 1, 2, 3]
        assert c.k.tolist() == [[0, 1, 2, 3], [0, 1, 2, 2]]  # capped at n = 2 for the second example
        # masked in order 3 (id 5), 2 (id 7), 1 (id 6): logit sums 5.5 -> 2.5 -> 0.5 -> -0.5
        assert c.logits[0, :, 1].tolist() == pytest.approx([5.5, 2.5, 0.5, -0.5])
        assert c.logits[1, :, 1].tolist() == pytest.approx([5.0, 2.0, 0.0, 0.0])
    assert curves["one_shot"].masked_fraction.flatten().tolist() == pytest.approx([0, 0.2, 0.4, 0.6, 0, 0.5, 1, 1])
    with pytest.raises(ValueError, match="not masking fractions"):
        _ = curves["one_shot"].fractions
    with pytest.raises(ValueError, match="counts"):
        IterativeMaskingEvaluator(InputXGradientSaliency(), MaskToken(toy_tokenizer), None, [0], steps="count")
    with pytest.raises(ValueError, match="ascending"):
        IterativeMaskingEvaluator(
            InputXGradientSaliency(), MaskToken(toy_tokenizer), None, [0], steps="count", counts=[2, 1]
        )
    # a repeated step would count twice in AOPC (full-grid AOPC is the mean over the grid's steps)
    with pytest.raises(ValueError, match="no repeats"):
        IterativeMaskingEvaluator(InputXGradientSaliency(), MaskToken(toy_tokenizer), [0, 0.1, 0.1, 0.5], [0])


def test_a_new_schedule_is_one_class(toy_tokenizer):
    """A MaskingSchedule subclass with a name registers itself; the evaluator runs it and asks it whether
    sufficiency (keep-only inputs) applies."""
    from conftest import AdditiveModel

    from itermask.core.schedules import SCHEDULES, MaskingSchedule, top_k_mask

    class LeastSalientFirst(MaskingSchedule):
        """Masks the *least* salient tokens first (a control ranking)."""

        name, sufficiency = "least_salient_first", True

        def masks(self, clean_saliency, maskable, k, saliency_fn=None):
            return torch.stack([top_k_mask(-clean_saliency, maskable, k_s) for k_s in k])

    try:
        model = AdditiveModel({5: 2.0, 6: 1.0, 7: -1.0})
        batch = TokenBatch(torch.tensor([[1, 5, 6, 7, 2]]), torch.ones(1, 5, dtype=torch.long))
        evaluator = IterativeMaskingEvaluator(
            InputXGradientSaliency(output="logit"),
            MaskToken(toy_tokenizer),
            [0.0, 1 / 3, 2 / 3],
            [0, 1, 2, 3, 4],
            schedules=["least_salient_first"],
        )
        curves = evaluator.evaluate(model, batch)["least_salient_first"]
        # saliency = the weights 2, 1, -1: token 7 goes first, then 6; logit sums 2, 3, 2
        assert curves.logits[0, :, 1].tolist() == pytest.approx([2.0, 3.0, 2.0])
        assert curves.keep_logits[0, :, 1].tolist() == pytest.approx([0.0, -1.0, 0.0])
    finally:
        SCHEDULES.pop("least_salient_first", None)
    with pytest.raises(ValueError, match="unknown masking schedule"):
        IterativeMaskingEvaluator(
            RandomSaliency(), MaskToken(toy_tokenizer), [0.0], [0], schedules=["least_salient_first"]
        )
