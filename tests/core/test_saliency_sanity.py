"""Saliency sanity: a forward that ignores the embeddings it is given, identically zero scores, and the
completeness gap of integrated gradients and DeepLIFT on the analytic additive model."""

import logging
import math

import pytest
import torch
from conftest import AdditiveModel

from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.masking import MaskToken
from itermask.core.saliency import (
    DeepLiftSaliency,
    GradientSaliency,
    InputXGradientSaliency,
    IntegratedGradientsSaliency,
    OcclusionSaliency,
    RandomSaliency,
    SaliencyError,
    ZeroSaliencyWarning,
)
from itermask.core.tokens import TokenBatch
from itermask.engine.masking import saliency_diagnostics

# ToyTokenizer ids [PAD]=0, [CLS]=1, [SEP]=2, [MASK]=3, [UNK]=4 are special; w[PAD] = 0
WEIGHTS = {1: 0.5, 2: -0.25, 5: 1.0, 6: -2.0, 7: 0.5, 8: 3.0}


def _batch(rows):
    ids = torch.tensor(rows)
    return TokenBatch(ids, (ids != 0).long())


class IgnoresGivenEmbeddings(AdditiveModel):
    """The failure of Captum issue 978: ``get_input_embeddings()`` names a layer whose output the forward
    never uses (it embeds the ids with a private copy), so no explanation can depend on that output."""

    def __init__(self) -> None:
        super().__init__(WEIGHTS)
        self.private = torch.nn.Embedding.from_pretrained(self.embedding.weight.detach().clone())

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        score = (self.private(input_ids).squeeze(-1) * attention_mask).sum(dim=1)
        return torch.stack([torch.zeros_like(score), score], dim=1)


@pytest.mark.parametrize(
    "method, raw",
    [
        (GradientSaliency(), "Forward hook did not obtain any outputs"),
        (InputXGradientSaliency(), "Forward hook did not obtain any outputs"),
        (IntegratedGradientsSaliency(n_steps=3), "does not require grad"),
        (DeepLiftSaliency(), "does not require grad"),
    ],
    ids=lambda v: getattr(v, "name", ""),
)
def test_a_forward_that_ignores_the_given_embeddings_is_named(method, raw, toy_tokenizer):
    if hasattr(method, "bind"):
        method.bind(toy_tokenizer)
    with pytest.raises(SaliencyError) as caught:
        method.attribute(IgnoresGivenEmbeddings(), _batch([[1, 5, 6, 2]]), torch.tensor([1]))
    message = str(caught.value)
    assert f"saliency={method.name} on IgnoresGivenEmbeddings" in message
    assert "does not use the word embeddings it is given" in message and "Embedding" in message
    assert raw in message and raw in str(caught.value.__cause__)  # the raw failure is kept, chained


def test_a_batch_of_identically_zero_saliency_is_an_error(toy_tokenizer):
    # every token's word embedding equals the pad baseline's (w = 0): integrated gradients are all zero
    method = IntegratedGradientsSaliency(n_steps=3, output="logit").bind(toy_tokenizer)
    batch = _batch([[1, 9, 10, 2], [1, 11, 2, 0]])
    with pytest.raises(SaliencyError, match="identically zero scores to all 2 examples of a batch") as caught:
        method.attribute(AdditiveModel(WEIGHTS), batch, torch.tensor([1, 1]))
    assert "saliency=integrated_gradients on AdditiveModel" in str(caught.value)
    # occlusion: the output does not change when such tokens are replaced
    with pytest.raises(SaliencyError, match="does not depend on the token ids"):
        OcclusionSaliency(output="logit").bind(toy_tokenizer).attribute(
            AdditiveModel(WEIGHTS), batch, torch.tensor([1, 1])
        )
    # random is exempt
    assert RandomSaliency().attribute(AdditiveModel(WEIGHTS), batch, torch.tensor([1, 1])).abs().sum() > 0


