"""The symmetric relevance gain (SRG, Bluecher et al., TMLR 2024) and the least-important-first direction it reads:
hand-computed areas on constructed curves, the additive model (exact ids and weights) with word features and a
sentence pair, and a tiny random BERT through the real evaluator (reversed ranking, random rankings, shared rows,
today's scores unchanged)."""

import math

import pytest
import torch
from conftest import AdditiveModel, tiny_bert_config
from transformers import BertForSequenceClassification, BertTokenizer

from itermask.core import measures, metrics
from itermask.core.curves import MaskingCurves
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.masking import MaskToken
from itermask.core.saliency import InputXGradientSaliency, RandomSaliency
from itermask.data.datamodule import TokenCollator, segment_ids, word_ids


def sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def _constructed(least: list[list[float]], most: list[list[float]], k, n, steps="count", grid=None) -> MaskingCurves:
    """Curves of two-class logits ``[0, z]`` (target 1) with target logits ``z`` along the least- and
    most-important-first directions, ``k`` ``[B, S]`` masked of ``n`` ``[B]`` features."""

    def logits(z):
        z = torch.tensor(z)
        return torch.stack([torch.zeros_like(z), z], dim=-1)

    b, s = len(most), len(most[0])
    return MaskingCurves(
        schedule="one_shot",
        steps=steps,
        grid=torch.tensor(grid if grid is not None else list(range(s)), dtype=torch.float64),
        example_ids=torch.arange(b),
        n_maskable=torch.tensor(n),
        k=torch.tensor(k),
        target=torch.ones(b, dtype=torch.long),
        labels=torch.ones(b, dtype=torch.long),
        clean_logits=logits([row[0] for row in most]),
        logits=logits(most),
        least_logits=logits(least),
    )


# example 0: n = 2, counts 0..3 capped at 2 (x = 0, .5, 1, 1: the last step has zero width, its gap of 5 adds
# nothing); example 1: n = 4 (x = 0, .25, .5, .75: the grid stops at .75, the area is over [0, .75])
LIF = [[3.0, 2.0, 0.0, 5.0], [4.0, 4.0, 3.0, 2.0]]
MIF = [[3.0, 1.0, 0.0, 0.0], [4.0, 2.0, 1.0, 1.0]]
K, N = [[0, 1, 2, 2], [0, 1, 2, 3]], [2, 4]
# logit gaps [0, 1, 0, 5] and [0, 2, 2, 1]
SRG_LOGIT = [0.5 * (0 + 1) / 2 + 0.5 * (1 + 0) / 2, 0.25 * (0 + 2) / 2 + 0.25 * (2 + 2) / 2 + 0.25 * (2 + 1) / 2]


def test_srg_by_hand_on_constructed_curves():
    curves = _constructed(LIF, MIF, K, N)
    assert measures.symmetric_relevance_gain(curves, "logit").tolist() == pytest.approx(SRG_LOGIT, abs=1e-6)
    gaps = [[sig(a) - sig(b) for a, b in zip(lrow, mrow)] for lrow, mrow in zip(LIF, MIF)]
    by_hand = [
        sum((x1 - x0) * (g0 + g1) / 2 for x0, x1, g0, g1 in zip(xs, xs[1:], g, g[1:]))
        for xs, g in zip([[0, 0.5, 1, 1], [0, 0.25, 0.5, 0.75]], gaps)
    ]
    assert by_hand[0] == pytest.approx(0.5 * (sig(2) - sig(1)), abs=1e-12)  # zero gap at x = 0 and 1
    assert measures.symmetric_relevance_gain(curves).tolist() == pytest.approx(by_hand, abs=1e-6)
    summary = metrics.summarize(curves, "logit", bins=None)
    assert summary["srg_logit"] == pytest.approx(sum(SRG_LOGIT) / 2, abs=1e-6)
    assert metrics.per_example(curves, "logit", bins=None)["srg_logit"].tolist() == pytest.approx(SRG_LOGIT, abs=1e-6)


