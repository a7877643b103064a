"""The accuracy stage: the fine-tuned classifier's test accuracy beside its validation accuracy and the
majority-class baseline."""

from __future__ import annotations

import logging

from itermask.analyses.base import AnalysisOutput, EvaluatedCurves, EvaluationContext

log = logging.getLogger(__name__)

__all__ = ["evaluate_accuracy", "model_check", "model_check_line"]


def evaluate_accuracy(context: EvaluationContext) -> AnalysisOutput:
    """Test accuracy (a fraction in [0, 1], the whole test split, Lightning's test loop), the best validation
    accuracy of the fine-tuning, and the test accuracy of always predicting the training split's majority
    class, under ``accuracy``; also the label names (``label_names``) and the test split's size (``n_test``).

    The test accuracy is computed once per checkpoint, test inputs and loop settings and read back by the
    other jobs on it (:meth:`EvaluationContext.reuse`), except under DDP."""
    import torch

    data = context.data

    def test_accuracy() -> dict:
        loader = data.test_dataloader()
        accuracy = float(context.trainer.test(context.classifier, dataloaders=loader, verbose=False)[0]["test_acc"])
        batches = context.trainer.num_test_batches[0]  # fewer than the loader's under trainer.limit_test_batches
        return {"test": accuracy, "n_scored": int(min(len(loader.dataset), batches * data.eval_batch_size))}

    if context.trainer.world_size > 1:  # every rank runs the test loop's collectives: no rank may skip it
        test = test_accuracy()
    else:  # the same for every job on this checkpoint: computed once (storage.derived)
        fingerprint = {
            "inputs": data.input_digest(data.tokenized["test"]),
            "class_order": getattr(context.trained, "class_order", None),
            "eval_batch_size": data.eval_batch_size,
            "precision": str(context.trainer.precision),
            "limit_test_batches": context.trainer.limit_test_batches,
        }
        test = context.reuse("test_accuracy", fingerprint, test_accuracy)
    test_labels = torch.tensor(data.tokenized["test"]["label"])
    train_labels = torch.tensor(data.tokenized["train"]["label"])
    majority = int(torch.bincount(train_labels).argmax())
    return AnalysisOutput(
        {
            "accuracy": {
                "test": float(test["test"]),
                "n_scored": test["n_scored"],  # test examples scored (all but under trainer.limit_test_batches)
                "validation": context.trained.meta["val_acc"],
                "majority_class_test": float((test_labels == majority).float().mean()),
            },
            "label_names": list(data.label_names),  # class id -> name (string labels: the mapping)
            "n_test": len(test_labels),
        }
    )


def model_check(result: dict, curves: EvaluatedCurves) -> AnalysisOutput:
    """Whether the classifier's faithfulness scores can mean anything, under ``model_check``: a classifier
    that predicts one class for every evaluated example, or whose test accuracy is not above the majority
    class's, has learnt nothing to explain, and masking its inputs measures noise (e.g. after
    ``model.finetune.optimizer.learning_rate=1000`` or ``train.max_train_examples=1``).

    Args:
        result: the result so far, with the accuracy stage's ``accuracy`` and ``label_names``.
        curves: the masking stage's curves (their clean logits give the predictions on the evaluated examples).

    Returns:
        ``{"model_check": {"meaningful": bool, "problems": [...], "predicted_classes": {class name: count}}}``;
        each problem is a sentence, and a warning is logged when there is one.
    """
    first = next(iter(curves[curves.method].values()))
    names = list(result.get("label_names") or [])
    predicted = first.clean_logits.argmax(dim=-1).tolist()
    counts: dict[str, int] = {}
    for index in predicted:
        name = names[index] if index < len(names) else str(index)
        counts[name] = counts.get(name, 0) + 1
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
    if problems:
        log.warning(
            "the faithfulness scores of this run MEAN NOTHING: %s. The classifier has learnt nothing to explain; "
            "check the fine-tuning (learning rate, epochs, train.max_train_examples) before reading its scores",
            "; ".join(problems),
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
    return "WARNING: these faithfulness scores mean nothing: " + "; ".join(check.get("problems") or [])
