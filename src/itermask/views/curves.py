"""Views built from an evaluation in memory (:func:`views_from_curves`) and the clean-input masking order they
show (:func:`masking_ranks`). Needs torch, imported inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from itermask.views.page import MAX_TOKENS, ExampleView, ExampleViews, MethodView, Trajectory

__all__ = ["masking_ranks", "views_from_curves"]


def masking_ranks(scores, maskable) -> list[list[int | None]]:
    """Masking ranks on the clean input of ``[B, L]`` saliency ``scores`` over the ``[B, L]`` bool ``maskable``
    positions (:func:`itermask.core.schedules.masking_ranks`: descending score, NaN lowest, ties by position;
    1 = masked first), as ``B`` lists of ``L`` ranks, ``None`` at positions that are not maskable."""
    from itermask.core.schedules import masking_ranks as rank_tensor

    return [[rank if rank > 0 else None for rank in row] for row in rank_tensor(scores, maskable).tolist()]


@dataclass
class _ScheduleCurves:
    """One schedule's curves of one method, on the CPU: its ``MaskingCurves``, the ``[S, B, L]`` bool masked
    positions at each step (``None``: not recorded), the target class's ``[B, S]`` probabilities and the ``[B, S]``
    bool decision flips (prediction differs from the clean one)."""

    curves: Any
    masks: Any
    probability: Any
    flips: Any


@dataclass
class _MethodCurves:
    """One method's ``[B, L]`` saliency on the CPU, its ``B`` lists of ``L`` clean-input masking ranks
    (:func:`masking_ranks`) and ``{schedule: _ScheduleCurves}``."""

    scores: Any
    ranks: list[list[int | None]]
    schedules: dict[str, _ScheduleCurves]


def _schedule_curves(method: str, schedule: str, curves, scores, maskable, masks) -> _ScheduleCurves:
    """One schedule's probabilities, flips and masks of one method, from its ``curves`` over the ``B`` rows of the
    batch, the method's ``[B, L]`` ``scores`` and the ``[B, L]`` bool ``maskable`` positions (on the CPU).
    ``masks`` (``[S, B, L]`` bool) missing are read from the curves' ``masked_step`` where recorded, else
    recomputed from ``scores`` for ``"one_shot"``, left ``None`` for any other schedule.

    Raises:
        ValueError: if ``curves`` do not have one example per row of the batch.
    """
    import torch

    from itermask.core.measures import decision_flips, target_output
    from itermask.core.schedules import SCHEDULES

    size = scores.shape[0]
    if len(curves) != size:
        raise ValueError(f"curves {method}/{schedule} have {len(curves)} examples, the batch {size}")
    first = None if curves.masked_step is None else _to_width(curves.masked_step.cpu().long(), scores.shape[1])
    if masks is None and first is not None and first.shape == scores.shape:
        masks = torch.stack([(first >= 0) & (first <= s) for s in range(curves.k.shape[1])])
    if masks is None and schedule == "one_shot":
        masks = SCHEDULES["one_shot"]().masks(scores, maskable, curves.k.T.cpu(), None)
    return _ScheduleCurves(
        curves=curves,
        masks=None if masks is None else masks.cpu(),
        probability=target_output(curves.logits, curves.target, "probability").cpu(),
        flips=decision_flips(curves).cpu(),
    )


def _method_curves(
    method: str, by_schedule: Mapping[str, Any], scores, maskable, masks: Mapping[str, Any]
) -> _MethodCurves:
    """One method's ``[B, L]`` ``scores`` (any device) and ranks, and its curves per schedule (``by_schedule``,
    with the recorded ``{schedule: [S, B, L] bool}`` ``masks``); ``maskable``: ``[B, L]`` bool on the CPU.

    Raises:
        ValueError: if ``scores`` or a schedule's curves disagree with the batch's shape.
    """
    scores = scores.detach().cpu()
    if tuple(scores.shape) != tuple(maskable.shape):
        raise ValueError(f"scores of {method!r} have shape {tuple(scores.shape)}, the batch {tuple(maskable.shape)}")
    return _MethodCurves(
        scores=scores,
        ranks=masking_ranks(scores, maskable),
        schedules={
            schedule: _schedule_curves(method, schedule, c, scores, maskable, masks.get(schedule))
            for schedule, c in by_schedule.items()
        },
    )


def _row_trajectory(schedule: str, data: _ScheduleCurves, row: int, where: Mapping[int, int]) -> Trajectory:
    """One schedule's :class:`Trajectory` of one ``row`` of the batch, masked positions as indices into the row's
    real tokens (``where``: ``{source position: index among them}``)."""
    flipped = data.flips[row].nonzero().flatten().tolist()
    masked = None
    if data.masks is not None:
        masked = [[where[p] for p in step[row].nonzero().flatten().tolist()] for step in data.masks]
    return Trajectory(
        schedule=schedule,
        steps=data.curves.steps,
        x=data.curves.grid.tolist(),
        masked=masked,
        probability=data.probability[row].tolist(),
        flip_step=flipped[0] if flipped else None,
    )


def _row_method_view(method: str, data: _MethodCurves, row: int, keep: list[int], maskable) -> MethodView:
    """One method's :class:`MethodView` of one ``row`` of the batch over its real tokens (source positions
    ``keep``, padding dropped); scores are ``NaN`` where ``maskable`` (``[B, L]`` bool) is false."""
    where = {pos: i for i, pos in enumerate(keep)}
    return MethodView(
        method=method,
        scores=[float(data.scores[row, p]) if maskable[row, p] else math.nan for p in keep],
        ranks=[data.ranks[row][p] for p in keep],
        trajectories={
            schedule: _row_trajectory(schedule, schedule_data, row, where)
            for schedule, schedule_data in data.schedules.items()
        },
    )


@dataclass
class _BatchCurves:
    """One evaluation's clean ``[B, L]`` batch and curves, on the CPU, that the views of its rows are read from:
    ``maskable`` is ``[B, L]`` bool, ``first`` the ``MaskingCurves`` that give each example's id, label, target and
    clean prediction, ``clean_probability`` the target class's ``[B]`` probability on the clean input."""

    batch: Any
    tokenizer: Any
    special_ids: set[int]
    maskable: Any
    methods: dict[str, _MethodCurves]
    first: Any
    clean_probability: Any


