"""The report's examples: a few examples chosen from the jobs' per-example files, each with the reason it
was picked (shown with the per-example view by :mod:`itermask.reporting.render.examples`).

Per group (model, dataset, saliency, masking), on the headline score (AOPC comprehensiveness over the
ERASER bins where computed, one-shot schedule; :func:`~itermask.reporting.headline.headline_scores`):

- the example where the method beats the seeded random explanation most, and the one where it does so
  least (method − random per example, mean over seeds, in the score's faithful direction);
- the example whose score disagrees most between seeds (largest standard deviation over seeds; 2+ seeds);
- the example whose decision flips earliest under the method (smallest ``first_flip_fraction``, mean over
  the seeds where it flips);
- the example whose masked inputs are most out of distribution under the method: the largest final-layer
  Mahalanobis score (squared distance to the closest class mean, Lee et al. 2018, arXiv 1807.03888, Eq. 2;
  the score behind the reported OOD AUROC) averaged over every step of the masking grid (so neither the clean
  0 % step nor the fully masked last step, where all inputs are nearly alike, decides alone), one-shot
  schedule, mean over seeds, from the jobs' ``per_example/ood.parquet``;
- across groups that differ only in the model: the example whose score differs most between two models.

Results without ``ood.parquet`` get :data:`OOD_NOTE` instead of that pick.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pandas as pd

from itermask.core.metrics import metric_info
from itermask.reporting.aggregate import model_pairs
from itermask.reporting.headline import headline_scores
from itermask.reporting.model import Report
from itermask.reporting.sweep import Run

__all__ = ["Pick", "pick_examples", "OOD_NOTE"]

OOD_NOTE = (
    "most out-of-distribution masked inputs: not shown, because these results have no per-example OOD "
    "scores (per_example/ood.parquet): they were run with ood=none or stored before itermask kept those "
    "scores; re-run with the OOD analysis (ood=final, the default) and reuse_results=false to show them."
)


@dataclass
class Pick:
    """One chosen example: the group ``label`` it is shown from, the ``run`` whose stored files its view is
    read from, its ``example_id``, the ``reason`` it was picked (with the numbers that picked it) and a short
    tag of the reason, ``kind`` (``beats_random_most``, ``seed_disagreement``...)."""

    label: tuple
    run: Run
    example_id: int
    reason: str
    kind: str


@dataclass
class _Scores:
    """One group's per-example values of one score: ``method`` and ``random`` ``[seeds, examples]``."""

    score: str
    schedule: str
    examples: list[int]
    method: np.ndarray
    random: np.ndarray | None
    flips: np.ndarray | None = None
    runs: list[Run] = field(default_factory=list)
    ood: _OODScores | None = None


@dataclass
class _OODScores:
    """One group's final-layer Mahalanobis scores ``[seeds, examples]``: the method's and random's mean over
    the masking steps (``random`` ``None`` without random) and the clean input's."""

    method: np.ndarray
    random: np.ndarray | None
    clean: np.ndarray
    n_steps: int


def _group_ood(members: list[Run], method: str, schedule: str, examples: list[int]) -> _OODScores | None:
    """The per-example OOD scores of one group from its jobs' ``per_example/ood.parquet`` (``None`` when a
    job has none, or none for the method and schedule)."""
    means: dict[str, list[np.ndarray]] = {method: [], "random": []}
    clean, n_steps = [], 0
    for run in members:
        path = run.per_example("ood")
        if not path.is_file():
            return None
        frame = pd.read_parquet(path)
        for name in means:
            mine = cast("pd.DataFrame", frame[(frame["schedule"] == schedule) & (frame["saliency"] == name)])
            if not len(mine):
                continue
            table = mine.groupby("example_id").agg(
                masked=("mahalanobis", "mean"), clean=("clean_mahalanobis", "first"), steps=("step", "nunique")
            )
            table = cast("pd.DataFrame", table).reindex(examples)
            means[name].append(table["masked"].to_numpy(dtype=float))
            if name == method:
                clean.append(table["clean"].to_numpy(dtype=float))
                n_steps = int(np.nanmax(table["steps"].to_numpy(dtype=float)))
    if len(means[method]) != len(members):
        return None
    random = np.stack(means["random"]) if len(means["random"]) == len(members) and method != "random" else None
    return _OODScores(np.stack(means[method]), random, np.stack(clean), n_steps)


