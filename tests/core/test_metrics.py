"""Every score on the analytic AdditiveModel, against values computed by hand.

Model: p(class 1) = sigmoid(sum of token weights); weights a=2, b=1, c=-1, every other id 0
([MASK] included). Input x gradient on the logit gives exactly the token weights as saliency.
"""

import math

import pytest
import torch
from conftest import AdditiveModel

from itermask.core import measures, metrics
from itermask.core.curves import MaskingCurves
from itermask.core.evaluation import IterativeMaskingEvaluator, resolve_target
from itermask.core.masking import Delete, MaskToken
from itermask.core.saliency import InputXGradientSaliency
from itermask.core.tokens import TokenBatch

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
    comp = measures.comprehensiveness(curves["one_shot"])
    for i in range(2):
        expected = [CLEAN[i] - p for p in per_step(MASKED[i], CLEAN[i])]
        assert comp[i].tolist() == pytest.approx(expected, abs=1e-6)


def test_sufficiency_by_hand(curves):
    suff = measures.sufficiency(curves["one_shot"])
    for i in range(2):
        expected = [CLEAN[i] - p for p in [KEPT[i][0]] * 4 + KEPT[i][1:]]
        assert suff[i].tolist() == pytest.approx(expected, abs=1e-6)
    with pytest.raises(ValueError, match="not defined"):
        measures.sufficiency(curves["recursive"])


def test_aopc_is_the_mean_over_the_eraser_bins(curves):
    one_shot = curves["one_shot"]
    comp = measures.comprehensiveness(one_shot)
    aopc = measures.aopc(comp, one_shot.fractions)
    # bins 1, 5, 10 % mask nothing (k = 0), 20 % masks 1 token, 50 % masks 2
    expected = [(CLEAN[i] - MASKED[i][0] + CLEAN[i] - MASKED[i][1]) / 5 for i in range(2)]
    assert aopc.tolist() == pytest.approx(expected, abs=1e-6)
    summary = metrics.summarize(one_shot)
    assert summary["aopc_comprehensiveness_prob"] == pytest.approx(sum(expected) / 2, abs=1e-6)
    suff = [(3 * (CLEAN[i] - KEPT[i][0]) + CLEAN[i] - KEPT[i][1] + CLEAN[i] - KEPT[i][2]) / 5 for i in range(2)]
    assert summary["aopc_sufficiency_prob"] == pytest.approx(sum(suff) / 2, abs=1e-6)
    with pytest.raises(ValueError, match="not on the masking grid"):
        measures.aopc(comp, one_shot.fractions, bins=[0.3])


def test_area_under_curve_trapezoid(curves):
    one_shot = curves["one_shot"]
    auc = measures.area_under_curve(measures.target_output(one_shot.logits, one_shot.target), one_shot.fractions)
    for i in range(2):
        y = per_step(MASKED[i], CLEAN[i])
        expected = sum((FRACTIONS[j + 1] - FRACTIONS[j]) * (y[j] + y[j + 1]) / 2 for j in range(6))
        assert auc[i].item() == pytest.approx(expected, abs=1e-6)


def test_decision_flips_and_accuracy(curves):
    one_shot = curves["one_shot"]
    # example 0: sums 2, 0 (tie -> class 0: flip), -1 (flip), 0 (flip)
    # example 1: sums -1, 0 (tie -> class 0: no flip), 1 (flip), 0 (no flip)
    assert measures.decision_flips(one_shot).int().tolist() == [
        [0, 0, 0, 0, 1, 1, 1],
        [0, 0, 0, 0, 0, 1, 0],
    ]
    # first flips at k = 1 (fraction step 0.2) and k = 2 (step 0.5) of n = 3: the shares masked are k / n
    assert measures.first_flip_step(one_shot).tolist() == [4, 5]
    assert measures.first_flip_fraction(one_shot).tolist() == pytest.approx([1 / 3, 2 / 3])
    assert measures.first_flip_count(one_shot).tolist() == [1.0, 2.0]
    summary = metrics.summarize(one_shot)
    assert summary["flip_rate"] == pytest.approx([0, 0, 0, 0, 0.5, 1.0, 0.5])
    # gold labels are 1, 1: predictions (1, 0) -> (0, 0) -> (0, 1) -> (0, 0)
    assert summary["accuracy"] == pytest.approx([0.5, 0.5, 0.5, 0.5, 0.0, 0.5, 0.0])
    assert summary["mean_k"] == pytest.approx([0, 0, 0, 0, 1, 2, 3])
    assert summary["first_flip_fraction"] == pytest.approx(0.5)
    assert summary["first_flip_count"] == pytest.approx(1.5)
    assert summary["never_flip_rate"] == 0.0