def test_examples_with_identically_zero_saliency_are_flagged_and_warned_about(toy_tokenizer):
    # row 0 saturates the softmax in float32 (score 100 * 3): p = [0, 1] exactly, so d p / d e = 0 exactly;
    # row 1 does not
    model = AdditiveModel({**WEIGHTS, 12: 100.0})
    batch = _batch([[1, 12, 12, 12, 2], [1, 5, 6, 2, 0]])
    assert model(batch.input_ids, batch.attention_mask).softmax(-1)[0].tolist() == [0.0, 1.0]
    with pytest.warns(ZeroSaliencyWarning, match="identically zero scores to 1 of 2 examples on AdditiveModel"):
        attribution = GradientSaliency().explain(model, batch, torch.tensor([1, 1]))
    assert attribution.zero.tolist() == [True, False]
    assert (attribution.scores[0] == 0).all() and (attribution.scores[1, 1:4] > 0).all()
    assert attribution.completeness_gap is None  # gradient saliency has no baseline
    # explaining the logit avoids the saturation
    assert not GradientSaliency(output="logit").explain(model, batch, torch.tensor([1, 1])).zero.any()


def test_integrated_gradients_completeness_gap_on_the_additive_model(toy_tokenizer):
    """The logit of the additive model is linear in the word embeddings: IG is exact (gap 0) for any number
    of steps. Its probability sigmoid(s) is not: with one Gauss-Legendre step (the midpoint) the attributions
    sum to delta * sigmoid'(s_mid), so the gap is delta * sigmoid'(s_b + delta / 2) - (sigmoid(s_x) - sigmoid(s_b))."""
    batch = _batch([[1, 5, 6, 7, 2, 0], [1, 8, 5, 2, 0, 0]])
    model, target = AdditiveModel(WEIGHTS), torch.tensor([1, 1])
    # logits s_x: 0.5 - 0.25 + (1 - 2 + 0.5) = -0.25 and 0.25 + (3 + 1) = 4.25; the pad baseline keeps the
    # special tokens: s_b = 0.25 for both; delta = s_x - s_b
    s_x, s_b = torch.tensor([-0.25, 4.25], dtype=torch.float64), torch.tensor([0.25, 0.25], dtype=torch.float64)
    for method in (IntegratedGradientsSaliency(n_steps=2, output="logit"), DeepLiftSaliency(output="logit")):
        attribution = method.bind(toy_tokenizer).explain(model, batch, target)
        assert attribution.output_difference.tolist() == pytest.approx((s_x - s_b).tolist(), abs=1e-6)
        assert attribution.completeness_gap.abs().max() < 1e-6, method.name
    probability = IntegratedGradientsSaliency(n_steps=1, output="probability").bind(toy_tokenizer)
    attribution = probability.explain(model, batch, target)
    sigmoid = torch.sigmoid
    mid = s_b + (s_x - s_b) / 2
    expected = (s_x - s_b) * sigmoid(mid) * (1 - sigmoid(mid)) - (sigmoid(s_x) - sigmoid(s_b))
    assert attribution.completeness_gap.tolist() == pytest.approx(expected.tolist(), abs=1e-6)
    assert attribution.completeness_gap[1].item() == pytest.approx(-0.0787, abs=1e-4)  # a visible gap
    assert attribution.output_difference.tolist() == pytest.approx((sigmoid(s_x) - sigmoid(s_b)).tolist(), abs=1e-6)
    # more steps close it
    many = (
        IntegratedGradientsSaliency(n_steps=50, output="probability").bind(toy_tokenizer).explain(model, batch, target)
    )
    assert many.completeness_gap.abs().max() < 1e-5


