"""Soft comprehensiveness and soft sufficiency (Zhao & Aletras 2023, :mod:`itermask.core.soft_masking`): the
perturbed embedding rows on a tiny BERT and on a one-dimensional additive model whose outputs are known by hand,
the normalisation and clipping on constructed curves, seeding, special tokens, word features, sentence pairs,
and that today's scores do not move."""

import math

import pytest
import torch
from conftest import AdditiveModel, tiny_bert_config
from transformers import BertForSequenceClassification, BertTokenizer

from itermask.core import metrics
from itermask.core.curves import MaskingCurves
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.evaluation_settings import EvaluationSettings
from itermask.core.masking import MaskToken
from itermask.core.saliency import InputXGradientSaliency
from itermask.core.soft_masking import MIN_FLOOR_DROP, draw_seed, draw_uniforms, soft_importance, soft_outputs
from itermask.core.tokens import TokenBatch, maskable_positions
from itermask.data.datamodule import TokenCollator, segment_ids, word_ids

TEXTS = ["a good film", "the story is funny and the actors are great", "not bad"]
FRACTIONS = [0.0, 0.5, 1.0]
# float rounding: the same row run in chunks of different padded widths (a reordered sum, ~1e-7)
TOL = 1e-5


class EmbeddingAdditive(AdditiveModel):
    """:class:`AdditiveModel` that also takes ``inputs_embeds`` (its 1-d word embedding): ``logits = [0, sum of
    the attended embeddings]``, so dropping a token's one dimension removes exactly its weight."""

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None):
        embeds = self.embedding(input_ids) if inputs_embeds is None else inputs_embeds
        score = (embeds.squeeze(-1) * attention_mask).sum(dim=1)
        return torch.stack([torch.zeros_like(score), score], dim=1)


class EmbedsRecorder(torch.nn.Module):
    """Wraps a classifier and records the ``inputs_embeds`` and ``token_type_ids`` of every call."""

    def __init__(self, model):
        super().__init__()
        self.model, self.calls = model, []

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def forward(self, **inputs):
        self.calls.append({k: v.detach().clone() for k, v in inputs.items()})
        return self.model(**inputs)


class Fingerprint(torch.nn.Module):
    """Takes ``inputs_embeds`` and returns ``[0, a fixed random float64 projection of the attended rows]``: a
    different number for every input row, so a test can tell which row an output came from."""

    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding
        dim = embedding.weight.shape[1]
        self.weights = torch.randn(64, dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)

    def get_input_embeddings(self):
        return self.embedding

    def fingerprint(self, row: torch.Tensor) -> float:
        return (row.double() * self.weights[: len(row)]).sum().item()

    def forward(self, inputs_embeds, attention_mask, token_type_ids=None):
        rows = inputs_embeds.double() * attention_mask[..., None]
        score = (rows * self.weights[: rows.shape[1]]).sum(dim=(1, 2))
        return torch.stack([torch.zeros_like(score), score], dim=1)


@pytest.fixture(scope="module")
def bert(tokenizer):
    """A tiny BERT with weights large enough that dropping embedding dimensions moves its outputs."""
    torch.manual_seed(0)
    return BertForSequenceClassification(tiny_bert_config(tokenizer, initializer_range=0.5)).eval()


def _batch(tokenizer, texts, pairs=None) -> TokenBatch:
    enc = tokenizer(texts, pairs)
    extra = {"segment_ids": segment_ids(enc, len(texts)), "word_ids": word_ids(enc, len(texts))}
    rows = [
        {**{k: enc[k][i] for k in enc}, "label": 0, "example_id": i} | {k: v[i] for k, v in extra.items() if v}
        for i in range(len(texts))
    ]
    return TokenCollator(tokenizer, tuple(tokenizer.model_input_names))(rows)["tokens"]


def _embedded(model, batch: TokenBatch, keep: torch.Tensor) -> torch.Tensor:
    """Logits of ``batch`` with the word embeddings multiplied by ``[B, L]`` ``keep`` (a plain forward)."""
    with torch.inference_mode():
        embeds = model.get_input_embeddings()(batch.input_ids) * keep[..., None].float()
        out = model(inputs_embeds=embeds, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids)
    return out.logits


