"""The degraded explanations of the sanity benchmark (itermask.core.degrade; its statistic is tested in
test_sanity_statistics.py), on an additive model whose input x gradient saliency is each token's weight and a
fast WordPiece tokenizer built here."""

import pytest
import torch
from conftest import AdditiveModel
from test_word_features import VOCAB, WEIGHTS, _batch, fast  # noqa: F401  (the fixture)

from itermask.core.degrade import DegradedSaliency, check_levels, degrade_scores, level_seed
from itermask.core.saliency import InputXGradientSaliency

# ten tokens with distinct weights 0.1 .. 1.0 (ids 5..14 of a 16-id vocabulary)
TEN = {i: 0.1 * (i - 4) for i in range(5, 15)}


def _ten_batch(rows: int = 1):
    from itermask.core.tokens import TokenBatch

    ids = torch.tensor([[2, *range(5, 15), 3]] * rows)
    return TokenBatch(ids, torch.ones_like(ids))


def _explain(level, seed=0, features="token", tok=None, batch=None, ids=None, weights=None):
    inner = InputXGradientSaliency(output="logit")
    method = DegradedSaliency(inner, level, seed, features, [0, 1, 2, 3, 4] if tok is None else tok.all_special_ids)
    batch = _ten_batch() if batch is None else batch
    model = AdditiveModel(weights or TEN, vocab_size=16 if tok is None else len(VOCAB))
    ids = torch.arange(len(batch)) if ids is None else ids
    target = torch.ones(len(batch), dtype=torch.long)
    with torch.enable_grad():
        return method.explain(model, batch, target, ids).scores, inner.explain(model, batch, target, ids).scores


def test_level_zero_is_the_inner_explanation_bit_for_bit():
    degraded, clean = _explain(0.0)
    assert torch.equal(degraded, clean)
    assert torch.allclose(clean[0, 1:11], torch.tensor(list(TEN.values())))


def test_level_one_permutes_every_score_and_the_ids_are_fixed_for_a_seed():
    degraded, clean = _explain(1.0, seed=3)
    assert sorted(degraded[0, 1:11].tolist()) == pytest.approx(sorted(clean[0, 1:11].tolist()))
    assert degraded[0, 0] == clean[0, 0] and degraded[0, 11] == clean[0, 11]  # special tokens untouched
    # the generator seeded by sha256("3:0:1.0"): which token's score each position now holds
    taken = [int(torch.isclose(clean[0], v).nonzero()[0]) for v in degraded[0, 1:11]]
    generator = torch.Generator().manual_seed(level_seed(3, 0, 1.0))
    chosen = torch.randperm(10, generator=generator)[:10]
    expected = {int(c) + 1: int(s) + 1 for c, s in zip(chosen, chosen[torch.randperm(10, generator=generator)])}
    assert taken == [expected[p] for p in range(1, 11)]
    assert taken == [5, 6, 2, 3, 10, 8, 7, 9, 4, 1]  # the exact draw, pinned
    assert _explain(1.0, seed=4)[0].tolist() != degraded.tolist()


@pytest.mark.parametrize(("level", "m"), [(0.25, 2), (0.5, 5), (0.75, 8), (0.3, 3), (0.05, 0)])
def test_m_is_round_level_times_n_and_only_chosen_scores_move(level, m):
    scores = torch.arange(10, dtype=torch.float).repeat(200, 1)  # 200 examples, ten features each
    maskable = torch.ones(200, 10, dtype=torch.bool)
    out = degrade_scores(scores, maskable, level, 0, torch.arange(200))
    moved = (out != scores).sum(dim=1)
    assert int(moved.max()) <= m and (round(level * 10) == m)
    assert torch.equal(out.sort(dim=1).values, scores)  # a permutation of each example's scores
    if m >= 2:
        assert int(moved.max()) == m  # some draw moves every chosen feature


def test_unmaskable_features_keep_their_scores():
    scores = torch.arange(6, dtype=torch.float)[None]
    maskable = torch.tensor([[False, True, True, True, True, False]])
    out = degrade_scores(scores, maskable, 1.0, 1, torch.tensor([7]))
    assert out[0, 0] == 0 and out[0, 5] == 5 and sorted(out[0, 1:5].tolist()) == [1, 2, 3, 4]


