"""The Hydra door: a composed config becomes an :class:`~itermask.plan.EvaluationPlan` (every setting checked,
every component built, unbound, before anything is loaded). This package and the entry points are the only code
that reads the Hydra config; it converts the config tree once (:func:`plain`). By concern:

* :mod:`itermask.settings.components`: building components from their ``_target_`` (the one plug-in scheme);
* :mod:`itermask.settings.job`: what every job shares (job, model, data, fine-tuning, trainer, tracker run);
* :mod:`itermask.settings.evaluate`: the evaluation's plan (:func:`evaluation_plan`) and a fine-tuning job's
  (:func:`training_plan`);
* :mod:`itermask.settings.presets`: the saliency and masking presets of ``conf/`` for :func:`itermask.evaluate`.

Keys (:mod:`itermask.engine.keys`, :mod:`itermask.storage.keys`), the tracker run (:mod:`itermask.tracking.runs`)
and the option checks that are not a component's own (:mod:`itermask.validation`) live with their concerns.
"""

from itermask.settings.components import build, plain
from itermask.settings.evaluate import evaluation_plan, training_plan

__all__ = ["plain", "build", "evaluation_plan", "training_plan"]