def test_logit_quantity(curves):
    comp = measures.comprehensiveness(curves["one_shot"], quantity="logit")
    # example 0: logit of class 1 is the sum: 2 -> 0, -1, 0 at k = 1, 2, 3
    assert comp[0, 4:].tolist() == pytest.approx([2.0, 3.0, 2.0])
    # example 1: logit of class 0 is constant 0
    assert comp[1].abs().max().item() == 0.0
    assert "aopc_comprehensiveness_logit" in metrics.summarize(curves["one_shot"], quantity="logit")
    with pytest.raises(ValueError, match="quantity"):
        measures.target_output(curves["one_shot"].logits, curves["one_shot"].target, "odds")


def test_recursive_equals_one_shot_for_an_additive_model(curves):
    # in an additive model saliency does not change as tokens are masked
    assert torch.allclose(curves["recursive"].logits, curves["one_shot"].logits)
    assert curves["recursive"].keep_logits is None


def test_delete_on_additive_model_equals_mask_token(toy_tokenizer):
    model = AdditiveModel({A: 2.0, B: 1.0, C: -1.0})
    batch = TokenBatch(torch.tensor([[1, A, B, C, 2], [1, C, C, B, 2]]), torch.ones(2, 5, dtype=torch.long))
    kwargs = dict(saliency=InputXGradientSaliency(output="logit"), fractions=FRACTIONS, special_ids=SPECIAL)
    masked = IterativeMaskingEvaluator(strategy=MaskToken(toy_tokenizer), **kwargs).evaluate(model, batch)
    deleted = IterativeMaskingEvaluator(strategy=Delete(toy_tokenizer), token_budget=8, **kwargs).evaluate(model, batch)
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


def test_log_odds_drop_by_hand(curves):
    one_shot = curves["one_shot"]
    # two classes: log-odds of the target = logit difference. Example 0 (target 1): sums 2 -> 0, -1, 0.
    # Example 1 (target 0, log-odds = -sum): 1 -> 0, -1, 0
    drop = measures.log_odds_drop(one_shot)
    assert drop[0].tolist() == pytest.approx([0, 0, 0, 0, 2, 3, 2])
    assert drop[1].tolist() == pytest.approx([0, 0, 0, 0, 1, 2, 1])
    logits = torch.tensor([[1.0, 2.0, 3.0]])
    assert measures.log_odds(logits, torch.tensor([2])).item() == pytest.approx(3 - math.log(math.e + math.e**2))
    summary = metrics.summarize(one_shot)
    assert summary["log_odds_drop"] == pytest.approx([0, 0, 0, 0, 1.5, 2.5, 1.5])
    assert summary["aopc_log_odds_drop"] == pytest.approx((1.5 + 2.5) / 5)  # bins: k = 0, 0, 0, 1, 2
    assert summary["aopc_full_log_odds_drop"] == pytest.approx((1.5 + 2.5 + 1.5) / 7)


def test_aopc_over_the_full_curve_by_hand(curves):
    one_shot = curves["one_shot"]
    summary = metrics.summarize(one_shot)
    comp = [sum(CLEAN[i] - p for p in MASKED[i]) / 7 for i in range(2)]  # k = 0 four times adds 0
    assert measures.aopc_full(measures.comprehensiveness(one_shot)).tolist() == pytest.approx(comp, abs=1e-6)
    assert summary["aopc_full_comprehensiveness_prob"] == pytest.approx(sum(comp) / 2, abs=1e-6)
    suff = [(4 * (CLEAN[i] - KEPT[i][0]) + sum(CLEAN[i] - p for p in KEPT[i][1:])) / 7 for i in range(2)]
    assert summary["aopc_full_sufficiency_prob"] == pytest.approx(sum(suff) / 2, abs=1e-6)
    assert summary["steps"] == "fraction" and summary["x"] == FRACTIONS and summary["fraction"] == FRACTIONS
    recursive = metrics.summarize(curves["recursive"])
    assert "aopc_full_sufficiency_prob" not in recursive and "aopc_sufficiency_prob" not in recursive


