"""Faithfulness scores computed from masking curves, and the registry of metrics.

Every function takes a :class:`itermask.core.evaluation.MaskingCurves` (or plain tensors) and returns per
example values ``[B]`` or ``[B, S]``; :func:`summarize` averages them over examples, and
:func:`relative_to_random` compares a summary with the random explanation's summary of the same run.

``quantity`` selects what is compared: ``"probability"`` (softmax probability of the target class, the
ERASER convention, default) or ``"logit"`` (its logit). The name of every score records which
(``..._prob`` / ``..._logit``); scores without the suffix do not depend on it.

Curves have fraction steps (x = masking fraction, share of the maskable tokens) or count steps (x = number
of tokens masked), recorded as ``curves.steps``; areas are taken over that x-axis.

Sources:
    * Comprehensiveness and sufficiency: DeYoung et al. 2020, "ERASER", arXiv 1911.03429, Sec. 4,
      Eqs. for comprehensiveness ``m(x)_j - m(x \\ r)_j`` and sufficiency ``m(x)_j - m(r)_j``.
    * AOPC over the bins 1, 5, 10, 20, 50 %: DeYoung et al. 2020, Sec. 4 ("we ... define bins ... and
      compute the average"), as ERASER's code ``rationale_benchmark/metrics.py`` does: the plain mean over
      the bins of the per-bin score (no ``1/(K+1)`` term for the empty bin). Fraction steps only.
    * AOPC over the full curve: Samek et al. 2017, arXiv 1509.06321, the AOPC of the most-relevant-first
      perturbation curve, ``1/(L+1) sum_{k=0}^{L}`` of the score after ``k`` perturbation steps: the mean
      over every step of the grid (a grid that starts at 0 reproduces Samek's ``k = 0`` term).
    * Log-odds drop: Shrikumar et al. 2017 (DeepLIFT), arXiv 1704.02685, Sec. 4.1, "change in log-odds"
      of the target class, ``log p/(1-p)`` on the clean input minus on the masked input.
    * Area under the masking curve: trapezoid rule over the x-axis (Crothers et al. 2023,
      arXiv 2308.06795, curves of the predicted-class probability against the fraction masked).
    * Decision flip: the prediction differs from the clean prediction (Chrysostomou & Aletras 2021,
      arXiv 2108.13759: the "fraction of tokens" removed at the first decision flip, DFFOT), and the
      share of examples flipped at each step.
    * RACU without retraining: the relative area between curves (RACU) of Madsen et al. 2022,
      arXiv 2110.08412 (its summarising metric and the figure of its "faithfulness" and "normaliser"
      areas), applied to our curves, which are measured *without*
      retraining (Madsen defines RACU on Recursive-ROAR curves, where the model is retrained on the
      masked data at every step); see :func:`racu_without_retraining`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from itermask.core.registry import Registered, Registry

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
    "summarize",
    "per_example",
    "relative_to_random",
    "Metric",
    "MetricInfo",
    "METRICS",
    "metric_info",
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


def log_odds(logits: Tensor, target: Tensor) -> Tensor:
    """Log-odds of class ``target``, ``log p / (1 - p)`` in nats, computed stably from the logits as
    ``z_target - logsumexp_{c != target} z_c``.

    Args:
        logits: ``[B, C]`` or ``[B, S, C]``.
        target: ``[B]`` long.

    Returns:
        ``[B]`` or ``[B, S]`` (for two classes, the logit difference ``z_target - z_other``).
    """
    import torch

    z = logits.double()
    index = target.long().view(-1, *([1] * (z.dim() - 1))).expand(*z.shape[:-1], 1)
    own = z.gather(-1, index).squeeze(-1)
    others = torch.logsumexp(z.scatter(-1, index, float("-inf")), dim=-1)
    return (own - others).float()


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


def log_odds_drop(curves: MaskingCurves) -> Tensor:
    """``[B, S]`` drop in the target class's log-odds when the top-k tokens are masked:
    ``log-odds(y|x) - log-odds(y|x without its top-k tokens)`` (Shrikumar et al. 2017, Sec. 4.1).
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
    """Area over the perturbation curve as ERASER computes it: the mean of ``scores`` over ``bins``.

    Args:
        scores: ``[B, S]`` per-step comprehensiveness or sufficiency.
        fractions: ``[S]`` the masking fractions of the steps.
        bins: fractions to average over (default 1, 5, 10, 20, 50 %; DeYoung et al. 2020, Sec. 4).

    Returns:
        ``[B]``.

    Raises:
        ValueError: if a bin is not one of the fractions, or there is no bin (the mean of nothing).
    """
    if len(bins) == 0:
        raise ValueError("AOPC needs at least one bin (summarize(..., bins=None) leaves AOPC out)")
    return scores[:, _bin_columns(fractions, bins)].mean(dim=1)


