"""The ``sanity`` analysis: the degraded-explainer sanity benchmark. Can a faithfulness measure rank
explanations whose order of quality is known?

Every explanation of the job except ``random`` (a degraded random explanation is still random) is degraded by
known amounts (:class:`itermask.core.degrade.DegradedSaliency`: a share ``level`` of each example's features
gets its scores permuted among themselves, seeded by ``(seed, example_id, level)``), each level evaluated by a
copy of the job's evaluator with the one-shot schedule on the evaluation subset (level 0 reuses the job's own
one-shot curves). Every per-example measure with a known direction (:func:`itermask.core.metrics.per_example`
keys whose :func:`~itermask.core.metrics.metric_info` has ``higher_is_more_faithful``), the decision-flip
fraction (the share of the grid's steps whose prediction flipped) and every other configured analysis's
:meth:`~itermask.analyses.base.Analysis.explanation_measures` are scored at every level; Spearman's rho with the
level over all (example, level) pairs and its bootstrap interval over examples
(:mod:`itermask.core.sanity_statistics`) say whether the measure ranks the known order; a measure whose rho
is undefined (constant, or NaN at some level) is listed with the reason. Configured by the
``sanity`` node (``conf/sanity/<name>.yaml``; ``none`` by default).
"""

from __future__ import annotations

import copy
import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from itermask.analyses.base import (
    RANDOM,
    Analysis,
    AnalysisInputs,
    AnalysisOutput,
    Artifacts,
    EvaluatedCurves,
    EvaluationContext,
    checked_max_examples,
    eval_mode,
    example_subset,
    subset_lines,
)
from itermask.core.aopc_bounds import SUBSET_RULE
from itermask.formatting import number
from itermask.storage.per_example import write_per_example

if TYPE_CHECKING:
    pass

__all__ = ["SanityAnalysis", "FLIP_COLUMN", "SEED_RULE"]

#: the decision-flip fraction's column: the mean over the grid's steps of ``flip_rate`` (1 where flipped)
FLIP_COLUMN = "decision_flip_fraction"
#: how the degradations are drawn
SEED_RULE = "a torch generator per (example, level) seeded by sha256('seed:example_id:level') (core.degrade.level_seed)"
#: the fewest bootstrap resamples of sanity.n_boot (besides 0, no interval)
MIN_BOOT = 100


