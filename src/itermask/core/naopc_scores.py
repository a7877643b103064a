"""The AOPC scores that Normalized AOPC normalises (Edin et al. 2025, arXiv 2408.08137, Eq. 1-4), from a
:class:`~itermask.core.aopc_bounds.SubsetOutputs`:

* :func:`ranking_aopc`: the authors' AOPC of an explanation's ranking, comprehensiveness (the mean over ``k =
  1..n`` of the drop after masking its top ``k`` features) and sufficiency (after masking its bottom ``k``:
  least important first), as the authors' ``src/evaluation/evaluate_feature_attributions.py`` computes them;
* :func:`grid_weights`: the weights that turn itermask's own AOPC over a grid of masking steps
  (``aopc_<measure>`` over the ERASER bins, ``aopc_full_<measure>`` over every step) into the functional of
  :func:`~itermask.core.aopc_bounds.exact_aopc_bounds`, so its bounds can be searched with them.

Drops are ``clean - masked`` of the target quantity, as in :mod:`itermask.core.aopc_bounds`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["DIRECTIONS", "feature_ranks", "ranking_aopc", "grid_weights"]

#: the two AOPC functionals: comprehensiveness masks the most important features first, sufficiency the least
DIRECTIONS = ("comprehensiveness", "sufficiency")


def feature_ranks(rank: Tensor, features: Tensor) -> list[np.ndarray]:
    """Each example's features in ranking order (most important first): from ``[B, L]`` masking ranks of the
    positions (1 = masked first, ``-1``: not ranked; :attr:`~itermask.core.curves.MaskingCurves.rank`) and the
    ``[B, L]`` feature index (:func:`~itermask.core.subset_outputs.token_features`); a feature takes the best
    rank of its tokens. Returns one ``[n_b]`` int64 ordering per example.

    Raises:
        ValueError: for a feature none of whose tokens is ranked."""
    rank, features = rank.long().cpu(), features.long().cpu()
    out = []
    for b in range(len(rank)):
        n = int(features[b].max()) + 1 if features.shape[1] else 0
        best = torch.full((max(n, 0),), torch.iinfo(torch.long).max, dtype=torch.long)
        ranked = (features[b] >= 0) & (rank[b] > 0)
        best.scatter_reduce_(0, features[b][ranked], rank[b][ranked], reduce="amin")
        if n and int(best.max()) == torch.iinfo(torch.long).max:
            raise ValueError(f"example row {b}: a feature has no ranked token (the ranking and features disagree)")
        out.append(torch.sort(best, stable=True).indices.numpy())
    return out


def _prefix_masks(order: np.ndarray, width: int, reverse: bool) -> np.ndarray:
    """``[n, width]`` bool: row ``k - 1`` masks the first ``k`` features of ``order`` (``reverse``: its last ``k``)."""
    n = len(order)
    position = np.empty(n, dtype=np.int64)
    position[order[::-1] if reverse else order] = np.arange(n)
    masks = position[None, :] < np.arange(1, n + 1)[:, None]
    return np.concatenate([masks, np.zeros((n, width - n), dtype=bool)], axis=1)


def ranking_aopc(outputs, orders: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """The authors' AOPC (Edin et al. 2025, Eq. 1-3) of each example's ranking: ``{"comprehensiveness": [E],
    "sufficiency": [E]}`` float64 in the unit of the target quantity. Comprehensiveness is the mean over ``k =
    1..n`` of ``f(x) - f(x without the top k features)``, sufficiency that of ``f(x) - f(x without the bottom k
    features)`` (lower is better). Every row (the clean input and ``2n`` masked ones per example) is asked for
    in one call of ``outputs``.

    Args:
        outputs: a :class:`~itermask.core.aopc_bounds.SubsetOutputs`.
        orders: per example its features, most important first (:func:`feature_ranks`).

    Raises:
        ValueError: for an example without features."""
    sizes = [len(o) for o in orders]
    if any(n < 1 for n in sizes):
        raise ValueError("the AOPC of a ranking needs at least one feature per example")
    if not sizes:
        return {d: np.empty(0) for d in DIRECTIONS}
    width = max(sizes)
    examples, masks = [np.arange(len(sizes))], [np.zeros((len(sizes), width), dtype=bool)]
    for e, order in enumerate(orders):
        for reverse in (False, True):
            examples.append(np.full(len(order), e, dtype=np.int64))
            masks.append(_prefix_masks(np.asarray(order), width, reverse))
    values = np.asarray(outputs(np.concatenate(examples), np.concatenate(masks)), dtype=np.float64)
    clean, start = values[: len(sizes)], len(sizes)
    out = {d: np.empty(len(sizes)) for d in DIRECTIONS}
    for e, n in enumerate(sizes):
        for direction in DIRECTIONS:
            out[direction][e] = float(np.mean(clean[e] - values[start : start + n]))
            start += n
    return out


def grid_weights(k: Sequence[int], n: int, direction: str) -> np.ndarray:
    """``[n + 1]`` float64 weights of the bounds of an AOPC that averages a measure over grid steps masking
    ``k`` (``[S]``, the steps' numbers of masked features of one example; itermask's ``curves.k`` at the
    ERASER bins for ``aopc_*``, at every step for ``aopc_full_*``): ``w[j]`` is the share of the steps whose
    score is the drop of a ``j``-feature prefix. Comprehensiveness masks the top ``k``: ``j = k``.
    Sufficiency keeps only the top ``k``, i.e. masks the bottom ``n - k``, the first ``n - k`` features of the
    ascending order: ``j = n - k``.

    Raises:
        ValueError: for an unknown direction, no step, or a ``k`` outside ``0..n``."""
    steps = np.asarray(k, dtype=np.int64).reshape(-1)
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown AOPC direction {direction!r}: choose from {DIRECTIONS}")
    if not len(steps) or steps.min() < 0 or steps.max() > n:
        raise ValueError(f"grid weights need at least one step with 0 <= k <= n={n}, got {steps.tolist()}")
    masked = steps if direction == "comprehensiveness" else n - steps
    return np.bincount(masked, minlength=n + 1).astype(np.float64) / len(steps)
