"""The registry of faithfulness metrics and their typed score keys.

A :class:`Metric` computes per-example values from masking curves (with the functions of
:mod:`itermask.core.measures`); defining a subclass with a ``name`` registers it in :data:`METRICS`.
:func:`summarize` averages every applicable metric over the examples of a run, :func:`per_example` keeps the
values per example, and :func:`relative_to_random` reads a summary against the random explanation's. Every
value of a summary has a :class:`ScoreKey`, stored as its text and read back only by :meth:`ScoreKey.parse`.
The registry is readable without torch (the report reads stored results without it).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from itermask.core.evaluation_settings import QUANTITIES, Quantity
from itermask.core.measures import (
    AOPC_BINS,
    aopc,
    aopc_full,
    area_under_curve,
    comprehensiveness,
    decision_flips,
    first_flip_count,
    first_flip_fraction,
    log_odds_drop,
    racu_without_retraining,
    sufficiency,
    symmetric_relevance_gain,
    target_output,
)
from itermask.core.registry import Registered, Registry

if TYPE_CHECKING:  # torch is imported where a score is computed: the metric registry is readable without it
    from torch import Tensor

    from itermask.core.curves import MaskingCurves

__all__ = [
    "AGGREGATES",
    "QUANTITY_SUFFIXES",
    "RACU",
    "ScoreKey",
    "MetricInfo",
    "Metric",
    "METRICS",
    "metric_info",
    "ffidelity_info",
    "naopc_info",
    "summarize",
    "per_example",
    "relative_to_random",
]

#: how a per-step metric is summarised over the steps: AOPC over the ERASER bins, or over every step
AGGREGATES = ("aopc", "aopc_full")
#: how a key names the quantity it was computed on
QUANTITY_SUFFIXES: dict[str, str] = {"probability": "prob", "logit": "logit"}
#: the relative measure of :func:`relative_to_random` (``racu_without_retraining_<prob|logit|accuracy>``)
RACU = "racu_without_retraining"


@dataclass(frozen=True)
class MetricInfo:
    """What a score key means (:meth:`ScoreKey.info`).

    Attributes:
        name: the registered metric's name (``comprehensiveness``; keys may add ``aopc_``/``aopc_full_``
            and ``_prob``/``_logit``).
        unit: ``"probability"``, ``"logit"``, ``"log-odds"`` (nats), ``"fraction"`` (share of the maskable tokens
            or of examples), ``"count"`` (tokens), or ``"area"`` (the quantity times the x-axis unit).
        higher_is_more_faithful: ``True`` when a higher value means a more faithful explanation, ``False``
            when lower does, ``None`` for descriptive values (the step grid).
        per_step: a curve (one value per masking step) or one value per example.
        bounds: ``(lo, hi)`` every value (and every mean of values) lies in, either end possibly infinite;
            ``None`` when unbounded (logits, log-odds); confidence intervals respect it.
    """

    name: str
    unit: str
    higher_is_more_faithful: bool | None
    per_step: bool
    bounds: tuple[float, float] | None = None


@dataclass(frozen=True)
class ScoreKey:
    """The key of one value of a summary (:func:`summarize`), stored as its text (``str(key)``:
    ``aopc_comprehensiveness_prob``): the registered ``metric``'s name, its ``aggregate`` (``None``: the metric
    itself, ``"aopc"``: its mean over the ERASER bins, ``"aopc_full"``: over every step) and, for a metric that
    depends on it, the target ``quantity`` (``"probability"`` or ``"logit"``; else ``None``)."""

    metric: str
    aggregate: str | None = None
    quantity: Quantity | None = None

    def __str__(self) -> str:
        prefix = f"{self.aggregate}_" if self.aggregate else ""
        suffix = f"_{QUANTITY_SUFFIXES[self.quantity]}" if self.quantity else ""
        return f"{prefix}{self.metric}{suffix}"

    @classmethod
    def of(cls, metric: str, quantity: Quantity, aggregate: str | None = None) -> ScoreKey:
        """The key of the registered ``metric`` computed on ``quantity`` (kept only when the metric depends on
        it), aggregated by ``aggregate``.

        Raises:
            ValueError: an unknown metric (naming the known ones) or aggregate."""
        if aggregate not in (None, *AGGREGATES):
            raise ValueError(f"unknown aggregate {aggregate!r}: choose from {AGGREGATES}")
        return METRICS.get_entry(metric).key(quantity, aggregate)

    @classmethod
    def parse(cls, text: str) -> ScoreKey | None:
        """The key a stored text names (``aopc_full_sufficiency_logit``), or ``None`` when no registered metric
        produces it."""
        for aggregate in ("aopc_full", "aopc", None):
            if aggregate and not text.startswith(f"{aggregate}_"):
                continue
            for metric in METRICS.values():
                if aggregate and not metric.aopc:
                    continue
                for quantity in QUANTITIES if metric.per_quantity else (None,):
                    key = cls(metric.name, aggregate, quantity)  # pyright: ignore[reportArgumentType]
                    if str(key) == text:
                        return key
        return None

    @property
    def base(self) -> ScoreKey:
        """The per-step key this aggregate summarises (the key itself when it is no aggregate)."""
        return replace(self, aggregate=None)

    def info(self, quantity: Quantity | None = None) -> MetricInfo:
        """What the key means: its metric's unit, direction and bounds (``quantity`` gives the unit of a key
        without one); an aggregate is one value, not a curve."""
        metric = METRICS[self.metric]
        info = metric.info(self.quantity or quantity)
        per_step = info.per_step and not self.aggregate
        return MetricInfo(str(self), info.unit, info.higher_is_more_faithful, per_step, info.bounds)


#: every metric by name, in the order summaries list them (subclasses of :class:`Metric` add themselves)
METRICS: Registry[Metric] = Registry("metric")


class Metric(Registered, ABC):
    """A score computed from masking curves. A subclass with a :attr:`name` registers itself in
    :data:`METRICS`; :func:`summarize` then reports it, and the tracker and the report read its unit and
    direction: a new metric is this one class.

    Class attributes:
        name: the summary key (``<name>_prob`` / ``<name>_logit`` when :attr:`per_quantity`).
        unit, higher_is_more_faithful, bounds: see :class:`MetricInfo`; the unit ``"quantity"`` stands for the
            evaluation's quantity, and its bounds are those with the probability (a logit is unbounded).
        per_step: :meth:`values` returns ``[B, S]`` (a curve) or ``[B]``.
        per_quantity: the values depend on the quantity (probability or logit).
        aopc: a per-step score also summarised as ``aopc_<key>`` (mean over the ERASER bins, fraction steps
            only) and ``aopc_full_<key>`` (mean over every step).
        vs_random: compared with the random explanation in :func:`relative_to_random` (AOPC scores always are).
    """

    registry = METRICS
    unit: ClassVar[str] = "quantity"
    higher_is_more_faithful: ClassVar[bool | None] = None
    per_step: ClassVar[bool] = True
    per_quantity: ClassVar[bool] = False
    aopc: ClassVar[bool] = False
    vs_random: ClassVar[bool] = False
    bounds: ClassVar[tuple[float, float] | None] = None

    @classmethod
    def _registry_entry(cls) -> Metric:
        return cls()

    def key(self, quantity: Quantity, aggregate: str | None = None) -> ScoreKey:
        """The summary key of this metric on ``quantity`` (aggregated by ``aggregate``)."""
        return ScoreKey(self.name, aggregate, quantity if self.per_quantity else None)

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


class MaskedFraction(Metric):
    """``fraction``: the masking fraction of each step (the grid, for fraction steps), or the mean share
    of the maskable tokens masked, ``k / n`` (count steps)."""

    name, unit, bounds = "fraction", "fraction", (0.0, 1.0)

    def values(self, curves, quantity):
        return curves.masked_fraction

    def reduce(self, values, curves):
        return (curves.grid if curves.steps == "fraction" else values.mean(dim=0)).tolist()


class TokensMasked(Metric):
    """``mean_k``: tokens masked at each step, a count."""

    name, unit, bounds = "mean_k", "count", (0.0, math.inf)

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


class SymmetricRelevanceGain(Metric):
    """``srg_<q>``: area under the least-important-first curve minus that under the most-important-first curve
    over the masked fraction (:func:`symmetric_relevance_gain`), for schedules with least-first inputs."""

    name, unit, per_quantity, per_step, higher_is_more_faithful, vs_random = "srg", "area", True, False, True, True
    bounds = (-1.0, 1.0)  # with probabilities: two areas over at most the fraction span [0, 1]

    def applies(self, curves):
        return curves.least_logits is not None

    def values(self, curves, quantity):
        return symmetric_relevance_gain(curves, quantity)

    def reduce(self, values, curves):
        return _mean(values)  # an example with one feature has no SRG (NaN)

    def info(self, quantity=None):
        info = super().info(quantity)
        return info if quantity in (None, "probability") else replace(info, bounds=None)  # logit areas: unbounded


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


def metric_info(text: str, quantity: Quantity | None = None) -> MetricInfo | None:
    """What the stored key ``text`` means (:meth:`ScoreKey.parse`, then :meth:`ScoreKey.info`; ``quantity`` gives
    the unit of a key without one; or a Normalized AOPC column, :func:`naopc_info`), or ``None`` for a key no
    registered metric produces."""
    key = ScoreKey.parse(text)
    return (naopc_info(text) or ffidelity_info(text)) if key is None else key.info(quantity)


def naopc_info(text: str) -> MetricInfo | None:
    """What a per-example column of the ``naopc`` analysis means (:mod:`itermask.analyses.naopc`), or ``None``:
    ``naopc_<comprehensiveness|sufficiency>_<q>`` and ``naopc_of_<aopc key>`` (NAOPC, a fraction of the bounds'
    span: 0 at the lower bound, 1 at the upper; beam bounds are inner bounds, so it may leave ``[0, 1]``), and
    ``aopc_authors_<comprehensiveness|sufficiency>_<q>`` (the authors' AOPC, the quantity's unit). For
    sufficiency lower is more faithful, for comprehensiveness higher."""
    base, _, suffix = text.rpartition("_")
    if suffix not in QUANTITY_SUFFIXES.values():
        return None
    for prefix, unit in (("naopc_of_", "fraction"), ("naopc_", "fraction"), ("aopc_authors_", None)):
        if not base.startswith(prefix):
            continue
        inner = ScoreKey.parse(text[len(prefix) :]) if prefix == "naopc_of_" else None
        metric = inner.metric if inner is not None else base[len(prefix) :]
        if metric not in ("comprehensiveness", "sufficiency"):
            return None
        quantity = next(q for q, short in QUANTITY_SUFFIXES.items() if short == suffix)
        return MetricInfo(text, unit or quantity, metric == "comprehensiveness", False)
    return None


def ffidelity_info(text: str) -> MetricInfo | None:
    """What a per-example column of the ``ffidelity`` analysis means (:mod:`itermask.analyses.ffidelity`), or
    ``None``: ``ffid_<plus|minus>_prob`` (a difference of target-class probabilities) and
    ``ffid_<plus|minus>_accuracy`` (a difference of 0/1 gold-label accuracies, a fraction), both in ``[-1, 1]``;
    FFid+ higher, FFid- lower is more faithful (Zheng et al. 2025)."""
    parts = text.split("_")
    if len(parts) != 3 or parts[0] != "ffid" or parts[1] not in ("plus", "minus"):
        return None
    unit = {"prob": "probability", "accuracy": "fraction"}.get(parts[2])
    return None if unit is None else MetricInfo(text, unit, parts[1] == "plus", False, (-1.0, 1.0))


def _mean(values: Tensor) -> float:
    finite = values[~values.isnan()]
    return finite.double().mean().item() if len(finite) else float("nan")


def summarize(
    curves: MaskingCurves, quantity: Quantity = "probability", bins: Sequence[float] | None = AOPC_BINS
) -> dict:
    """Scores averaged over the examples of ``curves``, every metric of :data:`METRICS` that applies, as plain
    Python values: ``n_examples``, ``quantity``, ``steps`` (``"fraction"`` or ``"count"``) and ``x`` (the grid);
    per per-step metric its means per step (keys of :meth:`Metric.key`: ``comprehensiveness_prob``, ...); for
    each with ``aopc``, ``aopc_<key>`` over the ERASER ``bins`` (fraction steps only; none when ``bins`` is
    ``None``) and ``aopc_full_<key>`` over every step; then one scalar per per-example metric.

    Raises:
        ValueError: for an unknown quantity, or a bin not on a fraction grid.
    """
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity must be 'probability' or 'logit', got {quantity!r}")
    out = {"n_examples": len(curves), "quantity": quantity, "steps": curves.steps, "x": curves.grid.tolist()}
    applicable = [metric for metric in METRICS.values() if metric.applies(curves)]
    areas = {}
    for metric in (m for m in applicable if m.per_step):
        values = metric.values(curves, quantity)
        out[str(metric.key(quantity))] = metric.reduce(values, curves)
        if metric.aopc:
            areas[metric.key(quantity)] = values
    if curves.steps == "fraction" and bins is not None:
        for key, values in areas.items():
            out[str(replace(key, aggregate="aopc"))] = aopc(values, curves.grid, bins).mean().item()
    for key, values in areas.items():
        out[str(replace(key, aggregate="aopc_full"))] = aopc_full(values).mean().item()
    for metric in (m for m in applicable if not m.per_step):
        out[str(metric.key(quantity))] = metric.reduce(metric.values(curves, quantity), curves)
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
        out[str(metric.key(quantity))] = values
        if metric.aopc:
            if curves.steps == "fraction" and bins is not None:
                out[str(metric.key(quantity, "aopc"))] = aopc(values, curves.grid, bins)
            out[str(metric.key(quantity, "aopc_full"))] = aopc_full(values)
    return out


def relative_to_random(summary: dict, random_summary: dict) -> dict:
    """Scores of an explanation read against the random explanation of the same run (``summary`` and
    ``random_summary``: :func:`summarize` of their curves, same examples and steps): ``{key: summary[key] -
    random_summary[key]}`` for every ``aopc_*`` and ``auc_*`` score, ``srg_<q>``, ``soft_comprehensiveness`` and
    ``soft_sufficiency`` (each summary's mean over its defined examples; NaN where either has none) present in
    both, ``racu_without_retraining_<q>``
    (:func:`racu_without_retraining` of the mean target curves) and ``racu_without_retraining_accuracy`` (of the
    accuracy curves; NaN without gold labels).

    Raises:
        ValueError: if the two summaries differ in steps, grid or quantity.
    """
    import torch

    for key in ("steps", "x", "quantity"):
        if summary[key] != random_summary[key]:
            raise ValueError(f"cannot compare summaries with different {key}: {summary[key]} vs {random_summary[key]}")
    compared = {str(m.key(summary["quantity"])) for m in METRICS.values() if m.vs_random}

    def is_compared(key: str) -> bool:
        parsed = ScoreKey.parse(key)
        return key in compared or parsed is not None and parsed.aggregate is not None

    out = {
        key: value - random_summary[key]
        for key, value in summary.items()
        if is_compared(key) and isinstance(value, float) and key in random_summary
    }
    grid = torch.tensor(summary["x"], dtype=torch.float64)
    target = str(ScoreKey.of("target", summary["quantity"]))
    for name, series in ((QUANTITY_SUFFIXES[summary["quantity"]], target), ("accuracy", "accuracy")):
        score = racu_without_retraining(
            torch.tensor(summary[series], dtype=torch.float64),
            torch.tensor(random_summary[series], dtype=torch.float64),
            grid,
        )
        out[f"{RACU}_{name}"] = score.item()
    return out


class SoftComprehensiveness(Metric):
    """``soft_comprehensiveness``: Zhao & Aletras's (ACL 2023) soft normalised comprehensiveness, per example the
    mean over the ``R`` draws of :func:`~itermask.core.soft_masking.soft_draw_values` (a fraction of the drop to
    the all-masked input, clipped to ``[0, 1]``; higher is more faithful). NaN where undefined
    (:func:`~itermask.core.soft_masking.soft_undefined`, counted by ``soft_undefined_fraction``); means skip it."""

    name, unit, per_step, higher_is_more_faithful, bounds = (
        "soft_comprehensiveness",
        "fraction",
        False,
        True,
        (0.0, 1.0),
    )
    direction: ClassVar[str] = "comprehensiveness"
    vs_random = True

    def applies(self, curves):
        return curves.soft_logits is not None

    def values(self, curves, quantity):
        return self.draws(curves).mean(dim=1)

    def draws(self, curves: MaskingCurves) -> Tensor:
        from itermask.core.soft_masking import soft_draw_values

        return soft_draw_values(curves, self.direction)

    def reduce(self, values, curves):
        return _mean(values)


class SoftSufficiency(SoftComprehensiveness):
    """``soft_sufficiency``: Zhao & Aletras's soft normalised sufficiency, ``1 -`` the clipped normalised drop of
    the input that keeps each dimension with probability ``a_i``, mean over the draws (higher is more faithful,
    unlike the ERASER ``sufficiency_<q>``, a drop)."""

    name, direction = "soft_sufficiency", "sufficiency"


class SoftComprehensivenessDrawSd(SoftComprehensiveness):
    """``soft_comprehensiveness_draw_sd``: the sample standard deviation over the ``R`` draws of an example's
    soft comprehensiveness (how much one draw, as the authors take, would vary; NaN for ``R = 1``);
    descriptive."""

    name, higher_is_more_faithful, vs_random = "soft_comprehensiveness_draw_sd", None, False

    def values(self, curves, quantity):
        draws = self.draws(curves)
        return draws.std(dim=1) if draws.shape[1] > 1 else draws[:, 0] * math.nan  # one draw: no spread


class SoftSufficiencyDrawSd(SoftComprehensivenessDrawSd):
    """``soft_sufficiency_draw_sd``: the same for soft sufficiency."""

    name, direction = "soft_sufficiency_draw_sd", "sufficiency"


class SoftUndefinedFraction(SoftComprehensiveness):
    """``soft_undefined_fraction``: the share of examples whose soft measures are NaN
    (:func:`~itermask.core.soft_masking.soft_undefined`: the all-masked input lowers the target probability by
    less than 1e-4, ``MIN_FLOOR_DROP``, or the importances are all equal); descriptive."""

    name, higher_is_more_faithful, vs_random = "soft_undefined_fraction", None, False

    def values(self, curves, quantity):
        from itermask.core.soft_masking import soft_undefined

        return soft_undefined(curves).double()
