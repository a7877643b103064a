"""Every score on the analytic AdditiveModel, against values computed by hand.

Model: p(class 1) = sigmoid(sum of token weights); weights a=2, b=1, c=-1, every other id 0
([MASK] included). Input x gradient on the logit gives exactly the token weights as saliency.
"""

import math

import pytest
import torch
from conftest import AdditiveModel

from itermask import metrics
from itermask.evaluation import IterativeMaskingEvaluator, MaskingCurves, resolve_target
from itermask.masking import Delete, MaskToken
from itermask.saliency import InputXGradientSaliency
from itermask.tokens import TokenBatch

A, B, C = 5, 6, 7
FRACTIONS = [0.0, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0]  # n = 3 -> k = 0, 0, 0, 0, 1, 2, 3
SPECIAL = [0, 1, 2, 3, 4]


def sig(x):
    return 1 / (1 + math.exp(-x))


@pytest.fixture
def curves(toy_tokenizer):
    model = AdditiveModel({A: 2.0, B: 1.0, C: -1.0})
    batch = TokenBatch(torch.tensor([[1, A, B, C, 2], [1, C, C, B, 2]]), torch.ones(2, 5, dtype=torch.long))
    evaluator = IterativeMaskingEvaluator(
        InputXGradientSaliency(output="logit"), MaskToken(toy_tokenizer), FRACTIONS, SPECIAL
    )
    return evaluator.evaluate(model, batch, labels=torch.tensor([1, 1]), example_ids=torch.tensor([10, 11]))


# p(target | x) by hand. Example 0: target 1 (sum 2), order a, b, c. Example 1: target 0 (sum -1);
# logit 0 is constant so every saliency is 0 and ties go to the earlier position: c, c, b.
CLEAN = [sig(2), sig(1)]
MASKED = [  # top-k masked, k = 1, 2, 3
    [sig(0), sig(-1), sig(0)],
    [sig(0), sig(-1), sig(0)],
]
KEPT = [  # only top-k kept, k = 0, 1, 2, 3
    [sig(0), sig(2), sig(3), sig(2)],
    [sig(0), sig(1), sig(2), sig(1)],
]


def per_step(values_by_k, clean):
    """Expand per-k values to the 7 fractions (k = 0 four times)."""
    return [clean] * 4 + values_by_k


def test_targets_and_counts(curves):
    one_shot = curves["one_shot"]
    assert one_shot.target.tolist() == [1, 0]
    assert one_shot.k.tolist() == [[0, 0, 0, 0, 1, 2, 3]] * 2
    assert one_shot.n_maskable.tolist() == [3, 3]
    assert one_shot.example_ids.tolist() == [10, 11]


def test_comprehensiveness_by_hand(curves):
    comp = metrics.comprehensiveness(curves["one_shot"])
    for i in range(2):
        expected = [CLEAN[i] - p for p in per_step(MASKED[i], CLEAN[i])]
        assert comp[i].tolist() == pytest.approx(expected, abs=1e-6)


def test_sufficiency_by_hand(curves):
    suff = metrics.sufficiency(curves["one_shot"])
    for i in range(2):
        expected = [CLEAN[i] - p for p in [KEPT[i][0]] * 4 + KEPT[i][1:]]
        assert suff[i].tolist() == pytest.approx(expected, abs=1e-6)
    with pytest.raises(ValueError, match="not defined"):
        metrics.sufficiency(curves["recursive"])


def test_aopc_is_the_mean_over_the_eraser_bins(curves):
    one_shot = curves["one_shot"]
    comp = metrics.comprehensiveness(one_shot)
    aopc = metrics.aopc(comp, one_shot.fractions)
    # bins 1, 5, 10 % mask nothing (k = 0), 20 % masks 1 token, 50 % masks 2
    expected = [(CLEAN[i] - MASKED[i][0] + CLEAN[i] - MASKED[i][1]) / 5 for i in range(2)]
    assert aopc.tolist() == pytest.approx(expected, abs=1e-6)
    summary = metrics.summarize(one_shot)
    assert summary["aopc_comprehensiveness_prob"] == pytest.approx(sum(expected) / 2, abs=1e-6)
    suff = [(3 * (CLEAN[i] - KEPT[i][0]) + CLEAN[i] - KEPT[i][1] + CLEAN[i] - KEPT[i][2]) / 5 for i in range(2)]
    assert summary["aopc_sufficiency_prob"] == pytest.approx(sum(suff) / 2, abs=1e-6)
    with pytest.raises(ValueError, match="not on the masking grid"):
        metrics.aopc(comp, one_shot.fractions, bins=[0.3])


def test_area_under_curve_trapezoid(curves):
    one_shot = curves["one_shot"]
    auc = metrics.area_under_curve(metrics.target_output(one_shot.logits, one_shot.target), one_shot.fractions)
    for i in range(2):
        y = per_step(MASKED[i], CLEAN[i])
        expected = sum((FRACTIONS[j + 1] - FRACTIONS[j]) * (y[j] + y[j + 1]) / 2 for j in range(6))
        assert auc[i].item() == pytest.approx(expected, abs=1e-6)


