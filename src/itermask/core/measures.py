"""The faithfulness measures of masking curves, as functions (the metrics of :mod:`itermask.core.metrics` are
built from them); each names its source.

Every function takes a :class:`itermask.core.curves.MaskingCurves` (or plain tensors) and returns per example
values ``[B]`` or ``[B, S]``. ``quantity`` selects what is compared: ``"probability"`` (softmax probability of
the target class, the ERASER convention, default) or ``"logit"`` (its logit). Curves have fraction steps
(x = masking fraction, share of the maskable tokens) or count steps (x = number of tokens masked), recorded as
``curves.steps``; areas are taken over that x-axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from itermask.core.evaluation_settings import Quantity

if TYPE_CHECKING:  # torch is imported where a score is computed: the metric registry is readable without it
    from torch import Tensor

    from itermask.core.curves import MaskingCurves

__all__ = [
    "AOPC_BINS",
    "target_output",
    "log_odds",
    "comprehensiveness",
    "sufficiency",
    "log_odds_drop",
    "aopc",
    "aopc_full",
    "area_under_curve",
    "decision_flips",
    "first_flip_step",
    "first_flip_fraction",
    "first_flip_count",
    "racu_without_retraining",
    "symmetric_relevance_gain",
]

#: ERASER's AOPC bins: masking fractions of 1, 5, 10, 20 and 50 %
AOPC_BINS = (0.01, 0.05, 0.1, 0.2, 0.5)


def target_output(logits: Tensor, target: Tensor, quantity: Quantity = "probability") -> Tensor:
    """``[B]`` or ``[B, S]`` probability (softmax, in [0, 1]) or logit (``quantity``) of class ``target`` (``[B]``
    long) from ``[B, C]`` or ``[B, S, C]`` ``logits``.

    Raises:
        ValueError: for an unknown quantity.
    """
    if quantity == "probability":
        values = logits.float().softmax(dim=-1)
    elif quantity == "logit":
        values = logits.float()
    else:
        raise ValueError(f"quantity must be 'probability' or 'logit', got {quantity!r}")
    index = target.long().view(-1, *([1] * (logits.dim() - 1)))
    index = index.expand(*logits.shape[:-1], 1)
    return values.gather(-1, index).squeeze(-1)


def log_odds(logits: Tensor, target: Tensor) -> Tensor:
    """``[B]`` or ``[B, S]`` log-odds of class ``target`` (``[B]`` long), ``log p / (1 - p)`` in nats, computed
    stably from the ``[B, C]`` or ``[B, S, C]`` ``logits`` as ``z_target - logsumexp_{c != target} z_c`` (for two
    classes, the logit difference ``z_target - z_other``)."""
    import torch

    z = logits.double()
    index = target.long().view(-1, *([1] * (z.dim() - 1))).expand(*z.shape[:-1], 1)
    own = z.gather(-1, index).squeeze(-1)
    others = torch.logsumexp(z.scatter(-1, index, float("-inf")), dim=-1)
    return (own - others).float()


def comprehensiveness(curves: MaskingCurves, quantity: Quantity = "probability") -> Tensor:
    """``p(y|x) - p(y|x without its top-k tokens)`` at each step, ``[B, S]`` (ERASER: DeYoung et al. 2020,
    arXiv 1911.03429, Sec. 4, ``m(x)_j - m(x \\ r)_j``)."""
    clean = target_output(curves.clean_logits, curves.target, quantity)
    return clean[:, None] - target_output(curves.logits, curves.target, quantity)


def sufficiency(curves: MaskingCurves, quantity: Quantity = "probability") -> Tensor:
    """``p(y|x) - p(y|only the top-k tokens kept)`` at each step, ``[B, S]`` (ERASER: DeYoung et al. 2020,
    Sec. 4, ``m(x)_j - m(r)_j``).

    Raises:
        ValueError: for curves without keep-only inputs (the recursive schedule, where it is undefined).
    """
    if curves.keep_logits is None:
        raise ValueError(f"sufficiency is not defined for the {curves.schedule!r} schedule")
    clean = target_output(curves.clean_logits, curves.target, quantity)
    return clean[:, None] - target_output(curves.keep_logits, curves.target, quantity)


def log_odds_drop(curves: MaskingCurves) -> Tensor:
    """``[B, S]`` drop in the target class's log-odds when the top-k tokens are masked:
    ``log-odds(y|x) - log-odds(y|x without its top-k tokens)`` (Shrikumar et al. 2017, arXiv 1704.02685, Sec. 4.1).
    Positive when masking lowers the target's odds; independent of ``quantity``."""
    clean = log_odds(curves.clean_logits, curves.target)
    return clean[:, None] - log_odds(curves.logits, curves.target)