def test_importances_all_0_or_all_1_give_the_clean_input_and_the_floor(tokenizer, bert):
    batch = _batch(tokenizer, TEXTS)
    maskable = maskable_positions(batch, tokenizer.all_special_ids)
    clean = _embedded(bert, batch, torch.ones_like(maskable))
    floor = _embedded(bert, batch, ~maskable)
    ids = torch.tensor([3, 4, 5])
    zero = soft_outputs(bert, batch, maskable, torch.zeros(maskable.shape), ids, 3, 0, 64)
    one = soft_outputs(bert, batch, maskable, torch.ones(maskable.shape), ids, 3, 0, 64)
    assert zero.comprehensiveness.shape == (3, 3, 2) and zero.floor.shape == (3, 2)
    for r in range(3):
        assert torch.allclose(zero.comprehensiveness[:, r], clean, atol=TOL)
        assert torch.allclose(zero.sufficiency[:, r], floor, atol=TOL)
        assert torch.allclose(one.comprehensiveness[:, r], floor, atol=TOL)
        assert torch.allclose(one.sufficiency[:, r], clean, atol=TOL)
    assert torch.allclose(zero.floor, floor, atol=TOL)
    assert (clean - floor).abs().max() > 4 * TOL  # the two references differ (the tiny model's outputs are close)
    with torch.inference_mode():  # the embedding path is the ids path
        assert torch.allclose(clean, bert(**batch.model_inputs()).logits, atol=TOL)


def _curves(logits_clean, draws_comp, draws_keep, floor, scores) -> MaskingCurves:
    """Two-class curves whose target (class 1) probabilities are ``sigmoid`` of the given logits."""

    def two(z):
        z = torch.tensor(z, dtype=torch.float64)
        return torch.stack([torch.zeros_like(z), z], dim=-1)

    n = len(logits_clean)
    scores = torch.tensor(scores, dtype=torch.float32)
    return MaskingCurves(
        schedule="one_shot",
        steps="fraction",
        grid=torch.tensor([0.0, 1.0]),
        example_ids=torch.arange(n),
        n_maskable=torch.full((n,), scores.shape[1]),
        k=torch.zeros(n, 2, dtype=torch.long),
        target=torch.ones(n, dtype=torch.long),
        labels=torch.ones(n, dtype=torch.long),
        clean_logits=two(logits_clean),
        logits=two([[z, z] for z in logits_clean]),
        scores=scores,
        rank=torch.ones(scores.shape, dtype=torch.int16),
        soft_logits=two(draws_comp),
        soft_keep_logits=two(draws_keep),
        soft_floor_logits=two(floor),
    )


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_normalisation_clipping_and_undefined_examples_by_hand():
    # example 0: p = 0.8, p0 = 0.2; comprehensiveness draws p_r = 0.5, 0.9, 0.1: (p - p_r) / 0.6 = 0.5, -1/6 (-> 0),
    # 7/6 (-> 1); sufficiency draws p_r = 0.5, 0.1, 0.9: 1 - that = 0.5, -1/6 (-> 0), 7/6 (-> 1).
    # example 1: p = 0.3 <= p0 = 0.4: undefined. example 2: constant importances: undefined.
    lo, hi = [0.5, 0.9, 0.1], [0.5, 0.1, 0.9]
    curves = _curves(
        [logit(0.8), logit(0.3), logit(0.8)],
        [[logit(p) for p in lo]] * 3,
        [[logit(p) for p in hi]] * 3,
        [logit(0.2), logit(0.4), logit(0.2)],
        [[0.1, 0.7], [0.1, 0.7], [0.5, 0.5]],
    )
    values = metrics.per_example(curves, bins=None)
    for name in ("soft_comprehensiveness", "soft_sufficiency"):
        assert values[name][0].item() == pytest.approx(0.5, abs=1e-9)
        assert values[f"{name}_draw_sd"][0].item() == pytest.approx(0.5, abs=1e-9)  # sd of 0.5, 0, 1
        assert values[name][1:].isnan().all() and values[f"{name}_draw_sd"][1:].isnan().all()
    assert values["soft_undefined_fraction"].tolist() == [0.0, 1.0, 1.0]
    summary = metrics.summarize(curves, bins=None)
    assert summary["soft_comprehensiveness"] == pytest.approx(0.5) and summary["soft_undefined_fraction"] == 2 / 3
    info = metrics.metric_info("soft_sufficiency")
    assert info is not None and info.higher_is_more_faithful is True and info.bounds == (0.0, 1.0)
    assert metrics.metric_info("soft_comprehensiveness_draw_sd").higher_is_more_faithful is None  # pyright: ignore[reportOptionalMemberAccess]


