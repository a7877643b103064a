"""Attention saliency methods (``attention``, ``attention_rollout``): scores read from the model's attention
weights (see :func:`itermask.core.saliency.prepare_for_saliency`)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

import torch
from torch import Tensor

from itermask.core.saliency.base import SaliencyMethod

__all__ = ["AttentionSaliency", "AttentionRolloutSaliency", "attention_rollout"]


def attention_rollout(attentions: Sequence[Tensor]) -> Tensor:
    """``[B, L, L]`` float attention rollout (Abnar & Zuidema 2020, arXiv 2005.00928, Sec. 3, Eq. 1) of
    ``attentions``, ``N >= 1`` tensors ``[B, H, L, L]`` (layer 1 first; rows summing to 1).

    Per layer the heads are averaged, the identity is added for the residual connection and the rows are
    renormalised, ``A_l = norm(mean_h W_l + I)``; the layers are then multiplied, later layers on the
    left: ``R = A_N ... A_2 A_1``. ``R[b, i, j]`` is how much of token ``j`` flows into token ``i`` at the top.

    Raises:
        ValueError: for no layers or tensors not ``[B, H, L, L]`` of one shape.
    """
    attentions = list(attentions)
    if not attentions:
        raise ValueError("attention rollout needs at least one layer of attention weights")
    shape = attentions[0].shape
    if len(shape) != 4 or shape[-1] != shape[-2] or any(a.shape != shape for a in attentions):
        raise ValueError(
            f"attention weights must all be [B, H, L, L] of one shape, got {[tuple(a.shape) for a in attentions]}"
        )
    identity = torch.eye(shape[-1], dtype=torch.float32, device=attentions[0].device)
    rollout = None
    for layer in attentions:
        augmented = layer.float().mean(dim=1) + identity
        augmented = augmented / augmented.sum(dim=-1, keepdim=True)
        rollout = augmented if rollout is None else augmented @ rollout
    assert rollout is not None  # attentions is non-empty (its first shape was read above)
    return rollout


class _AttentionSaliency(SaliencyMethod):
    """Scores read from the attention weights of the model, row of the classification token (position
    0, ``[CLS]`` / ``<s>``); non-negative and class-independent (``target`` is ignored). The model must
    return attention weights: see :func:`prepare_for_saliency`."""

    needs_gradients = False
    needs_embeddings = False
    needs_attentions = True

    def __init__(self) -> None:
        super().__init__(output="probability", absolute=False)

    def describe(self) -> dict:
        return {"name": self.name, "row": 0}

    def _scores(self, model, batch, target, example_ids):
        return self._scores_from(self._attentions(model, batch))[:, 0, :]

    @abstractmethod
    def _scores_from(self, attentions: tuple[Tensor, ...]) -> Tensor:
        """``[B, L, L]`` token-to-token scores."""


class AttentionSaliency(_AttentionSaliency):
    """Raw attention: last layer, mean over heads, the classification token's row (e.g. Jain & Wallace
    2019, arXiv 1902.10186, who question it as an explanation)."""

    name = "attention"

    def _scores_from(self, attentions):
        return attentions[-1].float().mean(dim=1)


class AttentionRolloutSaliency(_AttentionSaliency):
    """Attention rollout (:func:`attention_rollout`), the classification token's row."""

    name = "attention_rollout"

    def _scores_from(self, attentions):
        return attention_rollout(attentions)