def _bin_columns(fractions: Tensor, bins: Sequence[float]) -> list[int]:
    import torch

    columns = []
    for b in bins:
        hits = torch.nonzero(torch.isclose(fractions.double(), torch.tensor(float(b), dtype=torch.float64))).flatten()
        if not len(hits):
            raise ValueError(f"AOPC bin {b} is not on the masking grid {fractions.tolist()}; add it to the fractions")
        columns.append(int(hits[0]))
    return columns


def aopc(scores: Tensor, fractions: Tensor, bins: Sequence[float] = AOPC_BINS) -> Tensor:
    """``[B]`` area over the perturbation curve as ERASER computes it: the mean of ``scores`` (``[B, S]`` per-step
    comprehensiveness or sufficiency at the ``[S]`` ``fractions``) over ``bins`` (default 1, 5, 10, 20, 50 %;
    DeYoung et al. 2020, Sec. 4), as ERASER's code ``rationale_benchmark/metrics.py`` does: no ``1/(K+1)`` term
    for the empty bin.

    Raises:
        ValueError: if a bin is not one of the fractions, or there is no bin (the mean of nothing).
    """
    if len(bins) == 0:
        raise ValueError("AOPC needs at least one bin (summarize(..., bins=None) leaves AOPC out)")
    return scores[:, _bin_columns(fractions, bins)].mean(dim=1)


def aopc_full(scores: Tensor) -> Tensor:
    """AOPC over the full curve: the mean of ``scores`` (``[B, S]``) over every step, ``[B]`` (Samek et al. 2017,
    arXiv 1509.06321, ``1/(L+1) sum_{k=0}^{L}``: the grid's steps are the perturbation steps, fraction or count;
    a grid that starts at 0 gives Samek's ``k = 0`` term)."""
    return scores.mean(dim=1)


def area_under_curve(values: Tensor, grid: Tensor) -> Tensor:
    """Trapezoid area under ``values`` (``[..., S]``) over the x-axis ``grid`` (``[S]``: masking fractions,
    or token counts for count steps); returns ``[...]`` (Crothers et al. 2023, arXiv 2308.06795).

    For a probability curve over the fraction grid 0..1 the area lies in [0, 1]; a faithful explanation
    makes the predicted-class probability fall fast, so a smaller area is better. Over count steps the
    unit is tokens times the quantity.

    Raises:
        ValueError: with fewer than two steps.
    """
    import torch

    if values.shape[-1] < 2:
        raise ValueError("the area under a masking curve needs at least two steps")
    return torch.trapezoid(values.double(), grid.double().to(values.device), dim=-1).float()


def decision_flips(curves: MaskingCurves) -> Tensor:
    """``[B, S]`` bool: the prediction at the step differs from the clean prediction."""
    return curves.logits.argmax(dim=-1) != curves.clean_logits.argmax(dim=-1)[:, None]


def first_flip_step(curves: MaskingCurves) -> Tensor:
    """``[B]`` long: the index of the first step whose prediction differs from the clean one, ``-1`` if none."""
    import torch

    flips = decision_flips(curves)
    steps = torch.arange(flips.shape[1], device=flips.device).expand_as(flips)
    first = torch.where(flips, steps, flips.shape[1]).min(dim=1).values
    return torch.where(first == flips.shape[1], -1, first)


def _at_first_flip(curves: MaskingCurves, values: Tensor) -> Tensor:
    import torch

    step = first_flip_step(curves)
    picked = values.double().gather(1, step.clamp(min=0)[:, None]).squeeze(1)
    return torch.where(step >= 0, picked, torch.full_like(picked, float("nan")))


def first_flip_fraction(curves: MaskingCurves) -> Tensor:
    """``[B]`` the fraction of the maskable tokens masked (``k / n``) at the first step whose prediction
    differs from the clean one, NaN if none (decision flip - fraction of tokens, Chrysostomou & Aletras
    2021, arXiv 2108.13759).

    This is the share actually masked, for fraction and count steps alike; on a fraction grid it can
    differ from the nominal fraction by the rounding of ``k = floor(f * n + 0.5)``. With a coarse grid it
    is an upper bound of the fraction at which the decision flips token by token.
    """
    return _at_first_flip(curves, curves.masked_fraction)


def first_flip_count(curves: MaskingCurves) -> Tensor:
    """``[B]`` the number of tokens masked at the first step whose prediction differs from the clean
    one, NaN if none (a count; see :func:`first_flip_fraction`)."""
    return _at_first_flip(curves, curves.k)