def aopc_full(scores: Tensor) -> Tensor:
    """AOPC over the full curve: the mean of ``scores`` (``[B, S]``) over every step, ``[B]``
    (Samek et al. 2017, arXiv 1509.06321; the grid's steps are the perturbation steps, fraction or count)."""
    return scores.mean(dim=1)


def area_under_curve(values: Tensor, grid: Tensor) -> Tensor:
    """Trapezoid area under ``values`` (``[..., S]``) over the x-axis ``grid`` (``[S]``: masking fractions,
    or token counts for count steps); returns ``[...]``.

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
    2021).

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
    """Relative area between the masking curve of an explanation and of the random explanation,
    normalised as RACU is in Madsen et al. 2022 (arXiv 2110.08412, summarising metric), but on curves
    measured *without retraining*.

    ``RACU = integral (r(x) - e(x)) dx / integral (r(x) - r(x_end)) dx`` over the x-axis ``grid`` (trapezoid
    rule), where ``e`` is the explanation's curve, ``r`` the random explanation's curve and ``r(x_end)``
    the random curve's last value (at 100 % masked the two curves meet). The numerator is the area by
    which the explanation's curve runs below the random one (Madsen's "faithfulness" area), the
    denominator the area of the random curve above its end point (his "normaliser"). 1 is the most
    faithful possible (the curve drops to the end value at once), 0 is no better than random, and a
    negative value is worse than random. The bound 1 holds only when the explanation's curve never drops
    below the end value and the random curve is not flat: without retraining, curves are not monotone
    (an intermediate step can score below the fully masked input), a grid that stops before 100 % can
    leave the explanation's curve below the random one's end, and a nearly flat random curve makes the
    denominator small, so values above 1 (and large ratios) occur.

    Madsen's curves are Recursive-ROAR test performance: the model is retrained on the masked data at
    every step. Ours use the same fine-tuned model throughout, so the masked inputs are out of
    distribution for it; hence the name. Pass the curves of the mean target probability/logit (or of
    accuracy) over the same examples for both explanations.

    Args:
        values: ``[..., S]`` the explanation's curve.
        random_values: ``[..., S]`` the random explanation's curve.
        grid: ``[S]`` the x-axis (fractions or counts).

    Returns:
        ``[...]``; NaN where the normaliser is not positive (a random curve that never falls).

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


# ------------------------------------------------------------------------------------------------
# the metric registry: summarize, the tracker and the report read it


@dataclass(frozen=True)
class MetricInfo:
    """What a score key means (see :func:`metric_info`).

    Attributes:
        name: the registered metric's name (``comprehensiveness``; keys may add ``aopc_``/``aopc_full_``
            and ``_prob``/``_logit``).
        unit: ``"probability"``, ``"logit"``, ``"log-odds"`` (nats), ``"fraction"`` (share of the
            maskable tokens or of examples), ``"count"`` (tokens), or ``"area"`` (the quantity times the
            x-axis unit: fraction or tokens).
        higher_is_more_faithful: ``True`` when a higher value means a more faithful explanation, ``False``
            when lower does, ``None`` for descriptive values (the step grid).
        per_step: a curve (one value per masking step) or one value per example.
        bounds: ``(lo, hi)`` every value (and every mean of values) lies in, either end possibly infinite;
            ``None`` when unbounded (logits, log-odds). Confidence intervals respect it
            (:mod:`itermask.reporting.intervals`).
    """

    name: str
    unit: str
    higher_is_more_faithful: bool | None
    per_step: bool
    bounds: tuple[float, float] | None = None


#: every metric by name, in the order summaries list them (subclasses of :class:`Metric` add themselves)
METRICS: Registry[Metric] = Registry("metric")


