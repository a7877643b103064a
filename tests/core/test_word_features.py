"""Word-level features (``evaluation.features=word``): every piece of a word is ranked, counted and masked
together, a word scores the sum of its pieces' scores, on a fast WordPiece tokenizer built here with words of
several pieces, an additive model whose input x gradient saliency is each token's weight, and exact ids."""

import math
from types import SimpleNamespace

import pytest
import torch
from conftest import AdditiveModel
from transformers import BertTokenizer

from itermask.analyses.attack import AttackAnalysis
from itermask.core.attack import GreedyAttack
from itermask.core.candidates import EmbeddingNeighbours, MaskCandidates
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.features import group_features
from itermask.core.masking import Delete, MaskToken
from itermask.core.measures import first_flip_count
from itermask.core.saliency import InputXGradientSaliency, RandomSaliency
from itermask.core.tokens import TokenBatch, maskable_positions
from itermask.data.datamodule import TokenCollator, segment_ids, word_ids

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "un", "##believ", "##able", "is"]
# token weights (the additive model's logit of class 1 is their sum; input x gradient gives each token its weight)
WEIGHTS = {5: 0.1, 6: 0.5, 7: 0.3, 8: 0.2, 9: 0.2, 10: 0.05}  # words: the .1, film .5, is .05, unbelievable .7
MASK = 4


def _t(value: torch.Tensor | None) -> torch.Tensor:
    """``value``, which the test expects to be recorded."""
    assert value is not None
    return value


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    path = tmp_path_factory.mktemp("words") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    tok = BertTokenizer(vocab=str(path))  # transformers 5: the fast (Rust) WordPiece tokenizer
    assert tok.is_fast and len(tok) == len(VOCAB)
    return tok


def _batch(tok, texts, pairs=None):
    enc = tok(texts, pairs)
    rows = [
        {**{k: enc[k][i] for k in enc}, "label": 1, "example_id": i}
        | {"segment_ids": _l(segment_ids(enc, len(texts)))[i], "word_ids": _l(word_ids(enc, len(texts)))[i]}
        for i in range(len(texts))
    ]
    return TokenCollator(tok, tuple(tok.model_input_names))(rows)["tokens"]


def _l(value: list | None) -> list:
    assert value is not None
    return value


def _curves(tok, batch, features, strategy=None, weights=None, **settings):
    evaluator = IterativeMaskingEvaluator(
        InputXGradientSaliency(output="logit"),
        (strategy or MaskToken()).bind(tok),
        settings.pop("fractions", None),
        tok.all_special_ids,
        features=features,
        **{"schedules": ["one_shot"], **settings},
    )
    return evaluator.evaluate(AdditiveModel(weights or WEIGHTS, vocab_size=len(VOCAB)), batch)


def _masked_ids(curves, step):
    """The clean ids with every position masked by ``step`` replaced by [MASK], per example."""
    ids, first = _t(curves.token_ids), _t(curves.masked_step).long()
    masked = torch.where((first >= 0) & (first <= step), torch.full_like(ids, MASK), ids)
    return [row[row >= 0].tolist() for row in masked]


def test_word_ids_number_a_pairs_second_text_after_the_first_and_ride_in_the_batch(fast):
    batch = _batch(fast, ["the film unbelievable", "is"], ["unbelievable is", "the"])
    assert batch.input_ids[0].tolist() == [2, 5, 6, 7, 8, 9, 3, 7, 8, 9, 10, 3]
    assert _t(batch.word_ids).tolist() == [[-1, 0, 1, 2, 2, 2, -1, 3, 3, 3, 4, -1], [-1, 0, -1, 1, -1] + [-1] * 7]
    assert _t(batch.segment_ids)[1].tolist() == [-1, 0, -1, 1, -1] + [-1] * 7
    assert _t(batch.index(torch.tensor([1])).word_ids).tolist() == [[-1, 0, -1, 1, -1] + [-1] * 7]
    assert _t(TokenBatch.concat([batch, batch]).word_ids).shape == (4, 12)
    assert _t(batch.tile(3).word_ids).shape == (6, 12)
    deleted = Delete().bind(fast).apply(batch, _t(batch.word_ids) == 2).batch
    assert _t(deleted.word_ids)[0].tolist() == [-1, 0, 1, -1, 3, 3, 3, 4, -1, -1, -1, -1]
    assert deleted.input_ids[0, :9].tolist() == [2, 5, 6, 3, 7, 8, 9, 10, 3]


def test_word_scores_are_sums_of_their_pieces_and_masks_expand_to_every_piece(fast):
    batch = _batch(fast, ["the film is unbelievable"])
    groups = group_features(batch, maskable_positions(batch, fast.all_special_ids), "word")
    scores = torch.tensor([[9.0, 0.1, 0.5, 0.05, 0.3, 0.2, 0.25, 9.0]])
    assert torch.allclose(groups.scores(scores), torch.tensor([[0.1, 0.5, 0.05, 0.75]]))
    assert groups.maskable.tolist() == [[True] * 4]
    # the random explanation takes each word's first piece's score: a uniform random order of words
    assert torch.allclose(groups.scores(scores, "first"), torch.tensor([[0.1, 0.5, 0.05, 0.3]]))
    assert RandomSaliency.word_score == "first" and InputXGradientSaliency.word_score == "sum"
    words = torch.tensor([[[False, False, False, True]], [[True, True, False, False]]])
    assert groups.to_tokens(words).long().tolist() == [[[0, 0, 0, 0, 1, 1, 1, 0]], [[0, 1, 1, 0, 0, 0, 0, 0]]]
    token = group_features(batch, maskable_positions(batch, fast.all_special_ids), "token")
    assert token.scores(scores) is scores and token.to_tokens(words) is words


