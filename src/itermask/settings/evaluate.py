"""The plans of the Hydra door: :func:`evaluation_plan` (``evaluate.py``) reads what every job shares
(:mod:`itermask.settings.job`) plus the saliency method, the masking evaluation and the configured analyses;
:func:`training_plan` (``train.py``, ``pretrain.py``) only the shared part. Every problem is raised together."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from omegaconf import DictConfig

from itermask.analyses.base import Analysis
from itermask.analyses.per_example import PerExampleAnalysis
from itermask.context import JobContext
from itermask.core.evaluation_settings import EvaluationSettings
from itermask.core.saliency.base import SaliencyMethod
from itermask.data.splits import SPLITS
from itermask.formatting import program
from itermask.plan import EvaluationPlan
from itermask.problems import Problems
from itermask.settings.components import build, plain
from itermask.settings.job import job_parts, read_job
from itermask.validation import SettingsError

__all__ = ["evaluation_plan", "training_plan"]


@contextmanager
def _naming(option: str) -> Iterator[None]:
    """Prefix the message of a ``ValueError`` raised inside with the option it is about (``option: ...``)."""
    try:
        yield
    except SettingsError:
        raise
    except ValueError as error:
        message = str(error)
        raise ValueError(message if message.startswith(option) else f"{option}: {message}") from error


def _analyses(config: dict, problems: Problems) -> list[Analysis]:
    """The built-in per-example tables, then the configured analyses: the top-level nodes named in
    ``config["analyses"]``, each built with its ``_target_`` unless absent or switched off (``enabled: false`` or
    ``level: none``; its other settings are then not checked). Errors are collected."""
    analyses: list[Analysis] = [PerExampleAnalysis()]
    for name in config.get("analyses") or []:
        node = config.get(name)
        if node is not None and not isinstance(enabled := node.get("enabled", True), bool):
            with problems.collect():  # "maybe", 0 or 2 would otherwise count as on
                raise ValueError(f"{name}.enabled must be true or false, got {enabled!r}")
            continue
        if node is None or node.get("enabled", True) is False or node.get("level") == "none":
            continue
        if problems.names(f"{name}."):  # a setting of it was refused above: not once more by its constructor
            continue
        with problems.collect():
            analyses.append(build(node, name, Analysis))
    return analyses


def evaluation_plan(cfg: DictConfig, context: JobContext | None = None) -> EvaluationPlan:
    """The plan of an ``evaluate.py`` job from the composed ``cfg``; ``context`` is the running job
    (:meth:`~itermask.context.JobContext.from_hydra`; none outside a Hydra job).

    Raises:
        ValueError: naming each bad setting (one :class:`~itermask.validation.SettingsError` listing them when
            there are several); OSError for missing files.
    """
    started_at, problems = time.time(), Problems()
    config = plain(cfg)
    parts = read_job(config, context or JobContext(), problems)
    saliency = evaluation = None
    with problems.collect():
        if not problems.names("saliency"):  # a list of methods (overrides.group_list_problems) is not built
            saliency = build(config["saliency"], "saliency", SaliencyMethod)
    # keys added with +evaluation.x= are refused by read_job's check, naming the override: not twice
    added = {
        o.split("=", 1)[0][1:].removeprefix("evaluation.")
        for o in parts.context.overrides
        if o.startswith("+evaluation.")
    }
    with problems.collect(), _naming("evaluation"):
        evaluation = EvaluationSettings.of({k: v for k, v in config["evaluation"].items() if k not in added})
        if evaluation.split not in SPLITS:  # every data source loads these three (data.splits)
            raise ValueError(f"evaluation.split={evaluation.split!r} is not a split: choose from {list(SPLITS)}")
    analyses = _analyses(config, problems)
    problems.raise_if_any()
    assert saliency is not None and evaluation is not None
    return EvaluationPlan(
        **job_parts(parts, started_at), evaluation=evaluation, saliency=(saliency,), analyses=tuple(analyses)
    )


def training_plan(cfg: DictConfig, context: JobContext | None = None) -> EvaluationPlan:
    """The plan of a ``train.py`` or ``pretrain.py`` job: fine-tuning (or continued pretraining) only.

    Raises:
        ValueError: ``train.enabled=false`` (nothing to do: that is for ``evaluate.py``); every bad setting
            together; OSError for missing files."""
    config = plain(cfg)
    if config["train"].get("enabled", True) is False:
        raise ValueError(
            f"{program('train')} fine-tunes, but train.enabled=false: evaluate a classifier without fine-tuning "
            f"with {program('evaluate')} train.enabled=false model.pretrained=<directory or hub id>"
        )
    problems = Problems()
    parts = read_job(config, context or JobContext(), problems)
    problems.raise_if_any()
    return EvaluationPlan(**job_parts(parts))