def test_a_floor_drop_of_float_noise_is_undefined_and_one_of_0_2_is_computed():
    # example 0: p = 0.8, p0 = 0.8 - 1e-7 (a model whose output barely moves), a draw at p - 1e-6: before the floor
    # of MIN_FLOOR_DROP this scored clip(1e-6 / 1e-7) = 1.0. example 1: p = 0.8, p0 = 0.6: comprehensiveness draws
    # p_r = 0.7, 0.5 give 0.1 / 0.2 = 0.5 and 0.3 / 0.2 (-> 1), mean 0.75; sufficiency draws 0.75, 0.65 give
    # 1 - 0.25 = 0.75 and 1 - 0.75 = 0.25, mean 0.5.
    assert MIN_FLOOR_DROP == 1e-4
    noise = 0.8 - 1e-6
    curves = _curves(
        [logit(0.8), logit(0.8)],
        [[logit(noise), logit(noise)], [logit(0.7), logit(0.5)]],
        [[logit(noise), logit(noise)], [logit(0.75), logit(0.65)]],
        [logit(0.8 - 1e-7), logit(0.6)],
        [[0.1, 0.7], [0.1, 0.7]],
    )
    values = metrics.per_example(curves, bins=None)
    assert math.isnan(values["soft_comprehensiveness"][0].item()) and math.isnan(values["soft_sufficiency"][0])
    assert values["soft_comprehensiveness"][1].item() == pytest.approx(0.75, abs=1e-9)
    assert values["soft_sufficiency"][1].item() == pytest.approx(0.5, abs=1e-9)
    assert values["soft_undefined_fraction"].tolist() == [1.0, 0.0]
    summary = metrics.summarize(curves, bins=None)
    assert summary["soft_comprehensiveness"] == pytest.approx(0.75) and summary["soft_undefined_fraction"] == 0.5


def test_soft_importance_min_max_and_its_undefined_rows():
    scores = torch.tensor([[9.0, 1.0, 3.0, 5.0], [2.0, 2.0, 0.0, 0.0], [1.0, -math.inf, 0.0, 0.0]])
    maskable = torch.tensor([[False, True, True, True], [True, True, False, False], [True, True, False, False]])
    a, defined = soft_importance(scores, maskable)
    assert a[0].tolist() == [0.0, 0.0, 0.5, 1.0]  # over the maskable 1, 3, 5 only; the rest 0
    assert defined.tolist() == [True, False, False] and a[1:].eq(0).all()


