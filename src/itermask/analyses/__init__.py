"""The analyses of the evaluate stage (see :mod:`itermask.analyses.base`): the built-in ``accuracy``,
``masking`` and ``per_example`` analyses, and the configurable ``ood`` and ``attack`` analyses."""

from itermask.analyses.accuracy import AccuracyAnalysis
from itermask.analyses.attack import AttackAnalysis
from itermask.analyses.base import ANALYSES, Analysis, AnalysisOutput, Artifacts, EvaluationContext
from itermask.analyses.masking import MaskingCurvesAnalysis
from itermask.analyses.ood import OODAnalysis
from itermask.analyses.per_example import PerExampleAnalysis

__all__ = [
    "ANALYSES",
    "Analysis",
    "AnalysisOutput",
    "Artifacts",
    "EvaluationContext",
    "AccuracyAnalysis",
    "MaskingCurvesAnalysis",
    "OODAnalysis",
    "PerExampleAnalysis",
    "AttackAnalysis",
]
