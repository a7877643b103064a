"""The Hydra door: a composed config becomes an :class:`~itermask.plan.EvaluationPlan`, every setting checked and
every component built, unbound, before anything is loaded (:func:`evaluation_plan`, :func:`training_plan`). This
package and the entry points are the only code that reads the Hydra config; it converts the config tree once
(:func:`plain`)."""

from itermask.settings.components import build, plain
from itermask.settings.evaluate import evaluation_plan, training_plan

__all__ = ["plain", "build", "evaluation_plan", "training_plan"]
