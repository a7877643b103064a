"""Faithfulness scores computed from masking curves.

Every function takes a :class:`itermask.evaluation.MaskingCurves` (or plain tensors) and returns per
example values ``[B]`` or ``[B, S]``; :func:`summarize` averages them over examples.

``quantity`` selects what is compared: ``"probability"`` (softmax probability of the target class, the
ERASER convention, default) or ``"logit"`` (its logit). The name of every score records which.

Sources:
    * Comprehensiveness and sufficiency: DeYoung et al. 2020, "ERASER", arXiv 1911.03429, Sec. 4,
      Eqs. for comprehensiveness ``m(x)_j - m(x \\ r)_j`` and sufficiency ``m(x)_j - m(r)_j``.
    * AOPC over the bins 1, 5, 10, 20, 50 %: DeYoung et al. 2020, Sec. 4 ("we ... define bins ... and
      compute the average"), as ERASER's code ``rationale_benchmark/metrics.py`` does: the plain mean over
      the bins of the per-bin score (no ``1/(K+1)`` term for the empty bin).
    * Area under the masking curve: trapezoid rule over the masking fraction (Crothers et al. 2023,
      arXiv 2308.06795, curves of the predicted-class probability against the fraction masked).
    * Decision flip: the prediction differs from the clean prediction (Chrysostomou & Aletras 2021,
      arXiv 2108.13759, "DFFOT" is the first fraction at which it flips).
"""

from __future__ import annotations

from typing import Literal, Sequence

import torch
from torch import Tensor

from itermask.evaluation import MaskingCurves

__all__ = [
    "AOPC_BINS",
    "target_output",
    "comprehensiveness",
    "sufficiency",
    "aopc",
    "area_under_curve",
    "decision_flips",
    "first_flip_fraction",
    "summarize",
]

AOPC_BINS = (0.01, 0.05, 0.1, 0.2, 0.5)
Quantity = Literal["probability", "logit"]