@pytest.mark.parametrize(
    ("features", "expected"),  # fraction 0.25, 0.5, 1.0 of 4 words (1, 2, 4) or of 6 tokens (2, 3, 6)
    [
        ("word", [[2, 5, 6, 10, 4, 4, 4, 3], [2, 5, 4, 10, 4, 4, 4, 3], [2, 4, 4, 4, 4, 4, 4, 3]]),
        # film, un; then ##believ (tied with ##able, earlier first); then all
        ("token", [[2, 5, 4, 10, 4, 8, 9, 3], [2, 5, 4, 10, 4, 4, 9, 3], [2, 4, 4, 4, 4, 4, 4, 3]]),
    ],
)
def test_exact_masked_ids_at_fractions_in_words_or_tokens(fast, features, expected):
    curves = _curves(fast, _batch(fast, ["the film is unbelievable"]), features, fractions=[0.25, 0.5, 1.0])["one_shot"]
    assert [_masked_ids(curves, s)[0] for s in range(3)] == expected
    assert curves.n_maskable.tolist() == [4 if features == "word" else 6]
    assert curves.k.tolist() == [[1, 2, 4] if features == "word" else [2, 3, 6]]
    # the additive model's logit: the sum of the weights left (special tokens are never masked)
    left = [0.65, 0.15, 0.0] if features == "word" else [0.55, 0.35, 0.0]
    assert curves.logits[0, :, 1].tolist() == pytest.approx(left, abs=1e-6)


def test_word_curves_give_each_piece_its_word_score_rank_and_id(fast):
    curves = _curves(fast, _batch(fast, ["the film is unbelievable"]), "word", fractions=[0.5])["one_shot"]
    assert _t(curves.rank).tolist() == [[-1, 3, 2, 4, 1, 1, 1, -1]]
    assert _t(curves.word_ids).tolist() == [[-1, 0, 1, 2, 3, 3, 3, -1]]
    nan = math.nan
    assert _t(curves.scores)[0].tolist() == pytest.approx([nan, 0.1, 0.5, 0.05, 0.7, 0.7, 0.7, nan], nan_ok=True)


def test_counts_are_words_and_a_pair_masks_only_its_chosen_segment(fast):
    batch = _batch(fast, ["unbelievable film"], ["the unbelievable"])
    curves = _curves(fast, batch, "word", steps="count", counts=[1, 5], segments=[1])["one_shot"]
    # [CLS] un ##believ ##able film [SEP] the un ##believ ##able [SEP]: only the second text's 2 words
    assert curves.n_maskable.tolist() == [2] and curves.k.tolist() == [[1, 2]]
    assert _masked_ids(curves, 0) == [[2, 7, 8, 9, 6, 3, 5, 4, 4, 4, 3]]
    assert _masked_ids(curves, 1) == [[2, 7, 8, 9, 6, 3, 4, 4, 4, 4, 3]]


def test_recursive_schedule_ranks_words_again_on_the_deleted_input(fast):
    batch = _batch(fast, ["the film is unbelievable"])
    curves = _curves(fast, batch, "word", Delete(), steps="count", counts=[1, 2, 3], schedules=["recursive"])
    recursive = curves["recursive"]
    assert recursive.k.tolist() == [[1, 2, 3]]
    assert _t(recursive.masked_step).tolist() == [[-1, 2, 1, -1, 0, 0, 0, -1]]
    assert recursive.logits[0, :, 1].tolist() == pytest.approx([0.65, 0.15, 0.05], abs=1e-6)


def test_token_features_are_unchanged_and_word_features_need_word_ids(fast):
    batch = _batch(fast, ["the film is unbelievable", "is the film"])
    token = _curves(fast, batch, "token", fractions=[0.0, 0.5, 1.0], schedules=["one_shot", "recursive"])
    plain = TokenBatch(batch.input_ids, batch.attention_mask, batch.token_type_ids, batch.segment_ids)
    before = _curves(fast, plain, "token", fractions=[0.0, 0.5, 1.0], schedules=["one_shot", "recursive"])
    for name in ("one_shot", "recursive"):
        assert token[name].word_ids is None
        for field in ("logits", "keep_logits", "rank", "scores", "masked_step", "k", "n_maskable"):
            a, b = getattr(token[name], field), getattr(before[name], field)
            assert (a is None and b is None) or torch.equal(_t(a).nan_to_num(-7), _t(b).nan_to_num(-7)), field
    with pytest.raises(ValueError, match="evaluation.features=word needs word ids from a fast tokenizer"):
        _curves(fast, plain, "word", fractions=[0.5])
    with pytest.raises(ValueError, match=r"unknown evaluation.features 'piece': choose one of \('token', 'word'\)"):
        _curves(fast, batch, "piece", fractions=[0.5])
    assert word_ids({"input_ids": [[2, 5, 3]]}, 1) is None  # a slow tokenizer's encoding: no word ids