class Metric(Registered, ABC):
    """A score computed from masking curves. A subclass with a :attr:`name` registers itself in
    :data:`METRICS`; :func:`summarize` then reports it, and the tracker and the report read its unit and
    direction: a new metric is this one class.

    Class attributes:
        name: the summary key (``<name>_prob`` / ``<name>_logit`` when :attr:`per_quantity`).
        unit: see :class:`MetricInfo`; ``"quantity"`` stands for the evaluation's quantity (probability or
            logit).
        higher_is_more_faithful: see :class:`MetricInfo`.
        per_step: :meth:`values` returns ``[B, S]`` (a curve) or ``[B]``.
        per_quantity: the values depend on the quantity (probability or logit).
        aopc: a per-step score also summarised as ``aopc_<key>`` (mean over the ERASER bins, fraction steps
            only) and ``aopc_full_<key>`` (mean over every step).
        vs_random: compared with the random explanation in :func:`relative_to_random` (AOPC scores always are).
        describes_grid: a per-step value that describes the x-axis (fraction, tokens masked), not the model.
        bounds: the range of the values, ``(lo, hi)`` (ends may be infinite) or ``None``; for a metric whose
            unit is ``"quantity"`` it is the range with the probability, a logit quantity being unbounded.
    """

    registry = METRICS
    unit: ClassVar[str] = "quantity"
    higher_is_more_faithful: ClassVar[bool | None] = None
    per_step: ClassVar[bool] = True
    per_quantity: ClassVar[bool] = False
    aopc: ClassVar[bool] = False
    vs_random: ClassVar[bool] = False
    describes_grid: ClassVar[bool] = False
    bounds: ClassVar[tuple[float, float] | None] = None

    @classmethod
    def _registry_entry(cls) -> Metric:
        return cls()

    def key(self, quantity: Quantity) -> str:
        """The summary key: ``name``, or ``name_prob`` / ``name_logit``."""
        return f"{self.name}_{_suffix(quantity)}" if self.per_quantity else self.name

    def applies(self, curves: MaskingCurves) -> bool:
        """Whether the metric is defined for ``curves`` (e.g. sufficiency needs keep-only inputs)."""
        return True

    @abstractmethod
    def values(self, curves: MaskingCurves, quantity: Quantity) -> Tensor:
        """Per-example values: ``[B, S]`` if :attr:`per_step`, else ``[B]`` (NaN where undefined)."""

    def reduce(self, values: Tensor, curves: MaskingCurves) -> list[float] | float:
        """The summary over examples: the mean per step (a list) or the mean (a float)."""
        return values.mean(dim=0).tolist() if self.per_step else values.mean().item()

    def info(self, quantity: Quantity | None = None) -> MetricInfo:
        unit = self.unit if self.unit != "quantity" or quantity is None else quantity
        bounds = None if self.unit == "quantity" and quantity not in (None, "probability") else self.bounds
        return MetricInfo(self.name, unit, self.higher_is_more_faithful, self.per_step, bounds)


def _suffix(quantity: Quantity) -> str:
    return "prob" if quantity == "probability" else "logit"


class MaskedFraction(Metric):
    """``fraction``: the masking fraction of each step (the grid, for fraction steps), or the mean share
    of the maskable tokens masked, ``k / n`` (count steps)."""

    name, unit, describes_grid, bounds = "fraction", "fraction", True, (0.0, 1.0)

    def values(self, curves, quantity):
        return curves.masked_fraction

    def reduce(self, values, curves):
        return (curves.grid if curves.steps == "fraction" else values.mean(dim=0)).tolist()


class TokensMasked(Metric):
    """``mean_k``: tokens masked at each step, a count."""

    name, unit, describes_grid, bounds = "mean_k", "count", True, (0.0, math.inf)

    def values(self, curves, quantity):
        return curves.k.double()


class TargetOutput(Metric):
    """``target_<q>``: the target class's probability or logit after masking (lower: more faithful)."""

    name, per_quantity, higher_is_more_faithful, bounds = "target", True, False, (0.0, 1.0)

    def values(self, curves, quantity):
        return target_output(curves.logits, curves.target, quantity)


class MaskedAccuracy(Metric):
    """``accuracy``: accuracy against the gold labels after masking (NaN without labels)."""

    name, unit, higher_is_more_faithful, bounds = "accuracy", "fraction", False, (0.0, 1.0)

    def values(self, curves, quantity):
        correct = (curves.logits.argmax(dim=-1) == curves.labels[:, None]).float()
        return correct.masked_fill((curves.labels < 0)[:, None], float("nan"))

    def reduce(self, values, curves):
        known = curves.labels >= 0
        if not known.any():
            return [float("nan")] * values.shape[1]
        return values[known].mean(dim=0).tolist()