def _batch_curves(curves: Mapping, batch, tokenizer, scores: Mapping, masks: Mapping, segments) -> _BatchCurves:
    """Every method's scores, ranks and curves of one evaluation (the arguments of :func:`views_from_curves`).

    Raises:
        ValueError: if shapes disagree with ``batch``.
    """
    from itermask.core.measures import target_output
    from itermask.core.tokens import maskable_positions

    special_ids = set(int(i) for i in tokenizer.all_special_ids)
    maskable = maskable_positions(batch, special_ids, segments).cpu()
    methods = {
        method: _method_curves(method, by_schedule, scores[method], maskable, masks.get(method) or {})
        for method, by_schedule in curves.items()
    }
    first = next(iter(next(iter(curves.values())).values()))
    clean_probability = target_output(first.clean_logits, first.target, "probability").cpu()
    return _BatchCurves(batch, tokenizer, special_ids, maskable, methods, first, clean_probability)


def _example_view(data: _BatchCurves, row: int, class_names: Sequence[str] | None, reason: str) -> ExampleView:
    """The :class:`ExampleView` of one ``row`` of the batch, padding dropped."""
    batch, first = data.batch, data.first
    keep = batch.attention_mask[row].cpu().bool().nonzero().flatten().tolist()  # real tokens, padding dropped
    ids = batch.input_ids[row, keep].tolist()
    segment_ids = batch.segment_ids if batch.segment_ids is not None else batch.token_type_ids
    segs = [0] * len(keep) if segment_ids is None else segment_ids[row, keep].tolist()
    label = int(first.labels[row])
    return ExampleView(
        example_id=int(first.example_ids[row]),
        tokens=list(data.tokenizer.convert_ids_to_tokens(ids)),
        token_ids=ids,
        segments=[int(x) for x in segs],
        methods={
            method: _row_method_view(method, method_curves, row, keep, data.maskable)
            for method, method_curves in data.methods.items()
        },
        target=int(first.target[row]),
        prediction=int(first.clean_logits[row].argmax()),
        label=None if label < 0 else label,
        clean_probability=float(data.clean_probability[row]),
        class_names=None if class_names is None else list(class_names),
        reason=reason,
        special=[i in data.special_ids for i in ids],
    )


def _to_width(first_step, width: int):
    """``[B, L]`` ``masked_step`` padded with -1 or cut to ``width`` positions (curves joined over batches are
    padded to the longest batch, a re-batched view to its own rows); ``None`` if the cut would drop a masked
    position (not the same rows)."""
    import torch.nn.functional as F

    if first_step.shape[1] > width:
        return None if (first_step[:, width:] >= 0).any() else first_step[:, :width]
    return F.pad(first_step, (0, width - first_step.shape[1]), value=-1)


