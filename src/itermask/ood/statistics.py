"""Out-of-distribution statistics of masked inputs' embeddings, per masking step.

Crothers et al. 2023 (arXiv 2308.06795) argue that iteratively masked inputs lie outside the distribution
the classifier was fine-tuned on. This module measures that on the representations the evaluator records
(:mod:`itermask.core.representations`) with the detectors of :mod:`itermask.ood.detectors`: tensors in,
tensors or small dataclasses out; no Hydra, no files.

Statistics (higher = more out-of-distribution for every *score*):

* L2 norm; cosine similarity and L2 distance to the same example unmasked.
* Mahalanobis score and k-nearest-neighbour distance per view; MaSF, reported as the fraction of inputs
  flagged at ``alpha`` (:mod:`itermask.ood.detectors`).
* OOD AUROC of masked vs clean test inputs for every score (:func:`ood_auroc`).
* Max softmax probability, predictive entropy (nats) and expected calibration error (Guo et al. 2017,
  arXiv 1706.04599, Eq. 3; :func:`expected_calibration_error`).

A statistic that cannot be computed is never a silent zero or 0.5: it is left out of the values and its
reason recorded under ``missing`` (a degenerate detector, whose scores all tie, also logs a warning).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, fields
from typing import Any, overload

import numpy as np
import torch
from torch import Tensor

from itermask.core.curves import MaskingCurves
from itermask.core.representations import Representations
from itermask.ood.detectors import OODDetectors, _numpy, representation_views

log = logging.getLogger(__name__)

__all__ = [
    "max_softmax_probability",
    "predictive_entropy",
    "calibration_bins",
    "calibration_error",
    "expected_calibration_error",
    "ood_auroc",
    "DegenerateScores",
    "TIE_RTOL",
    "CONSTANT_RTOL",
    "OODCurves",
    "masking_ood_statistics",
]


def max_softmax_probability(logits: Tensor) -> Tensor:
    """``[...]`` float64, the largest softmax probability of ``logits`` ``[..., C]`` (Hendrycks & Gimpel
    2017); in float64 so that ``1 - p`` of a confident prediction does not round to 0 as in float32."""
    return logits.double().softmax(dim=-1).amax(dim=-1)


def predictive_entropy(logits: Tensor) -> Tensor:
    """``[...]`` float64 entropy in nats of the softmax of ``logits`` ``[..., C]``."""
    log_p = logits.double().log_softmax(dim=-1)
    return -(log_p.exp() * log_p).sum(dim=-1)


def calibration_bins(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    """``[N]`` int indices in ``0..M-1`` (``M``: ``n_bins``) of the equal-width bin of each of the ``[N]``
    probabilities ``confidence``: ``B_1 = [0, 1/M]`` and ``B_m = ((m-1)/M, m/M]`` for ``m = 2..M`` (Guo et al.
    2017, Sec. 2): 0.0 falls in the first bin, 1.0 in the last, a confidence equal to an edge ``m/M`` in the bin
    it closes."""
    edges = np.arange(1, int(n_bins)) / int(n_bins)  # the inner edges m/M, m = 1..M-1
    return np.searchsorted(edges, np.asarray(confidence, dtype=np.float64), side="left")


def calibration_error(confidence: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """``ECE = sum_m |B_m|/N |acc(B_m) - conf(B_m)|`` over the bins of :func:`calibration_bins`
    (Guo et al. 2017, Eq. 3), for ``[N]`` confidences and ``[N]`` bool correctness."""
    confidence = np.asarray(confidence, dtype=np.float64)
    gap = np.bincount(
        calibration_bins(confidence, n_bins),
        weights=np.asarray(correct, dtype=np.float64) - confidence,
        minlength=int(n_bins),
    )  # per bin: sum of (correct - confidence) = |B_m| (acc - conf)
    return float(np.abs(gap).sum() / len(confidence))


def expected_calibration_error(logits: Tensor, labels: Tensor, n_bins: int = 15) -> float:
    """Expected calibration error of the top label (Guo et al. 2017, arXiv 1706.04599, Sec. 2, Eq. 3) of
    ``[N, C]`` ``logits`` against ``[N]`` gold ``labels``: a probability difference in [0, 1].

    Top-label convention: each example's confidence is its largest softmax probability (computed in
    float64) and it counts as correct when that class (the first, on a tie) is its gold label
    (:func:`calibration_error` in ``n_bins`` bins).

    Raises:
        ValueError: without examples, with unknown (negative) labels or with ``n_bins < 1``.
    """
    # Not torchmetrics' multiclass_calibration_error: in torchmetrics 1.9.0 a confidence of exactly 1.0 (saturated
    # float32 softmax) lands in an extra bin beyond the last (torchmetrics issue 3510).
    if len(labels) == 0 or (labels < 0).any():
        raise ValueError("ECE needs at least one example and a gold label for each")
    if int(n_bins) < 1:
        raise ValueError(f"ECE needs at least one bin, got n_bins={n_bins}")
    confidence, predicted = logits.detach().double().softmax(dim=-1).max(dim=-1)
    correct = predicted.cpu() == labels.detach().cpu().long()
    return calibration_error(confidence.cpu().numpy(), correct.numpy(), n_bins)


#: relative tolerance of :func:`ood_auroc`: scores closer than this share of their interquartile range tie
TIE_RTOL = 1e-4
#: a detector whose scores on every clean and masked input lie within this share of their magnitude is
#: constant: they carry nothing beyond the float32 rounding of the representations they are computed from
CONSTANT_RTOL = 1e-6


class DegenerateScores(ValueError):
    """Scores that all tie cannot tell any two inputs apart (an AUROC of 0.5 would read as "in
    distribution")."""


def ood_auroc(clean_scores: np.ndarray, masked_scores: np.ndarray, rtol: float = TIE_RTOL) -> float:
    """AUROC of telling masked inputs (positives) from clean ones (negatives) by a score that is higher
    for out-of-distribution inputs: the probability that a masked input scores above a clean one, ties
    counting one half (the Mann-Whitney U statistic over ``n_masked * n_clean``; equal to
    ``sklearn.metrics.roc_auc_score`` when ``rtol = 0``). 0.5: indistinguishable; 1: every masked input
    scores above every clean one; below 0.5: masked inputs score *lower*.

    Two scores tie when they are equal or differ by at most ``rtol`` times the interquartile range of all
    the scores (their spread, which one extreme score does not move), so values that differ only by the
    float noise of differently padded batches tie and masking 0 % gives exactly 0.5; the scores themselves
    are never rounded.

    Raises:
        DegenerateScores: (a ``ValueError``) if all scores are equal.
        ValueError: if a score is not finite or either set is empty.
    """
    clean, masked = np.asarray(clean_scores, float).ravel(), np.asarray(masked_scores, float).ravel()
    if not len(clean) or not len(masked):
        raise ValueError("OOD AUROC needs clean and masked scores")
    scores = np.concatenate([clean, masked])
    if not np.isfinite(scores).all():
        raise ValueError("OOD AUROC got non-finite scores")
    if scores.min() == scores.max():
        raise DegenerateScores(
            f"the scores separate no inputs: all clean and masked scores tie (at {np.median(scores):.6g})"
        )
    # Not sklearn's roc_auc_score (used by the tests as the reference for rtol = 0): it ties only equal
    # scores, and making float-noise neighbours equal by rounding merges distinct scores near a coarse grid
    tol = rtol * float(np.subtract(*np.percentile(scores, [75, 25])))
    clean = np.sort(clean)
    below = np.searchsorted(clean, masked - tol, side="left")  # clean < masked - tol
    within = np.searchsorted(clean, masked + tol, side="right") - below  # |clean - masked| <= tol
    return float((below.sum() + 0.5 * within.sum()) / (len(clean) * len(masked)))


@dataclass
class OODCurves:
    """Out-of-distribution statistics along one masking curve (one saliency method and schedule).

    Keys are ``"<view>/<statistic>"`` for per-view statistics (``l2_norm``, ``cosine_to_clean``,
    ``l2_to_clean``, ``mahalanobis``, ``knn_distance`` and ``auroc_<score>``) and plain names for the
    model-level ones (``max_softmax``, ``entropy``, ``ece``, ``masf_flagged``, ``masf_p_median``,
    ``auroc_masf``, ``auroc_max_softmax``, ``auroc_entropy``).

    Attributes:
        steps: ``"fraction"`` or ``"count"``, what ``x`` holds (see :class:`~itermask.core.curves.MaskingCurves`).
        x: ``S`` steps of the grid (masking fractions or token counts).
        fraction: ``S`` mean share of the maskable tokens masked at each step (the grid itself for
            fraction steps).
        values: ``{key: [S] means over examples}`` (AUROC and ECE: one value per step).
        clean: ``{key: value on the clean inputs}`` for the keys where it is defined.
        missing: ``{key: reason}`` for statistics that could not be computed (absent from ``values``).
        n_examples: examples the statistics average over.
        example_scores: ``{key: [B, S] float64}`` the detector score (``<view>/mahalanobis``,
            ``<view>/knn_distance``) of every masked input, the rows with ``k = 0`` those of the clean input;
            only for the keys in ``values``. Not part of :meth:`to_dict` (the per-example table of
            :mod:`itermask.analyses.ood` stores them).
        example_clean: ``{key: [B] float64}`` the same detector's score of each clean input.
    """

    steps: str
    x: list[float]
    fraction: list[float]
    values: dict[str, list[float]] = field(default_factory=dict)
    clean: dict[str, float] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    n_examples: int = 0
    example_scores: dict[str, np.ndarray] = field(default_factory=dict)
    example_clean: dict[str, np.ndarray] = field(default_factory=dict)

    def to_dict(self) -> dict:
        names = ("steps", "x", "fraction", "n_examples", "values", "clean", "missing")
        return {name: getattr(self, name) for name in names}


def _per_step(clean: np.ndarray, masked: np.ndarray, out: OODCurves, key: str, auroc: bool = True) -> None:
    """Record the mean of ``masked`` ``[B, S]`` per step, the clean mean and (optionally) the AUROC."""
    out.values[key] = masked.mean(axis=0).tolist()
    out.clean[key] = float(clean.mean())
    if auroc:
        name = key.rsplit("/", 1)
        _auroc_series(clean, masked, out, f"{name[0]}/auroc_{name[1]}" if len(name) == 2 else f"auroc_{key}")


def _auroc_series(clean: np.ndarray, masked: np.ndarray, out: OODCurves, key: str) -> None:
    """``out.values[key]``: the OOD AUROC of ``masked`` ``[B, S]`` vs ``clean`` ``[B]`` at each step; if it
    cannot be computed at some step (non-finite scores, or a degenerate detector whose scores all tie),
    the whole series goes under ``out.missing[key]`` with the reasons and the steps, and a warning is
    logged: a tie must never read as 0.5 ("in distribution")."""
    series, failed = [], {}
    for s in range(masked.shape[1]):
        try:
            series.append(ood_auroc(clean, masked[:, s]))
        except ValueError as error:
            failed.setdefault(str(error), []).append(f"{out.x[s]:g}")
    if not failed:
        out.values[key] = series
        return
    out.missing[key] = "; ".join(f"{reason} at {out.steps} {', '.join(at)}" for reason, at in failed.items())
    log.warning("OOD statistic %s is missing: %s", key, out.missing[key])


def _degenerate(clean: np.ndarray, masked: np.ndarray, out: OODCurves, keys: tuple[str, ...], detector: str) -> bool:
    """If a detector's finite scores on every clean (``[B]``) and masked (``[B, S]``) input are constant
    (equal within :data:`CONSTANT_RTOL` of their magnitude), list ``keys`` under ``out.missing`` with the
    reason, log a warning and return ``True``."""
    scores = np.concatenate([clean.ravel(), masked.ravel()])
    if not np.isfinite(scores).all() or np.ptp(scores) > CONSTANT_RTOL * np.abs(scores).max():
        return False
    reason = (
        f"degenerate detector: {detector} gives every clean and masked input the same score "
        f"({np.median(scores):.6g}), so it cannot tell any inputs apart"
    )
    for key in keys:
        out.missing[key] = reason
    log.warning("OOD statistics %s are missing: %s", ", ".join(keys), reason)
    return True


@overload
def _same_as_clean(masked: Tensor, clean: Tensor | None, unmasked: Tensor) -> Tensor: ...
@overload
def _same_as_clean(masked: Tensor | None, clean: Tensor | None, unmasked: Tensor) -> Tensor | None: ...
def _same_as_clean(masked: Tensor | None, clean: Tensor | None, unmasked: Tensor) -> Tensor | None:
    """``masked`` ``[B, S, ...]`` with the rows where ``unmasked`` ``[B, S]`` replaced by ``clean`` ``[B, ...]``
    (``None`` if not captured, e.g. the pooled layers at ``ood.level=final``)."""
    if masked is None:
        return None
    assert clean is not None  # the clean forward captures what the masked ones do
    where = unmasked.to(masked.device).reshape(*unmasked.shape, *(1,) * (masked.dim() - 2))
    return torch.where(where, clean.unsqueeze(1).to(masked.dtype), masked)


def _with_unmasked_as_clean(curves: MaskingCurves) -> tuple[Representations, Representations, Tensor]:
    """``(clean, masked)`` representations and the masked ``[B, S, C]`` logits of ``curves``, the masked rows
    with ``k = 0`` taken from the clean forward (see :func:`masking_ood_statistics`).

    Raises:
        ValueError: if the curves carry no representations.
    """
    pair = curves.representations()
    if pair is None:
        raise ValueError("these masking curves carry no representations: evaluate with collect_representations=True")
    clean_reps, masked_reps = pair
    unmasked = curves.k == 0  # [B, S]
    # a tensor for each field captured (``features`` always), else ``None``
    values: list[Any] = [
        _same_as_clean(getattr(masked_reps, f.name), getattr(clean_reps, f.name), unmasked)
        for f in fields(Representations)
    ]
    masked_reps = Representations(*values)
    return clean_reps, masked_reps, _same_as_clean(curves.logits, curves.clean_logits, unmasked)


def masking_ood_statistics(
    curves: MaskingCurves, detectors: OODDetectors, alpha: float = 0.05, n_bins: int = 15
) -> OODCurves:
    """Every statistic of the module docstring at every step of ``curves`` (``B`` examples, ``S`` steps, with
    representations: ``collect_representations=True``), by ``detectors`` fitted on in-distribution data
    (:meth:`OODDetectors.fit`); ``alpha``: MaSF's significance level, ``n_bins``: the ECE's bins.

    A masked input with no token masked (``k = 0``: every 0 % step, and small fractions of short
    examples) *is* the clean input; its representations and logits are taken from the clean forward, since
    the masked forward ran it in another chunk, whose padding changes the last float bits (and a
    near-singular covariance can magnify those into visibly different Mahalanobis scores).

    Returns:
        :class:`OODCurves`. L2 norm, Mahalanobis, kNN distance, MaSF (``1 - p``, ties at its floor
        ``1 / (n_cal + 1)`` broken by :meth:`~itermask.ood.detectors.MaSF.scores`), entropy and
        ``1 - max softmax`` get an ``auroc_*`` (masked vs clean); cosine similarity and distance to the
        clean input do not (they are constant on clean inputs).

    Raises:
        ValueError: if the curves carry no representations.
    """
    clean_reps, masked_reps, logits = _with_unmasked_as_clean(curves)
    size = logits.shape[0]
    fraction = curves.grid if curves.steps == "fraction" else curves.masked_fraction.mean(dim=0)
    out = OODCurves(steps=curves.steps, x=curves.grid.tolist(), fraction=fraction.tolist(), n_examples=size)
    _representation_statistics(clean_reps, masked_reps, detectors, out)
    _masf_statistics(clean_reps, masked_reps, detectors, alpha, out)
    _output_statistics(curves.clean_logits, logits, curves.labels, n_bins, out)
    _drop_non_finite(out)
    return out


def _representation_statistics(
    clean_reps: Representations, masked_reps: Representations, detectors: OODDetectors, out: OODCurves
) -> None:
    """Record in ``out`` the per-view statistics of the ``[B, D]`` clean and ``[B, S, D]`` masked
    representations of every view (:func:`representation_views`): L2 norm,
    cosine similarity and L2 distance to the clean input, and the Mahalanobis and kNN-distance scores with their
    AUROCs (missing, with the reason, where the detector was not fitted or is degenerate)."""
    clean_views, masked_views = representation_views(clean_reps), representation_views(masked_reps)
    for view, clean in clean_views.items():
        masked = masked_views[view]  # [B, S, D]
        size, steps = masked.shape[:2]
        flat = masked.reshape(size * steps, -1)
        _per_step(_numpy(clean.norm(dim=-1)), _numpy(masked.norm(dim=-1)), out, f"{view}/l2_norm")
        cosine = torch.nn.functional.cosine_similarity(masked, clean[:, None, :].expand_as(masked), dim=-1)
        out.values[f"{view}/cosine_to_clean"] = _numpy(cosine).mean(axis=0).tolist()
        out.values[f"{view}/l2_to_clean"] = _numpy((masked - clean[:, None, :]).norm(dim=-1)).mean(axis=0).tolist()
        for name, scorers in (("mahalanobis", detectors.mahalanobis), ("knn_distance", detectors.knn)):
            key = f"{view}/{name}"
            if view not in scorers:
                out.missing[key] = detectors.missing.get(key, "the detector was not fitted")
                out.missing[f"{view}/auroc_{name}"] = out.missing[key]
                continue
            scores = scorers[view].score(clean), scorers[view].score(flat).reshape(size, steps)
            if not _degenerate(*scores, out, (key, f"{view}/auroc_{name}"), f"{name} on {view}"):
                _per_step(*scores, out, key)
                out.example_clean[key], out.example_scores[key] = scores


def _masf_statistics(
    clean_reps: Representations, masked_reps: Representations, detectors: OODDetectors, alpha: float, out: OODCurves
) -> None:
    """Record in ``out`` the MaSF statistics of the clean ``[B, L+1, H]`` and masked ``[B, S, L+1, H]`` pooled
    per-layer representations (``layer_max``): the share of inputs flagged
    (p-value below ``alpha``), the median p-value and the AUROC (missing, with the reason, where MaSF was not
    fitted or is degenerate).

    Raises:
        ValueError: if MaSF was fitted but the representations lack ``layer_max``.
    """
    if detectors.masf is None:
        reason = detectors.missing.get("masf", "MaSF was not fitted")
        for key in ("masf_flagged", "masf_p_median", "auroc_masf"):
            out.missing[key] = reason
        return
    if clean_reps.layer_max is None or masked_reps.layer_max is None:
        raise ValueError("MaSF needs the curves' pooled per-layer representations (layer_max)")
    clean_p = detectors.masf.p_values(clean_reps.layer_max)
    size, steps = masked_reps.layer_max.shape[:2]
    masked_max = masked_reps.layer_max.reshape(size * steps, *masked_reps.layer_max.shape[2:])
    flat_p = detectors.masf.p_values(masked_max)
    masked_p = flat_p.reshape(size, steps)
    if _degenerate(clean_p, masked_p, out, ("masf_flagged", "masf_p_median", "auroc_masf"), "MaSF"):
        return
    out.values["masf_flagged"] = (masked_p < alpha).mean(axis=0).tolist()
    out.clean["masf_flagged"] = float((clean_p < alpha).mean())
    out.values["masf_p_median"] = np.median(masked_p, axis=0).tolist()
    out.clean["masf_p_median"] = float(np.median(clean_p))
    clean_score = detectors.masf.scores(clean_reps.layer_max, clean_p)
    masked_score = detectors.masf.scores(masked_max, flat_p).reshape(size, steps)
    _auroc_series(clean_score, masked_score, out, "auroc_masf")


def _output_statistics(clean_logits: Tensor, logits: Tensor, labels: Tensor, n_bins: int, out: OODCurves) -> None:
    """Record in ``out`` the statistics of the ``[B, C]`` clean and ``[B, S, C]`` masked logits: max softmax
    probability, predictive entropy (nats), the AUROCs of ``1 - max softmax`` and of the entropy, and the ECE
    in ``n_bins`` bins against the ``[B]`` gold ``labels`` (missing where a label is unknown, ``-1``)."""
    msp_clean, msp = _numpy(max_softmax_probability(clean_logits)), _numpy(max_softmax_probability(logits))
    _per_step(msp_clean, msp, out, "max_softmax", auroc=False)
    _auroc_series(1 - msp_clean, 1 - msp, out, "auroc_max_softmax")
    _per_step(_numpy(predictive_entropy(clean_logits)), _numpy(predictive_entropy(logits)), out, "entropy")
    if (labels < 0).any():
        out.missing["ece"] = "ECE needs gold labels; some evaluated examples have none"
    else:
        labels = labels.cpu()
        out.values["ece"] = [expected_calibration_error(step.cpu(), labels, n_bins) for step in logits.unbind(dim=1)]
        out.clean["ece"] = expected_calibration_error(clean_logits.cpu(), labels, n_bins)


def _drop_non_finite(out: OODCurves) -> None:
    """Move every series of ``out.values`` with a non-finite value to ``out.missing`` (naming the values), and
    drop that key's clean value and per-example scores."""
    for key in [k for k, series in out.values.items() if not all(math.isfinite(v) for v in series)]:
        out.missing[key] = f"non-finite values {out.values.pop(key)}"
        out.clean.pop(key, None)
        out.example_scores.pop(key, None)
        out.example_clean.pop(key, None)