def racu_without_retraining(values: Tensor, random_values: Tensor, grid: Tensor) -> Tensor:
    """Relative area between the masking curves of an explanation and of the random explanation, normalised as
    RACU is in Madsen et al. 2022 (arXiv 2110.08412, summarising metric), but on curves measured *without
    retraining*: Madsen's curves are Recursive-ROAR test performance (the model retrained on the masked data at
    every step); ours use the same fine-tuned model throughout, so the masked inputs are out of distribution
    for it. Pass the curves of the mean target probability/logit (or of accuracy) over the same examples for
    both explanations.

    ``RACU = integral (r(x) - e(x)) dx / integral (r(x) - r(x_end)) dx`` over the x-axis ``grid`` (trapezoid
    rule), ``e`` the explanation's curve, ``r`` the random one's and ``r(x_end)`` its last value (at 100 %
    masked the curves meet): the area by which the explanation's curve runs below the random one (Madsen's
    "faithfulness" area) over the area of the random curve above its end point (his "normaliser"). 1 is the
    most faithful possible, 0 no better than random, negative worse. Without retraining curves are not
    monotone, a grid that stops before 100 % can leave the explanation's curve below the random one's end,
    and a nearly flat random curve makes the denominator small, so values above 1 (and large ratios) occur.

    ``values`` and ``random_values`` are ``[..., S]`` (the two curves), ``grid`` ``[S]`` (fractions or counts);
    returns ``[...]``, NaN where the normaliser is not positive (a random curve that never falls).

    Raises:
        ValueError: with fewer than two steps, or curves of different shapes.
    """
    import torch

    if values.shape != random_values.shape:
        raise ValueError(f"curves differ in shape: {tuple(values.shape)} vs {tuple(random_values.shape)}")
    between = area_under_curve(random_values.double() - values.double(), grid).double()
    normaliser = area_under_curve(random_values.double() - random_values[..., -1:].double(), grid).double()
    ratio = between / normaliser.clamp(min=torch.finfo(torch.float64).tiny)
    return torch.where(normaliser > 0, ratio, torch.full_like(ratio, float("nan"))).float()


def symmetric_relevance_gain(curves: MaskingCurves, quantity: Quantity = "probability") -> Tensor:
    """``[B]`` symmetric relevance gain (SRG; Bluecher, Vielhaben & Strodthoff, "Decoupling Pixel Flipping and
    Occlusion Strategy for Consistent XAI Benchmarks", TMLR 2024, arXiv 2401.06654): the area under the
    least-important-first curve minus the area under the most-important-first curve of the target ``quantity``
    (probability, the paper's and its code's choice; or logit),
    ``SRG = AUC[LIF] - AUC[MIF] = LRG + MRG`` (the two relevance gains against a random ordering, whose area
    cancels): neither halved nor normalised, in units of the quantity times the masked fraction; NaN for an example
    with fewer than two features (its two orders coincide). The authors'
    code (github.com/bluecher31/pixel-flipping, ``scripts/plot_pixel_flipping.py``: ``get_results`` subtracts
    the MIF from the LIF curve of the target-class softmax probability, ``src/plotting.py``: ``calculate_auc``
    integrates the linear interpolation from 0 to 1) is followed; the paper's text was not at hand to quote its
    equation number. Higher is more faithful; a random ranking scores about 0; with probabilities over the
    fraction axis 0..1 it lies in [-1, 1].

    The x-axis is per example the masked share of its features, ``curves.masked_fraction`` (``k / n``; the
    authors' x is the occluded share as well), so fraction and count steps both read as a share of the
    features, and zero-width steps (a count grid capped at ``n``) add nothing. A grid that does not span
    [0, 1] gives the area over the grid's span. The curves are ``curves.least_logits`` (LIF) and
    ``curves.logits`` (MIF) on the same grid and ``k``.

    Raises:
        ValueError: for curves without least-important-first inputs (the recursive schedule, where SRG is
            undefined: its ranking changes at every step, so there is no fixed order to reverse; or an
            evaluator with ``least_first`` off), or with fewer than two steps (no area).
    """
    import torch

    if curves.least_logits is None:
        raise ValueError(
            f"the symmetric relevance gain is not defined for these {curves.schedule!r} curves: no "
            "least-important-first inputs (a recursive schedule has no fixed ranking to reverse, or least_first is off)"
        )
    if curves.k.shape[1] < 2:
        raise ValueError("the symmetric relevance gain is an area between two curves: it needs at least two steps")
    gap = target_output(curves.least_logits, curves.target, quantity) - target_output(
        curves.logits, curves.target, quantity
    )
    srg = torch.trapezoid(gap.double(), curves.masked_fraction.to(gap.device), dim=-1).float()
    # one feature (or none): the least- and most-important-first orders are the same, so the gap is 0 whatever the
    # ranking: SRG says nothing about it (NaN, left out of the mean), not that it is as good as a random one
    return srg.masked_fill(curves.n_maskable.to(srg.device) < 2, float("nan"))