def test_an_example_with_one_feature_has_no_srg():
    # n = 1: its least- and most-important-first rows are the same input, whatever the ranking; its gap of 3 here
    # stands for any gap the curves could hold (it would count as an area of 1.5 were it not NaN)
    curves = _constructed([[3.0, 1.0], [4.0, 4.0]], [[3.0, -2.0], [4.0, 2.0]], [[0, 1], [0, 1]], [1, 2])
    values = measures.symmetric_relevance_gain(curves, "logit")
    assert math.isnan(values[0]) and values[1].item() == pytest.approx(0.5 * 2 / 2)
    assert metrics.summarize(curves, "logit", bins=None)["srg_logit"] == pytest.approx(0.5)  # the mean of the rest


def test_srg_changes_sign_when_the_directions_swap():
    forward, swapped = _constructed(LIF, MIF, K, N), _constructed(MIF, LIF, K, N)
    for quantity in ("probability", "logit"):
        a = measures.symmetric_relevance_gain(forward, quantity)
        assert measures.symmetric_relevance_gain(swapped, quantity).tolist() == pytest.approx((-a).tolist(), abs=1e-7)
        assert (a.abs() > 0.05).all()


def test_srg_is_undefined_without_least_first_inputs_or_with_one_step():
    curves = _constructed(LIF, MIF, K, N)
    curves.least_logits = None
    with pytest.raises(ValueError, match="no least-important-first inputs"):
        measures.symmetric_relevance_gain(curves)
    assert "srg_prob" not in metrics.summarize(curves, bins=None)
    one = _constructed([row[:1] for row in LIF], [row[:1] for row in MIF], [[0], [0]], N)
    with pytest.raises(ValueError, match="at least two steps"):
        measures.symmetric_relevance_gain(one)


def test_srg_keys_read_as_areas_where_higher_is_more_faithful():
    prob, logit = metrics.metric_info("srg_prob"), metrics.metric_info("srg_logit")
    assert prob is not None and logit is not None
    assert (prob.unit, prob.higher_is_more_faithful, prob.per_step, prob.bounds) == ("area", True, False, (-1.0, 1.0))
    assert (logit.unit, logit.bounds) == ("area", None)


# --- the additive model: word features and a sentence pair, exact weights -----------------------------------------

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "un", "##believ", "##able", "is"]
WEIGHTS = {5: 0.1, 6: 0.5, 7: 0.3, 8: 0.2, 9: 0.2, 10: 0.05}  # words: the .1, film .5, is .05, unbelievable .7


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    path = tmp_path_factory.mktemp("srg_words") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    tok = BertTokenizer(vocab=str(path))
    assert tok.is_fast and len(tok) == len(VOCAB)
    return tok


def _batch(tok, texts, pairs=None):
    enc = tok(texts, pairs)
    segments, words = segment_ids(enc, len(texts)), word_ids(enc, len(texts))
    assert segments is not None and words is not None
    rows = [
        {**{k: enc[k][i] for k in enc}, "label": 1, "example_id": i, "segment_ids": segments[i], "word_ids": words[i]}
        for i in range(len(texts))
    ]
    return TokenCollator(tok, tuple(tok.model_input_names))(rows)["tokens"]


def _additive_srg(tok, batch, fractions, **settings) -> MaskingCurves:
    evaluator = IterativeMaskingEvaluator(
        InputXGradientSaliency(output="logit"),
        MaskToken().bind(tok),
        fractions,
        tok.all_special_ids,
        schedules=["one_shot", "recursive"],
        **settings,
    )
    curves = evaluator.evaluate(AdditiveModel(WEIGHTS, vocab_size=len(VOCAB)), batch)
    assert curves["recursive"].least_logits is None  # no fixed ranking to reverse
    assert "srg_logit" not in metrics.per_example(curves["recursive"], "logit", bins=None)
    return curves["one_shot"]