def test_the_evaluator_carries_the_diagnostics_to_the_results(toy_tokenizer, caplog):
    model = AdditiveModel({**WEIGHTS, 12: 100.0})
    batch = _batch([[1, 12, 12, 12, 2], [1, 5, 6, 2, 0], [1, 8, 7, 5, 2]])
    method = IntegratedGradientsSaliency(n_steps=1, output="probability").bind(toy_tokenizer)
    evaluator = IterativeMaskingEvaluator(
        method, MaskToken(toy_tokenizer), [0.0, 0.5, 1.0], [0, 1, 2, 3, 4], schedules=["one_shot"], target=1
    )
    # row 0 is saturated along the path (scores 300 -> 0.25, the midpoint 150): its one-step IG is 0
    with pytest.warns(ZeroSaliencyWarning, match="1 of 3 examples"):
        curves = evaluator.evaluate(model, batch, example_ids=torch.tensor([10, 11, 12]))["one_shot"]
    assert curves.saliency_zero.tolist() == [True, False, False]
    direct = method.explain(model, batch.index(torch.tensor([1, 2])), torch.tensor([1, 1]))
    torch.testing.assert_close(curves.completeness_gap[1:], direct.completeness_gap)
    torch.testing.assert_close(curves.output_difference[1:], direct.output_difference)
    # so the whole difference p(x) - p(baseline) = 1 - sigmoid(0.25) is missing from its attributions
    difference = 1 - 1 / (1 + math.exp(-0.25))
    assert curves.output_difference[0].item() == pytest.approx(difference, abs=1e-6)
    assert curves.completeness_gap[0].item() == pytest.approx(-difference, abs=1e-6)
    assert curves.select(torch.tensor([2])).completeness_gap.tolist() == curves.completeness_gap[2:].tolist()
    with caplog.at_level(logging.WARNING, logger="itermask.engine.masking"):
        entry = saliency_diagnostics("integrated_gradients", curves)
    assert entry["n_examples"] == 3 and entry["n_zero_saliency"] == 1 and entry["zero_saliency_example_ids"] == [10]
    assert "1 of 3 evaluated examples have identically zero saliency" in caplog.text
    gap, difference = curves.completeness_gap, curves.output_difference
    assert entry["completeness_gap"]["median"] == pytest.approx(gap.median().item())
    assert entry["completeness_gap"]["median_abs"] == pytest.approx(gap.abs().median().item())
    relative = sorted((gap.abs() / difference.abs()).tolist())
    assert relative[2] == pytest.approx(1.0)  # the saturated row misses all of it
    assert entry["completeness_gap"]["median_relative"] == pytest.approx(relative[1])
    assert not math.isnan(entry["completeness_gap"]["max_abs"])
    random = IterativeMaskingEvaluator(
        RandomSaliency(), MaskToken(toy_tokenizer), [0.0, 1.0], [0, 1, 2, 3, 4], schedules=["one_shot"]
    ).evaluate(model, batch)["one_shot"]
    assert saliency_diagnostics("random", random) == {
        "n_examples": 3,
        "n_zero_saliency": 0,
        "zero_saliency_example_ids": [],
    }


def _evaluator(method, toy_tokenizer, fractions=(0.0, 0.5, 1.0), **kwargs):
    return IterativeMaskingEvaluator(
        method, MaskToken(toy_tokenizer), list(fractions), [0, 1, 2, 3, 4], target=1, **kwargs
    )


