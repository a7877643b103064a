"""Views built from an evaluation in memory: :func:`views_from_curves` reads the evaluator's
:class:`~itermask.core.evaluation.MaskingCurves`, the clean batch, the saliency scores and the masks;
:func:`masking_ranks` gives the clean-input masking order the views show.

Needs torch (imported inside the functions, so that importing this module does not).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from itermask.views.page import MAX_TOKENS, ExampleView, ExampleViews, MethodView, Trajectory

__all__ = ["masking_ranks", "views_from_curves"]


def masking_ranks(scores, maskable) -> list[list[int | None]]:
    """Masking ranks on the clean input, the order :func:`itermask.core.schedules.top_k_mask` masks in:
    descending score, NaN lowest, ties by position (earlier first); 1 = masked first.

    Args:
        scores: ``[B, L]`` saliency.
        maskable: ``[B, L]`` bool.

    Returns:
        ``B`` lists of ``L`` ranks, ``None`` at positions that are not maskable.
    """
    import torch

    ranked = torch.nan_to_num(scores.double(), nan=-torch.inf).masked_fill(~maskable, -torch.inf)
    order = torch.sort(ranked, dim=1, descending=True, stable=True).indices
    out = []
    for positions, ok in zip(order.tolist(), maskable.tolist()):
        # counted over the maskable positions only, so that a NaN score ranks after every scored one
        ranks: list[int | None] = [None] * len(ok)
        for rank, position in enumerate((p for p in positions if ok[p]), start=1):
            ranks[position] = rank
        out.append(ranks)
    return out


@dataclass
class _ScheduleCurves:
    """One schedule's curves of one method, on the CPU, for all rows of the batch.

    Attributes:
        curves: the schedule's :class:`~itermask.core.evaluation.MaskingCurves`.
        masks: ``[S, B, L]`` bool masked positions at each step, ``None`` where not recorded.
        probability: ``[B, S]`` probabilities of the target class after each step.
        flips: ``[B, S]`` bool, whether each step's prediction differs from the clean prediction.
    """

    curves: Any
    masks: Any
    probability: Any
    flips: Any


@dataclass
class _MethodCurves:
    """One method's scores, clean-input ranks and per-schedule curves, for all rows of the batch.

    Attributes:
        scores: ``[B, L]`` saliency on the CPU.
        ranks: ``B`` lists of ``L`` masking ranks (see :func:`masking_ranks`).
        schedules: ``{schedule: _ScheduleCurves}``.
    """

    scores: Any
    ranks: list[list[int | None]]
    schedules: dict[str, _ScheduleCurves]


def _schedule_curves(method: str, schedule: str, curves, scores, maskable, masks) -> _ScheduleCurves:
    """One schedule's probabilities, flips and masks of one method.

    Args:
        method: the method's name (for error messages).
        schedule: the schedule's name.
        curves: the schedule's ``MaskingCurves`` over the ``B`` rows of the batch.
        scores: ``[B, L]`` saliency of the method on the CPU.
        maskable: ``[B, L]`` bool maskable positions on the CPU.
        masks: ``[S, B, L]`` bool recorded masks, or ``None``: read from the curves' ``masked_step`` where
            recorded, else recomputed from ``scores`` for ``"one_shot"``, left ``None`` for any other
            schedule.

    Returns:
        The schedule's :class:`_ScheduleCurves`.

    Raises:
        ValueError: if ``curves`` do not have one example per row of the batch.
    """
    import torch

    from itermask.core.measures import decision_flips, target_output
    from itermask.core.schedules import SCHEDULES

    size = scores.shape[0]
    if len(curves) != size:
        raise ValueError(f"curves {method}/{schedule} have {len(curves)} examples, the batch {size}")
    if masks is None and curves.masked_step is not None and curves.masked_step.shape == scores.shape:
        # the evaluator records the step that first masks each position (MaskingCurves.masked_step)
        first = curves.masked_step.cpu().long()
        masks = torch.stack([(first >= 0) & (first <= s) for s in range(curves.k.shape[1])])
    if masks is None and schedule == "one_shot":
        # the one-shot masks are the top k of the clean ranking at each step
        masks = SCHEDULES["one_shot"]().masks(scores, maskable, curves.k.T.cpu(), None)
    return _ScheduleCurves(
        curves=curves,
        masks=None if masks is None else masks.cpu(),
        probability=target_output(curves.logits, curves.target, "probability").cpu(),
        flips=decision_flips(curves).cpu(),
    )


def _method_curves(
    method: str,
    by_schedule: Mapping[str, Any],
    scores,
    maskable,
    masks: Mapping[str, Any],
) -> _MethodCurves:
    """Reads one method's scores and ranks, and its curves per schedule.

    Args:
        method: the method's name.
        by_schedule: ``{schedule: MaskingCurves}`` of the method.
        scores: ``[B, L]`` saliency of the method (any device).
        maskable: ``[B, L]`` bool maskable positions on the CPU.
        masks: ``{schedule: [S, B, L] bool}`` the recorded masks of the method.

    Returns:
        The method's :class:`_MethodCurves`.

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
    """One schedule's :class:`Trajectory` of one row.

    Args:
        schedule: the schedule's name.
        data: the schedule's curves.
        row: the row of the batch.
        where: ``{source position: index among the row's real tokens}``.

    Returns:
        The row's trajectory, masked positions as indices into the row's real tokens.
    """
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
    """One method's :class:`MethodView` of one row.

    Args:
        method: the method's name.
        data: the method's curves.
        row: the row of the batch.
        keep: source positions of the row's real tokens (padding dropped).
        maskable: ``[B, L]`` bool maskable positions on the CPU.

    Returns:
        The row's view of the method; scores are ``NaN`` at positions that are not maskable.
    """
    where = {pos: i for i, pos in enumerate(keep)}
    s = data.scores[row]
    return MethodView(
        method=method,
        scores=[float(s[p]) if maskable[row, p] else math.nan for p in keep],
        ranks=[data.ranks[row][p] for p in keep],
        trajectories={
            schedule: _row_trajectory(schedule, schedule_data, row, where)
            for schedule, schedule_data in data.schedules.items()
        },
    )


