"""The parts of a plan every job shares (the job, the model, the data, fine-tuning, the trainer and the tracker
run), read from the resolved config: every numeric setting checked (:func:`itermask.validation.composed_problems`)
and every component built, unbound, each problem collected (:class:`itermask.problems.Problems`). Nothing is
loaded here (:func:`itermask.engine.prepare` does that)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from itermask.context import JobContext
from itermask.core.candidates import CandidateSource, EmbeddingNeighbours
from itermask.core.masking import MaskingStrategy
from itermask.core.precision import canonical_precision
from itermask.data import wordnet  # noqa: F401  (registers the wordnet candidate source)
from itermask.data.sources import DataSource
from itermask.models import mlm  # noqa: F401  (registers the mlm candidate source)
from itermask.models.loading import resolve_pretrained
from itermask.plan import DataPlan, FineTuningPlan, JobPlan, ModelPlan, Spec
from itermask.problems import Problems
from itermask.settings.components import Built, build, check_registered_name
from itermask.tracking.runs import logger_options, run_name
from itermask.training.augmentation import check_adversarial_keys
from itermask.training.distributed import distributed_problem
from itermask.training.pretraining import check_pretrain_node
from itermask.validation import composed_problems

__all__ = ["JobParts", "read_job", "job_parts"]

T = TypeVar("T")


@dataclass
class JobParts:
    """What :func:`read_job` read and built; a field is ``None`` where building it failed (its error is among
    the collected problems)."""

    config: dict
    context: JobContext
    seed: int
    enabled: bool
    built: Built
    source: DataSource | None = None
    masking: MaskingStrategy | None = None
    masked_strategy: MaskingStrategy | None = None
    candidates: CandidateSource | None = None


def _group_by_length(train: dict) -> bool:
    """``train.group_by_length`` (default true).

    Raises:
        ValueError: not true or false."""
    value = train.get("group_by_length", True)
    if not isinstance(value, bool):
        raise ValueError(f"train.group_by_length must be true or false, got {value!r}")
    return value


def _train_enabled(train: dict) -> bool:
    """``train.enabled`` (default true).

    Raises:
        ValueError: if it is not a boolean, or it is false with masked fine-tuning switched on."""
    enabled = train.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"train.enabled must be true or false, got {enabled!r}")
    if not enabled and (train.get("masking_augmentation") or {}).get("enabled", False):
        raise ValueError(
            "train.masking_augmentation.enabled=true is masked fine-tuning, but train.enabled=false "
            "evaluates model.pretrained without fine-tuning: switch one of them"
        )
    return enabled


def _adversarial_candidates(spec: dict) -> CandidateSource:
    """The candidate source of ``train.adversarial_augmentation`` (``spec``, enabled), built unbound."""
    check_adversarial_keys(spec)
    node = spec.get("candidates")
    if not node:
        return EmbeddingNeighbours()
    path = "train.adversarial_augmentation.candidates"
    check_registered_name(node, path)
    return build(node, path, CandidateSource)


def _pretrain_problems(config: dict, enabled: bool) -> list[str]:
    """The problems of ``model.pretrain`` (continued MLM pretraining), if the model has that node."""
    node = config["model"].get("pretrain")
    if node is None:
        return []
    problems = check_pretrain_node(node)
    if not enabled:
        problems.append(
            "model.pretrain (continued MLM pretraining) makes an encoder to fine-tune, but train.enabled=false "
            "evaluates model.pretrained as it is: set train.enabled=true, or choose a model without pretrain"
        )
    return problems


def read_job(config: dict, context: JobContext, problems: Problems) -> JobParts:
    """What every job reads of the resolved ``config`` (a plain dict): its settings checked and its components
    built, unbound; errors are collected in ``problems``."""
    problems.add(
        composed_problems(config, list(context.overrides), context.command)
    )  # numbers, the seed, keys added with +
    value = config.get("seed")
    seed = value if isinstance(value, int) and not isinstance(value, bool) else 0  # 0: a stand-in (refused above)
    enabled = True
    with problems.collect():
        enabled = _train_enabled(config["train"])
    problems.add(_pretrain_problems(config, enabled))
    if (problem := distributed_problem(config["trainer"], context.multirun)) is not None:
        problems.add([problem])
    parts = JobParts(config, context, seed, enabled, Built())
    with problems.collect():  # a local folder that is not there: before Hydra makes the job's folder
        if isinstance(pretrained := config["model"].get("pretrained"), str):
            resolve_pretrained(pretrained)
    with problems.collect():
        parts.source = build(config["dataset"]["source"], "dataset.source", DataSource)
    with problems.collect():
        parts.masking = parts.built.get(config["masking"], "masking", MaskingStrategy)
    masked = config["train"].get("masking_augmentation") or {}
    if masked.get("enabled", False):
        with problems.collect():
            parts.masked_strategy = parts.built.get(
                masked["strategy"], "train.masking_augmentation.strategy", MaskingStrategy
            )
    adversarial = config["train"].get("adversarial_augmentation") or {}
    if adversarial.get("enabled", False):
        with problems.collect():
            parts.candidates = _adversarial_candidates(adversarial)
    return parts


def _set(value: T | None) -> T:
    """``value``, set once the pass that builds it raised no error."""
    assert value is not None
    return value


def _fine_tuning(parts: JobParts) -> FineTuningPlan:
    """The ``train`` node as a plan (masked and adversarial fine-tuning: their settings and components)."""
    train = parts.config["train"]
    every = train.get("checkpoint_every_n_steps")
    return FineTuningPlan(
        enabled=parts.enabled,
        keep_lightning_checkpoints=bool(train["keep_lightning_checkpoints"]),
        checkpoint_every_n_steps=int(every) if every else None,
        masked=train["masking_augmentation"] if parts.masked_strategy is not None else None,
        masked_strategy=parts.masked_strategy,
        adversarial=train["adversarial_augmentation"] if parts.candidates is not None else None,
        candidates=parts.candidates,
    )


def _spec(node: dict) -> Spec:
    """A ``_target_`` node as a :class:`~itermask.plan.Spec`."""
    return Spec(str(node["_target_"]), {k: v for k, v in node.items() if k != "_target_"})


def _pretrain_logger(config: dict, sweep_dir: str | None) -> Spec | None:
    """The tracker run of the continued-pretraining stage: its own run (task ``pretrain``, the pretraining
    seed), shared by every fine-tuning of the pretrained encoder (``None`` without the stage or a logger)."""
    pretrain = config["model"].get("pretrain")
    if pretrain is None:
        return None
    stage = {k: v for k, v in config.items() if k not in ("saliency", "masking")}
    stage.update(task_name="pretrain", seed=int(pretrain.get("seed", 0)))
    options = logger_options(stage, run_name(stage), sweep_dir)
    return None if options is None else _spec(options)


def job_parts(parts: JobParts, started_at: float | None = None) -> dict:
    """The plan's fields shared by every job (``job``, ``model``, ``data``, ``train``, ``trainer``, ``logger``,
    ``pretrain_logger``, ``masking``) from the parts of a first pass that raised no error."""
    config, model = parts.config, parts.config["model"]
    logger = logger_options(config, run_name(config), parts.context.sweep_dir)
    return dict(
        job=JobPlan(
            task=str(config["task_name"]),
            seed=parts.seed,
            output_dir=Path(str(config["output_dir"])),
            cache_dir=Path(str(config["cache_dir"])).expanduser(),
            lock_timeout=-1.0 if config.get("cache_lock_timeout") is None else float(config["cache_lock_timeout"]),
            reuse_results=bool(config.get("reuse_results", True)),
            config=config,
            started_at=time.time() if started_at is None else started_at,
        ),
        model=ModelPlan(
            name=str(model["name"]),
            pretrained=str(model["pretrained"]),
            max_length=int(model["max_length"]),
            batch_size=int(model["finetune"]["batch_size"]),
            optimizer=dict(model["finetune"]["optimizer"]),
            pretrain=model.get("pretrain"),
        ),
        # without fine-tuning the training split only feeds analyses (the OOD fit draws its own subset)
        data=DataPlan(
            name=str(config["dataset"]["name"]),
            source=_set(parts.source),
            eval_batch_size=int(config["data"]["eval_batch_size"]),
            num_workers=int(config["data"]["num_workers"]),
            max_train_examples=config["train"]["max_train_examples"] if parts.enabled else None,
            group_by_length=_group_by_length(config["train"]),
        ),
        train=_fine_tuning(parts),
        trainer=_spec(
            {**config["trainer"], "precision": canonical_precision(config["trainer"].get("precision", "32-true"))}
        ),
        logger=None if logger is None else _spec(logger),
        pretrain_logger=_pretrain_logger(config, parts.context.sweep_dir),
        masking=_set(parts.masking),
    )
