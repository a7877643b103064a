"""The evaluate stage's analyses (see :mod:`itermask.analyses.base`): the accuracy and masking stages, the
built-in ``per_example`` analysis, and the configurable ``ood`` and ``attack`` analyses. Importing them
imports no torch (their run paths do)."""

from itermask.analyses.attack import AttackAnalysis
from itermask.analyses.base import (
    ANALYSES,
    Analysis,
    AnalysisInputs,
    AnalysisOutput,
    Artifacts,
    EvaluatedCurves,
    EvaluationContext,
    analysis_classes,
)
from itermask.analyses.ood import OODAnalysis
from itermask.analyses.per_example import PerExampleAnalysis
from itermask.engine.accuracy import evaluate_accuracy
from itermask.engine.masking import evaluate_curves

__all__ = [
    "ANALYSES",
    "Analysis",
    "AnalysisInputs",
    "AnalysisOutput",
    "Artifacts",
    "EvaluatedCurves",
    "EvaluationContext",
    "analysis_classes",
    "evaluate_accuracy",
    "evaluate_curves",
    "OODAnalysis",
    "PerExampleAnalysis",
    "AttackAnalysis",
]
