"""The settings stage: a composed Hydra config becomes frozen, typed settings, every component built once
and every option checked once, before any data is loaded or any model trained.

This package (with the entry points) is the only code that reads the Hydra config, and it converts the
config tree once (:func:`plain`): the later stages of :mod:`itermask.pipeline` receive a
:class:`TrainJobSettings` or :class:`EvaluateSettings`, never a ``DictConfig``. By concern:

* :mod:`itermask.settings.components`: building components from their ``_target_`` (the one plug-in scheme);
* :mod:`itermask.settings.job`: a fine-tuning job's settings, read in two passes that collect their errors;
* :mod:`itermask.settings.evaluate`: an evaluation's settings, evaluators and analyses.

Keys (:mod:`itermask.storage.keys`), the tracker run (:mod:`itermask.tracking.runs`) and the fine-tuning
augmentations (:mod:`itermask.training.augmentation`) live with their concerns; the option checks that are
not a component's own live in :mod:`itermask.validation`.
"""

from itermask.settings.components import build, plain
from itermask.settings.evaluate import EvaluateSettings, EvaluationSettings, evaluate_settings
from itermask.settings.job import (
    DataSettings,
    ModelSettings,
    TrainJobSettings,
    TrainSettings,
    check_seed,
    train_settings,
    training_key_of,
)

__all__ = [
    "check_seed",
    "plain",
    "build",
    "ModelSettings",
    "DataSettings",
    "TrainSettings",
    "EvaluationSettings",
    "TrainJobSettings",
    "EvaluateSettings",
    "train_settings",
    "evaluate_settings",
    "training_key_of",
]