class SanityAnalysis(Analysis):
    """The degraded-explainer sanity benchmark (see the module docstring).

    Args:
        levels: the degradation levels, distinct, in ``[0, 1]``, 0 among them (the undegraded explanation).
        seed: the seed of the degradations (the config passes the job's ``seed``).
        n_boot: bootstrap resamples of the examples for the interval of the overall rho (0: none; else at least
            :data:`MIN_BOOT`).
        max_examples: measure only this many of the evaluated examples (``None``: all), chosen by
            :func:`~itermask.analyses.base.example_subset` (the examples ``naopc.max_examples`` bounds).
        enabled: read by the settings stage.

    Raises:
        ValueError: (at construction, before any data or model work) bad ``levels``
            (:func:`~itermask.core.degrade.check_levels`), a ``seed`` or ``n_boot`` that is not a whole number, a
            ``n_boot`` below 0 or from 1 to ``MIN_BOOT - 1``.
    """

    name = "sanity"

    def __init__(
        self,
        levels: Any = (0.0, 0.25, 0.5, 0.75, 1.0),
        seed: int = 0,
        n_boot: int = 1000,
        max_examples: int | None = None,
        enabled: bool = True,
    ) -> None:
        from itermask.core.degrade import check_levels

        self.max_examples = checked_max_examples(max_examples, "sanity.max_examples")
        self.levels = check_levels(levels)
        if not _whole(seed):
            raise ValueError(f"sanity.seed={seed!r}: give a whole number")
        if not _whole(n_boot) or n_boot < 0 or 0 < n_boot < MIN_BOOT:
            raise ValueError(
                f"sanity.n_boot={n_boot!r}: give 0 (no interval) or a whole number >= {MIN_BOOT} (a 95 % interval "
                "from fewer resamples rests on a handful of draws; 1000 is the default)"
            )
        self.seed, self.n_boot = int(seed), int(n_boot)

    def describe(self) -> dict:
        from itermask.core.sanity_statistics import RULE

        return {
            "levels": self.levels,
            "seed": self.seed,
            "n_boot": self.n_boot,
            "seed_rule": SEED_RULE,
            "rule": RULE,
            "max_examples": self.max_examples,
        }

    def check(self, inputs: AnalysisInputs) -> None:
        """Raises ``ValueError`` when the job evaluates no explanation but ``random``."""
        if not [name for name in inputs.evaluators if name != RANDOM]:
            raise ValueError("sanity=on: the job explains only with random, whose degradation is still random")

    def run(self, inputs: AnalysisInputs, context: EvaluationContext, curves: EvaluatedCurves) -> AnalysisOutput:
        start, frames, cost = time.time(), [], {"rows": 0, "computed": 0, "forwards": 0}
        curves, measured, evaluated = example_subset(curves, self.max_examples)
        for name, evaluator in inputs.evaluators.items():
            if name == RANDOM or name not in curves.curves:
                continue
            job = curves[name]
            order, clean = next(iter(job.values())).example_ids, {}  # clean: the method's attributions, once
            for level in self.levels:
                if level == 0 and "one_shot" in job:
                    level_curves = job["one_shot"]
                else:
                    level_curves = self._degraded(inputs, context, evaluator, level, order, cost, clean)
                frames.append(self._measures(inputs, context, name, level, level_curves))
        table = pd.concat(frames, ignore_index=True)
        section = self._section(table)
        section["examples"] = {"measured": measured, "evaluated": evaluated, "rule": SUBSET_RULE}
        n = len(table) / len(self.levels)  # examples x explanations
        section["cost"] = {**cost, "seconds": time.time() - start, "rows_per_example_explanation": cost["rows"] / n}
        artifacts = _artifacts(section)
        if inputs.output_dir is not None:
            artifacts.files = write_per_example(inputs.folder, {"sanity": table})
        return AnalysisOutput({"sanity": section}, artifacts)

    def _degraded(
        self,
        inputs: AnalysisInputs,
        context: EvaluationContext,
        evaluator,
        level,
        order,
        cost: dict,
        clean: dict | None = None,
    ):
        """One-shot curves of ``evaluator``'s explanation degraded by ``level`` on the evaluation subset, batch
        by batch as the masking stage runs it (examples without a maskable feature skipped), in the example
        ``order`` of the job's curves; ``cost`` counts the forwards; ``clean`` keeps the method's attributions
        across levels (:class:`~itermask.core.degrade.DegradedSaliency`'s ``clean_cache``; ``None``: this
        call's own)."""
        import torch

        from itermask.core.curves import MaskingCurves
        from itermask.core.degrade import DegradedSaliency

        e = inputs.evaluation
        degraded = copy.copy(evaluator)
        degraded.saliency = DegradedSaliency(
            evaluator.saliency,
            level,
            self.seed,
            e.features,
            evaluator.special_ids,
            evaluator.segments,
            {} if clean is None else clean,
        )
        degraded.schedules, degraded.collect_representations = ["one_shot"], False
        device, wanted, parts = next(context.model.parameters()).device, set(order.tolist()), []
        with eval_mode(context.model):
            for batch in context.data.eval_loader(context.examples):
                ids, keep = batch["example_ids"], torch.tensor([i in wanted for i in batch["example_ids"].tolist()])
                if not keep.any():
                    continue
                tokens = batch["tokens"].index(keep).trim().to(device)
                result = degraded.evaluate(
                    context.model, tokens, batch["labels"][keep].to(device), ids[keep].to(device)
                )
                parts.append(result["one_shot"].to("cpu"))
                for key in cost:
                    cost[key] += getattr(degraded.forward_stats, key)
        joined = MaskingCurves.concat(parts)
        position = {int(i): r for r, i in enumerate(joined.example_ids.tolist())}
        return joined.select(torch.tensor([position[int(i)] for i in order.tolist()]))

    def _measures(self, inputs: AnalysisInputs, context: EvaluationContext, name: str, level: float, curves):
        """The per-example rows of one explanation at one level: every measure with a known direction."""
        from itermask.core import metrics

        e = inputs.evaluation
        bins = e.aopc_bins if e.steps == "fraction" else None
        frame = pd.DataFrame({"saliency": name, "level": level, "example_id": curves.example_ids.cpu().numpy()})
        values = metrics.per_example(curves, e.quantity, bins)  # pyright: ignore[reportArgumentType]
        for key, value in values.items():
            if value.dim() == 1 and _direction(key) is not None:
                frame[key] = value.double().cpu().numpy()
        if "flip_rate" in values:
            frame[FLIP_COLUMN] = values["flip_rate"].double().mean(dim=1).cpu().numpy()
        for analysis in inputs.analyses:
            if analysis is not self:
                for key, value in analysis.explanation_measures(inputs, context, curves).items():
                    frame[key] = value.double().cpu().numpy()
        return frame

    def _section(self, table: pd.DataFrame) -> dict:
        """The result section: per explanation, every measure with a known direction with its
        :class:`~itermask.core.sanity_statistics.LevelCorrelation` (an undefined one too, with its reason), and
        the measures that cannot rank a known order."""
        from itermask.core.sanity_statistics import level_correlation

        methods: dict[str, dict] = {}
        cannot: dict[str, list[str]] = {}
        measures = [c for c in table.columns if c not in ("saliency", "level", "example_id")]
        for method, rows in table.groupby("saliency", sort=False):
            for measure in measures:
                higher = _direction(measure)
                if higher is None:
                    continue
                values = rows.pivot(index="example_id", columns="level", values=measure)[self.levels]
                found = level_correlation(values.to_numpy(dtype=float), self.levels, higher, self.n_boot, self.seed)
                methods.setdefault(str(method), {})[measure] = found.as_dict()
                if not found.ranks_known_order:
                    cannot.setdefault(str(method), []).append(measure)
        return {"settings": self.describe(), "methods": methods, "cannot_rank": cannot}

    def artifacts_from(self, result: dict, output_dir) -> Artifacts:
        return _artifacts(result["sanity"])

    @classmethod
    def report_measures(cls, result: dict) -> dict[tuple[str, str, str], float]:
        """``sanity rho: <measure>`` rows (schedule ``one_shot``): each measure's overall Spearman rho with the
        degradation level."""
        out = {}
        for method, measures in ((result.get("sanity") or {}).get("methods") or {}).items():
            for measure, entry in measures.items():
                rho = entry.get("rho")
                out[(method, "one_shot", f"sanity rho: {measure}")] = math.nan if rho is None else float(rho)
        return out

    @classmethod
    def report_bounds(cls, score: str) -> tuple[float, float] | None:
        """``[-1, 1]`` for the sanity rows (a rank correlation)."""
        return (-1.0, 1.0) if score.startswith("sanity rho: ") else None

    @classmethod
    def headline_lines(cls, summary: pd.DataFrame) -> list[str]:
        """Per explanation, the measures whose mean rho over seeds is not in the expected direction or undefined
        (each run's own verdict, the bootstrap interval, is in its ``sanity`` section and console line)."""
        rows = summary[summary["score"].astype(str).str.startswith("sanity rho: ")]
        lines = []
        for explanation, group in rows.groupby("explanation", sort=False):
            wrong = [
                f"{score[len('sanity rho: ') :]} (rho {number(mean, 3)})"
                for score, mean in zip(group["score"], group["mean"])
                if _wrong_sign(score[len("sanity rho: ") :], mean)
            ]
            if wrong:
                lines.append(
                    f"- Sanity benchmark, {explanation}: mean rho over seeds on the wrong side of 0 or undefined "
                    f"(cannot rank a known order): {', '.join(wrong)}"
                )
        return lines

    @classmethod
    def summary_lines(cls, result: dict) -> list[str]:
        """Per explanation, how many measures rank the known order and, for each one that cannot, its rho and
        95 % bootstrap interval or why it has none."""
        section = result.get("sanity")
        if not section:
            return []
        levels = (section.get("settings") or {}).get("levels")
        lines = []
        for method, measures in (section.get("methods") or {}).items():
            cannot = [_why(m, measures[m]) for m in (section.get("cannot_rank") or {}).get(method) or []]
            lines.append(
                f"Sanity benchmark ({method}, levels {levels}): {len(measures) - len(cannot)} of {len(measures)} "
                "measures rank the known order (95 % bootstrap interval of rho over examples on the expected side "
                "of 0); cannot rank a known order: " + ("; ".join(cannot) or "none")
            )
        return lines + subset_lines(section, "sanity.max_examples")