def test_the_zero_check_covers_the_whole_batch_not_each_length_chunk(toy_tokenizer):
    # a token budget of 5 puts each row's path point in a length chunk of its own: the saturated row
    # (length 5, one-step IG exactly 0) is a chunk whose every score is 0, yet the batch is not all zero
    model = AdditiveModel({**WEIGHTS, 12: 100.0})
    batch = _batch([[1, 12, 12, 12, 2], [1, 5, 6, 2, 0]])
    method = IntegratedGradientsSaliency(n_steps=1, output="probability", token_budget=5).bind(toy_tokenizer)
    evaluator = _evaluator(method, toy_tokenizer, schedules=["one_shot"], token_budget=5)
    with pytest.warns(ZeroSaliencyWarning, match="identically zero scores to 1 of 2 examples") as caught:
        curves = evaluator.evaluate(model, batch)["one_shot"]
    assert len([w for w in caught if w.category is ZeroSaliencyWarning]) == 1  # one warning per batch, not per chunk
    assert curves.saliency_zero.tolist() == [True, False]
    # the chunked diagnostics are those of one call on the whole batch
    whole = method.explain(model, batch, torch.tensor([1, 1]), sanity=False)
    torch.testing.assert_close(curves.completeness_gap, whole.completeness_gap)
    torch.testing.assert_close(curves.output_difference, whole.output_difference)
    # every row saturated: an error, however the rows are chunked
    saturated = _batch([[1, 12, 12, 12, 2], [1, 12, 12, 2, 0]])
    with pytest.raises(SaliencyError, match="identically zero scores to all 2 examples of a batch"):
        evaluator.evaluate(model, saturated)


def test_recursive_saliency_of_a_masked_input_may_be_all_zero(toy_tokenizer):
    # [CLS] a z [SEP] with w(a) = 1, w(z) = 0: the clean logit-IG scores are [0, 1, 0, 0] (not all zero). The
    # recursive schedule masks a at 50 %, then explains [CLS] [MASK] z [SEP], whose word embeddings at the
    # maskable positions all equal the pad baseline's (0): every score is 0, legitimately, and no error
    model = AdditiveModel(WEIGHTS)
    method = IntegratedGradientsSaliency(n_steps=2, output="logit").bind(toy_tokenizer)
    batch = _batch([[1, 5, 9, 2]])
    with pytest.raises(SaliencyError):  # called on its own, that input is an all-zero batch
        method.attribute(model, _batch([[1, 3, 9, 2]]), torch.tensor([1]))
    curves = _evaluator(method, toy_tokenizer, schedules=["recursive"]).evaluate(model, batch)["recursive"]
    assert curves.k.tolist() == [[0, 1, 2]] and curves.saliency_zero.tolist() == [False]
    # logit 0.5 - 0.25 + 1 = 1.25 clean, 0.25 with a masked (and with z masked too)
    assert curves.logits[0, :, 1].tolist() == pytest.approx([1.25, 0.25, 0.25])
    assert curves.completeness_gap.abs().max() < 1e-6  # logit IG on a linear model is exact


def test_the_per_example_scores_table_carries_the_diagnostics(toy_tokenizer):
    from itermask.analyses.per_example import score_frame

    model = AdditiveModel({**WEIGHTS, 12: 100.0})
    batch = _batch([[1, 12, 12, 12, 2], [1, 5, 6, 2, 0], [1, 8, 7, 5, 2]])
    method = IntegratedGradientsSaliency(n_steps=1, output="probability").bind(toy_tokenizer)
    with pytest.warns(ZeroSaliencyWarning):
        curves = _evaluator(method, toy_tokenizer, schedules=["one_shot"]).evaluate(
            model, batch, example_ids=torch.tensor([10, 11, 12])
        )["one_shot"]
    frame = score_frame("integrated_gradients", curves, "probability", [0.5])
    assert frame.example_id.tolist() == [10, 11, 12] and frame.saliency_zero.tolist() == [True, False, False]
    # the saturated row misses all of p(x) - p(baseline) = 1 - sigmoid(0.25)
    assert frame.completeness_gap[0] == pytest.approx(-(1 - 1 / (1 + math.exp(-0.25))), abs=1e-6)
    assert frame.completeness_gap.tolist() == pytest.approx(curves.completeness_gap.tolist())
    assert frame.output_difference.tolist() == pytest.approx(curves.output_difference.tolist())
    gradient = _evaluator(GradientSaliency(output="logit"), toy_tokenizer, schedules=["one_shot"]).evaluate(
        model, batch
    )
    plain = score_frame("gradient", gradient["one_shot"], "probability", [0.5])
    assert plain.saliency_zero.tolist() == [False] * 3 and "completeness_gap" not in plain.columns