class FlipRate(Metric):
    """``flip_rate``: share of examples whose prediction differs from the clean one (decision flip)."""

    name, unit, higher_is_more_faithful, bounds = "flip_rate", "fraction", True, (0.0, 1.0)

    def values(self, curves, quantity):
        return decision_flips(curves).float()


class Comprehensiveness(Metric):
    """``comprehensiveness_<q>`` (ERASER; :func:`comprehensiveness`)."""

    name, per_quantity, higher_is_more_faithful, aopc = "comprehensiveness", True, True, True
    bounds = (-1.0, 1.0)  # a difference of two probabilities

    def values(self, curves, quantity):
        return comprehensiveness(curves, quantity)


class LogOddsDrop(Metric):
    """``log_odds_drop`` in nats (:func:`log_odds_drop`)."""

    name, unit, higher_is_more_faithful, aopc = "log_odds_drop", "log-odds", True, True

    def values(self, curves, quantity):
        return log_odds_drop(curves)


class Sufficiency(Metric):
    """``sufficiency_<q>`` (ERASER; :func:`sufficiency`), for schedules with keep-only inputs."""

    name, per_quantity, higher_is_more_faithful, aopc = "sufficiency", True, False, True
    bounds = (-1.0, 1.0)  # a difference of two probabilities

    def applies(self, curves):
        return curves.keep_logits is not None

    def values(self, curves, quantity):
        return sufficiency(curves, quantity)


class AreaUnderCurve(Metric):
    """``auc_<q>``: trapezoid area under the target curve over the x-axis (:func:`area_under_curve`)."""

    name, unit, per_quantity, per_step, higher_is_more_faithful, vs_random = "auc", "area", True, False, False, True
    bounds = (0.0, math.inf)  # at most 1 over a fraction grid, but up to the largest count over a count grid

    def values(self, curves, quantity):
        return area_under_curve(target_output(curves.logits, curves.target, quantity), curves.grid)


class FirstFlipFraction(Metric):
    """``first_flip_fraction``: ``k / n`` at the first decision flip, mean over the examples that flip."""

    name, unit, per_step, higher_is_more_faithful = "first_flip_fraction", "fraction", False, False
    bounds = (0.0, 1.0)

    def values(self, curves, quantity):
        return first_flip_fraction(curves)

    def reduce(self, values, curves):
        return _mean(values)


class FirstFlipCount(FirstFlipFraction):
    """``first_flip_count``: tokens masked at the first decision flip, mean over the examples that flip."""

    name, unit, bounds = "first_flip_count", "count", (0.0, math.inf)

    def values(self, curves, quantity):
        return first_flip_count(curves)


class NeverFlipRate(Metric):
    """``never_flip_rate``: share of examples whose prediction never flips."""

    name, unit, per_step, higher_is_more_faithful = "never_flip_rate", "fraction", False, False
    bounds = (0.0, 1.0)

    def values(self, curves, quantity):
        return first_flip_fraction(curves).isnan().float()


def metric_info(key: str, quantity: Quantity | None = None) -> MetricInfo | None:
    """What the summary key ``key`` means, with ``aopc_``/``aopc_full_`` prefixes and ``_prob``/``_logit``
    suffixes resolved (``quantity`` gives the unit of keys without a suffix), or ``None`` for a key no
    registered metric produces."""
    prefix = next(p for p in ("aopc_full_", "aopc_", "") if key.startswith(p))
    base = key[len(prefix) :]
    for metric in METRICS.values():
        for q in ("probability", "logit") if metric.per_quantity else (quantity,):
            if metric.key(q or "probability") == base and (not prefix or metric.aopc):
                info = metric.info(q)
                per_step = info.per_step and not prefix
                return MetricInfo(key, info.unit, info.higher_is_more_faithful, per_step, info.bounds)
    return None


def _mean(values: Tensor) -> float:
    finite = values[~values.isnan()]
    return finite.double().mean().item() if len(finite) else float("nan")


