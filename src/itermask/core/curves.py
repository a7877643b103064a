"""The result of the iterative-masking evaluation, :class:`MaskingCurves`: the model outputs along one schedule's
masking curve for a batch of examples, which :mod:`itermask.core.metrics` scores.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from itermask.core.representations import Representations

__all__ = ["MaskingCurves"]


@dataclass
class MaskingCurves:
    """Model outputs along a masking curve for ``B`` examples and ``S`` steps.

    Attributes:
        schedule: ``"one_shot"`` or ``"recursive"``.
        steps: ``"fraction"`` (``grid`` holds masking fractions, shares of the maskable tokens) or ``"count"``
            (numbers of tokens, capped per example at its ``n_maskable``).
        grid: ``[S]`` float64, the x-axis: the masking fractions or token counts of the steps.
        example_ids, n_maskable, target, labels: ``[B]`` long stable example ids, number of maskable tokens,
            class whose probability the curve follows, gold labels (``-1`` where unknown).
        k: ``[B, S]`` long number of tokens masked at each step.
        clean_logits: ``[B, C]`` logits on the clean input.
        logits: ``[B, S, C]`` logits with the top-k tokens masked (comprehensiveness direction).
        keep_logits: ``[B, S, C]`` logits with only the top-k tokens kept, every other maskable token
            masked (sufficiency direction); ``None`` for schedules where it is undefined (``recursive``;
            see :attr:`itermask.core.schedules.MaskingSchedule.sufficiency`).
        clean_features, features: ``[B, D]`` / ``[B, S, D]`` input of the final linear layer for the clean
            and the masked (comprehensiveness direction) inputs; ``None`` unless representations were
            collected (see :mod:`itermask.core.representations`).
        clean_layer_mean, layer_mean, clean_layer_max, layer_max: ``[B, L+1, H]`` / ``[B, S, L+1, H]`` hidden
            states mean- / max-pooled over attended tokens; ``None`` unless collected.
        saliency_zero, completeness_gap, output_difference: ``[B]`` the clean input's saliency diagnostics
            (:class:`itermask.core.saliency.Attribution`: ``zero`` and the other two).
        token_ids: ``[B, L]`` long token ids of the clean input, ``-1`` at padding (``L``: the longest row
            of the batch; rows of concatenated batches are padded to the longest row of all).
        token_segments: ``[B, L]`` long segment of each token (``0``/``1``: first/second text of a sentence
            pair, ``-1``: special tokens and padding; all ``0`` when the batch records no segments).
        scores: ``[B, L]`` float32 saliency of the clean input (the method's units), ``NaN`` at padding.
        rank: ``[B, L]`` int16 masking rank of each maskable position on the clean input (1 = masked
            first; the one-shot order, :func:`~itermask.core.schedules.masking_ranks`), ``-1`` elsewhere.
        word_ids: ``[B, L]`` long word of each token under word features (``evaluation.features=word``), ``-1``
            for special tokens and padding; ``None`` under token features. With word features ``n_maskable``
            and ``k`` count words, and ``scores`` and ``rank`` hold each token's word's summed score and rank.
        masked_step: ``[B, L]`` int16 index of the step at which the schedule first masked each position,
            ``-1`` for positions never masked (and padding): with ``k`` it gives the positions masked at
            each step, for the recursive schedule the only record of its re-ranked order.
        least_logits: ``[B, S, C]`` logits with the ``k`` LEAST important maskable features masked at each step
            (least-important-first direction, LIF / LeRF: the complement, within the maskable features, of the
            top ``n - k`` of the clean ranking, ties broken as in the other directions), same grid and ``k`` as
            ``logits``; read by the symmetric relevance gain (:func:`~itermask.core.measures.symmetric_relevance_gain`).
            ``None`` for schedules without one fixed clean ranking (``recursive``: the ranking changes at every
            step, so there is no order to reverse) and when the evaluator's ``least_first`` is off.
        soft_logits, soft_keep_logits: ``[B, R, C]`` logits of ``R`` soft comprehensiveness / soft sufficiency
            inputs (Zhao & Aletras 2023, :mod:`itermask.core.soft_masking`: each embedding dimension of a
            maskable token dropped with probability ``a`` / ``1 - a``, its min-max normalised importance);
            ``None`` when ``evaluation.soft_draws=0`` and for the ``recursive`` schedule (undefined there: the
            ranking changes at every step, so there is no one importance per token).
        soft_floor_logits: ``[B, C]`` logits of the all-masked input (every maskable token's word embedding
            zeroed) that normalises both; ``None`` with them.
        soft_features, soft_keep_features: ``[B, R, H]`` float32 input of the classifier's final linear layer for
            the soft comprehensiveness / sufficiency inputs (the ``features`` of those rows, for their OOD AUROC);
            ``None`` without soft inputs or when representations are not collected.
    """

    schedule: str
    steps: str
    grid: Tensor
    example_ids: Tensor
    n_maskable: Tensor
    k: Tensor
    target: Tensor
    labels: Tensor
    clean_logits: Tensor
    logits: Tensor
    keep_logits: Tensor | None = None
    clean_features: Tensor | None = None
    features: Tensor | None = None
    clean_layer_mean: Tensor | None = None
    layer_mean: Tensor | None = None
    clean_layer_max: Tensor | None = None
    layer_max: Tensor | None = None
    saliency_zero: Tensor | None = None
    completeness_gap: Tensor | None = None
    output_difference: Tensor | None = None
    token_ids: Tensor | None = None
    token_segments: Tensor | None = None
    scores: Tensor | None = None
    rank: Tensor | None = None
    masked_step: Tensor | None = None
    word_ids: Tensor | None = None
    least_logits: Tensor | None = None
    soft_logits: Tensor | None = None
    soft_keep_logits: Tensor | None = None
    soft_floor_logits: Tensor | None = None
    soft_features: Tensor | None = None
    soft_keep_features: Tensor | None = None

    def representations(self) -> tuple[Representations, Representations] | None:
        """``(clean, masked)`` representations, ``clean`` with ``[B, ...]`` and ``masked`` with
        ``[B, S, ...]`` leading dimensions; ``None`` if they were not collected."""
        if self.features is None:
            return None
        assert self.clean_features is not None  # collected together with features
        clean = Representations(self.clean_features, self.clean_layer_mean, self.clean_layer_max)
        return clean, Representations(self.features, self.layer_mean, self.layer_max)

    #: fields shared by every example (not indexed by example)
    SHARED = ("schedule", "steps", "grid")
    #: ``[B, L]`` per-token fields and the value that pads them to a longer ``L`` (see :meth:`concat`)
    TOKEN_FIELDS = {
        "token_ids": -1,
        "token_segments": -1,
        "scores": math.nan,
        "rank": -1,
        "masked_step": -1,
        "word_ids": -1,
    }

    def __len__(self) -> int:
        return self.example_ids.shape[0]

    @property
    def fractions(self) -> Tensor:
        """``[S]`` the masking fractions of a fraction-step curve.

        Raises:
            ValueError: for a count-step curve (use ``grid``, or ``k / n_maskable`` per example).
        """
        if self.steps != "fraction":
            raise ValueError(f"these curves have {self.steps} steps, not masking fractions; read curves.grid")
        return self.grid

    @property
    def masked_fraction(self) -> Tensor:
        """``[B, S]`` float64: the share of each example's maskable tokens masked at each step, ``k / n``."""
        return self.k.double() / self.n_maskable.double()[:, None]

    def select(self, rows: Tensor) -> MaskingCurves:
        """The examples ``rows`` (index tensor or boolean mask of shape ``[B]``)."""
        selected: dict[str, Any] = {
            f.name: (v if f.name in self.SHARED or v is None else v[rows])
            for f in fields(MaskingCurves)
            for v in [getattr(self, f.name)]
        }
        return MaskingCurves(**selected)

    @staticmethod
    def concat(parts: Iterable[MaskingCurves]) -> MaskingCurves:
        """Join curves of the same schedule and steps along the example dimension.

        Raises:
            ValueError: if there are no parts, or they differ in schedule or steps.
        """
        parts = list(parts)
        if not parts:
            raise ValueError("no masking curves to concatenate (no example was evaluated)")
        first = parts[0]
        for part in parts[1:]:
            if (part.schedule, part.steps) != (first.schedule, first.steps) or not torch.equal(part.grid, first.grid):
                raise ValueError("cannot concatenate masking curves of different schedules or steps")
        joined: dict[str, Any] = {}
        for field in fields(MaskingCurves):
            values = [getattr(p, field.name) for p in parts]
            if field.name in MaskingCurves.SHARED:
                joined[field.name] = values[0]
            elif any(v is None for v in values):
                joined[field.name] = None
            elif field.name in MaskingCurves.TOKEN_FIELDS:  # batches differ in padded length
                width, pad = max(v.shape[1] for v in values), MaskingCurves.TOKEN_FIELDS[field.name]
                joined[field.name] = torch.cat([F.pad(v, (0, width - v.shape[1]), value=pad) for v in values])
            else:
                joined[field.name] = torch.cat(values)
        return MaskingCurves(**joined)

    def to(self, device) -> MaskingCurves:
        moved: dict[str, Any] = {
            f.name: (v.to(device) if isinstance(v := getattr(self, f.name), Tensor) else v)
            for f in fields(MaskingCurves)
        }
        return MaskingCurves(**moved)