def views_from_curves(
    curves: Mapping[str, Mapping[str, Any]],
    batch,
    tokenizer,
    scores: Mapping[str, Any],
    masks: Mapping[str, Mapping[str, Any]] | None = None,
    segments: int | Sequence[int] | None = None,
    class_names: Sequence[str] | None = None,
    rows: Sequence[int] | None = None,
    reasons: Mapping[int, str] | None = None,
    max_tokens: int = MAX_TOKENS,
) -> ExampleViews:
    """Views (:class:`ExampleViews`) of the examples of one evaluation, one per row, padding dropped.

    Args:
        curves: ``{method: {schedule: MaskingCurves}}`` (:meth:`IterativeMaskingEvaluator.evaluate` per
            method), every curve over the rows of ``batch`` in its order.
        batch: the clean :class:`~itermask.core.tokens.TokenBatch` ``[B, L]`` the curves were computed on.
        tokenizer: a Hugging Face tokenizer (``convert_ids_to_tokens``, ``all_special_ids``).
        scores: ``{method: [B, L] tensor}`` saliency on the clean input (source positions).
        masks: ``{method: {schedule: [S, B, L] bool}}`` the masked positions at each step. Missing, they are
            read from the curves' ``masked_step``, else recomputed from ``scores`` for a one-shot schedule;
            for another schedule the trajectory shows the curve without positions.
        segments: the maskable segments of the evaluation (see
            :func:`itermask.core.tokens.maskable_positions`), for the ranks and recomputed masks.
        class_names: names of the classes by id.
        rows: which rows of ``batch`` to view (default all).
        reasons: ``{row: why it is shown}``.
        max_tokens: tokens shown per example (:data:`MAX_TOKENS`).

    Curves of word features (their ``word_ids``) are shown by word (:func:`_by_word`).

    Raises:
        ValueError: if ``curves`` or ``scores`` miss a method, or shapes disagree with ``batch``.
    """
    if set(scores) != set(curves):
        raise ValueError(f"scores are for methods {sorted(scores)}, curves for {sorted(curves)}")
    data = _batch_curves(curves, batch, tokenizer, scores, masks or {}, segments)
    shown = range(batch.input_ids.shape[0]) if rows is None else rows
    views = [_example_view(data, row, class_names, (reasons or {}).get(row, "")) for row in shown]
    if data.first.word_ids is not None:
        views = [_by_word(view, row, curves, tokenizer) for view, row in zip(views, shown)]
    return ExampleViews(views, max_tokens)


def _by_word(view: ExampleView, row: int, curves: Mapping, tokenizer) -> ExampleView:
    """``view`` (one per token of ``row``, padding dropped) with one entry per word of word-feature curves: a
    word's pieces joined (``tokenizer.convert_tokens_to_string``), each method's word score and rank as its
    curves record them (the sum of the pieces' scores, the word's rank), masked positions as word indices."""
    from dataclasses import replace

    words = [int(w) for w in _row_values(curves, "word_ids", row)[: len(view.tokens)]]
    starts = [i for i, w in enumerate(words) if i == 0 or w < 0 or w != words[i - 1]]
    first = set(starts)
    unit = list(accumulate(int(i in first) for i in range(len(words))))  # 1-based word of each token
    ends = [*starts[1:], len(words)]
    tokens = [
        view.tokens[s] if words[s] < 0 else tokenizer.convert_tokens_to_string(view.tokens[s:e]).strip()
        for s, e in zip(starts, ends)
    ]
    methods = {}
    for name, method in view.methods.items():
        scores, ranks = _row_values(curves, "scores", row, name), _row_values(curves, "rank", row, name)
        trajectories = {
            schedule: replace(
                t, masked=None if t.masked is None else [sorted({unit[i] - 1 for i in m}) for m in t.masked]
            )
            for schedule, t in method.trajectories.items()
        }
        methods[name] = replace(
            method,
            scores=[float(scores[s]) if ranks[s] > 0 else math.nan for s in starts],
            ranks=[int(ranks[s]) if ranks[s] > 0 else None for s in starts],
            trajectories=trajectories,
        )

    def pick(values: list | None) -> list | None:
        return None if values is None else [values[s] for s in starts]

    return replace(
        view,
        tokens=tokens,
        token_ids=pick(view.token_ids),
        segments=pick(view.segments),
        special=pick(view.special),
        methods=methods,
    )


def _row_values(curves: Mapping, field: str, row: int, method: str | None = None) -> list:
    """The per-token ``field`` of ``row`` of ``method``'s curves (default the first method's), as a list."""
    by_schedule = curves[method] if method is not None else next(iter(curves.values()))
    return getattr(next(iter(by_schedule.values())), field)[row].tolist()