def target_output(logits: Tensor, target: Tensor, quantity: Quantity = "probability") -> Tensor:
    """Probability or logit of class ``target``.

    Args:
        logits: ``[B, C]`` or ``[B, S, C]``.
        target: ``[B]`` long.
        quantity: ``"probability"`` (softmax, in [0, 1]) or ``"logit"``.

    Returns:
        ``[B]`` or ``[B, S]``.

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


def comprehensiveness(curves: MaskingCurves, quantity: Quantity = "probability") -> Tensor:
    """``p(y|x) - p(y|x without its top-k tokens)`` at each step, ``[B, S]`` (ERASER, DeYoung et al. 2020)."""
    clean = target_output(curves.clean_logits, curves.target, quantity)
    return clean[:, None] - target_output(curves.logits, curves.target, quantity)


def sufficiency(curves: MaskingCurves, quantity: Quantity = "probability") -> Tensor:
    """``p(y|x) - p(y|only the top-k tokens kept)`` at each step, ``[B, S]`` (ERASER, DeYoung et al. 2020).

    Raises:
        ValueError: for curves without keep-only inputs (the recursive schedule, where it is undefined).
    """
    if curves.keep_logits is None:
        raise ValueError(f"sufficiency is not defined for the {curves.schedule!r} schedule")
    clean = target_output(curves.clean_logits, curves.target, quantity)
    return clean[:, None] - target_output(curves.keep_logits, curves.target, quantity)


def _bin_columns(fractions: Tensor, bins: Sequence[float]) -> list[int]:
    columns = []
    for b in bins:
        hits = torch.nonzero(torch.isclose(fractions.double(), torch.tensor(float(b), dtype=torch.float64))).flatten()
        if not len(hits):
            raise ValueError(f"AOPC bin {b} is not on the masking grid {fractions.tolist()}; add it to the fractions")
        columns.append(int(hits[0]))
    return columns


def aopc(scores: Tensor, fractions: Tensor, bins: Sequence[float] = AOPC_BINS) -> Tensor:
    """Area over the perturbation curve as ERASER computes it: the mean of ``scores`` over ``bins``.

    Args:
        scores: ``[B, S]`` per-step comprehensiveness or sufficiency.
        fractions: ``[S]`` the masking fractions of the steps.
        bins: fractions to average over (default 1, 5, 10, 20, 50 %; DeYoung et al. 2020, Sec. 4).

    Returns:
        ``[B]``.

    Raises:
        ValueError: if a bin is not one of the fractions.
    """
    return scores[:, _bin_columns(fractions, bins)].mean(dim=1)


def area_under_curve(values: Tensor, fractions: Tensor) -> Tensor:
    """Trapezoid area under ``values`` (``[B, S]``) over the masking fraction (``[S]``); returns ``[B]``.

    For a probability curve over the grid 0..1 the area lies in [0, 1]; a faithful explanation makes the
    predicted-class probability fall fast, so a smaller area is better.

    Raises:
        ValueError: with fewer than two steps.
    """
    if values.shape[-1] < 2:
        raise ValueError("the area under a masking curve needs at least two steps")
    return torch.trapezoid(values.double(), fractions.double().to(values.device), dim=-1).float()


def decision_flips(curves: MaskingCurves) -> Tensor:
    """``[B, S]`` bool: the prediction at the step differs from the clean prediction."""
    return curves.logits.argmax(dim=-1) != curves.clean_logits.argmax(dim=-1)[:, None]


def first_flip_fraction(curves: MaskingCurves) -> Tensor:
    """``[B]`` the smallest masking fraction whose prediction differs from the clean one, NaN if none
    (decision flip - fraction of tokens, Chrysostomou & Aletras 2021)."""
    flips = decision_flips(curves)
    fractions = curves.fractions.to(flips.device).double().expand_as(flips)
    first = torch.where(flips, fractions, torch.full_like(fractions, float("inf"))).min(dim=1).values
    return torch.where(torch.isinf(first), torch.full_like(first, float("nan")), first)


def summarize(
    curves: MaskingCurves, quantity: Quantity = "probability", bins: Sequence[float] = AOPC_BINS
) -> dict:
    """Scores averaged over the examples of ``curves``.

    Returns a dict of plain Python values:
        ``n_examples``; per-step lists ``fraction``, ``mean_k`` (tokens masked, a count), ``target_<q>``
        (mean target probability/logit after masking), ``accuracy`` (vs gold labels; NaN without labels),
        ``flip_rate``, ``comprehensiveness_<q>`` and, for one-shot curves, ``sufficiency_<q>``; scalars
        ``aopc_comprehensiveness_<q>``, ``aopc_sufficiency_<q>`` (one-shot), ``auc_<q>`` (area under the
        target curve), ``first_flip_fraction`` (mean over examples that flip) and ``never_flip_rate``.
        ``<q>`` is ``quantity``.
    """
    q = "prob" if quantity == "probability" else "logit"
    comp = comprehensiveness(curves, quantity)
    values = target_output(curves.logits, curves.target, quantity)
    known = curves.labels >= 0
    preds = curves.logits.argmax(dim=-1)
    accuracy = (
        (preds[known] == curves.labels[known][:, None]).float().mean(dim=0)
        if known.any()
        else torch.full((len(curves.fractions),), float("nan"))
    )
    first = first_flip_fraction(curves)
    out = {
        "n_examples": len(curves),
        "quantity": quantity,
        "fraction": curves.fractions.tolist(),
        "mean_k": curves.k.double().mean(dim=0).tolist(),
        f"target_{q}": values.mean(dim=0).tolist(),
        "accuracy": accuracy.tolist(),
        "flip_rate": decision_flips(curves).float().mean(dim=0).tolist(),
        f"comprehensiveness_{q}": comp.mean(dim=0).tolist(),
        f"aopc_comprehensiveness_{q}": aopc(comp, curves.fractions, bins).mean().item(),
        f"auc_{q}": area_under_curve(values, curves.fractions).mean().item(),
        "first_flip_fraction": first[~first.isnan()].mean().item() if (~first.isnan()).any() else float("nan"),
        "never_flip_rate": first.isnan().float().mean().item(),
    }
    if curves.keep_logits is not None:
        suff = sufficiency(curves, quantity)
        out[f"sufficiency_{q}"] = suff.mean(dim=0).tolist()
        out[f"aopc_sufficiency_{q}"] = aopc(suff, curves.fractions, bins).mean().item()
    return out
