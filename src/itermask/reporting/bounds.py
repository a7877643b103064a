"""The range of each report measure ``(explanation, schedule, score)``, read from where the measure is declared,
for intervals that stay in it: ``accuracy_<split>`` is in [0, 1]; a masking score (a key of
:func:`itermask.core.metrics.summarize`) has its metric's declared :attr:`~itermask.core.metrics.Metric.bounds`;
an analysis's row (``ood ...``, ``attack ...``) its :meth:`~itermask.analyses.Analysis.report_bounds`; a
``"<method> - random"`` row the range of a difference (:func:`~itermask.reporting.intervals.difference_bounds`).
Anything else is unbounded (``None``): its interval is the plain one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from itermask.reporting.intervals import UNIT_INTERVAL, Bounds, difference_bounds

if TYPE_CHECKING:
    from itermask.core.evaluation_settings import Quantity

__all__ = ["measure_bounds", "score_bounds"]


def score_bounds(score: str, quantity: str | None = None) -> Bounds | None:
    """The range of one value of the score key ``score`` (a masking metric, an accuracy or an analysis's row), or
    ``None`` if unbounded or unknown. ``quantity`` resolves keys without a ``_prob``/``_logit`` suffix."""
    from itermask.analyses import ANALYSES
    from itermask.core.metrics import metric_info

    if score.startswith("accuracy_"):
        return UNIT_INTERVAL
    info = metric_info(score, cast("Quantity | None", quantity))
    if info is not None:
        return info.bounds
    for analysis in ANALYSES.values():
        bounds = analysis.report_bounds(score)
        if bounds is not None:
            return bounds
    return None


def measure_bounds(explanation: str, schedule: str, score: str, quantity: str | None = None) -> Bounds | None:
    """The range of the report measure ``(explanation, schedule, score)``: :func:`score_bounds`, or for a
    ``"<method> - random"`` row the range of a difference of two such values. ``schedule`` does not change
    the range (it is an argument so that a measure's key can be passed as it is)."""
    bounds = score_bounds(score, quantity)
    return difference_bounds(bounds) if explanation.endswith(" - random") else bounds
