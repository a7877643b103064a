"""The accuracy stage: the fine-tuned classifier's test accuracy beside its validation accuracy and the
majority-class baseline."""

from __future__ import annotations

from itermask.analyses.base import AnalysisOutput, EvaluationContext

__all__ = ["evaluate_accuracy"]


def evaluate_accuracy(context: EvaluationContext) -> AnalysisOutput:
    """Test accuracy (a fraction in [0, 1], the whole test split, Lightning's test loop), the best validation
    accuracy of the fine-tuning, and the test accuracy of always predicting the training split's majority
    class, under ``accuracy``; also the label names (``label_names``) and the test split's size (``n_test``)."""
    import torch

    data = context.data
    test_acc = context.trainer.test(context.classifier, dataloaders=data.test_dataloader(), verbose=False)[0][
        "test_acc"
    ]
    test_labels = torch.tensor(data.tokenized["test"]["label"])
    train_labels = torch.tensor(data.tokenized["train"]["label"])
    majority = int(torch.bincount(train_labels).argmax())
    return AnalysisOutput(
        {
            "accuracy": {
                "test": float(test_acc),
                "validation": context.trained.meta["val_acc"],
                "majority_class_test": float((test_labels == majority).float().mean()),
            },
            "label_names": list(data.label_names),  # class id -> name (string labels: the mapping)
            "n_test": len(test_labels),
        }
    )
