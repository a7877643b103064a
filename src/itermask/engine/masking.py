"""The masking stage: the iterative-masking evaluation itself, run by Lightning's test loop
(:class:`~itermask.engine.lightning.MaskingEvaluationModule`) over the fixed evaluation
subset, summarised by :func:`itermask.core.metrics.summarize` and read against the random explanation. Its
curves (:class:`~itermask.analyses.base.EvaluatedCurves`) are what every analysis receives."""

from __future__ import annotations

import logging
from dataclasses import fields

from itermask.analyses.base import (
    RANDOM,
    AnalysisInputs,
    AnalysisOutput,
    EvaluatedCurves,
    EvaluationContext,
    baseline_fingerprint,
)
from itermask.core import metrics
from itermask.core.curves import MaskingCurves
from itermask.core.evaluation_settings import EvaluationSettings
from itermask.engine.lightning import MaskingEvaluationModule

log = logging.getLogger(__name__)

__all__ = ["evaluate_curves", "masking_output", "saliency_diagnostics", "relative_to_random"]


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
        assert curves.output_difference is not None  # set beside the completeness gap
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


#: the kind of the random baseline's stored curves (storage.derived)
BASELINE_CURVES = "random_baseline_curves"


def _baseline_fingerprint(inputs: AnalysisInputs, context: EvaluationContext) -> dict | None:
    """What the random baseline's curves of this job depend on besides the classifier
    (:func:`~itermask.analyses.base.baseline_fingerprint`: the settings without the saliency method, the examples,
    the batch size; here also the token budget and the test-batch limit: the curves are the same at any budget,
    up to float rounding, and the stored ones are bit for bit), or ``None`` when they are not shared."""
    shared = baseline_fingerprint(inputs, context)
    if shared is None:
        return None
    return {
        **shared,
        "curves_fields": [f.name for f in fields(MaskingCurves)],  # what a stored value holds
        "token_budget": inputs.evaluation.token_budget,
        "limit_test_batches": context.trainer.limit_test_batches,
    }


def _test_loop(context: EvaluationContext, evaluators: dict) -> MaskingEvaluationModule:
    """Run ``evaluators`` on the evaluation subset in Lightning's test loop, under the module's own progress bar."""
    lightning_bar = context.trainer.progress_bar_callback
    show = lightning_bar is not None and getattr(lightning_bar, "is_enabled", True)
    module = MaskingEvaluationModule(context.model, evaluators, progress_bar=show)
    loader = context.data.eval_loader(context.examples)
    if show and lightning_bar is not None:
        lightning_bar.disable()
    try:
        context.trainer.test(module, dataloaders=loader, verbose=False)
    finally:
        if show and lightning_bar is not None:
            lightning_bar.enable()
    return module


def masking_output(curves: EvaluatedCurves, e: EvaluationSettings, n_skipped: int) -> AnalysisOutput:
    """The masking stage's part of the result: ``n_evaluated``, ``n_skipped_no_maskable``, ``example_ids``,
    ``scores`` (``{explanation: {schedule: summary}}``, :func:`itermask.core.metrics.summarize`),
    ``saliency_diagnostics`` and ``relative_to_random`` (the method under study against ``random``)."""
    scores = {
        name: {
            schedule: metrics.summarize(c, quantity=e.quantity, bins=e.aopc_bins) for schedule, c in by_schedule.items()
        }
        for name, by_schedule in curves.items()
    }
    first = next(iter(curves[curves.method].values()))
    return AnalysisOutput(
        {
            "n_evaluated": len(first),
            "n_skipped_no_maskable": n_skipped,
            "example_ids": first.example_ids.tolist(),
            "scores": scores,
            "saliency_diagnostics": {
                name: saliency_diagnostics(name, next(iter(by_schedule.values())))
                for name, by_schedule in curves.items()
            },
            # racu_without_retraining_*: Madsen et al. 2022's RACU on curves without retraining
            "relative_to_random": relative_to_random(scores, curves.method),
        }
    )


def evaluate_curves(
    inputs: AnalysisInputs, context: EvaluationContext
) -> tuple[EvaluatedCurves | None, AnalysisOutput]:
    """Run every evaluator of ``inputs`` (the methods under study and ``random``) on the evaluation subset and
    summarise each schedule's curves (:func:`masking_output`). The random baseline's curves are read back when an
    earlier job on the same classifier and settings stored them (:func:`_baseline_fingerprint`).

    Returns:
        The curves (``None`` on processes other than rank 0 of a distributed run, with an empty output) and
        the result's top-level entries of :func:`masking_output`.

    Raises:
        ValueError: if no example could be evaluated (none has a maskable token).
    """
    evaluators = dict(inputs.evaluators)
    baseline = _baseline_fingerprint(inputs, context)
    stored = None if baseline is None else context.stored(BASELINE_CURVES, baseline)
    if stored is not None:  # an earlier job on this checkpoint evaluated the same random baseline
        evaluators.pop(RANDOM)
        log.info("reusing the random baseline's curves of this classifier computed by an earlier job")
    module = _test_loop(context, evaluators)
    if not context.trainer.is_global_zero:
        return None, AnalysisOutput({})
    if not module.curves:
        raise ValueError(
            f"no example could be evaluated: all {module.n_skipped} have no maskable token "
            f"(check evaluation.segments={inputs.evaluation.segments} and the data)"
        )
    evaluated = dict(module.curves)
    if stored is not None:
        evaluated[RANDOM] = {schedule: MaskingCurves(**fields) for schedule, fields in stored.items()}
    elif baseline is not None and RANDOM in evaluated:
        context.keep(BASELINE_CURVES, baseline, {schedule: vars(c) for schedule, c in evaluated[RANDOM].items()})
    curves = EvaluatedCurves.of(evaluated, inputs.method)
    _warn_test_batch_limit(context, len(next(iter(curves[curves.method].values()))) + module.n_skipped)
    return curves, masking_output(curves, inputs.evaluation, module.n_skipped)


def _warn_test_batch_limit(context: EvaluationContext, seen: int) -> None:
    """Warn when ``trainer.limit_test_batches`` stopped the masking stage before every selected example (``seen``:
    evaluated or skipped): the scores are then those of the first batches' examples (the evaluation subset's
    order), fewer than ``evaluation.n_examples`` asked, and nothing said so (session 55's new-user review)."""
    selected, limit = len(context.examples), context.trainer.limit_test_batches
    if seen < selected:
        log.warning(
            "evaluated %d of the %d examples selected: trainer.limit_test_batches=%s stops the test loop after "
            "that many batches of data.eval_batch_size=%d (debug=smoke sets it); set trainer.limit_test_batches=1.0 "
            "to evaluate them all",
            seen,
            selected,
            limit,
            context.data.eval_batch_size,
        )
