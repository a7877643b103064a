"""Out-of-distribution statistics of masked inputs' embeddings, per masking step.

Crothers et al. 2023 (arXiv 2308.06795) argue that iteratively masked inputs lie outside the distribution
the classifier was fine-tuned on. This module measures that on the representations recorded by
:class:`itermask.core.evaluation.IterativeMaskingEvaluator` (``collect_representations=True``; see
:mod:`itermask.core.representations`), with the detectors of :mod:`itermask.ood.detectors`. Every
function takes tensors and returns tensors or small dataclasses: no Hydra, no logging backend, no files.

Statistics (higher = more out-of-distribution for every *score*):

* L2 norm; cosine similarity and L2 distance to the same example unmasked.
* Mahalanobis score and k-nearest-neighbour distance per view; MaSF, reported as the fraction of inputs
  flagged at ``alpha`` (:mod:`itermask.ood.detectors`).
* OOD AUROC of masked vs clean test inputs for every score (:func:`ood_auroc`, scikit-learn's
  ``roc_auc_score``).
* Max softmax probability, predictive entropy (nats) and expected calibration error (15 equal-width
  bins; Guo et al. 2017, arXiv 1706.04599, Eq. 3; torchmetrics).

A statistic that cannot be computed is never a silent zero: it is left out of the values and its
reason recorded under ``missing``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import Tensor
from torchmetrics.functional.classification import multiclass_calibration_error

from itermask.core.evaluation import MaskingCurves
from itermask.ood.detectors import OODDetectors, _numpy, representation_views

__all__ = [
    "max_softmax_probability",
    "predictive_entropy",
    "expected_calibration_error",
    "ood_auroc",
    "OODCurves",
    "masking_ood_statistics",
]

def max_softmax_probability(logits: Tensor) -> Tensor:
    """``[...]`` the largest softmax probability of ``logits`` ``[..., C]`` (Hendrycks & Gimpel 2017)."""
    return logits.float().softmax(dim=-1).amax(dim=-1)


def predictive_entropy(logits: Tensor) -> Tensor:
    """``[...]`` entropy in nats of the softmax of ``logits`` ``[..., C]``."""
    log_p = logits.float().log_softmax(dim=-1)
    return -(log_p.exp() * log_p).sum(dim=-1)


def expected_calibration_error(logits: Tensor, labels: Tensor, n_bins: int = 15) -> float:
    """Expected calibration error (Guo et al. 2017, arXiv 1706.04599, Eq. 3): the confidence (max softmax
    probability) is binned into ``n_bins`` equal-width bins; ECE ``= sum_b |B_b|/N |acc(B_b) - conf(B_b)|``.

    Args:
        logits: ``[N, C]``.
        labels: ``[N]`` gold labels, all ``>= 0``.

    Returns:
        ECE, a probability difference in [0, 1] (torchmetrics' ``multiclass_calibration_error``, L1 norm).

    Raises:
        ValueError: without examples or with unknown (negative) labels.
    """
    if len(labels) == 0 or (labels < 0).any():
        raise ValueError("ECE needs at least one example and a gold label for each")
    probs = logits.float().softmax(dim=-1)
    return float(multiclass_calibration_error(probs, labels.long(), num_classes=probs.shape[-1], n_bins=n_bins, norm="l1"))


def ood_auroc(clean_scores: np.ndarray, masked_scores: np.ndarray, rtol: float = 1e-6) -> float:
    """AUROC of telling masked inputs (positives) from clean ones (negatives) by a score that is higher
    for out-of-distribution inputs (``sklearn.metrics.roc_auc_score``). 0.5: indistinguishable; 1: every
    masked input scores above every clean one; below 0.5: masked inputs score *lower*.

    Scores are rounded to ``rtol`` times the largest absolute score first, so values that differ only by
    the float noise of differently padded batches tie (masking 0 % gives exactly 0.5).

    Raises:
        ValueError: if a score is not finite or either set is empty.
    """
    clean_scores, masked_scores = np.asarray(clean_scores, float), np.asarray(masked_scores, float)
    if not len(clean_scores) or not len(masked_scores):
        raise ValueError("OOD AUROC needs clean and masked scores")
    scores = np.concatenate([clean_scores, masked_scores])
    if not np.isfinite(scores).all():
        raise ValueError("OOD AUROC got non-finite scores")
    truth = np.concatenate([np.zeros(len(clean_scores)), np.ones(len(masked_scores))])
    scale = float(np.abs(scores).max()) * rtol
    if scale > 0:
        scores = np.round(scores / scale)
    return float(roc_auc_score(truth, scores))



@dataclass
class OODCurves:
    """Out-of-distribution statistics along one masking curve (one saliency method and schedule).

    Keys are ``"<view>/<statistic>"`` for per-view statistics (``l2_norm``, ``cosine_to_clean``,
    ``l2_to_clean``, ``mahalanobis``, ``knn_distance`` and ``auroc_<score>``) and plain names for the
    model-level ones (``max_softmax``, ``entropy``, ``ece``, ``masf_flagged``, ``masf_p_median``,
    ``auroc_masf``, ``auroc_max_softmax``, ``auroc_entropy``).

    Attributes:
        steps: ``"fraction"`` or ``"count"``, what ``x`` holds (see :class:`~itermask.evaluation.MaskingCurves`).
        x: ``S`` steps of the grid (masking fractions or token counts).
        fraction: ``S`` mean share of the maskable tokens masked at each step (the grid itself for
            fraction steps).
        values: ``{key: [S] means over examples}`` (AUROC and ECE: one value per step).
        clean: ``{key: value on the clean inputs}`` for the keys where it is defined.
        missing: ``{key: reason}`` for statistics that could not be computed (absent from ``values``).
        n_examples: examples the statistics average over.
    """

    steps: str
    x: list[float]
    fraction: list[float]
    values: dict[str, list[float]] = field(default_factory=dict)
    clean: dict[str, float] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    n_examples: int = 0

    def to_dict(self) -> dict:
        return {
            "steps": self.steps,
            "x": self.x,
            "fraction": self.fraction,
            "n_examples": self.n_examples,
            "values": self.values,
            "clean": self.clean,
            "missing": self.missing,
        }


def _per_step(clean: np.ndarray, masked: np.ndarray, out: OODCurves, key: str, auroc: bool = True) -> None:
    """Record the mean of ``masked`` ``[B, S]`` per step, the clean mean and (optionally) the AUROC."""
    out.values[key] = masked.mean(axis=0).tolist()
    out.clean[key] = float(clean.mean())
    if not auroc:
        return
    name = key.rsplit("/", 1)
    auroc_key = f"{name[0]}/auroc_{name[1]}" if len(name) == 2 else f"auroc_{key}"
    try:
        out.values[auroc_key] = [ood_auroc(clean, masked[:, s]) for s in range(masked.shape[1])]
    except ValueError as error:
        out.missing[auroc_key] = str(error)


def masking_ood_statistics(
    curves: MaskingCurves, detectors: OODDetectors, alpha: float = 0.05, n_bins: int = 15
) -> OODCurves:
    """Every statistic of the module docstring at every step of ``curves``.

    Args:
        curves: masking curves with representations (``collect_representations=True``), ``B`` examples,
            ``S`` steps.
        detectors: fitted on in-distribution data (:meth:`OODDetectors.fit`).
        alpha: MaSF significance level; ``masf_flagged`` is the share of inputs with p-value below it.
        n_bins: ECE bins.

    Returns:
        :class:`OODCurves`. L2 norm, Mahalanobis, kNN distance, MaSF (``1 - p``), entropy and
        ``1 - max softmax`` get an ``auroc_*`` (masked vs clean); cosine similarity and distance to the
        clean input do not (they are constant on clean inputs).

    Raises:
        ValueError: if the curves carry no representations.
    """
    pair = curves.representations()
    if pair is None:
        raise ValueError(
            "these masking curves carry no representations: evaluate with collect_representations=True"
        )
    clean_reps, masked_reps = pair
    size, steps = curves.logits.shape[:2]
    fraction = curves.grid if curves.steps == "fraction" else curves.masked_fraction.mean(dim=0)
    out = OODCurves(steps=curves.steps, x=curves.grid.tolist(), fraction=fraction.tolist(), n_examples=size)
    clean_views, masked_views = representation_views(clean_reps), representation_views(masked_reps)
    for view, clean in clean_views.items():
        masked = masked_views[view]  # [B, S, D]
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
            scorer = scorers[view]
            _per_step(scorer.score(clean), scorer.score(flat).reshape(size, steps), out, key)

    if detectors.masf is None:
        reason = detectors.missing.get("masf", "MaSF was not fitted")
        for key in ("masf_flagged", "masf_p_median", "auroc_masf"):
            out.missing[key] = reason
    else:
        clean_p = detectors.masf.p_values(clean_reps.layer_max)
        masked_p = detectors.masf.p_values(masked_reps.layer_max.reshape(size * steps, *masked_reps.layer_max.shape[2:]))
        masked_p = masked_p.reshape(size, steps)
        out.values["masf_flagged"] = (masked_p < alpha).mean(axis=0).tolist()
        out.clean["masf_flagged"] = float((clean_p < alpha).mean())
        out.values["masf_p_median"] = np.median(masked_p, axis=0).tolist()
        out.clean["masf_p_median"] = float(np.median(clean_p))
        out.values["auroc_masf"] = [ood_auroc(1 - clean_p, 1 - masked_p[:, s]) for s in range(steps)]

    msp_clean, msp = _numpy(max_softmax_probability(curves.clean_logits)), _numpy(max_softmax_probability(curves.logits))
    _per_step(msp_clean, msp, out, "max_softmax", auroc=False)
    out.values["auroc_max_softmax"] = [ood_auroc(1 - msp_clean, 1 - msp[:, s]) for s in range(steps)]
    _per_step(_numpy(predictive_entropy(curves.clean_logits)), _numpy(predictive_entropy(curves.logits)), out, "entropy")
    if (curves.labels < 0).any():
        out.missing["ece"] = "ECE needs gold labels; some evaluated examples have none"
    else:
        labels = curves.labels.cpu()
        out.values["ece"] = [expected_calibration_error(curves.logits[:, s].cpu(), labels, n_bins) for s in range(steps)]
        out.clean["ece"] = expected_calibration_error(curves.clean_logits.cpu(), labels, n_bins)
    for key in [k for k, series in out.values.items() if not all(math.isfinite(v) for v in series)]:
        out.missing[key] = f"non-finite values {out.values.pop(key)}"
        out.clean.pop(key, None)
    return out