def trapezoid(x, y):
    return sum((x[j + 1] - x[j]) * (y[j] + y[j + 1]) / 2 for j in range(len(x) - 1))


def test_racu_without_retraining_by_hand():
    x = torch.tensor([0.0, 0.5, 1.0])
    random = torch.tensor([0.9, 0.6, 0.2])
    explained = torch.tensor([0.9, 0.3, 0.2])
    # between: 0.5 * (0 + 0.3) / 2 + 0.5 * (0.3 + 0) / 2 = 0.15; normaliser: 0.5 * 1.1 / 2 + 0.5 * 0.4 / 2 = 0.375
    assert measures.racu_without_retraining(explained, random, x).item() == pytest.approx(0.4)
    assert measures.racu_without_retraining(random, random, x).item() == 0.0
    ideal = torch.tensor([0.9, 0.2, 0.2])  # 1 would need the drop at x = 0 itself
    assert measures.racu_without_retraining(ideal, random, x).item() == pytest.approx((0.5 * 0.4 / 2 * 2) / 0.375)
    worse = torch.tensor([0.9, 0.9, 0.2])
    assert measures.racu_without_retraining(worse, random, x).item() == pytest.approx(-0.15 / 0.375)
    flat = torch.tensor([0.5, 0.5, 0.5])
    assert math.isnan(measures.racu_without_retraining(explained, flat, x).item())
    with pytest.raises(ValueError, match="differ in shape"):
        measures.racu_without_retraining(explained, random[:2], x)


class NegatedWeights(InputXGradientSaliency):
    """Stands in for the random explanation: the opposite ranking (least important first)."""

    name = "random"

    def _scores(self, model, batch, target, example_ids):
        return -super()._scores(model, batch, target, example_ids)


def test_relative_to_random_on_the_additive_model(toy_tokenizer, curves):
    model = AdditiveModel({A: 2.0, B: 1.0, C: -1.0})
    batch = TokenBatch(torch.tensor([[1, A, B, C, 2], [1, C, C, B, 2]]), torch.ones(2, 5, dtype=torch.long))
    base = IterativeMaskingEvaluator(NegatedWeights(output="logit"), MaskToken(toy_tokenizer), FRACTIONS, SPECIAL)
    base_curves = base.evaluate(model, batch, labels=torch.tensor([1, 1]), example_ids=torch.tensor([10, 11]))
    ours, theirs = metrics.summarize(curves["one_shot"]), metrics.summarize(base_curves["one_shot"])
    # example 0 masked in the reverse order c, b, a: sums 3, 2, 0; example 1 has all-zero saliency: same order
    reverse = [[sig(3), sig(2), sig(0)], MASKED[1]]
    mean_ours = [(CLEAN[0] + CLEAN[1]) / 2] * 4 + [(MASKED[0][j] + MASKED[1][j]) / 2 for j in range(3)]
    mean_theirs = [(CLEAN[0] + CLEAN[1]) / 2] * 4 + [(reverse[0][j] + reverse[1][j]) / 2 for j in range(3)]
    assert theirs["target_prob"] == pytest.approx(mean_theirs, abs=1e-6)
    between = trapezoid(FRACTIONS, [r - e for r, e in zip(mean_theirs, mean_ours)])
    normaliser = trapezoid(FRACTIONS, [r - mean_theirs[-1] for r in mean_theirs])
    relative = metrics.relative_to_random(ours, theirs)
    assert relative["racu_without_retraining_prob"] == pytest.approx(between / normaliser, abs=1e-5)
    assert relative["aopc_comprehensiveness_prob"] == pytest.approx(
        ours["aopc_comprehensiveness_prob"] - theirs["aopc_comprehensiveness_prob"]
    )
    assert relative["auc_prob"] == pytest.approx(ours["auc_prob"] - theirs["auc_prob"])
    assert {"aopc_full_comprehensiveness_prob", "aopc_log_odds_drop", "racu_without_retraining_accuracy"} <= set(
        relative
    )
    # accuracy against labels 1, 1. Reverse order: example 0 sums 3, 2, 0 -> right, right, wrong (tie -> 0);
    # example 1 sums 0, 1, 0 -> wrong, right, wrong (clean: wrong)
    acc_theirs = [0.5] * 4 + [0.5, 1.0, 0.0]
    assert theirs["accuracy"] == pytest.approx(acc_theirs)
    acc_ours = [0.5] * 4 + [0.0, 0.5, 0.0]
    expected = trapezoid(FRACTIONS, [r - e for r, e in zip(acc_theirs, acc_ours)]) / trapezoid(
        FRACTIONS, [r - 0.0 for r in acc_theirs]
    )
    assert relative["racu_without_retraining_accuracy"] == pytest.approx(expected)
    with pytest.raises(ValueError, match="different quantity"):
        metrics.relative_to_random(metrics.summarize(curves["one_shot"], quantity="logit"), theirs)