def test_decision_flips_and_accuracy(curves):
    one_shot = curves["one_shot"]
    # example 0: sums 2, 0 (tie -> class 0: flip), -1 (flip), 0 (flip)
    # example 1: sums -1, 0 (tie -> class 0: no flip), 1 (flip), 0 (no flip)
    assert metrics.decision_flips(one_shot).int().tolist() == [
        [0, 0, 0, 0, 1, 1, 1],
        [0, 0, 0, 0, 0, 1, 0],
    ]
    # first flips at k = 1 (fraction step 0.2) and k = 2 (step 0.5) of n = 3: the shares masked are k / n
    assert metrics.first_flip_step(one_shot).tolist() == [4, 5]
    assert metrics.first_flip_fraction(one_shot).tolist() == pytest.approx([1 / 3, 2 / 3])
    assert metrics.first_flip_count(one_shot).tolist() == [1.0, 2.0]
    summary = metrics.summarize(one_shot)
    assert summary["flip_rate"] == pytest.approx([0, 0, 0, 0, 0.5, 1.0, 0.5])
    # gold labels are 1, 1: predictions (1, 0) -> (0, 0) -> (0, 1) -> (0, 0)
    assert summary["accuracy"] == pytest.approx([0.5, 0.5, 0.5, 0.5, 0.0, 0.5, 0.0])
    assert summary["mean_k"] == pytest.approx([0, 0, 0, 0, 1, 2, 3])
    assert summary["first_flip_fraction"] == pytest.approx(0.5)
    assert summary["first_flip_count"] == pytest.approx(1.5)
    assert summary["never_flip_rate"] == 0.0


def test_logit_quantity(curves):
    comp = metrics.comprehensiveness(curves["one_shot"], quantity="logit")
    # example 0: logit of class 1 is the sum: 2 -> 0, -1, 0 at k = 1, 2, 3
    assert comp[0, 4:].tolist() == pytest.approx([2.0, 3.0, 2.0])
    # example 1: logit of class 0 is constant 0
    assert comp[1].abs().max().item() == 0.0
    assert "aopc_comprehensiveness_logit" in metrics.summarize(curves["one_shot"], quantity="logit")
    with pytest.raises(ValueError, match="quantity"):
        metrics.target_output(curves["one_shot"].logits, curves["one_shot"].target, "odds")


def test_recursive_equals_one_shot_for_an_additive_model(curves):
    # in an additive model saliency does not change as tokens are masked
    assert torch.allclose(curves["recursive"].logits, curves["one_shot"].logits)
    assert curves["recursive"].keep_logits is None


def test_delete_on_additive_model_equals_mask_token(toy_tokenizer):
    model = AdditiveModel({A: 2.0, B: 1.0, C: -1.0})
    batch = TokenBatch(torch.tensor([[1, A, B, C, 2], [1, C, C, B, 2]]), torch.ones(2, 5, dtype=torch.long))
    kwargs = dict(saliency=InputXGradientSaliency(output="logit"), fractions=FRACTIONS, special_ids=SPECIAL)
    masked = IterativeMaskingEvaluator(strategy=MaskToken(toy_tokenizer), **kwargs).evaluate(model, batch)
    deleted = IterativeMaskingEvaluator(strategy=Delete(toy_tokenizer), chunk_size=1, **kwargs).evaluate(model, batch)
    for schedule in ("one_shot", "recursive"):  # [MASK] weighs 0, like a deleted token
        assert torch.allclose(masked[schedule].logits, deleted[schedule].logits)


def test_concat_and_target_policies(curves):
    both = MaskingCurves.concat([curves["one_shot"], curves["one_shot"]])
    assert len(both) == 4 and both.keep_logits.shape == (4, 7, 2)
    with pytest.raises(ValueError, match="different schedules"):
        MaskingCurves.concat([curves["one_shot"], curves["recursive"]])
    logits = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    assert resolve_target("predicted", logits, None).tolist() == [1, 0]
    assert resolve_target("gold", logits, torch.tensor([0, 0])).tolist() == [0, 0]
    assert resolve_target(1, logits, None).tolist() == [1, 1]
    with pytest.raises(ValueError, match="out of range"):
        resolve_target(2, logits, None)
    with pytest.raises(ValueError, match="unknown target policy"):
        resolve_target("best", logits, None)


def test_evaluator_rejects_bad_settings(toy_tokenizer):
    saliency, strategy = InputXGradientSaliency(), MaskToken(toy_tokenizer)
    with pytest.raises(ValueError, match="unknown masking schedule"):
        IterativeMaskingEvaluator(saliency, strategy, FRACTIONS, SPECIAL, schedules=["sideways"])
    with pytest.raises(ValueError, match="ascending"):
        IterativeMaskingEvaluator(saliency, strategy, [0.5, 0.1], SPECIAL)
    evaluator = IterativeMaskingEvaluator(saliency, strategy, FRACTIONS, SPECIAL)
    only_special = TokenBatch(torch.tensor([[1, 2]]), torch.ones(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="maskable"):
        evaluator.evaluate(AdditiveModel({}), only_special)
