"""itermask: faithfulness of token-saliency explanations under iterative masking.

Layout (data flows one way: data -> model -> saliency -> masking -> metrics/statistics -> tracking/report):

- :func:`itermask.evaluate` (:mod:`itermask.api`): the notebook facade, evaluating a given classifier on
  given texts;
- :mod:`itermask.core`: the plain PyTorch library (tokens, saliency, masking, schedules, evaluation,
  metrics, representations); no Hydra, W&B, Lightning or file I/O, callable from a notebook;
- :mod:`itermask.ood`: out-of-distribution statistics of masked inputs;
- :mod:`itermask.training`: data, models, Lightning fine-tuning and evaluation loops;
- :mod:`itermask.analyses`: the evaluate stage's analyses (accuracy, masking curves, OOD);
- :mod:`itermask.storage`: checkpoint cache, results store, atomic result files;
- :mod:`itermask.reporting`: aggregation over seeds and models (``python -m itermask.reporting``);
- :mod:`itermask.settings`, :mod:`itermask.pipeline`: the stages of a job (settings, model, evaluate,
  record), :mod:`itermask.tracking` and :mod:`itermask.callbacks` for W&B and Hydra.

Reference: Crothers, Viktor, Japkowicz, "Robust Infidelity: When Faithfulness Measures on Masked
Language Models Are Misleading", arXiv 2308.06795.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from itermask.version import __version__

__all__ = ["__version__", "evaluate", "EvaluationResult"]

if TYPE_CHECKING:
    from itermask.api import EvaluationResult, evaluate


def __getattr__(name: str) -> Any:
    """``itermask.evaluate`` and ``itermask.EvaluationResult`` (:mod:`itermask.api`), imported on first use:
    ``import itermask`` itself imports no torch (the entry points' fast ``--help``)."""
    if name in ("evaluate", "EvaluationResult"):
        from itermask import api

        return getattr(api, name)
    raise AttributeError(f"module 'itermask' has no attribute {name!r}")
