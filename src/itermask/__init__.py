"""itermask: faithfulness of token-saliency explanations under iterative masking.

:func:`itermask.evaluate` (:mod:`itermask.api`) evaluates a given classifier on given texts; ``evaluate.py``,
``train.py`` and ``pretrain.py`` run the same engine (:mod:`itermask.engine`) from a Hydra config; the layout
is in ``docs/architecture.md``. Reference: Crothers, Viktor, Japkowicz, "Robust Infidelity: When Faithfulness
Measures on Masked Language Models Are Misleading", arXiv 2308.06795.
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
