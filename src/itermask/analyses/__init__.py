"""The analyses of an evaluation (see :mod:`itermask.analyses.base`): the built-in ``per_example`` tables and
model check, and the configurable ``ood``, ``attack``, ``naopc``, ``ffidelity``, ``removal_reference`` and
``sanity`` analyses. Importing them imports no torch (their run paths do)."""

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
from itermask.analyses.ffidelity import FFidelityAnalysis
from itermask.analyses.model_check import model_check, model_check_line
from itermask.analyses.naopc import NAOPCAnalysis
from itermask.analyses.ood import OODAnalysis
from itermask.analyses.per_example import PerExampleAnalysis
from itermask.analyses.removal_reference import RemovalReferenceAnalysis
from itermask.analyses.sanity import SanityAnalysis

__all__ = [
    "ANALYSES",
    "Analysis",
    "AnalysisInputs",
    "AnalysisOutput",
    "Artifacts",
    "EvaluatedCurves",
    "EvaluationContext",
    "analysis_classes",
    "model_check",
    "model_check_line",
    "OODAnalysis",
    "PerExampleAnalysis",
    "AttackAnalysis",
    "NAOPCAnalysis",
    "FFidelityAnalysis",
    "RemovalReferenceAnalysis",
    "SanityAnalysis",
]
