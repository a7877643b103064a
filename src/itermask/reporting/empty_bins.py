"""AOPC bins that mask no token for most examples of a group (short texts: 1 % of 26 tokens rounds to 0), noted
next to the AOPC score on the first screen (:func:`itermask.reporting.render.first_screen.empty_bin_notes`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from itermask.core.metrics import ScoreKey
from itermask.reporting.model import Report

__all__ = ["EmptyBin", "empty_bins"]


@dataclass
class EmptyBin:
    """An AOPC ``bin`` (masking fraction) that masks no token for ``n_empty`` of the ``n_examples`` examples
    of the group ``label`` (counted in its first run: the texts are the same for every seed), with the AOPC
    key ``score`` (``aopc_comprehensiveness_prob``) and the method's mean AOPC over seeds over the bins
    (``with_bin``) and over the bins other than the empty ones (``without_bin``)."""

    label: tuple
    bin: float
    n_empty: int
    n_examples: int
    score: str
    with_bin: float
    without_bin: float


def empty_bins(report: Report) -> list[EmptyBin]:
    """The :class:`EmptyBin` of every group and AOPC score: bins that mask no token for more than half of the
    examples (the jobs' ``per_example/steps.parquet``, the method under study, one-shot schedule). Groups
    without per-example files or AOPC bins give none."""
    out = []
    for label, members in report.groups.items():
        method = label[2]
        evaluation = (members[0].result.get("config") or {}).get("evaluation") or {}
        bins = [float(b) for b in evaluation.get("aopc_bins") or []]
        frames = []
        for run in members:
            path = run.per_example("steps")
            if path.is_file() and bins:
                steps = pd.read_parquet(path)
                frames.append(steps[(steps.saliency == method)])
        if not frames:
            continue
        first = frames[0]
        one_shot = first[first.schedule == first.schedule.iloc[0]]
        n_examples = one_shot.example_id.nunique()
        empty = []
        for b in bins:
            at = one_shot[(one_shot.x - b).abs() < 1e-9]
            n_empty = int((at.k == 0).sum())
            if len(at) and n_empty * 2 > n_examples:
                empty.append((b, n_empty))
        if not empty:
            continue
        kept = [b for b in bins if all(abs(b - e) > 1e-9 for e, _ in empty)]
        for key in _aopc_keys(members[0], method):
            column = str(key.base)
            if column not in first.columns:
                continue
            with_bin, without = _aopc_means(frames, column, bins), _aopc_means(frames, column, kept)
            for b, n_empty in empty:
                out.append(EmptyBin(label, b, n_empty, n_examples, str(key), with_bin, without))
    return out


def _aopc_keys(run, method: str) -> list[ScoreKey]:
    """The method's AOPC-over-bins keys in a run's result, in the result's order."""
    scores = (run.result.get("scores") or {}).get(method) or {}
    keys = [ScoreKey.parse(k) for summary in scores.values() for k in summary]
    return list(dict.fromkeys(k for k in keys if k is not None and k.aggregate == "aopc"))


def _aopc_means(frames: Sequence[pd.DataFrame], key: str, bins: Sequence[float]) -> float:
    """The one-shot AOPC of ``key`` over ``bins`` (mean over bins, then examples, then seeds)."""
    if not bins:
        return math.nan
    values = []
    for steps in frames:
        one_shot = steps[steps["schedule"] == "one_shot"] if bool((steps["schedule"] == "one_shot").any()) else steps
        on = cast(pd.DataFrame, one_shot[[any(abs(x - b) < 1e-9 for b in bins) for x in one_shot["x"]]])
        per_example = cast(pd.Series, on.groupby("example_id")[key].mean())
        values.append(float(np.nanmean(per_example.to_numpy(dtype=float))))
    return float(sum(values) / len(values))