# "is" weighs -0.4 here: the text sums to 0.9 (class 1); masking unbelievable (.7) then film (.5) flips it
FLIPS = WEIGHTS | {10: -0.4}


def _attack(tok, features, strategy=None, ranking="one_shot", source=None):
    return GreedyAttack(
        InputXGradientSaliency(output="logit"),
        (strategy or MaskToken()).bind(tok),
        (source or MaskCandidates()).bind(tok),
        tok.all_special_ids,
        ranking=ranking,
        budget=0.5,
        features=features,
    )


@pytest.mark.parametrize(
    ("features", "ids", "positions", "counts", "left"),  # counts: n_perturbed, n_maskable, k_max; left: logit
    [
        ("word", [2, 5, 4, 10, 4, 4, 4, 3], [2, 4, 5, 6], [2, 4, 2], -0.3),  # unbelievable whole, then film
        ("token", [2, 5, 4, 10, 4, 4, 9, 3], [2, 4, 5], [3, 6, 3], -0.1),  # film, un, ##believ (earlier of a tie)
    ],
)
def test_the_mask_attack_perturbs_every_piece_of_a_word_and_counts_the_budget_in_words(
    fast, features, ids, positions, counts, left
):
    batch = _batch(fast, ["the film is unbelievable"])
    model = AdditiveModel(FLIPS, vocab_size=len(VOCAB))
    result = _attack(fast, features).attack(model, batch)
    assert result.adversarial.input_ids.tolist() == [ids]
    assert torch.equal(result.substituted_ids, batch.input_ids)  # the mask source writes no id itself
    assert torch.nonzero(result.perturbed[0]).flatten().tolist() == positions
    assert [result.n_perturbed.item(), result.n_maskable.item(), result.k_max.item()] == counts
    assert result.success.item() and result.perturbed_fraction.item() == 0.5
    assert result.final_prob.item() == pytest.approx(torch.sigmoid(torch.tensor(left)).item(), abs=1e-6)
    # the masking curves count the same unit: their first flip is at the attack's count
    curves = _curves(fast, batch, features, steps="count", counts=[1, 2, 3, 4], weights=FLIPS)["one_shot"]
    assert first_flip_count(curves).tolist() == [counts[0]]


@pytest.mark.parametrize("ranking", ["one_shot", "recursive"])
def test_the_attack_deletes_whole_words_with_either_ranking(fast, ranking):
    batch = _batch(fast, ["the film is unbelievable"])
    model = AdditiveModel(FLIPS, vocab_size=len(VOCAB))
    result = _attack(fast, "word", Delete(), ranking).attack(model, batch)
    assert result.adversarial.input_ids.tolist() == [[2, 5, 10, 3, 0, 0, 0, 0]]  # [CLS] the is [SEP]
    assert result.n_perturbed.item() == 2 and result.success.item()


def test_word_features_attack_only_with_the_mask_source_refused_before_any_work(fast):
    with pytest.raises(
        ValueError, match=r"attack candidates 'embedding_neighbors' propose one token id .* use attack=mask"
    ):
        _attack(fast, "word", source=EmbeddingNeighbours())
    inputs = SimpleNamespace(evaluation=SimpleNamespace(features="word", schedules=("one_shot",)), tokenizer=fast)
    with pytest.raises(ValueError, match=r"attack candidates 'embedding_neighbors' propose one token id"):
        AttackAnalysis(EmbeddingNeighbours()).check(inputs)  # pyright: ignore[reportArgumentType] (settings only)
    analysis = AttackAnalysis()
    analysis.check(inputs)  # pyright: ignore[reportArgumentType]
    assert analysis.word_start is None  # word_initial_only is moot with words: every maskable word is attackable
    with pytest.raises(ValueError, match=r"unknown evaluation.features 'piece'"):
        _attack(fast, "piece")


def test_a_view_of_word_curves_shows_words(fast):
    from itermask.views import views_from_curves

    batch = _batch(fast, ["the film is unbelievable"])
    curves = _curves(fast, batch, "word", fractions=[0.0, 0.25, 0.5])
    view = views_from_curves({"x": curves}, batch, fast, {"x": torch.zeros(1, 8)}).views[0]
    assert view.tokens == ["[CLS]", "the", "film", "is", "unbelievable", "[SEP]"]
    assert view.token_ids == [2, 5, 6, 10, 7, 3] and view.special == [True, False, False, False, False, True]
    method = view.methods["x"]
    assert method.ranks == [None, 3, 2, 4, 1, None]
    assert method.scores[1:5] == pytest.approx([0.1, 0.5, 0.05, 0.7])
    assert method.trajectories["one_shot"].masked == [[], [4], [2, 4]]
