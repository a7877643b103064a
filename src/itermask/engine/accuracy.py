"""The accuracy stage: the fine-tuned classifier's test accuracy beside its validation accuracy and the
majority-class baseline."""

from __future__ import annotations

from itermask.analyses.base import AnalysisOutput, EvaluationContext

__all__ = ["evaluate_accuracy"]


def evaluate_accuracy(context: EvaluationContext) -> AnalysisOutput:
    """Test accuracy (a fraction in [0, 1], the whole test split, Lightning's test loop), the best validation
    accuracy of the fine-tuning, and the test accuracy of always predicting the training split's majority
    class, under ``accuracy``; also the label names (``label_names``) and the test split's size (``n_test``).

    The test accuracy is computed once per checkpoint, test inputs and loop settings and read back by the
    other jobs on it (:meth:`EvaluationContext.reuse`), except under DDP."""
    import torch

    data, trained = context.data, context.trained
    assert trained is not None and context.classifier is not None  # a job that measures accuracy has both

    def test_accuracy() -> dict:
        loader = data.test_dataloader()
        accuracy = float(context.trainer.test(context.classifier, dataloaders=loader, verbose=False)[0]["test_acc"])
        batches = context.trainer.num_test_batches[0]  # fewer than the loader's under trainer.limit_test_batches
        n_test = len(data.splits["test"])
        return {"test": accuracy, "n_scored": int(min(n_test, batches * data.eval_batch_size))}

    if context.trainer.world_size > 1:  # every rank runs the test loop's collectives: no rank may skip it
        test = test_accuracy()
    else:  # the same for every job on this checkpoint: computed once (storage.derived)
        fingerprint = {
            "inputs": data.input_digest(data.splits["test"]),
            "class_order": trained.class_order,
            "eval_batch_size": data.eval_batch_size,
            "precision": str(context.trainer.precision),
            "limit_test_batches": context.trainer.limit_test_batches,
        }
        test = context.reuse("test_accuracy", fingerprint, test_accuracy)
    test_labels = torch.tensor(data.splits["test"]["label"])
    # the majority-class reference over the examples scored: the first n_scored of the test loader's (length-sorted)
    # order, all of them but under trainer.limit_test_batches
    scored = torch.tensor(data.by_length(data.splits["test"])["label"][: test.get("n_scored", len(test_labels))])
    # the whole training split's majority, not that of the train.max_train_examples subset fine-tuned on
    train_labels = torch.tensor(data.training_labels())
    majority = int(torch.bincount(train_labels).argmax())
    return AnalysisOutput(
        {
            "accuracy": {
                "test": float(test["test"]),
                "n_scored": test["n_scored"],  # test examples scored (all but under trainer.limit_test_batches)
                "validation": trained.meta["val_acc"],
                "majority_class_test": float((scored == majority).float().mean()),
            },
            "label_names": list(data.label_names),  # class id -> name (string labels: the mapping)
            "n_test": len(test_labels),
        }
    )
