"""The ``masking`` analysis: the iterative-masking evaluation itself, run by Lightning's test loop
(:class:`~itermask.training.lightning_evaluation.MaskingEvaluationModule`) over the fixed evaluation
subset, summarised by :func:`itermask.core.metrics.summarize` and read against the random explanation."""

from __future__ import annotations

import logging

from itermask.analyses.base import Analysis, AnalysisOutput, EvaluationContext
from itermask.core import metrics
from itermask.core.evaluation import MaskingCurves
from itermask.training.lightning_evaluation import MaskingEvaluationModule

log = logging.getLogger(__name__)

__all__ = ["MaskingCurvesAnalysis", "saliency_diagnostics"]


def saliency_diagnostics(method: str, curves: MaskingCurves) -> dict:
    """The ``saliency_diagnostics`` entry of one method, from its curves' per-example fields (the clean
    input's saliency, shared by every schedule): ``n_examples``; ``n_zero_saliency`` and
    ``zero_saliency_example_ids`` (identically zero scores: ranked by position only); for methods with a
    completeness gap (``integrated_gradients``, ``deeplift``; sum of attributions minus ``f(x) - f(baseline)``,
    Sundararajan et al. 2017, Prop. 1), ``completeness_gap`` with its ``median`` and ``median_abs`` (units
    of the explained output) and ``median_relative`` (``|gap| / |f(x) - f(baseline)|`` over the examples where
    that is not 0). Logs a warning when some examples have zero saliency."""
    entry: dict = {"n_examples": len(curves)}
    if curves.saliency_zero is not None:
        zero = curves.saliency_zero.bool()
        entry["n_zero_saliency"] = int(zero.sum())
        entry["zero_saliency_example_ids"] = curves.example_ids[zero].tolist()
        if zero.any():
            log.warning(
                "saliency=%s: %d of %d evaluated examples have identically zero saliency on the clean input "
                "(ranked by position only): example ids %s",
                method,
                entry["n_zero_saliency"],
                len(curves),
                entry["zero_saliency_example_ids"][:20],
            )
    if curves.completeness_gap is not None:
        gap = curves.completeness_gap.double()
        nonzero = curves.output_difference.abs() > 0
        relative = gap[nonzero].abs() / curves.output_difference[nonzero].abs()
        entry["completeness_gap"] = {
            "median": float(gap.median()),
            "median_abs": float(gap.abs().median()),
            "median_relative": float(relative.median()) if len(relative) else None,
            "max_abs": float(gap.abs().max()),
        }
    return entry


def relative_to_random(scores: dict, method: str) -> dict:
    """``{schedule: metrics.relative_to_random(...)}`` of ``method`` against ``random`` (empty without it)."""
    if method == "random" or "random" not in scores:
        return {}
    return {
        schedule: metrics.relative_to_random(summary, scores["random"][schedule])
        for schedule, summary in scores[method].items()
    }


class MaskingCurvesAnalysis(Analysis):
    """Runs every evaluator of the settings (the method under study and ``random``) on the evaluation subset
    and summarises each schedule's curves. Hands the curves to later analyses as ``shared["curves"]``.

    Raises:
        ValueError: if no example could be evaluated (none has a maskable token).
    """

    name = "masking"

    def run(self, context: EvaluationContext) -> AnalysisOutput:
        settings, e = context.settings, context.settings.evaluation
        # the module's own bar (per explanation, schedule and batch) stands in for Lightning's per-batch bar
        lightning_bar = context.trainer.progress_bar_callback
        show = lightning_bar is not None and getattr(lightning_bar, "is_enabled", True)
        module = MaskingEvaluationModule(context.model, settings.evaluators, progress_bar=show)
        loader = context.data.evaluation_dataloader(e.n_examples, e.subset_seed, e.split)
        if show:
            lightning_bar.disable()
        try:
            context.trainer.test(module, dataloaders=loader, verbose=False)
        finally:
            if show:
                lightning_bar.enable()
        if not context.trainer.is_global_zero:
            return AnalysisOutput({})
        if not module.curves:
            raise ValueError(
                f"no example could be evaluated: all {module.n_skipped} have no maskable token "
                f"(check evaluation.segments={e.segments} and the data)"
            )
        context.shared["curves"] = module.curves
        scores = {
            name: {
                schedule: metrics.summarize(curves, quantity=e.quantity, bins=e.aopc_bins)
                for schedule, curves in by_schedule.items()
            }
            for name, by_schedule in module.curves.items()
        }
        first = next(iter(module.curves[settings.method].values()))
        return AnalysisOutput(
            {
                "n_evaluated": len(first),
                "n_skipped_no_maskable": module.n_skipped,
                "example_ids": first.example_ids.tolist(),
                "scores": scores,
                "saliency_diagnostics": {
                    name: saliency_diagnostics(name, next(iter(by_schedule.values())))
                    for name, by_schedule in module.curves.items()
                },
                # racu_without_retraining_*: Madsen et al. 2022's RACU on curves without retraining
                "relative_to_random": relative_to_random(scores, settings.method),
            }
        )