def test_word_features_put_each_words_score_on_its_first_piece(fast):  # noqa: F811
    from itermask.core.features import group_features
    from itermask.core.tokens import maskable_positions

    batch = _batch(fast, ["the film is unbelievable"])
    degraded, clean = _explain(1.0, seed=0, features="word", tok=fast, batch=batch, weights=WEIGHTS)
    groups = group_features(batch, maskable_positions(batch, fast.all_special_ids), "word")
    words = groups.scores(degraded, "sum")
    assert sorted(words[0].tolist()) == pytest.approx([0.05, 0.1, 0.5, 0.7])  # the word scores, permuted
    # "unbelievable" (positions 4-6): its word score on the first piece, 0 on the others
    assert degraded[0, 5].item() == 0 and degraded[0, 6].item() == 0
    assert degraded[0, 4].item() == pytest.approx(words[0, 3].item())
    expected = degrade_scores(groups.scores(clean), groups.maskable, 1.0, 0, torch.tensor([0]))
    assert torch.equal(words, expected)
    assert DegradedSaliency(InputXGradientSaliency(), 0.5, 0, "word").word_score == "sum"
    assert DegradedSaliency(InputXGradientSaliency(), 0.0, 0, "word").word_score == "sum"


def test_an_examples_degradation_does_not_depend_on_its_batch():
    batch = _ten_batch(3)
    together = _explain(0.5, seed=1, batch=batch, ids=torch.tensor([4, 9, 2]))[0]
    alone = _explain(0.5, seed=1, batch=batch.index(torch.tensor([1])), ids=torch.tensor([9]))[0]
    assert torch.equal(together[1], alone[0])
    assert not torch.equal(together[0], together[1])  # other examples draw otherwise


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        ([0.5, 1.0], r"sanity.levels: must contain 0 \(the undegraded explanation\), got \[0.5, 1.0\]$"),
        ([0, 0.5, 0.5], r"sanity.levels: repeated values \[0.5\]$"),
        ([0, 1.5, -0.25], r"sanity.levels: values outside \[0, 1\]: \[1.5, -0.25\]$"),
        ([0, float("nan")], r"sanity.levels: values outside \[0, 1\]: \[nan\]$"),
        ([0], r"sanity.levels: give at least two levels, got \[0.0\]$"),
        ("ab", "give a list of numbers"),
        # every problem in one line
        ([0.5, 2, 2], r"outside \[0, 1\]: \[2.0, 2.0\]; repeated values \[2.0\]; must contain 0"),
    ],
)
def test_bad_levels_are_one_line_errors(levels, message):
    with pytest.raises(ValueError, match=message):
        check_levels(levels)
    assert check_levels([1.0, 0, 0.5]) == [0.0, 0.5, 1.0]


def test_a_shared_clean_cache_explains_each_batch_once_and_changes_no_score():
    """The sanity benchmark's levels share one cache: the inner method runs once per batch, not once per level,
    and every level's scores equal those of an uncached DegradedSaliency."""
    inner = InputXGradientSaliency(output="logit")
    calls = []
    explain = inner.explain
    inner.explain = lambda *args, **kwargs: calls.append(1) or explain(*args, **kwargs)  # count the inner calls
    model, batch = AdditiveModel(TEN, vocab_size=16), _ten_batch(3)
    ids, target, cache = torch.tensor([7, 8, 9]), torch.ones(3, dtype=torch.long), {}
    with torch.enable_grad():
        for level in (0.25, 0.5, 1.0):
            cached = DegradedSaliency(inner, level, 0, "token", [0, 1, 2, 3, 4], clean_cache=cache)
            plain = DegradedSaliency(InputXGradientSaliency(output="logit"), level, 0, "token", [0, 1, 2, 3, 4])
            assert torch.equal(
                cached.explain(model, batch, target, ids).scores, plain.explain(model, batch, target, ids).scores
            )
    assert len(calls) == 1 and list(cache) == [(7, 8, 9)]