def test_hand_computed_draws_on_an_additive_model():
    # [CLS] x y z [SEP] with weights 0.3, 1, 2, -0.5, 0.2 (special tokens never dropped); a = 1, 0, 0.5: in the
    # comprehensiveness input x always goes, y always stays, z goes iff its uniform is below 0.5 (the reverse
    # for sufficiency). The floor keeps only [CLS] and [SEP]: logit 0.5.
    model = EmbeddingAdditive({2: 0.3, 5: 1.0, 6: 2.0, 7: -0.5, 3: 0.2})
    batch = TokenBatch(torch.tensor([[2, 5, 6, 7, 3]]), torch.ones(1, 5, dtype=torch.long))
    maskable = maskable_positions(batch, [0, 1, 2, 3, 4])
    out = soft_outputs(model, batch, maskable, torch.tensor([[0.0, 1.0, 0.0, 0.5, 0.0]]), torch.tensor([7]), 6, 11, 64)
    z_gone = [bool(draw_uniforms(11, 7, r, 5, 1)[3, 0] < 0.5) for r in range(6)]
    assert 0 < sum(z_gone) < 6, "pick a seed whose draws go both ways"
    comp = [0.5 + 2.0 + (0.0 if gone else -0.5) for gone in z_gone]
    keep = [0.5 + 1.0 + (-0.5 if gone else 0.0) for gone in z_gone]
    assert out.comprehensiveness[0, :, 1].tolist() == pytest.approx(comp)
    assert out.sufficiency[0, :, 1].tolist() == pytest.approx(keep)
    assert out.floor[0, 1].item() == pytest.approx(0.5)

    # normalised: p = sig(3), p0 = sig(0.5)
    def sig(z: float) -> float:
        return 1 / (1 + math.exp(-z))

    p, p0 = sig(3.0), sig(0.5)
    curves = _curves([3.0], [comp], [keep], [0.5], [[0.0, 1.0, 0.0, 0.5, 0.0]])
    expected = sum(min(max((p - sig(c)) / (p - p0), 0.0), 1.0) for c in comp) / 6
    value = metrics.per_example(curves, bins=None)["soft_comprehensiveness"].item()
    assert value == pytest.approx(expected, abs=1e-12) and 0 < value < 1


