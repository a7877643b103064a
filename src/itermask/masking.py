"""Masking strategies and masking schedules.

A *strategy* decides what a masked token becomes (``[MASK]``, removed, ...); a *schedule* decides which
tokens are masked at each step (rank once on the clean input, or re-rank on the masked input). Both work
on token ids directly: text is never decoded and re-tokenized.

Conventions (Crothers et al. 2023, arXiv 2308.06795, Sec. 3; DeYoung et al. 2020, arXiv 1911.03429):

* the maskable positions are the non-special, non-padding tokens (:func:`itermask.tokens.maskable_positions`);
* with ``n`` maskable tokens, masking fraction ``f`` masks ``k = floor(f * n + 0.5)`` tokens
  (:func:`masked_counts`), the ``k`` with the highest saliency, ties broken by position (earlier first);
* under the recursive schedule a token once masked stays masked.

Masks are boolean tensors over the positions of the *clean* batch, ``[B, L]`` (or ``[S, B, L]`` for
``S`` steps). A strategy turns a clean batch and such a mask into the model input, and returns where each
of its positions came from, so saliency computed on a masked input (whose length may differ, as with
:class:`Delete`) can be mapped back to clean positions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import Tensor

from itermask.tokens import TokenBatch

__all__ = [
    "MaskedBatch",
    "MaskingStrategy",
    "MaskToken",
    "Delete",
    "MaskingSchedule",
    "OneShot",
    "Recursive",
    "masked_counts",
    "top_k_mask",
    "to_source_positions",
    "SCHEDULES",
]


@dataclass(frozen=True)
class MaskedBatch:
    """The model input for a masked batch.

    Attributes:
        batch: the input to feed the model, ``[B, L']`` (``L' = L`` for every built-in strategy).
        source_positions: ``[B, L']`` long; for each position of ``batch`` the clean position it holds,
            or ``-1`` for padding.
    """

    batch: TokenBatch
    source_positions: Tensor


class MaskingStrategy(ABC):
    """What a masked token becomes. Subclasses implement :meth:`apply`.

    Args:
        tokenizer: a Hugging Face tokenizer; strategies read the ids they need from it
            (``mask_token_id``, ``pad_token_id``) and raise ``ValueError`` if it has none.
    """

    name: str = "strategy"

    def __init__(self, tokenizer) -> None:
        self.pad_token_id = _required_id(tokenizer, "pad_token_id", self)

    @abstractmethod
    def apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        """Mask the positions ``masked`` (``[B, L]`` bool, clean positions) of ``batch`` (``[B, L]``)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _required_id(tokenizer, attribute: str, strategy) -> int:
    value = getattr(tokenizer, attribute, None)
    if value is None:
        raise ValueError(
            f"masking strategy {type(strategy).__name__!r} needs the tokenizer's {attribute}, "
            f"but {type(tokenizer).__name__} has none; choose another masking strategy"
        )
    return int(value)


def _identity_positions(batch: TokenBatch) -> Tensor:
    positions = torch.arange(batch.input_ids.shape[1], device=batch.device).expand_as(batch.input_ids)
    return torch.where(batch.attention_mask.bool(), positions, torch.full_like(positions, -1))


class MaskToken(MaskingStrategy):
    """Replace each masked token by the tokenizer's mask token (``[MASK]``, ``<mask>``).

    Raises:
        ValueError: if the tokenizer has no mask token.
    """

    name = "mask_token"

    def __init__(self, tokenizer) -> None:
        super().__init__(tokenizer)
        self.replacement_id = _required_id(tokenizer, "mask_token_id", self)

    def apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        ids = torch.where(masked, torch.full_like(batch.input_ids, self.replacement_id), batch.input_ids)
        return MaskedBatch(batch.with_ids(ids), _identity_positions(batch))


class Delete(MaskingStrategy):
    """Remove each masked token: the remaining ids move left, the freed tail becomes padding.

    The ids are edited directly (no decode and re-tokenize), so the remaining tokens are exactly the
    clean ones, in order, and the sequence is ``k`` tokens shorter.
    """

    name = "delete"

    def apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        keep = batch.attention_mask.bool() & ~masked
        # stable sort on "dropped" puts kept positions first, in their original order
        order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices
        kept_sorted = torch.gather(keep, 1, order)
        ids = torch.where(kept_sorted, torch.gather(batch.input_ids, 1, order), self.pad_token_id)
        types = None
        if batch.token_type_ids is not None:
            types = torch.where(kept_sorted, torch.gather(batch.token_type_ids, 1, order), 0)
        attention = kept_sorted.to(batch.attention_mask.dtype)
        source = torch.where(kept_sorted, order, torch.full_like(order, -1))
        return MaskedBatch(TokenBatch(ids, attention, types), source)


def to_source_positions(scores: Tensor, masked: MaskedBatch, length: int) -> Tensor:
    """Map per-position scores of a masked input back to clean positions.

    Args:
        scores: ``[B, L']`` scores over the positions of ``masked.batch``.
        masked: the masked batch the scores were computed on.
        length: ``L``, the clean length.

    Returns:
        ``[B, L]`` scores; clean positions absent from the masked input get ``-inf``.
    """
    out = torch.full((scores.shape[0], length + 1), float("-inf"), dtype=scores.dtype, device=scores.device)
    index = torch.where(masked.source_positions >= 0, masked.source_positions, length)
    out.scatter_(1, index, scores)
    return out[:, :length]


def masked_counts(n_maskable: Tensor, fractions: Sequence[float] | Tensor) -> Tensor:
    """How many tokens each masking fraction masks: ``k = floor(f * n + 0.5)``.

    Args:
        n_maskable: ``[B]`` count of maskable tokens per example.
        fractions: ``S`` masking fractions in ``[0, 1]``.

    Returns:
        ``[S, B]`` long counts (0 <= k <= n).

    Raises:
        ValueError: if a fraction lies outside ``[0, 1]``.
    """
    f = torch.as_tensor(fractions, dtype=torch.float64, device=n_maskable.device)
    if ((f < 0) | (f > 1)).any():
        raise ValueError(f"masking fractions must lie in [0, 1], got {f.tolist()}")
    return torch.floor(f[:, None] * n_maskable[None, :].double() + 0.5).long()


def top_k_mask(scores: Tensor, candidates: Tensor, k: Tensor) -> Tensor:
    """The ``k`` candidate positions with the highest score, ties broken by position (earlier first).

    Args:
        scores: ``[B, L]`` saliency (higher = more salient). NaN counts as lowest.
        candidates: ``[B, L]`` bool, positions that may be chosen.
        k: ``[B]`` long, how many to choose per row (clipped to the number of candidates).

    Returns:
        ``[B, L]`` bool mask with ``min(k, candidates.sum(1))`` True entries per row.
    """
    ranked = torch.nan_to_num(scores.double(), nan=-torch.inf).masked_fill(~candidates, -torch.inf)
    order = torch.sort(ranked, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    return candidates & (rank < k[:, None])


SaliencyFn = Callable[[Tensor, Tensor], Tensor]
"""``saliency_fn(masked, rows) -> scores``: saliency on the input with ``masked`` (``[R, L]`` bool, clean
positions) applied, for the examples ``rows`` (``[R]`` long indices); returns ``[R, L]`` scores over clean
positions."""


class MaskingSchedule(ABC):
    """Which tokens are masked at each step. Subclasses implement :meth:`masks`."""

    name: str = "schedule"

    @abstractmethod
    def masks(self, clean_saliency: Tensor, maskable: Tensor, k: Tensor, saliency_fn: SaliencyFn) -> Tensor:
        """Masks for every step.

        Args:
            clean_saliency: ``[B, L]`` saliency on the clean input.
            maskable: ``[B, L]`` bool maskable positions.
            k: ``[S, B]`` tokens to mask at each step (from :func:`masked_counts`).
            saliency_fn: recomputes saliency on a masked input (see :data:`SaliencyFn`).

        Returns:
            ``[S, B, L]`` bool, the masked positions at each step.
        """


class OneShot(MaskingSchedule):
    """Rank once on the clean input; step ``s`` masks the top ``k[s]`` tokens of that ranking."""

    name = "one_shot"

    def masks(self, clean_saliency, maskable, k, saliency_fn=None):
        return torch.stack([top_k_mask(clean_saliency, maskable, k_s) for k_s in k])


class Recursive(MaskingSchedule):
    """Re-rank on the already-masked input at every step; masked tokens stay masked.

    Step ``s`` adds the ``k[s] - k[s-1]`` most salient still-unmasked tokens, with saliency recomputed on
    the input masked at step ``s-1`` (the clean input for the first step, so the first step agrees with
    :class:`OneShot`). Saliency is recomputed only for the examples that gain tokens at that step.

    Raises:
        ValueError: if ``k`` decreases between steps (fractions must be sorted ascending).
    """

    name = "recursive"

    def masks(self, clean_saliency, maskable, k, saliency_fn):
        if (k[1:] < k[:-1]).any():
            raise ValueError("the recursive schedule needs ascending masking fractions/counts")
        state = torch.zeros_like(maskable)
        steps = []
        scores = clean_saliency
        for k_s in k:
            need = (k_s - state.sum(dim=1)).clamp(min=0)
            # rows with nothing masked yet still rank by the clean saliency
            rows = torch.nonzero((need > 0) & state.any(dim=1)).flatten()
            if len(rows):
                scores = scores.clone()
                scores[rows] = saliency_fn(state[rows], rows).to(scores.dtype)
            state = state | top_k_mask(scores, maskable & ~state, need)
            steps.append(state)
        return torch.stack(steps)


SCHEDULES: dict[str, type[MaskingSchedule]] = {"one_shot": OneShot, "recursive": Recursive}