def _why(measure: str, entry: dict) -> str:
    """``measure (rho r [low, high])``, or ``measure (reason)`` without an interval."""
    rho, low, high = (entry.get(k) for k in ("rho", "ci_low", "ci_high"))
    if rho is None or low is None or high is None:
        return f"{measure} ({entry.get('reason')})"
    return f"{measure} (rho {number(rho, 3, True)} [{number(low, 3, True)}, {number(high, 3, True)}])"


def _direction(column: str) -> bool | None:
    """Whether a higher value of ``column`` is more faithful (``None``: no direction, or an unknown column)."""
    from itermask.core.metrics import metric_info

    info = metric_info("flip_rate" if column == FLIP_COLUMN else column)
    return None if info is None else info.higher_is_more_faithful


def _wrong_sign(measure: str, rho) -> bool:
    """Whether a mean ``rho`` is not strictly in ``measure``'s expected direction (NaN counts as wrong)."""
    higher = _direction(measure)
    if higher is None:
        return False
    return not (isinstance(rho, (int, float)) and math.isfinite(rho) and (rho < 0 if higher else rho > 0))


def _whole(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _artifacts(section: dict) -> Artifacts:
    """W&B: summary keys ``sanity/<saliency>/<measure>/<rho|ci_low|ci_high|p_boot|mean_example_rho>`` and
    ``sanity/cost/<key>``; one table ``sanity/correlations`` (a row per explanation and measure)."""
    summary, rows = {}, []
    columns = ["saliency", "measure", "rho", "ci_low", "ci_high", "p_boot", "mean_example_rho", "ranks"]
    for method, measures in (section.get("methods") or {}).items():
        for measure, entry in measures.items():
            for key in columns[2:-1]:
                if isinstance(entry.get(key), (int, float)):
                    summary[f"sanity/{method}/{measure}/{key}"] = float(entry[key])
            rows.append([method, measure, *(entry.get(k) for k in columns[2:-1]), bool(entry["ranks_known_order"])])
    for key, value in (section.get("cost") or {}).items():
        summary[f"sanity/cost/{key}"] = float(value)
    return Artifacts(summary=summary, tables={"sanity/correlations": (columns, rows)})
