"""Masking schedules: which tokens are masked at each step (rank once on the clean input, or re-rank on the
masked input), and how many. Conventions (Crothers et al. 2023, arXiv 2308.06795, Sec. 3; DeYoung et al.
2020, arXiv 1911.03429):

* steps are masking *fractions* or token *counts* (:data:`STEP_KINDS`): with ``n`` maskable tokens,
  fraction ``f`` masks ``k = floor(f * n + 0.5)`` tokens (:func:`masked_counts`), count ``c`` masks
  ``k = min(c, n)`` (:func:`capped_counts`); the ``k`` with the highest saliency, ties broken by position
  (earlier first, :func:`top_k_mask`);
* under the recursive schedule a token once masked stays masked.

A new schedule is one subclass of :class:`MaskingSchedule`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from itermask.core.registry import Registered, Registry

if TYPE_CHECKING:
    from torch import Tensor

# torch is imported inside the functions: the schedule names (SCHEDULES, STEP_KINDS) are read when the
# config is checked (itermask.validation), before torch is imported (a fast --help and config error)

__all__ = [
    "masking_ranks",
    "masked_counts",
    "capped_counts",
    "step_counts",
    "STEP_KINDS",
    "top_k_mask",
    "SaliencyFn",
    "MaskingSchedule",
    "OneShot",
    "Recursive",
    "SCHEDULES",
    "check_schedules",
]


def masked_counts(n_maskable: Tensor, fractions: Sequence[float] | Tensor) -> Tensor:
    """``[S, B]`` long: how many tokens each of the ``S`` masking ``fractions`` masks of the ``[B]``
    ``n_maskable`` tokens, ``k = floor(f * n + 0.5)`` (0 <= k <= n).

    Raises:
        ValueError: if a fraction lies outside ``[0, 1]``.
    """
    import torch

    f = torch.as_tensor(fractions, dtype=torch.float64, device=n_maskable.device)
    if ((f < 0) | (f > 1)).any():
        raise ValueError(f"masking fractions must lie in [0, 1], got {f.tolist()}")
    return torch.floor(f[:, None] * n_maskable[None, :].double() + 0.5).long()


def capped_counts(n_maskable: Tensor, counts: Sequence[float] | Tensor) -> Tensor:
    """``[S, B]`` long: count steps, step ``s`` masks ``k = min(counts[s], n)`` of the ``[B]`` ``n_maskable``
    tokens (``counts``: ``S`` non-negative integers, token counts, not fractions).

    Raises:
        ValueError: if a count is negative or not an integer.
    """
    import torch

    c = torch.as_tensor(counts, dtype=torch.float64, device=n_maskable.device)
    if ((c < 0) | (c != torch.round(c))).any():
        raise ValueError(f"masking counts must be non-negative integers, got {c.tolist()}")
    return torch.minimum(c.long()[:, None], n_maskable[None, :].long())


#: the kinds of masking steps: a share of the maskable tokens, or a number of tokens
STEP_KINDS = ("fraction", "count")


def step_counts(n_maskable: Tensor, grid: Sequence[float] | Tensor, steps: str = "fraction") -> Tensor:
    """Tokens to mask at each step of ``grid``: :func:`masked_counts` for ``steps="fraction"``,
    :func:`capped_counts` for ``steps="count"``. Returns ``[S, B]`` long.

    Raises:
        ValueError: for an unknown kind of step, or grid values invalid for it.
    """
    if steps == "fraction":
        return masked_counts(n_maskable, grid)
    if steps == "count":
        return capped_counts(n_maskable, grid)
    raise ValueError(f"unknown kind of masking steps {steps!r}: choose one of {STEP_KINDS}")


def top_k_mask(scores: Tensor, candidates: Tensor, k: Tensor) -> Tensor:
    """``[B, L]`` bool: the ``k`` (``[B]`` long, clipped to the number of candidates) positions of ``candidates``
    (``[B, L]`` bool) with the highest ``scores`` (``[B, L]``, NaN lowest), ties broken by position (earlier
    first)."""
    import torch

    ranked = torch.nan_to_num(scores.double(), nan=-torch.inf).masked_fill(~candidates, -torch.inf)
    order = torch.sort(ranked, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    return candidates & (rank < k[:, None])


def masking_ranks(scores: Tensor, candidates: Tensor) -> Tensor:
    """``[B, L]`` long: each candidate's rank (1 = masked first) in the order :func:`top_k_mask` masks in
    (descending score, NaN lowest, ties by position), counted over the ``[B, L]`` bool ``candidates`` only;
    ``-1`` elsewhere."""
    import torch

    ranked = torch.nan_to_num(scores.double(), nan=-torch.inf).masked_fill(~candidates, -torch.inf)
    order = torch.sort(ranked, dim=1, descending=True, stable=True).indices
    in_order = torch.gather(candidates, 1, order).long()
    ranks = torch.full_like(order, -1)
    ranks.scatter_(1, order, torch.where(in_order.bool(), in_order.cumsum(dim=1), -1))
    return ranks


SaliencyFn = Callable[["Tensor", "Tensor"], "Tensor"]
"""``saliency_fn(masked, rows) -> scores``: saliency on the input with ``masked`` (``[R, L]`` bool, clean
positions) applied, for the examples ``rows`` (``[R]`` long indices); returns ``[R, L]`` scores over clean
positions."""


#: every masking schedule by name, in definition order (subclasses of :class:`MaskingSchedule` add themselves)
SCHEDULES: Registry[type[MaskingSchedule]] = Registry("masking schedule")


def check_schedules(schedules: Sequence[str]) -> None:
    """Raises ValueError: for no schedule (``evaluation.schedules=[]``) or an unknown one, naming the choices."""
    if not schedules:
        raise ValueError("evaluation.schedules is empty: choose one or more of " + str(sorted(SCHEDULES)))
    if unknown := [s for s in schedules if s not in SCHEDULES]:
        raise ValueError(f"unknown masking schedule(s) {unknown}: choose from {sorted(SCHEDULES)}")


class MaskingSchedule(Registered, ABC):
    """Which tokens are masked at each step. Subclasses set :attr:`name` (registering them in
    :data:`SCHEDULES`) and :attr:`sufficiency`, and implement :meth:`masks`."""

    registry = SCHEDULES
    #: whether the keep-only-top-k inputs (sufficiency) are defined: the top-k set of a step must be one
    #: fixed ranking of the clean input
    sufficiency: ClassVar[bool] = False

    @abstractmethod
    def masks(self, clean_saliency: Tensor, maskable: Tensor, k: Tensor, saliency_fn: SaliencyFn) -> Tensor:
        """``[S, B, L]`` bool, the masked positions at each step, from the ``[B, L]`` ``clean_saliency``, the
        ``[B, L]`` bool ``maskable`` positions and ``k`` (``[S, B]`` tokens to mask at each step,
        :func:`step_counts`); ``saliency_fn`` recomputes saliency on a masked input (see :data:`SaliencyFn`)."""


class OneShot(MaskingSchedule):
    """Rank once on the clean input; step ``s`` masks the top ``k[s]`` tokens of that ranking."""

    name = "one_shot"
    sufficiency = True

    def masks(self, clean_saliency, maskable, k, saliency_fn=None):
        import torch

        return torch.stack([top_k_mask(clean_saliency, maskable, k_s) for k_s in k])


class Recursive(MaskingSchedule):
    """Re-rank on the already-masked input at every step; masked tokens stay masked.

    Step ``s`` adds the ``k[s] - k[s-1]`` most salient still-unmasked tokens, with saliency recomputed on the
    input masked at step ``s-1`` (the clean input for the first step, so the first step agrees with
    :class:`OneShot`), in one ``saliency_fn`` call per step, only for the examples where it decides something:
    those that gain tokens at that step, have some masked already, and keep some unmasked.

    Raises:
        ValueError: if ``k`` decreases between steps (fractions must be sorted ascending).
    """

    name = "recursive"

    def masks(self, clean_saliency, maskable, k, saliency_fn):
        import torch

        if (k[1:] < k[:-1]).any():
            raise ValueError("the recursive schedule needs ascending masking fractions/counts")
        state = torch.zeros_like(maskable)
        steps = []
        scores = clean_saliency
        for k_s in k:
            need = (k_s - state.sum(dim=1)).clamp(min=0)
            left = (maskable & ~state).sum(dim=1)
            # rows with nothing masked yet still rank by the clean saliency; rows that take every token
            # left need no ranking
            rows = torch.nonzero((need > 0) & (need < left) & state.any(dim=1)).flatten()
            if len(rows):
                scores = scores.clone()
                scores[rows] = saliency_fn(state[rows], rows).to(scores.dtype)
            state = state | top_k_mask(scores, maskable & ~state, need)
            steps.append(state)
        return torch.stack(steps)