def test_count_step_summary(toy_tokenizer):
    model = AdditiveModel({A: 2.0, B: 1.0, C: -1.0})
    batch = TokenBatch(torch.tensor([[1, A, B, C, 2], [1, C, B, 2, 0]]), torch.tensor([[1] * 5, [1, 1, 1, 1, 0]]))
    evaluator = IterativeMaskingEvaluator(
        InputXGradientSaliency(output="logit"),
        MaskToken(toy_tokenizer),
        None,
        SPECIAL,
        steps="count",
        counts=[0, 1, 2, 3],
    )
    one_shot = evaluator.evaluate(model, batch, labels=torch.tensor([1, 0]))["one_shot"]
    summary = metrics.summarize(one_shot, quantity="logit")
    assert summary["steps"] == "count" and summary["x"] == [0, 1, 2, 3]
    assert summary["mean_k"] == [0, 1, 2, 2.5]  # the second example has n = 2
    assert summary["fraction"] == pytest.approx([0, (1 / 3 + 1 / 2) / 2, (2 / 3 + 1) / 2, 1])
    assert not any(key.startswith("aopc_comprehensiveness") for key in summary)  # ERASER bins: fractions only
    # example 0 (target 1): logit 2 -> 0, -1, 0; example 1 (sum 0 -> target 0, logit 0 constant): comp 0
    assert summary["comprehensiveness_logit"] == pytest.approx([0, 1, 1.5, 1])
    assert summary["aopc_full_comprehensiveness_logit"] == pytest.approx((0 + 1 + 1.5 + 1) / 4)
    # area over token counts: example 0's target logit 2, 0, -1, 0, example 1's 0 throughout
    assert summary["auc_logit"] == pytest.approx(trapezoid([0, 1, 2, 3], [2, 0, -1, 0]) / 2)
    # example 0 flips at k = 1 (1/3 of its tokens); example 1 (clean sum 0, class 0) too: masking c gives
    # sum 1, class 1 (1/2 of its tokens)
    assert measures.first_flip_count(one_shot).tolist() == [1.0, 1.0]
    assert summary["first_flip_fraction"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert summary["flip_rate"] == pytest.approx([0, 1, 0.5, 0.5])  # sums: ex. 0: 0, -1, 0; ex. 1: 1, 0, 0


def test_new_scores_reach_the_tracked_scalars_and_curves(curves):
    from itermask import tracking

    summary = metrics.summarize(curves["one_shot"])
    result = {
        "accuracy": {"test": 0.5},
        "scores": {"gradient": {"one_shot": summary}, "random": {"one_shot": summary}},
        "relative_to_random": {"one_shot": metrics.relative_to_random(summary, summary)},
        "n_evaluated": 2,
        "n_skipped_no_maskable": 0,
    }
    scalars = tracking._scalars(result)
    assert scalars["gradient/one_shot/aopc_full_log_odds_drop"] == summary["aopc_full_log_odds_drop"]
    assert scalars["gradient/one_shot/first_flip_count"] == 1.5
    # this curve ends above its minimum, so its area above the end point is negative: RACU is undefined (NaN in
    # the result) and is left out of the run summary, which holds only numbers
    assert math.isnan(result["relative_to_random"]["one_shot"]["racu_without_retraining_prob"])
    assert "relative_to_random/one_shot/racu_without_retraining_prob" not in scalars
    assert all(math.isfinite(v) for v in scalars.values())
    columns, rows = tracking.curve_table(result["scores"])
    assert [row[columns.index("x")] for row in rows[:7]] == FRACTIONS
    assert [row[columns.index("log_odds_drop")] for row in rows[:7]] == pytest.approx(summary["log_odds_drop"])


def test_curve_table_follows_the_quantity(curves):
    from itermask import tracking

    summary = metrics.summarize(curves["one_shot"], quantity="logit")
    columns, rows = tracking.curve_table({"gradient": {"one_shot": summary}})
    assert "comprehensiveness_logit" in columns and "comprehensiveness_prob" not in columns
    assert [row[columns.index("comprehensiveness_logit")] for row in rows] == summary["comprehensiveness_logit"]
    assert len(rows) == len(FRACTIONS)


def test_a_new_metric_is_one_class(curves):
    """Adding a metric is one Metric subclass: it registers itself, summarize reports it (with its AOPC),
    and the tracker and the report read its name, unit and direction from the registry."""
    from itermask import tracking
    from itermask.reporting.model import result_measures

    class KeptShare(metrics.Metric):
        """``kept_share``: p(y | x without its top-k tokens) / p(y | x), the share of the target
        probability that survives masking."""

        name, unit, higher_is_more_faithful, aopc = "kept_share", "fraction", False, True

        def values(self, curves, quantity):
            clean = measures.target_output(curves.clean_logits, curves.target, "probability")
            return measures.target_output(curves.logits, curves.target, "probability") / clean[:, None]

    try:
        summary = metrics.summarize(curves["one_shot"])
        by_example = [[1.0] * 4 + [p / CLEAN[i] for p in MASKED[i]] for i in range(2)]
        expected = [(a + b) / 2 for a, b in zip(*by_example)]
        assert summary["kept_share"] == pytest.approx(expected)
        assert summary["aopc_full_kept_share"] == pytest.approx(sum(expected) / len(expected))
        # ERASER bins 1, 5, 10, 20, 50 %: k = 0, 0, 0, 1, 2
        assert summary["aopc_kept_share"] == pytest.approx(sum(expected[1:6]) / 5)
        assert metrics.metric_info("aopc_kept_share") == metrics.MetricInfo("aopc_kept_share", "fraction", False, False)
        assert metrics.metric_info("kept_share").per_step
        columns, rows = tracking.curve_table({"gradient": {"one_shot": summary}})
        assert [row[columns.index("kept_share")] for row in rows] == pytest.approx(expected)
        history = tracking.curve_history({"gradient": {"one_shot": summary}})
        assert [row["curves/gradient/one_shot/kept_share"] for row in history] == pytest.approx(expected)
        result = {
            "accuracy": {"test": 0.5},
            "saliency": {"name": "gradient"},
            "scores": {"gradient": {"one_shot": summary}},
        }
        assert result_measures(result)[("gradient", "one_shot", "aopc_kept_share")] == pytest.approx(
            sum(expected[1:6]) / 5
        )
    finally:
        metrics.METRICS.pop("kept_share", None)
    assert "kept_share" not in metrics.summarize(curves["one_shot"])


def test_naopc_columns_are_known_scores_with_their_direction():
    from itermask.core.metrics import metric_info

    comprehensiveness = metric_info("naopc_comprehensiveness_prob")
    sufficiency = metric_info("naopc_of_aopc_full_sufficiency_logit")
    authors = metric_info("aopc_authors_sufficiency_prob")
    assert comprehensiveness is not None and comprehensiveness.higher_is_more_faithful is True
    assert comprehensiveness.unit == "fraction" and not comprehensiveness.per_step
    assert sufficiency is not None and sufficiency.higher_is_more_faithful is False
    assert authors is not None and authors.unit == "probability" and authors.higher_is_more_faithful is False
    for other in ("naopc_upper", "naopc_flip_rate_prob", "naopc_of_aopc_log_odds_drop_prob", "naopc_n_features"):
        assert metric_info(other) is None, other
