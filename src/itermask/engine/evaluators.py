"""One evaluator per explanation: the methods under study and, when compared, the seeded random explanation
(:func:`build_evaluators`)."""

from __future__ import annotations

from collections.abc import Sequence

from itermask.analyses.base import RANDOM, Analysis
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.evaluation_settings import EvaluationSettings
from itermask.core.masking import MaskingStrategy
from itermask.core.saliency.base import RandomSaliency, SaliencyMethod

__all__ = ["RANDOM", "build_evaluators"]


def build_evaluators(
    e: EvaluationSettings,
    methods: Sequence[SaliencyMethod],
    masking: MaskingStrategy,
    special_ids: list[int],
    seed: int,
    analyses: Sequence[Analysis] = (),
) -> dict[str, IterativeMaskingEvaluator]:
    """``{explanation: evaluator}``: the ``methods`` (bound) in order, then a :class:`RandomSaliency` seeded with
    ``seed`` when ``e.compare_random`` and no method is the random explanation itself; ``seed`` also seeds the
    soft comprehensiveness and sufficiency draws (``e.soft_draws`` of them).

    Raises:
        ValueError: the evaluator's own error (an empty schedule list, an unknown schedule)."""
    explanations: dict[str, SaliencyMethod] = {method.name: method for method in methods}
    if e.compare_random and RANDOM not in explanations:
        explanations[RANDOM] = RandomSaliency(seed=seed)
    # the representations the analyses read: every layer, the final linear layer's input, or none
    wanted = {analysis.representations for analysis in analyses}
    collect = "all" if "all" in wanted else "final" if "final" in wanted else False
    return {
        name: IterativeMaskingEvaluator(
            method,
            masking,
            fractions=list(e.fractions),
            special_ids=special_ids,
            schedules=list(e.schedules),
            target=e.target,
            steps=e.steps,
            token_budget=e.token_budget,
            counts=list(e.counts),
            segments=e.segments,
            features=e.features,
            collect_representations=collect,
            least_first=True,  # the symmetric relevance gain's direction: always on, no setting (few added rows)
            soft_draws=e.soft_draws,
            soft_seed=seed,
        )
        for name, method in explanations.items()
    }