def summarize(
    curves: MaskingCurves, quantity: Quantity = "probability", bins: Sequence[float] | None = AOPC_BINS
) -> dict:
    """Scores averaged over the examples of ``curves``: every metric of :data:`METRICS` that applies.

    Returns a dict of plain Python values (``<q>`` is ``prob`` or ``logit`` after ``quantity``):
        * ``n_examples``, ``quantity``, ``steps`` (``"fraction"`` or ``"count"``), ``x`` (the grid:
          fractions or token counts);
        * per-step lists, one per per-step metric: ``fraction`` (the grid for fraction steps; the mean share
          masked ``k / n`` for count steps), ``mean_k`` (tokens masked, a count), ``target_<q>`` (mean target
          probability/logit after masking), ``accuracy`` (vs gold labels; NaN without labels),
          ``flip_rate`` (share of examples whose prediction differs from the clean one),
          ``comprehensiveness_<q>``, ``log_odds_drop`` and, for schedules with keep-only inputs
          (one-shot), ``sufficiency_<q>``;
        * for each per-step metric with ``aopc``: ``aopc_<key>`` over the ERASER ``bins`` (fraction steps
          only; none when ``bins`` is ``None``), then ``aopc_full_<key>`` over every step;
        * one scalar per per-example metric: ``auc_<q>`` (area under the target curve over x),
          ``first_flip_fraction`` and ``first_flip_count`` (means over the examples that flip) and
          ``never_flip_rate``.

    Raises:
        ValueError: for an unknown quantity, or a bin not on a fraction grid.
    """
    if quantity not in ("probability", "logit"):
        raise ValueError(f"quantity must be 'probability' or 'logit', got {quantity!r}")
    out = {"n_examples": len(curves), "quantity": quantity, "steps": curves.steps, "x": curves.grid.tolist()}
    applicable = [metric for metric in METRICS.values() if metric.applies(curves)]
    areas = {}
    for metric in (m for m in applicable if m.per_step):
        values = metric.values(curves, quantity)
        out[metric.key(quantity)] = metric.reduce(values, curves)
        if metric.aopc:
            areas[metric.key(quantity)] = values
    if curves.steps == "fraction" and bins is not None:
        out.update({f"aopc_{key}": aopc(values, curves.grid, bins).mean().item() for key, values in areas.items()})
    out.update({f"aopc_full_{key}": aopc_full(values).mean().item() for key, values in areas.items()})
    for metric in (m for m in applicable if not m.per_step):
        out[metric.key(quantity)] = metric.reduce(metric.values(curves, quantity), curves)
    return out


def per_example(
    curves: MaskingCurves, quantity: Quantity = "probability", bins: Sequence[float] | None = AOPC_BINS
) -> dict[str, Tensor]:
    """Every applicable metric per example: ``{key: [B, S] or [B] tensor}`` (keys as in :func:`summarize`,
    AOPC scores per example included; none over bins when ``bins`` is ``None``); NaN where a value is
    undefined (e.g. no flip)."""
    out = {}
    for metric in (m for m in METRICS.values() if m.applies(curves)):
        values = metric.values(curves, quantity)
        out[metric.key(quantity)] = values
        if metric.aopc:
            if curves.steps == "fraction" and bins is not None:
                out[f"aopc_{metric.key(quantity)}"] = aopc(values, curves.grid, bins)
            out[f"aopc_full_{metric.key(quantity)}"] = aopc_full(values)
    return out


def relative_to_random(summary: dict, random_summary: dict) -> dict:
    """Scores of an explanation read against the random explanation of the same run.

    Args:
        summary: :func:`summarize` of the explanation's curves.
        random_summary: :func:`summarize` of the random explanation's curves, same examples and steps.

    Returns:
        ``{key: summary[key] - random_summary[key]}`` for every ``aopc_*`` and ``auc_*`` score, and
        ``racu_without_retraining_<q>`` (:func:`racu_without_retraining` of the mean target curves) and
        ``racu_without_retraining_accuracy`` (of the accuracy curves; NaN without gold labels).

    Raises:
        ValueError: if the two summaries differ in steps, grid or quantity.
    """
    import torch

    for key in ("steps", "x", "quantity"):
        if summary[key] != random_summary[key]:
            raise ValueError(f"cannot compare summaries with different {key}: {summary[key]} vs {random_summary[key]}")
    compared = {m.key(summary["quantity"]) for m in METRICS.values() if m.vs_random}
    out = {
        key: value - random_summary[key]
        for key, value in summary.items()
        if (key.startswith("aopc_") or key in compared) and isinstance(value, float) and key in random_summary
    }
    grid = torch.tensor(summary["x"], dtype=torch.float64)
    q = "prob" if summary["quantity"] == "probability" else "logit"
    for name in (f"target_{q}", "accuracy"):
        score = racu_without_retraining(
            torch.tensor(summary[name], dtype=torch.float64),
            torch.tensor(random_summary[name], dtype=torch.float64),
            grid,
        )
        out[f"racu_without_retraining_{name.removeprefix('target_')}"] = score.item()
    return out
