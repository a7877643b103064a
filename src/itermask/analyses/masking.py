"""The ``masking`` analysis: the iterative-masking evaluation itself, run by Lightning's test loop
(:class:`~itermask.training.lightning_evaluation.MaskingEvaluationModule`) over the fixed evaluation
subset, summarised by :func:`itermask.core.metrics.summarize` and read against the random explanation."""

from __future__ import annotations

from itermask.analyses.base import Analysis, AnalysisOutput, EvaluationContext
from itermask.core import metrics
from itermask.training.lightning_evaluation import MaskingEvaluationModule

__all__ = ["MaskingCurvesAnalysis"]


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
        return AnalysisOutput({
            "n_evaluated": len(first),
            "n_skipped_no_maskable": module.n_skipped,
            "example_ids": first.example_ids.tolist(),
            "scores": scores,
            # racu_without_retraining_*: Madsen et al. 2022's RACU on curves without retraining
            "relative_to_random": relative_to_random(scores, settings.method),
        })
