"""Whether a classifier's faithfulness scores can mean anything (:func:`model_check`), and the warning the console
and the report read from a stored result (:func:`model_check_line`)."""

from __future__ import annotations

from collections import Counter

from itermask.analyses.base import AnalysisOutput, EvaluatedCurves

__all__ = ["model_check", "model_check_line"]


def model_check(result: dict, curves: EvaluatedCurves) -> AnalysisOutput:
    """Whether the classifier's faithfulness scores can mean anything, under ``model_check``: a classifier
    that predicts one class for every evaluated example, or whose test accuracy is not above the majority
    class's, has learnt nothing to explain, and masking its inputs measures noise (e.g. after
    ``model.finetune.optimizer.learning_rate=1000`` or ``train.max_train_examples=1``). Reads the accuracy
    stage's ``accuracy`` and ``label_names`` in ``result`` and the predictions (clean logits) of ``curves``.

    Returns:
        ``{"model_check": {"meaningful": bool, "problems": [...], "predicted_classes": {class name: count}}}``;
        each problem is a sentence. Nothing is logged here: the job's console summary ends with
        :func:`model_check_line` (once per job), and the report, the W&B run summary and the facade's
        ``warnings`` read the stored result.
    """
    first = next(iter(curves[curves.method].values()))
    names = list(result.get("label_names") or [])
    predicted = first.clean_logits.argmax(dim=-1).tolist()
    counts = dict(Counter(names[index] if index < len(names) else str(index) for index in predicted))
    problems = []
    if len(counts) == 1 and len(predicted) > 1:
        problems.append(
            f"the classifier predicts class {next(iter(counts))!r} for all {len(predicted)} evaluated examples"
        )
    accuracy = result.get("accuracy") or {}
    test, majority = accuracy.get("test"), accuracy.get("majority_class_test")
    if test is not None and majority is not None and test <= majority + 1e-9:
        problems.append(
            f"its test accuracy {test:.3f} is not above the majority class's {majority:.3f} (always predicting the "
            "training split's most frequent class)"
        )
    return AnalysisOutput(
        {"model_check": {"meaningful": not problems, "problems": problems, "predicted_classes": counts}}
    )


def model_check_line(result: dict) -> str | None:
    """The console's and the report's warning for a result whose ``model_check`` failed (``None`` when it
    passed or the result has none)."""
    check = result.get("model_check") or {}
    if check.get("meaningful", True):
        return None
    config = result.get("config") or {}
    examples = (config.get("train") or {}).get("max_train_examples")
    if result.get("fine_tuned") is False:  # evaluated as given (train.enabled=false, or itermask.evaluate)
        advice = "it was evaluated as given, without fine-tuning here: check that it is trained for these labels"
    elif examples is not None and examples <= 1000:
        advice = (
            f"it was fine-tuned on at most {examples} training examples (train.max_train_examples; debug=smoke uses "
            "200 to test the pipeline, not to explain): fine-tune on more before reading its scores"
        )
    else:
        advice = "check the fine-tuning (learning rate, epochs, train.max_train_examples) before reading its scores"
    problems = "; ".join(check.get("problems") or [])
    return f"WARNING: these faithfulness scores mean nothing: {problems}. The classifier has learnt nothing: {advice}"