def test_word_features_mask_the_least_important_words_first(fast):
    # "the film is unbelievable": words .1, .5, .05, .7; MIF masks unbelievable, film, the, is; LIF the reverse
    curves = _additive_srg(fast, _batch(fast, ["the film is unbelievable"]), [0, 0.25, 0.5, 0.75, 1], features="word")
    least = measures.target_output(_t(curves.least_logits), curves.target, "logit")
    assert least[0].tolist() == pytest.approx([1.35, 1.30, 1.20, 0.70, 0.0], abs=1e-6)
    assert measures.target_output(curves.logits, curves.target, "logit")[0].tolist() == pytest.approx(
        [1.35, 0.65, 0.15, 0.05, 0.0], abs=1e-6
    )
    # gaps 0, .65, 1.05, .65, 0 over steps of .25
    assert measures.symmetric_relevance_gain(curves, "logit").item() == pytest.approx(0.25 * 2.35, abs=1e-6)


def test_a_sentence_pairs_second_text_alone_with_ties_broken_as_in_the_other_directions(fast):
    # pair ("the film", "is unbelievable"), segment 1 maskable: is .05, un .3, ##believ .2, ##able .2 (a tie: the
    # earlier piece ranks higher, so LIF masks ##able before ##believ, the complement of the top n - k)
    batch = _batch(fast, ["the film"], ["is unbelievable"])
    curves = _additive_srg(fast, batch, [0, 0.25, 0.5, 0.75, 1], segments=1)
    assert curves.n_maskable.tolist() == [4]
    least = measures.target_output(_t(curves.least_logits), curves.target, "logit")
    assert least[0].tolist() == pytest.approx([1.35, 1.30, 1.10, 0.90, 0.60], abs=1e-6)
    assert measures.target_output(curves.logits, curves.target, "logit")[0].tolist() == pytest.approx(
        [1.35, 1.05, 0.85, 0.65, 0.60], abs=1e-6
    )
    assert measures.symmetric_relevance_gain(curves, "logit").item() == pytest.approx(0.25 * 0.75, abs=1e-6)


def _t(value: torch.Tensor | None) -> torch.Tensor:
    assert value is not None
    return value


# --- a tiny random BERT through the real evaluator --------------------------------------------------------------

TEXTS = [
    "a good film with a bad ending",
    "the story is funny and the actors are great",
    "not bad at all",
    "it is a movie about nothing , and it is too long",
    "one of the best films of the year",
    "the worst thing about this film is its music",
]
SYMMETRIC = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]


class NegatedRandom(RandomSaliency):
    """The random explanation's ranking reversed (continuous scores: no ties)."""

    def _scores(self, model, batch, target, example_ids):
        return -super()._scores(model, batch, target, example_ids)


@pytest.fixture(scope="module")
def bert(tokenizer):
    torch.manual_seed(0)  # a wider initialisation than BERT's: outputs that move when tokens are masked
    return BertForSequenceClassification(tiny_bert_config(tokenizer, initializer_range=0.3)).eval()


@pytest.fixture(scope="module")
def texts(tokenizer):
    return _batch(tokenizer, TEXTS)


def _evaluate(tokenizer, model, batch, method, grid=SYMMETRIC, **settings):
    evaluator = IterativeMaskingEvaluator(
        method, MaskToken().bind(tokenizer), grid, tokenizer.all_special_ids, **{"schedules": ["one_shot"], **settings}
    )
    return evaluator.evaluate(model, batch)["one_shot"], evaluator.forward_stats


def test_a_reversed_ranking_gives_the_opposite_srg(tokenizer, bert, texts, one_thread):
    # MIF of the negated scores is LIF of the scores and vice versa (no ties), so the curves swap exactly; they
    # agree up to float rounding of differently padded row chunks (about 1e-7): tolerance 1e-5
    ranked, _ = _evaluate(tokenizer, bert, texts, RandomSaliency(seed=3))
    reversed_, _ = _evaluate(tokenizer, bert, texts, NegatedRandom(seed=3))
    for quantity in ("probability", "logit"):
        srg = measures.symmetric_relevance_gain(ranked, quantity)
        assert measures.symmetric_relevance_gain(reversed_, quantity).tolist() == pytest.approx(
            (-srg).tolist(), abs=1e-5
        )
        assert (srg.abs() > 1e-3).all(), srg  # the model's outputs move: the check could fail