def _group_scores(label: tuple, members: list[Run]) -> _Scores | None:
    """The headline score per example and seed of one group, from its jobs' ``per_example/scores.parquet``
    (``None`` when a job has none)."""
    if not all(run.per_example("scores").is_file() and run.per_example("tokens").is_file() for run in members):
        return None
    frames = [pd.read_parquet(run.per_example("scores")) for run in members]
    method, quantity = label[2], members[0].result.get("quantity", "probability")
    mine = [f[f.saliency == method] for f in frames]
    schedules = list(dict.fromkeys(mine[0].schedule))
    if not schedules:
        return None
    schedule = "one_shot" if "one_shot" in schedules else schedules[0]
    keys = headline_scores(quantity, set(mine[0].columns))
    if not keys:
        return None
    score = keys[0]
    examples = sorted(set.intersection(*(set(f.example_id) for f in mine)))

    def matrix(frames_of, column):
        rows = []
        for f in frames_of:
            sub = f[f.schedule == schedule].drop_duplicates("example_id").set_index("example_id")
            if column not in sub:
                return None
            rows.append(sub.reindex(examples)[column].to_numpy(dtype=float))
        return np.stack(rows)

    values = matrix(mine, score)
    if values is None:
        return None
    randoms = [f[f.saliency == "random"] for f in frames]
    random = matrix(randoms, score) if all(len(r) for r in randoms) and method != "random" else None
    flips = matrix(mine, "first_flip_fraction")
    ood = _group_ood(members, method, schedule, examples)
    return _Scores(score, schedule, examples, values, random, flips, list(members), ood)


def _fmt(value) -> str:
    """``value`` (a float or numpy float) with 3 decimals, ``n/a`` when missing or not finite."""
    return "n/a" if value is None or not math.isfinite(float(value)) else f"{float(value):.3f}"


#: a candidate pick: (index into the group's examples, reason, kind)
_Candidate = tuple[int, str, str]


def _random_picks(data: _Scores, sign: float) -> list[_Candidate]:
    """The examples where the method beats the seeded random explanation most and least (``sign``: -1 for a
    score where lower is more faithful)."""
    if data.random is None:
        return []
    gain = sign * (data.method - data.random)  # [seeds, examples], > 0: more faithful than random
    mean = np.nanmean(gain, axis=0)
    if not np.isfinite(mean).any():
        return []
    seeds = len(data.runs)
    out = []
    for i, which in ((int(np.nanargmax(mean)), "most"), (int(np.nanargmin(mean)), "least")):
        reason = (
            f"method beats random {which}: {data.score} ({data.schedule}) {_fmt(np.nanmean(data.method[:, i]))} vs "
            f"random {_fmt(np.nanmean(data.random[:, i]))} (mean over {seeds} seed(s))"
        )
        out.append((i, reason, f"beats_random_{which}"))
    return out


def _seed_picks(data: _Scores) -> list[_Candidate]:
    """The example whose score disagrees most between seeds (2+ seeds)."""
    if len(data.runs) < 2:
        return []
    spread = np.nanstd(data.method, axis=0, ddof=1)
    if not np.isfinite(spread).any():
        return []
    i = int(np.nanargmax(spread))
    values = ", ".join(_fmt(v) for v in data.method[:, i])
    reason = (
        f"largest disagreement between seeds: {data.score} ({data.schedule}) per seed {values} "
        f"(sd {_fmt(float(spread[i]))})"
    )
    return [(i, reason, "seed_disagreement")]