def test_draws_are_reproducible_and_independent_of_the_batch(tokenizer, bert):
    batch = _batch(tokenizer, TEXTS)
    maskable = maskable_positions(batch, tokenizer.all_special_ids)
    a = torch.rand(maskable.shape, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([10, 11, 12])
    first = soft_outputs(bert, batch, maskable, a, ids, 2, 5, 64)
    again = soft_outputs(bert, batch, maskable, a, ids, 2, 5, 8192)
    assert torch.allclose(first.comprehensiveness, again.comprehensiveness, atol=TOL)
    alone = _batch(tokenizer, TEXTS[2:])  # example 12 alone: a shorter padded width
    width = alone.input_ids.shape[1]
    single = soft_outputs(bert, alone, maskable[2:, :width], a[2:, :width], ids[2:], 2, 5, 64)
    assert torch.allclose(single.comprehensiveness, first.comprehensiveness[2:], atol=TOL)
    assert torch.allclose(single.sufficiency, first.sufficiency[2:], atol=TOL)
    other_seed = soft_outputs(bert, batch, maskable, a, ids, 2, 6, 64)
    assert not torch.allclose(other_seed.comprehensiveness, first.comprehensiveness, atol=1e-4)


def test_only_maskable_tokens_of_the_chosen_segment_are_perturbed(tokenizer, bert):
    batch = _batch(tokenizer, ["a good film", "bad"], ["not bad at all", "the story is funny"])
    assert batch.token_type_ids is not None
    maskable = maskable_positions(batch, tokenizer.all_special_ids, segments=[1])
    recorder = EmbedsRecorder(bert)
    soft_outputs(recorder, batch, maskable, torch.full(maskable.shape, 0.5), torch.tensor([0, 1]), 3, 0, 8192)
    clean = bert.get_input_embeddings()(batch.input_ids).detach()
    rows = [row for call in recorder.calls for row in call["inputs_embeds"]]
    types = [row for call in recorder.calls for row in call["token_type_ids"]]
    assert len(rows) == 2 * 7
    for row, token_types in zip(rows, types):
        b = next(i for i in range(2) if torch.equal(token_types, batch.token_type_ids[i, : len(token_types)]))
        n = len(row)
        untouched = ~maskable[b, :n]  # special tokens, padding, the first text
        assert torch.equal(row[untouched], clean[b, :n][untouched])
    changed = [row for row in rows if not torch.equal(row, clean[0, : len(row)])]
    assert changed, "some maskable token's dimensions were dropped"


def test_word_features_give_every_piece_its_words_importance(tmp_path, monkeypatch):
    import itermask.core.evaluation as evaluation

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "un", "##believ", "##able", "is"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizer(vocab=str(tmp_path / "vocab.txt"))
    seen = {}

    def capture(model, batch, maskable, importance, *rest, **options):
        seen["importance"] = importance
        return soft_outputs(model, batch, maskable, importance, *rest, **options)

    monkeypatch.setattr(evaluation, "soft_outputs", capture)
    batch = _batch(tok, ["the film unbelievable is"])  # [CLS] the film un ##believ ##able is [SEP]
    assert batch.input_ids[0].tolist() == [2, 5, 6, 7, 8, 9, 10, 3]
    evaluator = IterativeMaskingEvaluator(
        InputXGradientSaliency(output="logit"), MaskToken(tok), FRACTIONS, tok.all_special_ids, features="word"
    )
    evaluator.soft_draws = 1
    model = EmbeddingAdditive({5: 0.1, 6: 0.5, 7: 0.3, 8: 0.2, 9: 0.2, 10: 0.05}, vocab_size=len(vocab))
    evaluator.evaluate(model, batch)
    # word scores (input x gradient: the weights, summed per word): the .1, film .5, unbelievable .7, is .05;
    # min-max over the four words: (s - .05) / .65, each piece its word's
    words = [0.1, 0.5, 0.7, 0.7, 0.7, 0.05]
    expected = [0.0] + [(w - 0.05) / 0.65 for w in words] + [0.0]
    assert seen["importance"][0].tolist() == pytest.approx(expected, abs=1e-6)


def test_todays_scores_are_unchanged_and_soft_scores_come_for_one_shot_only(tokenizer, bert):
    batch = _batch(tokenizer, TEXTS)

    def run(draws):
        evaluator = IterativeMaskingEvaluator(
            InputXGradientSaliency(), MaskToken(tokenizer), FRACTIONS, tokenizer.all_special_ids, soft_draws=draws
        )
        return evaluator, evaluator.evaluate(bert, batch, torch.tensor([0, 1, 0]), torch.tensor([4, 5, 6]))

    (_, off), (evaluator, on) = run(0), run(5)
    assert evaluator.soft_stats.rows == 3 * 11 and evaluator.soft_stats.forwards >= 1
    for schedule in ("one_shot", "recursive"):
        before, after = (metrics.summarize(c[schedule], bins=None) for c in (off, on))
        assert {k: v for k, v in after.items() if k in before} == before  # every existing key, exactly
        extra = set(after) - set(before)
        soft = {"soft_comprehensiveness", "soft_sufficiency", "soft_undefined_fraction"}
        soft |= {"soft_comprehensiveness_draw_sd", "soft_sufficiency_draw_sd"}
        assert extra == (soft if schedule == "one_shot" else set())
    assert on["one_shot"].soft_logits.shape == (3, 5, 2) and on["recursive"].soft_logits is None  # pyright: ignore[reportOptionalMemberAccess]
    values = metrics.per_example(on["one_shot"], bins=None)["soft_comprehensiveness"]
    assert ((values >= 0) & (values <= 1) | values.isnan()).all()


def test_a_model_without_inputs_embeds_is_refused_before_any_forward(toy_tokenizer):
    calls = []

    class Counting(AdditiveModel):
        def forward(self, input_ids, attention_mask, token_type_ids=None):
            calls.append(1)
            return super().forward(input_ids, attention_mask, token_type_ids)

    batch = TokenBatch(torch.tensor([[1, 5, 6, 2]]), torch.ones(1, 4, dtype=torch.long))
    evaluator = IterativeMaskingEvaluator(
        InputXGradientSaliency(), MaskToken(toy_tokenizer), FRACTIONS, [0, 1, 2, 3], soft_draws=1
    )
    with pytest.raises(ValueError, match="evaluation.soft_draws=0"):
        evaluator.evaluate(Counting({5: 1.0}), batch)
    assert not calls
    evaluator.soft_draws = 0  # off: the same model runs
    evaluator.evaluate(Counting({5: 1.0}), batch)


@pytest.mark.parametrize("bad", [-1, 1.5, True, 1001, 10**11])  # 1e11 draws crashed late on memory (review)
def test_soft_draws_must_be_a_whole_number_at_least_0(toy_tokenizer, bad):
    with pytest.raises(ValueError, match="evaluation.soft_draws must be a whole number"):
        IterativeMaskingEvaluator(InputXGradientSaliency(), MaskToken(toy_tokenizer), FRACTIONS, [0], soft_draws=bad)
    node = dict(split="test", n_examples=None, subset_seed=0, steps="fraction", fractions=[0.0], counts=[0])
    node |= dict(aopc_bins=None, segments=None, schedules=["one_shot"], target="predicted", quantity="probability")
    with pytest.raises(ValueError, match="evaluation.soft_draws"):
        EvaluationSettings.of(node | dict(compare_random=False, soft_draws=bad))
    assert EvaluationSettings.of(node | dict(compare_random=False)).soft_draws == 5


def test_soft_draws_enter_the_results_key_away_from_the_default():
    from conftest import compose_config, keys_of

    default = keys_of(compose_config()).results
    assert keys_of(compose_config("evaluation.soft_draws=5")).results == default
    keys = {keys_of(compose_config(f"evaluation.soft_draws={r}")).results for r in (0, 1, 3)}
    assert len(keys) == 3 and default not in keys


def test_the_draws_and_the_perturbed_embeddings_are_pinned_bit_for_bit(tokenizer, bert):
    # the seeding contract: SeedSequence((seed, example_id, draw)) -> torch.Generator -> torch.rand(length, dim)
    assert draw_seed(11, 7, 2) == 8349579755873649791
    expected = [[0.5368990302085876, 0.15678083896636963], [0.578484296798706, 0.39592546224594116]]
    assert draw_uniforms(11, 7, 2, 2, 2).tolist() == expected
    assert draw_uniforms(11, 7, 2, 3, 2)[:2].tolist() == expected  # a position's values ignore the length
    # every embedding row fed to the model, bit for bit, against a plain loop over (example, row) (chunks of a
    # small token budget: several widths), and each row's output where it belongs (a float64 fingerprint, returned
    # as float32 logits: rel 1e-6)
    batch = _batch(tokenizer, TEXTS)
    maskable = maskable_positions(batch, tokenizer.all_special_ids)
    a = torch.rand(maskable.shape, generator=torch.Generator().manual_seed(3))
    ids, draws = torch.tensor([10, 11, 12]), 2
    recorder = EmbedsRecorder(Fingerprint(bert.get_input_embeddings()))
    out = soft_outputs(recorder, batch, maskable, a, ids, draws, 5, 40)
    assert len(recorder.calls) > 1
    fed = [(int(m.sum()), row) for c in recorder.calls for row, m in zip(c["inputs_embeds"], c["attention_mask"])]
    clean = bert.get_input_embeddings()(batch.input_ids).detach()
    reference, fingerprint = [], recorder.model.fingerprint
    for b, n in enumerate(batch.attention_mask.sum(dim=1).tolist()):
        where = maskable[b, :n, None]
        for r in range(draws):
            below = draw_uniforms(5, int(ids[b]), r, n, clean.shape[2]) < a[b, :n, None]
            comp, suff = clean[b, :n] * ~(where & below), clean[b, :n] * ~(where & ~below)
            assert out.comprehensiveness[b, r, 1].item() == pytest.approx(fingerprint(comp), rel=1e-6)
            assert out.sufficiency[b, r, 1].item() == pytest.approx(fingerprint(suff), rel=1e-6)
            reference += [(n, comp), (n, suff)]
        reference.append((n, clean[b, :n] * ~where))
        assert out.floor[b, 1].item() == pytest.approx(fingerprint(reference[-1][1]), rel=1e-6)

    def key(pair):
        n, row = pair
        return n, row[:n].numpy().tobytes()

    assert sorted(map(key, fed)) == sorted(map(key, reference))


def test_srg_and_the_soft_measures_are_read_against_random_by_hand():
    # explanation: p = 0.8, p0 = 0.2 on example 0 (example 1 undefined: p = 0.3 <= p0), one draw: comprehensiveness
    # p_r = 0.5 -> 0.3 / 0.6 = 0.5, sufficiency p_r = 0.6 -> 1 - 0.2 / 0.6 = 2/3. random: p = 0.8, p0 = 0.4 on
    # both: p_r = 0.7 -> 0.1 / 0.4 = 0.25, sufficiency p_r = 0.4 -> 1 - 0.4 / 0.4 = 0. SRG over the masked fraction
    # 0 -> 1: explanation least-first curve at 0.9, most-first at 0.8: 0.1; random both at 0.6: 0.
    ours = _curves(
        [logit(0.8), logit(0.3)], [[logit(0.5)]] * 2, [[logit(0.6)]] * 2, [logit(0.2), logit(0.4)], [[0.0, 1.0]] * 2
    )
    theirs = _curves([logit(0.8)] * 2, [[logit(0.7)]] * 2, [[logit(0.4)]] * 2, [logit(0.4)] * 2, [[0.0, 1.0]] * 2)
    ours.least_logits, theirs.least_logits = ours.logits.clone(), theirs.logits.clone()
    ours.least_logits[..., 1] += torch.tensor(logit(0.9)) - ours.least_logits[..., 1]
    ours.logits[..., 1] += torch.tensor(logit(0.8)) - ours.logits[..., 1]
    theirs.least_logits[..., 1] += torch.tensor(logit(0.6)) - theirs.least_logits[..., 1]
    theirs.logits[..., 1] += torch.tensor(logit(0.6)) - theirs.logits[..., 1]
    ours.k = theirs.k = torch.tensor([[0, 2], [0, 2]])  # masked fraction 0 -> 1
    relative = metrics.relative_to_random(metrics.summarize(ours, bins=None), metrics.summarize(theirs, bins=None))
    assert relative["soft_comprehensiveness"] == pytest.approx(0.5 - 0.25, abs=1e-9)
    assert relative["soft_sufficiency"] == pytest.approx(2 / 3 - 0.0, abs=1e-9)
    assert relative["srg_prob"] == pytest.approx(0.1 - 0.0, abs=1e-6)
    assert not {"soft_comprehensiveness_draw_sd", "soft_undefined_fraction"} & set(relative)  # descriptive
    logit_relative = metrics.relative_to_random(
        metrics.summarize(ours, "logit", bins=None), metrics.summarize(theirs, "logit", bins=None)
    )
    assert logit_relative["srg_logit"] == pytest.approx(logit(0.9) - logit(0.8), abs=1e-6)


def test_recorded_features_are_the_final_layers_input_of_each_soft_row(tokenizer, bert):
    """features=True records, per example and draw, the input of the final linear layer of exactly that row (the
    head applied to it gives the row's logits), in row order across length chunks, and changes no logit."""
    batch = _batch(tokenizer, TEXTS)
    maskable = maskable_positions(batch, tokenizer.all_special_ids)
    a = torch.rand(maskable.shape, generator=torch.Generator().manual_seed(1))
    ids = torch.tensor([10, 11, 12])
    plain = soft_outputs(bert, batch, maskable, a, ids, 2, 5, 64)
    recorded = soft_outputs(bert, batch, maskable, a, ids, 2, 5, 64, features=True)  # 64 tokens: several chunks
    assert plain.comprehensiveness_features is None and plain.sufficiency_features is None
    assert torch.equal(recorded.comprehensiveness, plain.comprehensiveness)
    assert torch.equal(recorded.sufficiency, plain.sufficiency)
    comp, suff = recorded.comprehensiveness_features, recorded.sufficiency_features
    assert comp is not None and suff is not None and comp.shape == (3, 2, bert.config.hidden_size)
    with torch.inference_mode():
        assert torch.allclose(bert.classifier(comp), recorded.comprehensiveness, atol=TOL)
        assert torch.allclose(bert.classifier(suff), recorded.sufficiency, atol=TOL)
    assert not torch.allclose(comp, suff, atol=1e-4)  # the two directions are different rows
