"""The degraded explanations of the sanity benchmark (itermask.core.degrade) and its statistic
(itermask.core.sanity_statistics), on an additive model whose input x gradient saliency is each token's weight,
a fast WordPiece tokenizer built here, and constructed values."""

import numpy as np
import pytest
import torch
from conftest import AdditiveModel
from test_word_features import VOCAB, WEIGHTS, _batch, fast  # noqa: F401  (the fixture)

from itermask.core.degrade import DegradedSaliency, check_levels, degrade_scores, level_seed
from itermask.core.saliency import InputXGradientSaliency
from itermask.core.sanity_statistics import CONSTANT, MISSING, example_correlations, level_correlation

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
    [([0.5, 1.0], "include 0"), ([0, 0.5, 0.5], "distinct"), ([0, 1.5], r"\[0, 1\]"), ([0], "two"), ("ab", "numbers")],
)
def test_bad_levels_are_one_line_errors(levels, message):
    with pytest.raises(ValueError, match=message):
        check_levels(levels)
    assert check_levels([1.0, 0, 0.5]) == [0.0, 0.5, 1.0]


LEVELS = [0.0, 0.25, 0.5, 0.75, 1.0]


def test_monotone_measures_get_rho_minus_one_or_plus_one_and_rank_the_order():
    falling = np.array([[1.0, 0.8, 0.5, 0.2, 0.1], [3.0, 2.0, 1.5, 1.0, 0.0], [0.9, 0.7, 0.6, 0.5, 0.4]])
    found = level_correlation(falling, LEVELS, higher_is_more_faithful=True, n_boot=200, seed=0)
    assert (
        found.mean_example_rho == pytest.approx(-1.0, abs=1e-12)
        and found.expected_sign == -1
        and found.ranks_known_order
    )
    assert found.rho < -0.6 and found.p_one_sided < 0.05 and found.reason is None
    rising = level_correlation(-falling, LEVELS, higher_is_more_faithful=False, n_boot=200)
    assert (
        rising.mean_example_rho == pytest.approx(1.0, abs=1e-12)
        and rising.expected_sign == 1
        and rising.ranks_known_order
    )
    # the same values read with the other direction cannot rank a known order, and say why
    wrong = level_correlation(falling, LEVELS, higher_is_more_faithful=False, n_boot=0)
    assert not wrong.ranks_known_order and "not significantly above 0" in str(wrong.reason)
    one = level_correlation(np.array([[5.0, 4.0, 3.0, 2.0, 1.0]]), LEVELS, True, n_boot=0)
    assert one.rho == pytest.approx(-1.0) and one.p_value == pytest.approx(0.0, abs=1e-6)


def test_constant_and_missing_values_have_no_example_rho_and_say_why():
    values = np.array([[1.0, 1.0, 1.0, 1.0, 1.0], [1.0, np.nan, 0.5, 0.2, 0.1], [1.0, 0.5, 0.4, 0.2, 0.1]])
    rho, reason = example_correlations(values, LEVELS)
    assert np.isnan(rho[0]) and reason[0] == CONSTANT and np.isnan(rho[1]) and reason[1] == MISSING
    assert rho[2] == pytest.approx(-1.0, abs=1e-12) and reason[2] == ""
    found = level_correlation(values, LEVELS, True, n_boot=0)
    assert (found.n_constant, found.n_missing) == (1, 1) and found.mean_example_rho == pytest.approx(-1.0, abs=1e-12)
    flat = level_correlation(np.ones((4, 5)), LEVELS, True, n_boot=50)
    assert np.isnan(flat.rho) and not flat.ranks_known_order and "constant" in str(flat.reason)
    assert flat.as_dict()["rho"] is None


def test_noise_does_not_rank_and_the_bootstrap_interval_holds_rho():
    noise = np.random.default_rng(0).normal(size=(30, 5))
    found = level_correlation(noise, LEVELS, True, n_boot=300, seed=1)
    assert not found.ranks_known_order and abs(found.rho) < 0.2
    assert found.ci_low <= found.rho <= found.ci_high
    again = level_correlation(noise, LEVELS, True, n_boot=300, seed=1)
    assert (again.ci_low, again.ci_high) == (found.ci_low, found.ci_high)  # seeded


def test_the_vectorised_bootstrap_is_the_loop_of_spearmanr():
    from itermask.core.sanity_statistics import _bootstrap, _pooled_rho

    values, grid = np.random.default_rng(0).normal(size=(8, 5)), np.asarray(LEVELS)
    picks = np.random.default_rng(3).integers(0, 8, (200, 8))
    loop = np.asarray([_pooled_rho(values[p], grid)[0] for p in picks])
    assert np.allclose(_bootstrap(values, grid, 200, 3), loop, atol=1e-12, rtol=0)
    values[0, 0] = np.nan  # NaN values: resample by resample, the same draws
    loop = np.asarray([_pooled_rho(values[p], grid)[0] for p in picks])
    assert np.allclose(_bootstrap(values, grid, 200, 3), loop[np.isfinite(loop)], atol=1e-12, rtol=0)