def _flip_picks(data: _Scores) -> list[_Candidate]:
    """The example whose decision flips earliest (mean over the seeds where it flips)."""
    if data.flips is None or not np.isfinite(data.flips).any():
        return []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        first = np.nanmean(data.flips, axis=0)
    if not np.isfinite(first).any():
        return []
    i = int(np.nanargmin(first))
    n = int(np.isfinite(data.flips[:, i]).sum())
    reason = (
        f"earliest decision flip: the prediction flips after masking a {_fmt(first[i])} share of the "
        f"tokens ({data.schedule}; flips in {n} of {len(data.runs)} seed(s))"
    )
    return [(i, reason, "decision_flip")]


def _ood_picks(data: _Scores) -> list[_Candidate]:
    """The example whose masked inputs are most out of distribution (module docstring)."""
    if data.ood is None:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an example without scores in every seed
        mean = np.nanmean(data.ood.method, axis=0)
    if not np.isfinite(mean).any():
        return []
    i = int(np.nanargmax(mean))
    versus = "" if data.ood.random is None else f", random {_fmt(np.nanmean(data.ood.random[:, i]))}"
    reason = (
        f"most out-of-distribution masked inputs: final-layer Mahalanobis score {_fmt(mean[i])} averaged "
        f"over the {data.ood.n_steps} masking steps ({data.schedule}{versus}; clean input "
        f"{_fmt(np.nanmean(data.ood.clean[:, i]))}; mean over {len(data.runs)} seed(s))"
    )
    return [(i, reason, "most_ood")]


def _group_picks(label: tuple, data: _Scores) -> list[Pick]:
    """One group's picks (module docstring), each example and kind once, shown from the group's first job."""
    info = metric_info(data.score)
    sign = -1.0 if info is not None and info.higher_is_more_faithful is False else 1.0
    candidates = [*_random_picks(data, sign), *_seed_picks(data), *_flip_picks(data), *_ood_picks(data)]
    picks, seen = [], set()
    for index, reason, kind in candidates:
        example = data.examples[index]
        if (example, kind) not in seen:
            seen.add((example, kind))
            picks.append(Pick(label, data.runs[0], example, reason, kind))
    return picks


def _model_picks(report: Report, scores: dict[tuple, _Scores]) -> list[Pick]:
    """Per pair of groups that differ only in the model: the example whose seed-mean score differs most."""
    picks = []
    for a, b in model_pairs(report.groups):
        if a not in scores or b not in scores or scores[a].score != scores[b].score:
            continue
        sa, sb = scores[a], scores[b]
        common = sorted(set(sa.examples) & set(sb.examples))
        if not common:
            continue
        ma = np.nanmean(sa.method[:, [sa.examples.index(e) for e in common]], axis=0)
        mb = np.nanmean(sb.method[:, [sb.examples.index(e) for e in common]], axis=0)
        gap = np.abs(ma - mb)
        if not np.isfinite(gap).any():
            continue
        i = int(np.nanargmax(gap))
        reason = (
            f"largest disagreement between models: {sa.score} ({sa.schedule}) {_fmt(ma[i])} with {a[0]}, "
            f"{_fmt(mb[i])} with {b[0]} (seed means); shown with {a[0]}"
        )
        picks.append(Pick(a, sa.runs[0], common[i], reason, "model_disagreement"))
    return picks


def pick_examples(report: Report) -> tuple[list[Pick], list[str]]:
    """The chosen examples of every group (see the module docstring) and notes on what could not be picked (groups
    without per-example files with tokens, a single seed, no per-example OOD scores: :data:`OOD_NOTE`)."""
    picks, notes, scores = [], [], {}
    for label, members in report.groups.items():
        data = _group_scores(label, members)
        if data is None:
            notes.append(
                f"{' / '.join(label)}: no per-example files with tokens (results written before itermask "
                "stored them; re-run with reuse_results=false): no examples shown"
            )
            continue
        scores[label] = data
        picks += _group_picks(label, data)
        if data.ood is None:
            notes.append(f"{' / '.join(label)}: {OOD_NOTE}")
        if len(members) < 2:
            notes.append(f"{' / '.join(label)}: one seed, so no disagreement between seeds to show")
    picks += _model_picks(report, scores)
    return picks, notes
