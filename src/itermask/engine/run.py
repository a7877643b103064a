"""``run(plan, resources)``: the evaluation of a prepared plan, the same for both doors.

The test accuracy (when the plan measures it), the masking stage (:func:`~itermask.engine.masking.evaluate_curves`,
whose curves every analysis receives), the model check, then the plan's analyses in order, each returning its
part of the result and its artifacts. Nothing is written or logged here: :func:`itermask.engine.record` does
that."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch

from itermask.analyses.base import Artifacts, EvaluatedCurves, eval_mode
from itermask.analyses.model_check import model_check
from itermask.core.precision import autocast
from itermask.engine.accuracy import evaluate_accuracy
from itermask.engine.masking import evaluate_curves
from itermask.engine.resources import Resources
from itermask.plan import EvaluationPlan

__all__ = ["Evaluation", "run", "on_trainer_device"]

log = logging.getLogger(__name__)


@dataclass
class Evaluation:
    """What :func:`run` produced: the parts of the result (JSON-ready), the analyses' artifacts, and the masking
    curves (``None`` on processes other than rank 0 of a distributed run)."""

    result: dict = field(default_factory=dict)
    artifacts: Artifacts = field(default_factory=Artifacts)
    curves: EvaluatedCurves | None = None


def on_trainer_device(context) -> torch.device:
    """Put ``context.model`` on the device of ``context.trainer`` (its strategy's root device) and return it.

    Lightning hands a module back on the CPU when a loop ends (``Strategy.teardown`` after ``fit`` and
    ``test``), so without this the analyses after the masking stage (NAOPC's bounds, F-Fidelity, the sanity
    benchmark, ...) ran on the CPU of a GPU machine. A CPU trainer leaves the model where it is."""
    root = context.trainer.strategy.root_device
    current = next(context.model.parameters()).device
    if current != root:
        log.info("evaluation: the classifier moves from %s to the trainer's %s", current, root)
        context.model.to(root)
    return root


def run(plan: EvaluationPlan, resources: Resources) -> Evaluation | None:
    """Evaluate the prepared classifier (see the module docstring). Returns ``None`` on processes other than
    rank 0 of a distributed run (every rank takes part in the loops; rank 0 gets the gathered curves).

    Raises:
        ValueError: if no example could be evaluated (none has a maskable token)."""
    assert plan.evaluation is not None, "run() evaluates a plan with an evaluation"
    inputs, context = resources.inputs(plan), resources.context()
    evaluation = Evaluation()
    # trainer.precision=bf16-mixed: every forward and backward of the evaluation under bfloat16 autocast, the
    # masking stage's test loop under Lightning's own as well (itermask.core.precision)
    precision = plan.trainer.options.get("precision", "32-true")
    device = on_trainer_device(context)
    with eval_mode(context.model), autocast(precision, device):
        if plan.measure_accuracy:
            evaluation.result.update(evaluate_accuracy(context).result)
        curves, masking = evaluate_curves(inputs, context)
        if curves is None or not context.trainer.is_global_zero:
            return None
        on_trainer_device(context)  # the test loop's teardown handed the model back on the CPU
        evaluation.curves = curves
        evaluation.result.update(masking.result)
        # a classifier that learnt nothing; its classes named as the data name them (the facade measures no accuracy)
        named = {"label_names": list(context.data.label_names), **evaluation.result}
        evaluation.result.update(model_check(named, curves).result)
        for analysis in resources.analyses:
            output = analysis.run(inputs, context, curves)
            if not context.trainer.is_global_zero:
                return None
            evaluation.result.update(output.result)
            evaluation.artifacts.update(output.artifacts)
    return evaluation