@dataclass
class _BatchCurves:
    """One evaluation's batch and curves, on the CPU, that the views of its rows are read from.

    Attributes:
        batch: the clean ``TokenBatch`` ``[B, L]``.
        tokenizer: a Hugging Face tokenizer (``convert_ids_to_tokens``).
        special_ids: the tokenizer's special token ids.
        maskable: ``[B, L]`` bool maskable positions.
        methods: ``{method: _MethodCurves}``.
        first: the ``MaskingCurves`` that give each example's id, label, target and clean prediction.
        clean_probability: ``[B]`` the target class's probability on the clean input.
    """

    batch: Any
    tokenizer: Any
    special_ids: set[int]
    maskable: Any
    methods: dict[str, _MethodCurves]
    first: Any
    clean_probability: Any


def _batch_curves(
    curves: Mapping[str, Mapping[str, Any]],
    batch,
    tokenizer,
    scores: Mapping[str, Any],
    masks: Mapping[str, Mapping[str, Any]],
    segments: int | Sequence[int] | None,
) -> _BatchCurves:
    """Reads every method's scores, ranks and curves of one evaluation (see :func:`views_from_curves`).

    Args:
        curves: ``{method: {schedule: MaskingCurves}}``, non-empty.
        batch: the clean ``TokenBatch`` ``[B, L]``.
        tokenizer: a Hugging Face tokenizer (``all_special_ids``).
        scores: ``{method: [B, L] tensor}`` saliency on the clean input, one per method of ``curves``.
        masks: ``{method: {schedule: [S, B, L] bool}}`` the recorded masks.
        segments: the maskable segments of the evaluation.

    Returns:
        The evaluation's :class:`_BatchCurves`.

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
    # the first method's first schedule gives each example's id, label, target and clean prediction
    first = next(iter(next(iter(curves.values())).values()))
    clean_probability = target_output(first.clean_logits, first.target, "probability").cpu()
    return _BatchCurves(batch, tokenizer, special_ids, maskable, methods, first, clean_probability)


def _example_view(data: _BatchCurves, row: int, class_names: Sequence[str] | None, reason: str) -> ExampleView:
    """The :class:`ExampleView` of one row of the batch.

    Args:
        data: the evaluation's batch and curves.
        row: the row of the batch.
        class_names: names of the classes by id.
        reason: why the example is shown.

    Returns:
        The row's view, padding dropped.
    """
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
    """Views of the examples of one evaluation.

    Args:
        curves: ``{method: {schedule: MaskingCurves}}`` (:meth:`IterativeMaskingEvaluator.evaluate` per
            method), every curve over the rows of ``batch`` in its order.
        batch: the clean :class:`~itermask.core.tokens.TokenBatch` ``[B, L]`` the curves were computed on.
        tokenizer: a Hugging Face tokenizer (``convert_ids_to_tokens``, ``all_special_ids``).
        scores: ``{method: [B, L] tensor}`` saliency on the clean input (source positions).
        masks: ``{method: {schedule: [S, B, L] bool}}`` the masked positions at each step. Missing, they are
            read from the curves' ``masked_step`` (recorded by the evaluator); curves without it: for a
            one-shot schedule they are recomputed from ``scores`` (the one-shot masks are the top ``k`` of
            the clean ranking), for another schedule (recursive, which re-ranks on the masked input) the
            trajectory shows the curve without positions.
        segments: the maskable segments of the evaluation (see
            :func:`itermask.core.tokens.maskable_positions`), for the ranks and recomputed masks.
        class_names: names of the classes by id.
        rows: which rows of ``batch`` to view (default all).
        reasons: ``{row: why it is shown}``.
        max_tokens: tokens shown per example (:data:`MAX_TOKENS`).

    Returns:
        :class:`ExampleViews`, one view per row, padding dropped.

    Raises:
        ValueError: if ``curves`` or ``scores`` miss a method, or shapes disagree with ``batch``.
    """
    if set(scores) != set(curves):
        raise ValueError(f"scores are for methods {sorted(scores)}, curves for {sorted(curves)}")
    data = _batch_curves(curves, batch, tokenizer, scores, masks or {}, segments)
    shown = range(batch.input_ids.shape[0]) if rows is None else rows
    views = [_example_view(data, row, class_names, (reasons or {}).get(row, "")) for row in shown]
    return ExampleViews(views, max_tokens)
