"""The range of each out-of-distribution statistic, for intervals that stay inside it (no torch: the report
reads it from results files)."""

from __future__ import annotations

import math

__all__ = ["STATISTIC_BOUNDS", "STATISTIC_UNITS", "statistic_bounds", "statistic_unit"]

#: the range of each statistic of :class:`OODCurves` (by its name without the ``<view>/`` prefix), for
#: intervals that stay inside it (:mod:`itermask.reporting.intervals`); ``auroc_*`` are all in [0, 1]
STATISTIC_BOUNDS: dict[str, tuple[float, float]] = {
    "l2_norm": (0.0, math.inf),
    "cosine_to_clean": (-1.0, 1.0),
    "l2_to_clean": (0.0, math.inf),
    "mahalanobis": (0.0, math.inf),  # a squared distance
    "knn_distance": (0.0, math.inf),
    "max_softmax": (0.0, 1.0),
    "entropy": (0.0, math.inf),  # at most log(C) nats
    "ece": (0.0, 1.0),
    "masf_flagged": (0.0, 1.0),
    "masf_p_median": (0.0, 1.0),
}

#: the unit of each statistic (as :data:`STATISTIC_BOUNDS`), for the report's unit column; ``auroc_*``: AUROC
STATISTIC_UNITS: dict[str, str] = {
    "l2_norm": "Euclidean norm",
    "cosine_to_clean": "cosine",
    "l2_to_clean": "Euclidean distance",
    "mahalanobis": "squared Mahalanobis distance",
    "knn_distance": "Euclidean distance",
    "max_softmax": "probability",
    "entropy": "nats",
    "ece": "probability (expected calibration error of the top label, ood.ece_bins bins)",
    "masf_flagged": "fraction of inputs",
    "masf_p_median": "p-value",
}


def statistic_bounds(key: str) -> tuple[float, float] | None:
    """The range of the statistic ``key`` (``"<view>/<statistic>"`` or a model-level name, see
    :class:`OODCurves`): ``(0, 1)`` for every ``auroc_*``, :data:`STATISTIC_BOUNDS` otherwise, ``None`` for an
    unknown key."""
    name = key.rsplit("/", 1)[-1]
    return (0.0, 1.0) if name.startswith("auroc_") else STATISTIC_BOUNDS.get(name)


def statistic_unit(key: str) -> str:
    """The unit of the statistic ``key`` (as :func:`statistic_bounds`): ``"AUROC"`` (in [0, 1]) for every
    ``auroc_*``, :data:`STATISTIC_UNITS` otherwise, ``""`` for an unknown key."""
    name = key.rsplit("/", 1)[-1]
    return "AUROC" if name.startswith("auroc_") else STATISTIC_UNITS.get(name, "")
