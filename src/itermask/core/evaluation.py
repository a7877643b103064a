"""The iterative-masking evaluation of one batch: saliency, masks for every step, masked forwards.

:class:`IterativeMaskingEvaluator` (plain PyTorch) predicts on the clean input and picks the class to explain
(:func:`resolve_target`), computes saliency on the clean input with its per-example diagnostics, builds each
schedule's masks of every step (:mod:`itermask.core.schedules`), then runs every masked input (``S x B`` rows
per schedule, and where the schedule has one fixed clean ranking the inputs with only the top-k tokens kept and
those with the k least important tokens masked) through the model
in one :class:`itermask.core.forwards.RowForwards` call, optionally recording the representations
(:mod:`itermask.core.representations`) that :mod:`itermask.ood.statistics` reads. The result is a
:class:`~itermask.core.curves.MaskingCurves` per schedule, which :mod:`itermask.core.metrics` scores.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from typing import Any, cast

import torch
from torch import Tensor

from itermask.core.curves import MaskingCurves
from itermask.core.evaluation_settings import (
    DEFAULT_TOKEN_BUDGET,
    FEATURE_KINDS,
    check_soft_draws,
    check_target_policy,
    segment_list,
)
from itermask.core.features import Features, group_features
from itermask.core.forwards import (
    BACKWARD_OVERHEAD,
    ForwardStats,
    RowForwards,
    RowOutputs,
    forward_overhead_tokens,
    length_chunks,
)
from itermask.core.masking import MaskingStrategy, to_source_positions
from itermask.core.representations import Representations
from itermask.core.saliency import Attribution, SaliencyMethod
from itermask.core.schedules import SCHEDULES, STEP_KINDS, check_schedules, masking_ranks, step_counts, top_k_mask
from itermask.core.soft_masking import check_soft_model, soft_importance, soft_outputs
from itermask.core.tokens import TokenBatch, maskable_positions, row_lengths

__all__ = [
    "IterativeMaskingEvaluator",
    "resolve_target",
    "saliency_scores",
    "saliency_attribution",
    "saliency_by_length",
    "first_masked_step",
]


def resolve_target(policy: str | int, clean_logits: Tensor, labels: Tensor | None) -> Tensor:
    """``[B]`` long: the class to explain for each example under ``policy``: ``"predicted"`` (argmax of the
    ``[B, C]`` ``clean_logits``), ``"gold"`` (the ``[B]`` ``labels``) or a fixed class id.

    Raises:
        ValueError: for an unknown policy, ``"gold"`` without labels, or a class id out of range.
    """
    check_target_policy(policy, clean_logits.shape[-1])
    if policy == "predicted":
        return clean_logits.argmax(dim=-1)
    if policy == "gold":
        if labels is None or (labels < 0).any():
            raise ValueError("target policy 'gold' needs a gold label for every example")
        return labels.long()
    # a class id: check_target_policy rejected any other string
    return torch.full((clean_logits.shape[0],), cast(int, policy), dtype=torch.long, device=clean_logits.device)


def saliency_attribution(
    method: SaliencyMethod, model, batch: TokenBatch, target: Tensor, example_ids: Tensor, sanity: bool = True
) -> Attribution:
    """``method``'s :class:`~itermask.core.saliency.Attribution` of ``batch`` for ``target`` (``[B]``): ``[B, L]``
    scores and their per-example diagnostics (:meth:`SaliencyMethod.explain`, whose zero-score check runs if
    ``sanity``), with gradients enabled for the methods that need them even when called under
    ``torch.no_grad`` or ``torch.inference_mode`` (clones the inputs: inference tensors never reach autograd).

    Raises:
        SaliencyError: see :meth:`SaliencyMethod.explain`.
    """
    if not method.needs_gradients:
        return method.explain(model, batch, target, example_ids, sanity)
    with torch.inference_mode(False), torch.enable_grad():
        batch = batch.map(torch.clone)
        return method.explain(model, batch, target.clone(), example_ids.clone(), sanity)


def saliency_by_length(
    method: SaliencyMethod,
    model,
    batch: TokenBatch,
    target: Tensor,
    example_ids: Tensor,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    sanity: bool = True,
) -> Attribution:
    """:func:`saliency_attribution` of a whole batch as the evaluator computes it. A method that batches its
    own model calls (:attr:`SaliencyMethod.batches_own_calls`: integrated gradients, DeepLift, the perturbation
    methods) gets the whole batch. For the others the rows are split into length chunks of at most
    ``token_budget`` padded tokens (:func:`itermask.core.forwards.length_chunks`, a call weighed as
    :data:`~itermask.core.forwards.BACKWARD_OVERHEAD` forwards), each trimmed to its longest row; padding
    positions score 0 as in one call. The zero-score check (``sanity``) runs once on the whole batch.

    Raises:
        SaliencyError: see :meth:`SaliencyMethod.explain`.
    """
    if method.batches_own_calls:
        return saliency_attribution(method, model, batch, target, example_ids, sanity)
    overhead = BACKWARD_OVERHEAD * forward_overhead_tokens(batch.device)
    chunks = length_chunks(row_lengths(batch), token_budget, overhead)
    parts = [
        (rows, saliency_attribution(method, model, batch.index(rows).trim(), target[rows], example_ids[rows], False))
        for rows in chunks
    ]
    whole = _assemble(parts, batch.input_ids.shape, batch.device)
    if sanity:
        method.check_scores(whole, model)
    return whole


def saliency_scores(
    method: SaliencyMethod, model, batch: TokenBatch, target: Tensor, example_ids: Tensor, sanity: bool = True
) -> Tensor:
    """The ``[B, L]`` scores of :func:`saliency_attribution`."""
    return saliency_attribution(method, model, batch, target, example_ids, sanity).scores


class IterativeMaskingEvaluator:
    """Masks the most salient tokens step by step and records the model's outputs.

    Args:
        fractions: ``S`` masking fractions in ``[0, 1]``, ascending (used when ``steps="fraction"``).
        special_ids: token ids never masked (``tokenizer.all_special_ids``).
        schedules: names from :data:`itermask.core.schedules.SCHEDULES`.
        target: target policy, see :func:`resolve_target`.
        token_budget: padded tokens (rows x padded length) per forward (:class:`~itermask.core.forwards.RowForwards`).
        sufficiency: also run the keep-only-top-k inputs for the schedules where sufficiency is defined.
        steps: ``"fraction"`` (the grid is ``fractions``) or ``"count"`` (the grid is ``counts``, ``S`` token
            counts, ascending: mask ``min(c, n)`` tokens at count ``c``).
        segments: segment(s) whose tokens may be masked and ranked (``0``/``1`` for the first/second text of a
            sentence pair), or ``None`` for all (:func:`itermask.core.tokens.maskable_positions`).
        features: the unit ranked, counted and masked (:mod:`itermask.core.features`): ``"token"`` (a word
            piece) or ``"word"`` (every piece of a word together; the batch needs ``word_ids``): fractions and
            counts are then of words, ``n_maskable`` and ``k`` count words, a word's score sums its pieces'.
        collect_representations: also record the clean and masked inputs' representations in the curves
            (:func:`itermask.core.representations.capture_representations`, Hugging Face classifiers): ``True``
            or ``"all"`` (every field), ``"final"`` (only ``features``, at no extra forward cost).
        least_first: also run the least-important-first inputs (the ``k`` least salient features masked,
            :attr:`MaskingCurves.least_logits`, read by the symmetric relevance gain) for the schedules with one
            fixed clean ranking; a least-first row equals the keep-only row of ``n - k`` whenever that count is
            on the grid, and the row engine then computes it once.
        soft_draws: ``R``, the draws of Zhao & Aletras's soft comprehensiveness and sufficiency inputs per
            example (:mod:`itermask.core.soft_masking`; ``B x (2R + 1)`` embedding rows a batch), recorded in the
            curves of the schedules with a fixed ranking (``one_shot``); ``0`` (the default here; jobs and
            :func:`itermask.evaluate` use ``evaluation.soft_draws``, 5) leaves them out.
        soft_seed: seeds the draws, with each example's id and the draw's number.

    Raises:
        ValueError: for unknown schedules or kinds of steps, an empty, unsorted or repeating grid, count steps
            without counts, a non-positive token budget, an unknown ``collect_representations`` or ``features``,
            a negative or fractional ``soft_draws``.
    """

    def __init__(
        self,
        saliency: SaliencyMethod,
        strategy: MaskingStrategy,
        fractions: Sequence[float] | None,
        special_ids: Iterable[int],
        schedules: Sequence[str] = ("one_shot", "recursive"),
        target: str | int = "predicted",
        sufficiency: bool = True,
        steps: str = "fraction",
        counts: Sequence[int] | None = None,
        segments: int | Sequence[int] | None = None,
        collect_representations: bool | str = False,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        features: str = "token",
        least_first: bool = True,
        soft_draws: int = 0,
        soft_seed: int = 0,
    ) -> None:
        check_schedules(schedules)
        if steps not in STEP_KINDS:
            raise ValueError(f"unknown kind of masking steps {steps!r}: choose one of {STEP_KINDS}")
        values = fractions if steps == "fraction" else counts
        if values is None:
            raise ValueError(f"{steps} steps need the masking {steps}s (evaluation.{steps}s)")
        grid = [float(v) for v in values]
        if not grid or any(b <= a for a, b in zip(grid, grid[1:])):  # a repeated step would count twice in AOPC
            raise ValueError(f"masking {steps}s must be one or more, strictly ascending (no repeats), got {grid}")
        step_counts(torch.zeros(1, dtype=torch.long), grid, steps)  # validates the grid
        check_target_policy(target)
        if token_budget <= 0:
            raise ValueError(f"token_budget must be positive, got {token_budget}")
        if features not in FEATURE_KINDS:
            raise ValueError(f"unknown evaluation.features {features!r}: choose one of {FEATURE_KINDS}")
        self.features = features
        self.saliency = saliency
        self.strategy = strategy
        self.steps = steps
        self.grid = torch.tensor(grid, dtype=torch.float64)
        self.segments = segment_list(segments)
        self.special_ids = sorted(set(int(i) for i in special_ids))
        self.schedules = list(schedules)
        self.target = target
        self.sufficiency = sufficiency
        self.least_first = bool(least_first)
        if collect_representations not in (False, True, "final", "all"):
            raise ValueError(
                f"collect_representations must be False, True, 'final' or 'all', got {collect_representations!r}"
            )
        self.collect_representations = collect_representations
        self.token_budget = int(token_budget)
        #: what the forwards of the last :meth:`evaluate` call ran (rows, distinct rows computed, padding)
        self.forward_stats = ForwardStats()
        self.soft_draws, self.soft_seed = check_soft_draws(soft_draws), int(soft_seed)
        #: what the soft inputs' forwards of the last :meth:`evaluate` call ran (embedding rows, apart)
        self.soft_stats = ForwardStats()

    def maskable(self, batch: TokenBatch) -> Tensor:
        """``[B, L]`` bool maskable positions of ``batch`` (within the chosen segments)."""
        return maskable_positions(batch, self.special_ids, self.segments)

    def feature_groups(self, batch: TokenBatch) -> Features:
        """The :class:`~itermask.core.features.Features` of ``batch`` (:attr:`features`) over :meth:`maskable`.

        Raises:
            ValueError: for word features of a batch without ``word_ids``."""
        return group_features(batch, self.maskable(batch), self.features)

    def _saliency_by_length(
        self, model, batch: TokenBatch, target: Tensor, example_ids: Tensor, sanity: bool = True
    ) -> Attribution:
        """:func:`saliency_by_length` of this evaluator's method and token budget (one call of all the rows: the
        clean input, or every example re-explained at a recursive step)."""
        return saliency_by_length(self.saliency, model, batch, target, example_ids, self.token_budget, sanity)

    def _runner(self, model, collect: bool | str) -> RowForwards:
        """The forward runner of one :meth:`evaluate` call, ``run(rows) -> RowOutputs``; resets
        :attr:`forward_stats`, which it then counts into."""
        runner = RowForwards(model, self.token_budget, representations=collect)
        self.forward_stats = runner.stats
        return runner

    def _masked_outputs(self, model, run, batch: TokenBatch, groups: list[tuple[Tensor, bool]]) -> list[RowOutputs]:
        """Outputs ``[B, S, ...]`` for each group ``(masks, collect)`` of masks ``[S, B, L]`` applied to
        ``batch``: every group's rows in one call of ``run``."""
        inputs = [self.strategy.apply(batch.tile(m.shape[0]), m.flatten(0, 1)).batch for m, _ in groups]
        joined, start, flat = run(TokenBatch.concat(inputs)), 0, []
        for rows in inputs:
            flat.append(joined.index(slice(start, start + len(rows))))
            start += len(rows)
        return [_by_example(out, masks.shape[0]) for out, (masks, _) in zip(flat, groups)]

    def evaluate(
        self,
        model: torch.nn.Module,
        batch: TokenBatch,
        labels: Tensor | None = None,
        example_ids: Tensor | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> dict[str, MaskingCurves]:
        """``{schedule: MaskingCurves}``: every schedule run on ``batch``.

        Args:
            model: a classifier in eval mode (see :mod:`itermask.core.tokens`).
            batch: ``[B, L]`` clean batch; every example needs a maskable token (filter with :meth:`maskable`).
            labels: ``[B]`` gold labels, or ``None``.
            example_ids: ``[B]`` stable ids (default: row index).
            progress: ``progress(stage)`` after each schedule's masks (``stage``: its name) and after the
                masked forwards (``"forwards"``), e.g. to advance a progress bar.

        Raises:
            ValueError: if an example has no maskable feature, for word features without ``word_ids``, or
                with soft draws for a model whose word embeddings cannot be fed (:func:`check_soft_model`).
        """
        if self._soft_on():
            check_soft_model(model)
        size, device = len(batch), batch.device
        example_ids = torch.arange(size, device=device) if example_ids is None else example_ids
        labels = torch.full((size,), -1, dtype=torch.long, device=device) if labels is None else labels.long()
        groups = self.feature_groups(batch)
        n_maskable = groups.maskable.sum(dim=1)
        if (n_maskable == 0).any():
            raise ValueError(f"every example needs at least one maskable {self.features}; filter them out first")
        run = self._runner(model, self.collect_representations)
        clean = run(batch)
        target = resolve_target(self.target, clean.logits, labels)
        k = step_counts(n_maskable, self.grid.to(device), self.steps)
        saliency = self._saliency_by_length(model, batch, target, example_ids)
        masks = self._schedule_masks(model, batch, groups, k, target, example_ids, saliency, progress)
        least = self._least_masks(groups, saliency.scores.detach(), k, n_maskable)
        outputs = self._schedule_outputs(model, run, batch, groups.to_tokens(groups.maskable), masks, least)
        grouped = groups.scores(saliency.scores.detach(), self.saliency.word_score)
        soft = self._soft_fields(model, batch, groups, grouped, example_ids) if self._soft_on() else {}
        if progress is not None:
            progress("forwards")
        shared = {  # the fields every schedule's curves share
            "example_ids": example_ids,
            "n_maskable": n_maskable,
            "k": k.T.contiguous(),
            "target": target,
            "labels": labels,
            "clean_logits": clean.logits,
            "saliency_zero": saliency.zero,
            "completeness_gap": saliency.completeness_gap,
            "output_difference": saliency.output_difference,
            **_token_fields(batch, grouped, groups),
        }
        return self._curves(masks, outputs, clean, shared, soft)

    def _soft_on(self) -> bool:
        """Whether :meth:`evaluate` runs the soft inputs: draws asked for and a schedule with a fixed ranking."""
        return self.soft_draws > 0 and any(SCHEDULES[name].sufficiency for name in self.schedules)

    def _soft_fields(self, model, batch: TokenBatch, groups: Features, grouped: Tensor, example_ids: Tensor) -> dict:
        """The soft fields of :class:`MaskingCurves` of ``batch`` from its ``[B, W]`` ``grouped`` clean saliency
        (:func:`~itermask.core.soft_masking.soft_outputs`: every piece of a word gets the word's importance)."""
        importance, _ = soft_importance(grouped, groups.maskable)
        self.soft_stats = ForwardStats()
        out = soft_outputs(
            model,
            batch,
            groups.to_tokens(groups.maskable),
            groups.broadcast(importance, 0.0),
            example_ids,
            self.soft_draws,
            self.soft_seed,
            self.token_budget,
            self.soft_stats,
            features=bool(self.collect_representations),
        )
        return {
            "soft_logits": out.comprehensiveness,
            "soft_keep_logits": out.sufficiency,
            "soft_floor_logits": out.floor,
            "soft_features": out.comprehensiveness_features,
            "soft_keep_features": out.sufficiency_features,
        }

    def _least_masks(self, groups: Features, scores: Tensor, k: Tensor, n_maskable: Tensor) -> Tensor | None:
        """``[S, B, L]`` token masks of the least-important-first direction: at step ``s`` the ``k[s]`` least
        salient maskable features of the clean ranking (``scores``: ``[B, L]`` token saliency, grouped into
        ``groups``' features; ``k``: ``[S, B]``, ``n_maskable``: ``[B]`` features), built as the complement of
        the top ``n - k[s]`` (:func:`~itermask.core.schedules.top_k_mask`, so ties break as in the other
        directions and a row equals the keep-only row of ``n - k[s]``); ``None`` when :attr:`least_first` is off
        or no schedule has one fixed clean ranking."""
        if not self.least_first or not any(SCHEDULES[name].sufficiency for name in self.schedules):
            return None
        grouped = groups.scores(scores, self.saliency.word_score)
        top = torch.stack([top_k_mask(grouped, groups.maskable, n_maskable - k_s) for k_s in k])
        return groups.to_tokens(groups.maskable & ~top)

    def _schedule_outputs(
        self,
        model,
        run: RowForwards,
        batch: TokenBatch,
        maskable: Tensor,
        masks: dict[str, Tensor],
        least: Tensor | None = None,
    ) -> dict[str, dict[str, RowOutputs]]:
        """``{schedule: {direction: outputs}}``: the outputs ``[B, S, ...]`` of ``batch`` ``[B, L]`` under each
        schedule's ``masks`` ``[S, B, L]`` (``"masked"``, the comprehensiveness direction) and, where the
        schedule has one fixed clean ranking, under their complements within the ``maskable`` ``[B, L]``
        positions (``"keep"``, when :attr:`sufficiency` is on) and under the ``least`` masks ``[S, B, L]``
        (``"least"``, when given, :meth:`_least_masks`); all in one :meth:`_masked_outputs` call through ``run``."""
        plan = []  # (schedule, direction, masks, collect), each schedule's keep and least rows before its masked
        for name, schedule_masks in masks.items():
            fixed = SCHEDULES[name].sufficiency
            if fixed and self.sufficiency:
                plan.append((name, "keep", maskable & ~schedule_masks, False))
            if fixed and least is not None:
                plan.append((name, "least", least, False))
            plan.append((name, "masked", schedule_masks, self.collect_representations))
        outputs = self._masked_outputs(model, run, batch, [(m, collect) for _, _, m, collect in plan])
        result: dict[str, dict[str, RowOutputs]] = {name: {} for name in masks}
        for (name, direction, _, _), out in zip(plan, outputs):
            result[name][direction] = out
        return result

    def _curves(
        self,
        masks: dict[str, Tensor],
        outputs: dict[str, dict[str, RowOutputs]],
        clean,
        shared: dict,
        soft: dict,
    ) -> dict[str, MaskingCurves]:
        """``{schedule: MaskingCurves}`` of one batch (see :meth:`evaluate`) from its ``masks`` (``[S, B, L]`` per
        schedule), ``outputs`` (``{direction: [B, S, ...]}`` per schedule, :meth:`_schedule_outputs`), the
        ``clean`` outputs, the ``shared`` fields of every schedule's curves and the ``soft`` fields of those with
        a fixed ranking."""
        collect = self.collect_representations
        results = {}
        for name, directions in outputs.items():
            masked, keep, least = directions["masked"], directions.get("keep"), directions.get("least")
            reps = masked.representations
            results[name] = MaskingCurves(
                schedule=name,
                steps=self.steps,
                grid=self.grid,
                logits=masked.logits,
                keep_logits=None if keep is None else keep.logits,
                least_logits=None if least is None else least.logits,
                masked_step=first_masked_step(masks[name]),
                **shared,
                **(soft if SCHEDULES[name].sufficiency else {}),
                **(
                    {}
                    if reps is None or clean.representations is None or not collect
                    else _representation_fields(clean.representations, reps)
                ),
            )
        return results

    def _schedule_masks(
        self,
        model,
        batch: TokenBatch,
        groups: Features,
        k: Tensor,
        target: Tensor,
        example_ids: Tensor,
        clean: Attribution,
        progress: Callable[[str], None] | None = None,
    ) -> dict[str, Tensor]:
        """``{schedule: token masks [S, B, L]}`` from the ``clean`` input's saliency, the schedules ranking the
        ``groups``' features (``k``: ``[S, B]`` features; the recursive schedule recomputes token saliency on
        the masked input at each step, see :meth:`_saliency_by_length`, and groups it);
        ``progress(schedule)`` after each schedule (see :meth:`evaluate`)."""
        length = batch.input_ids.shape[1]

        def saliency_fn(state: Tensor, rows: Tensor) -> Tensor:
            of_rows = groups.select(rows)
            masked = self.strategy.apply(batch.index(rows), of_rows.to_tokens(state))
            # no zero-score check: a masked input may legitimately lose every gradient (the clean one was checked)
            scores = self._saliency_by_length(model, masked.batch, target[rows], example_ids[rows], sanity=False).scores
            return of_rows.scores(to_source_positions(scores, masked, length), self.saliency.word_score)

        masks = {}
        for name in self.schedules:
            grouped = groups.scores(clean.scores, self.saliency.word_score)
            ranked = SCHEDULES[name]().masks(grouped, groups.maskable, k, saliency_fn)
            masks[name] = groups.to_tokens(ranked)
            if progress is not None:
                progress(name)
        return masks


def _assemble(parts: list[tuple[Tensor, Attribution]], shape: torch.Size, device) -> Attribution:
    """One batch's :class:`Attribution` (scores ``shape`` ``[B, L]``) from those of its row chunks
    ``(rows, attribution)``, each trimmed to its own longest row (the rest of a row scores 0)."""
    scores = torch.zeros(shape, device=device)
    zero = torch.zeros(shape[0], dtype=torch.bool, device=device)
    first = parts[0][1] if parts else None
    extra = {
        name: torch.zeros(shape[0], dtype=torch.float64, device=device)
        for name in ("completeness_gap", "output_difference")
        if first is not None and getattr(first, name) is not None
    }
    for rows, part in parts:
        scores[rows, : part.scores.shape[1]] = part.scores
        zero[rows] = part.zero
        for name, values in extra.items():
            values[rows] = getattr(part, name)
    return Attribution(scores, zero, extra.get("completeness_gap"), extra.get("output_difference"))


def first_masked_step(masks: Tensor) -> Tensor:
    """``[B, L]`` int16: the index of the first step whose mask holds each position, ``-1`` where none does.

    Args:
        masks: ``[S, B, L]`` bool masked positions at each step (a schedule's masks; masked positions stay
            masked, so the positions masked at step ``s`` are those with a first step ``<= s``).
    """
    if masks.shape[0] == 0:
        return torch.full(masks.shape[1:], -1, dtype=torch.int16, device=masks.device)
    first = masks.to(torch.int8).argmax(dim=0)  # the first True along the steps (argmax returns the first)
    return first.masked_fill(~masks.any(dim=0), -1).to(torch.int16)


def _token_fields(batch: TokenBatch, grouped: Tensor, groups: Features) -> dict[str, Tensor | None]:
    """The clean input's per-token fields of :class:`MaskingCurves` (``token_ids``, ``token_segments``,
    ``scores``, ``rank``, ``word_ids``; see there) from ``batch`` ``[B, L]``, its feature ``groups`` and their
    ``[B, W]`` saliency ``grouped`` (a word's score and rank are given to each of its pieces)."""
    real = batch.attention_mask.bool()
    segments = batch.segment_ids if batch.segment_ids is not None else batch.token_type_ids
    if segments is None:
        segments = torch.zeros_like(batch.input_ids)
    rank = groups.broadcast(masking_ranks(grouped, groups.maskable), -1)
    return {
        "token_ids": batch.input_ids.masked_fill(~real, -1),
        "token_segments": segments.long().masked_fill(~real, -1),
        "scores": groups.broadcast(grouped, math.nan).float().masked_fill(~real, math.nan),
        "rank": rank.to(torch.int16),
        "word_ids": None if groups.columns is None else groups.columns,
    }


def _by_example(outputs: RowOutputs, steps: int) -> RowOutputs:
    """Step-major rows ``[S * B, ...]`` -> ``[B, S, ...]``."""

    def fold(t: Tensor) -> Tensor:
        return t.reshape(steps, t.shape[0] // steps, *t.shape[1:]).transpose(0, 1)

    reps = None if outputs.representations is None else outputs.representations.map(fold)
    return RowOutputs(fold(outputs.logits), reps)


def _representation_fields(clean: Representations, masked: Representations) -> dict[str, Any]:
    names = [f.name for f in fields(Representations)]
    return {f"clean_{name}": getattr(clean, name) for name in names} | {name: getattr(masked, name) for name in names}