def test_random_rankings_score_about_zero(tokenizer, bert, texts, one_thread):
    # over uniform random rankings the bottom-k set is distributed as the top-k set, so E[SRG] = 0 exactly; the mean
    # over 30 seeds must lie within 4 standard errors of the per-seed means (deterministic: seeded draws)
    per_seed = torch.stack(
        [
            measures.symmetric_relevance_gain(_evaluate(tokenizer, bert, texts, RandomSaliency(seed=s))[0])
            for s in range(30)
        ]
    ).double()
    means = per_seed.mean(dim=1)
    standard_error = means.std() / math.sqrt(len(means))
    assert per_seed.std() > 1e-3  # single draws are far from 0: the mean's closeness is not a flat model's
    assert abs(means.mean().item()) < 4 * standard_error.item(), (means.mean(), standard_error)


def _added_rows(curves: MaskingCurves) -> int:
    """Least-first rows that are no other row: ``0 < k < n`` with ``n - k`` not a count of the grid (equal to a
    keep-only row otherwise; ``k = 0`` is the clean input, ``k = n`` the all-masked one), distinct per example."""
    added = 0
    for n, ks in zip(curves.n_maskable.tolist(), curves.k.tolist()):
        added += len({k for k in ks if 0 < k < n and n - k not in ks})
    return added


@pytest.mark.parametrize(
    ("grid", "steps"),
    [(list(range(16)), "count"), ([0.0, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0], "fraction")],
    ids=["symmetric-counts", "asymmetric-fractions"],
)
def test_least_first_rows_are_shared_with_keep_rows(tokenizer, bert, texts, one_thread, grid, steps):
    settings = {"steps": steps, "counts": grid} if steps == "count" else {}
    fractions = None if steps == "count" else grid
    on, with_least = _evaluate(tokenizer, bert, texts, RandomSaliency(seed=1), fractions, **settings)
    off, without = _evaluate(tokenizer, bert, texts, RandomSaliency(seed=1), fractions, least_first=False, **settings)
    assert off.least_logits is None and on.least_logits is not None
    assert with_least.rows == without.rows + on.k.numel()  # every least-first row is asked for
    if steps == "count":
        assert int(on.n_maskable.max()) <= max(grid)  # every n - k is on the grid: nothing new to compute
        assert _added_rows(on) == 0
    else:
        assert _added_rows(on) > 0
    assert with_least.computed - without.computed == _added_rows(on)


DEFAULT_GRID = [0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]  # conf/evaluate.yaml's


def test_todays_scores_are_unchanged_with_least_first(tokenizer, bert, texts, one_thread):
    # least-first rows can change how rows are chunked, and a differently padded chunk reorders a few sums (about
    # 1e-7): every existing key agrees within 1e-6, on the default grid
    schedules, method, strategy = ["one_shot", "recursive"], InputXGradientSaliency(output="logit"), MaskToken()
    on = IterativeMaskingEvaluator(method, strategy.bind(tokenizer), DEFAULT_GRID, tokenizer.all_special_ids, schedules)
    off = IterativeMaskingEvaluator(
        method, strategy, DEFAULT_GRID, tokenizer.all_special_ids, schedules, least_first=False
    )
    with_least, without = on.evaluate(bert, texts), off.evaluate(bert, texts)
    for schedule in schedules:
        for quantity in ("probability", "logit"):
            new, old = (metrics.per_example(c[schedule], quantity) for c in (with_least, without))
            extra = {f"srg_{metrics.QUANTITY_SUFFIXES[quantity]}"} if schedule == "one_shot" else set()
            assert set(new) == set(old) | extra
            for key, values in old.items():
                assert torch.allclose(new[key], values, atol=1e-6, equal_nan=True), key
