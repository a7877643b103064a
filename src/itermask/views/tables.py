"""Views built from a job's stored per-example tables (:mod:`itermask.storage.per_example`): :func:`views_from_tables`
and :func:`load` (from a job folder). No model, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itermask.core.metrics import ScoreKey
from itermask.views.page import MAX_TOKENS, ExampleView, ExampleViews, MethodView, Trajectory

__all__ = ["views_from_tables", "load"]

#: the per-step column of the target class's probability after masking
TARGET_PROBABILITY = str(ScoreKey.of("target", "probability"))


def _trajectory_from_tables(schedule: str, kind: str, steps, first_step: list[int] | None, ranks) -> Trajectory:
    """One schedule's :class:`Trajectory` of one example and explanation from its ``steps.parquet`` rows
    (``steps``, sorted by step; ``kind``: ``"fraction"`` or ``"count"``). ``first_step``: per token, the step that
    first masks it (``-1``: never), ``None`` for the one-shot schedule (its tokens of rank ``1..k`` of ``ranks``
    are masked at a step masking ``k``)."""
    flips = [i for i, v in enumerate(steps["flip_rate"].tolist()) if v == 1.0] if "flip_rate" in steps else []
    if first_step is None:
        masked = [[i for i, r in enumerate(ranks) if r is not None and r <= k] for k in steps["k"].tolist()]
    else:
        masked = [[i for i, at in enumerate(first_step) if 0 <= at <= s] for s in range(len(steps))]
    return Trajectory(
        schedule=schedule,
        steps=kind,
        x=[float(v) for v in steps["x"].tolist()],
        masked=masked,
        probability=[float(v) for v in steps[TARGET_PROBABILITY].tolist()],
        flip_step=flips[0] if flips else None,
    )


def _explained_name(tables) -> str:
    """The method under study of per-example tables: the explanation in ``scores.parquet`` other than
    ``random`` (``random`` itself when it is the only one)."""
    names = list(dict.fromkeys(tables.scores["saliency"].tolist()))
    return next((n for n in names if n != "random"), names[0])


def _roles(tokens, method: str, methods: Sequence[str] | None) -> tuple[dict[str, str], list[str]]:
    """``({name: column prefix in tokens.parquet}, the explanations to show in order)``: the prefix is
    ``explained`` for ``method``, ``random`` for ``random``; ``methods`` ``None``: every one with scores in ``tokens``.

    Raises:
        ValueError: if ``tokens`` has no scores of a requested explanation.
    """
    role = {method: "explained", **({"random": "random"} if method != "random" else {})}
    known = [name for name, r in role.items() if f"{r}_score" in tokens]
    shown = list(methods) if methods is not None else known
    if missing := [m for m in shown if m not in known]:
        raise ValueError(f"no tokens of explanation(s) {missing} in these results (explanations: {known})")
    return role, shown


def _class_names(examples) -> list[str] | None:
    """Names of the classes by id from ``examples.parquet``'s ``label_name`` (a label without a name is shown
    by its id); ``None`` when no label has a name."""
    names = {
        int(label): name
        for label, name in zip(examples["label"].tolist(), examples["label_name"].tolist())
        if isinstance(name, str)
    }
    return [names.get(i, str(i)) for i in range(max(names) + 1)] if names else None


@dataclass
class _GroupedTables:
    """A job's per-example tables grouped the way the views read them: ``tokens`` by example id (rows in position
    order), ``steps`` by ``(saliency, example_id, schedule)`` (sorted by step), ``scores`` by ``(saliency,
    example_id)``, gold ``labels`` by example id (negative: unknown) and :func:`_class_names`."""

    tokens: dict[Any, Any]
    steps: dict[Any, Any]
    scores: dict[Any, Any]
    labels: dict[Any, Any]
    class_names: list[str] | None


def _grouped(tables, tokens) -> _GroupedTables:
    """Groups ``tables`` (a :class:`~itermask.storage.per_example.PerExample`) and its ``tokens`` table."""
    return _GroupedTables(
        tokens=dict(tuple(tokens.groupby("example_id", sort=False))),
        steps={key: f.sort_values("step") for key, f in tables.steps.groupby(["saliency", "example_id", "schedule"])},
        scores={key: f for key, f in tables.scores.groupby(["saliency", "example_id"])},
        labels=dict(zip(tables.examples["example_id"].tolist(), tables.examples["label"].tolist())),
        class_names=_class_names(tables.examples),
    )


def _method_view_from_tables(name: str, role: str, example_id: int, rows, by_step, kind: str) -> MethodView:
    """One explanation's :class:`MethodView` of one example from its ``tokens`` ``rows`` (``role``: the column
    prefix) and ``by_step`` (:attr:`_GroupedTables.steps`): scores ``NaN`` at tokens that are not maskable, one
    trajectory per stored schedule (masked positions ``None`` where a schedule other than one-shot has no
    ``{role}_masked_step_*`` column)."""
    ranks = [int(v) if v >= 0 else None for v in rows[f"{role}_rank"].tolist()]
    scores = [float(v) if k is not None else math.nan for v, k in zip(rows[f"{role}_score"].tolist(), ranks)]
    trajectories = {}
    for schedule in dict.fromkeys(s for (m, e, s) in by_step if m == name and e == example_id):
        column = f"{role}_masked_step_{schedule}"
        first_step = [int(v) for v in rows[column].tolist()] if column in rows else None
        trajectory = _trajectory_from_tables(schedule, kind, by_step[(name, example_id, schedule)], first_step, ranks)
        if first_step is None and schedule != "one_shot":
            trajectory.masked = None  # not recorded for this schedule
        trajectories[schedule] = trajectory
    return MethodView(name, scores, ranks, trajectories)


def _example_view_from_tables(
    example_id: int, methods: list[str], role: dict[str, str], data: _GroupedTables, kind: str, reason: str
) -> ExampleView:
    """The :class:`ExampleView` of one example; the first of ``methods`` gives the target, prediction, clean
    probability and special tokens."""
    rows = data.tokens[example_id]
    method_views = {
        name: _method_view_from_tables(name, role[name], example_id, rows, data.steps, kind) for name in methods
    }
    first_steps = next(f for (m, e, _), f in data.steps.items() if m == methods[0] and e == example_id)
    score_row = data.scores[(methods[0], example_id)].iloc[0]
    label = data.labels.get(example_id)
    return ExampleView(
        example_id=int(example_id),
        tokens=[str(t) for t in rows["token"].tolist()],
        token_ids=[int(t) for t in rows["token_id"].tolist()],
        segments=[int(t) for t in rows["segment"].tolist()] if "segment" in rows else [0] * len(rows),
        methods=method_views,
        target=int(first_steps["target"].iloc[0]),
        prediction=int(score_row["prediction"]) if "prediction" in score_row else int(first_steps["target"].iloc[0]),
        label=None if label is None or int(label) < 0 else int(label),
        clean_probability=float(score_row["clean_prob"]) if "clean_prob" in score_row else math.nan,
        class_names=data.class_names,
        reason=reason,
        special=[v < 0 for v in rows[f"{role[methods[0]]}_rank"].tolist()],
    )


def views_from_tables(
    tables,
    example_ids: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    reasons: Mapping[int, str] | None = None,
    steps: str = "fraction",
    max_tokens: int = MAX_TOKENS,
    method: str | None = None,
) -> ExampleViews:
    """Views (:class:`ExampleViews`) of the examples of one job from its per-example tables (no model, no torch).

    Args:
        tables: a :class:`~itermask.storage.per_example.PerExample` (``tokens`` needed).
        example_ids: which examples, in this order (default: every example, by id).
        methods: which explanations, by name (default: the method under study, then ``random``).
        reasons: ``{example_id: why it is shown}``.
        steps: ``"fraction"`` or ``"count"``: what the grid ``x`` of ``steps.parquet`` holds.
        max_tokens: tokens shown per example (:data:`MAX_TOKENS`).
        method: the method under study (its ``tokens.parquet`` columns are ``explained_*``); default: the
            explanation of ``scores.parquet`` other than ``random``.

    Raises:
        ValueError: if the tables have no ``tokens`` table (results written before it existed: re-run the
            job with ``reuse_results=false``) or lack a requested example or explanation.
    """
    tokens = tables.tokens
    if tokens is None:
        raise ValueError(
            "these per-example results have no tokens.parquet (written before itermask stored tokens): "
            "re-run the job with reuse_results=false to view its examples"
        )
    role, shown = _roles(tokens, method or _explained_name(tables), methods)
    ids = sorted(set(tokens["example_id"].tolist())) if example_ids is None else [int(i) for i in example_ids]
    if absent := sorted(set(ids) - set(tokens["example_id"].tolist())):
        raise ValueError(f"no example(s) {absent[:10]} in these results")
    data = _grouped(tables, tokens)
    views = [
        _example_view_from_tables(example_id, shown, role, data, steps, (reasons or {}).get(example_id, ""))
        for example_id in ids
    ]
    return ExampleViews(views, max_tokens)


def load(
    job_dir: str | Path,
    example_ids: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    reasons: Mapping[int, str] | None = None,
    max_tokens: int = MAX_TOKENS,
) -> ExampleViews:
    """Views of a finished job's examples from its stored files (``results.json`` and ``per_example/``), e.g.
    in a notebook: ``itermask.views.load("outputs/.../0")[:5]`` shows the first five.

    Args:
        job_dir: the job folder (the one holding ``results.json``).
        example_ids, methods, reasons, max_tokens: see :func:`views_from_tables`.

    Raises:
        FileNotFoundError: naming the missing per-example file.
        ValueError: see :func:`views_from_tables`.
    """
    import json

    from itermask.storage.per_example import load_per_example

    steps, method = "fraction", None
    result_file = Path(job_dir) / "results.json"
    if result_file.is_file():
        result = json.loads(result_file.read_text(encoding="utf-8"))
        steps = ((result.get("config") or {}).get("evaluation") or {}).get("steps", "fraction")
        saliency = result.get("saliency")
        method = saliency.get("name") if isinstance(saliency, dict) else None
    return views_from_tables(load_per_example(job_dir), example_ids, methods, reasons, steps, max_tokens, method)
