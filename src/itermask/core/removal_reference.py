"""A token-removal reference for masking strategies: how close does a model's output on an input masked by a
strategy stay to its output on the same input with the masked tokens removed?

The idea is the R-OMS ("reference out-of-model-scope") score of Blücher, Vielhaben & Strodthoff, "Decoupling
Pixel Flipping and Occlusion Strategy for Consistent XAI Benchmarks", TMLR 2024, arXiv 2401.06654, Sec. 3: an
occlusion strategy is reliable where the model's class probabilities on the occluded input agree with those of a
reference that never sees the occluded features (for images, a ViT whose occluded patch tokens are dropped).
Transferred to text as the authors' code computes it (``bluecher31/pixel-flipping``, ``scripts/plot_ood.py``,
``calculate_ood_score(which="correlation_baseline")``: the cosine of softmax predictions against the ``internal``,
token-dropping imputer's, per sample and occlusion fraction): for one ranking and masking step, the cosine

    cos(p_strategy, p_reference) = <p_s, p_r> / (|p_s| |p_r|),

of the softmax vectors ``p`` (probabilities, all ``C`` classes) of the input masked by a strategy and by the
reference strategy. 1 means the strategy's masked input is, to the model, the same as the reference's.

Plain library code: tensors in, tensors and a small dataclass out (the wiring, the OOD detector and the tables
are :mod:`itermask.analyses.removal_reference`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from itermask.core.forwards import ForwardStats, RowForwards
from itermask.core.masking import MaskingStrategy
from itermask.core.tokens import TokenBatch

__all__ = ["step_masks", "compared_steps", "StrategyOutputs", "strategy_outputs", "cosine_to_reference"]


def step_masks(rank: Tensor, k: Tensor) -> Tensor:
    """``[B, S, L]`` bool: the positions masked at each step of the one-shot order, those with
    ``1 <= rank <= k[:, s]``.

    Args:
        rank: ``[B, L]`` masking rank of each position on the clean input (1 = masked first, ``-1`` where not
            maskable; :attr:`itermask.core.curves.MaskingCurves.rank`; under word features each piece carries
            its word's rank, so a word's pieces are masked together).
        k: ``[B, S]`` features masked at each step (tokens, or words under word features).
    """
    r = rank.long().to(k.device)
    return (r[:, None, :] >= 1) & (r[:, None, :] <= k[:, :, None])


def compared_steps(k: Tensor, n: Tensor) -> Tensor:
    """``[B, S]`` bool: the steps compared, ``0 < k < n`` (at ``k = 0`` every strategy gives the clean input, at
    ``k = n`` removal leaves no maskable token; both would only add ties)."""
    return (k > 0) & (k < n.to(k.device)[:, None])


@dataclass
class StrategyOutputs:
    """The outputs of one :func:`strategy_outputs` call.

    Attributes:
        pairs: ``[R, 2]`` long ``(example index, step index)`` of the ``R`` compared steps, in row order.
        probs: ``{strategy: [R, C]}`` float64 softmax probabilities of the masked inputs.
        features: ``{strategy: [R, D]}`` float32 input of the classifier's final linear layer.
        clean_features: ``[B, D]`` the same for the clean inputs.
        stats: what the forward call ran (rows asked, distinct rows computed, forwards).
    """

    pairs: Tensor
    probs: dict[str, Tensor]
    features: dict[str, Tensor]
    clean_features: Tensor
    stats: ForwardStats


def strategy_outputs(
    model: torch.nn.Module,
    batch: TokenBatch,
    rank: Tensor,
    k: Tensor,
    n: Tensor,
    strategies: Mapping[str, MaskingStrategy],
    token_budget: int,
) -> StrategyOutputs:
    """Every strategy's masked input at every compared step (:func:`compared_steps`) of the one-shot order
    (:func:`step_masks`), and the clean inputs, through ONE :class:`~itermask.core.forwards.RowForwards` call
    (each distinct row once, final-layer representations captured).

    Args:
        model: a classifier in eval mode.
        batch: ``[B, L]`` the clean inputs (on the model's device).
        rank, k: see :func:`step_masks`; ``n``: ``[B]`` maskable features per example.
        strategies: ``{name: bound strategy}``; each must keep the width ``L`` (every built-in does).
        token_budget: padded tokens per forward.

    Raises:
        ValueError: (before any forward) shapes that disagree, no strategy, a strategy that changes the width.
    """
    size, length = batch.input_ids.shape
    if rank.shape != (size, length) or k.dim() != 2 or k.shape[0] != size or n.shape != (size,):
        raise ValueError(
            f"removal reference: rank {tuple(rank.shape)}, k {tuple(k.shape)} and n {tuple(n.shape)} do not fit "
            f"the batch {tuple(batch.input_ids.shape)} (expected [B, L], [B, S], [B])"
        )
    if not strategies:
        raise ValueError("removal reference: no masking strategy to compare")
    pairs = compared_steps(k, n).nonzero().to(batch.device)
    masks = step_masks(rank, k).to(batch.device)[pairs[:, 0], pairs[:, 1]]
    rows = batch.index(pairs[:, 0])
    parts = [batch]
    for name, strategy in strategies.items():
        masked = strategy.apply(rows, masks).batch
        if masked.input_ids.shape[1] != length:
            raise ValueError(f"removal reference: masking strategy {name!r} changes the input width")
        parts.append(masked)
    forwards = RowForwards(model, token_budget, representations="final")
    out = forwards(TokenBatch.concat(parts))
    assert out.representations is not None  # requested above
    features, count = out.representations.features, len(pairs)
    probs, feats = {}, {}
    for i, name in enumerate(strategies):
        part = slice(size + i * count, size + (i + 1) * count)
        probs[name] = out.logits[part].double().softmax(dim=-1)
        feats[name] = features[part]
    return StrategyOutputs(pairs, probs, feats, features[:size], forwards.stats)


def cosine_to_reference(probs: Mapping[str, Tensor], reference: str) -> dict[str, Tensor]:
    """``{strategy: [R]}`` float64 cosine similarity of each strategy's probability vectors ``[R, C]`` to the
    reference's (1 for the reference itself).

    Raises:
        KeyError: if ``reference`` is not among ``probs``.
    """
    if reference not in probs:
        raise KeyError(f"removal reference: no outputs of the reference strategy {reference!r}")
    ref = probs[reference].double()
    return {name: torch.nn.functional.cosine_similarity(p.double(), ref, dim=-1) for name, p in probs.items()}
