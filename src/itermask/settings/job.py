"""A fine-tuning job's settings (``train.py``, and the part of ``evaluate.py`` shared with it).

The resolved config is read once (:func:`itermask.settings.components.plain`), in two passes:

1. without the tokenizer: every numeric setting (:func:`itermask.validation.config_problems`), the seed, and
   every component built (data source, masking strategy, attack candidates of adversarial fine-tuning);
2. with the tokenizer and the model's config: ``model.pretrained``'s vocabulary and ``model.max_length``, the
   components bound, masked and adversarial fine-tuning assembled, the local files fingerprinted.

Each pass collects its errors (:class:`itermask.settings.problems.Problems`) and raises them together.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import hydra
from omegaconf import DictConfig

from itermask.core.candidates import CandidateSource, EmbeddingNeighbours
from itermask.core.masking import MaskingStrategy
from itermask.data import wordnet  # noqa: F401  (registers the wordnet candidate source)
from itermask.data.sources import DataSource
from itermask.models import mlm  # noqa: F401  (registers the mlm candidate source)
from itermask.models.loading import classifier_architecture, load_model_config, load_tokenizer, resolve_pretrained
from itermask.models.mlm import mlm_architecture
from itermask.settings.components import Built, build, check_registered_name, plain
from itermask.settings.problems import Problems
from itermask.storage.keys import Fingerprint, training_key
from itermask.tracking.runs import job_logger, run_name
from itermask.training.augmentation import (
    AdversarialAugmentation,
    RandomMaskingAugmentation,
    adversarial_fine_tuning,
    check_adversarial_keys,
    masked_fine_tuning,
)
from itermask.training.distributed import distributed_problem, trainer_processes
from itermask.training.pretraining import (
    PretrainSettings,
    check_pretrain_node,
    get_or_pretrain,
    pretrain_settings,
    use_pretrained_mlm,
)
from itermask.validation import (
    SettingsError,
    check_added_keys,
    check_max_length,
    check_seed_value,
    check_vocabulary,
    config_problems,
)

__all__ = [
    "check_seed",
    "ModelSettings",
    "DataSettings",
    "TrainSettings",
    "TrainJobSettings",
    "JobParts",
    "read_job",
    "bind_job",
    "train_settings",
    "training_key_of",
]

T = TypeVar("T")


def check_seed(cfg: DictConfig | dict) -> int:
    """``cfg["seed"]`` as an int.

    Raises:
        ValueError: if the seed is missing (``seed=null``), not an integer, or outside NumPy's range
            ``[0, 2**32 - 1]``."""
    seed = cfg.get("seed")
    message = f"seed must be set to an integer (seed=0 is a valid seed), got seed={seed!r}"
    if seed is None or isinstance(seed, bool) or isinstance(seed, float) and not seed.is_integer():
        raise ValueError(message)
    try:
        seed = int(seed)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if (problem := check_seed_value("seed", seed)) is not None:
        raise SettingsError([problem])
    return seed


@dataclass(frozen=True)
class ModelSettings:
    """The classifier to fine-tune (``model`` group): ``pretrained`` is a hub id, a local directory or
    ``package:<module>``; ``optimizer`` holds the :class:`~itermask.training.classifier.SequenceClassifier`
    keyword arguments (learning rate, weight decay, warm-up ratio).

    A model with a ``pretrain`` node (continued MLM pretraining, :mod:`itermask.training.pretraining`):
    ``pretrained`` is the pretrained encoder's folder in the cache, ``pretrained_from`` the configured
    ``model.pretrained`` it was pretrained from, ``pretrain_key`` its cache key; both ``None`` otherwise."""

    name: str
    pretrained: str
    max_length: int
    batch_size: int
    optimizer: dict
    pretrained_from: str | None = None
    pretrain_key: str | None = None


@dataclass(frozen=True)
class DataSettings:
    """The data (``dataset`` group and ``data``): the built source and the loader settings."""

    name: str
    source: DataSource
    eval_batch_size: int
    num_workers: int
    max_train_examples: int | None


@dataclass(frozen=True)
class TrainSettings:
    """Fine-tuning settings (``train``): checkpointing, masked fine-tuning (``augmentation``) and adversarial
    fine-tuning (``adversarial``), each ``None`` when disabled.

    ``enabled=False`` (``evaluate.py`` only): ``model.pretrained`` is a sequence classifier evaluated as it
    is, without fine-tuning (:func:`itermask.pipeline.given_classifier`)."""

    keep_lightning_checkpoints: bool
    checkpoint_every_n_steps: int | None
    augmentation: RandomMaskingAugmentation | None
    adversarial: AdversarialAugmentation | None
    enabled: bool


@dataclass(frozen=True)
class TrainJobSettings:
    """Everything a fine-tuning job needs, built and checked (see :func:`train_settings`).

    ``make_trainer(**overrides)`` builds the Lightning trainer of ``cfg.trainer``; ``make_logger()`` starts
    the job's tracker run (or returns ``None``); ``config`` is the resolved config as recorded with results;
    ``fingerprint`` the contents of the local files the job reads (part of both keys); ``lock_timeout`` the
    seconds to wait for the checkpoint cache's lock (``cache_lock_timeout``; ``-1``: forever)."""

    task_name: str
    seed: int
    cache_dir: Path
    lock_timeout: float
    output_dir: Path
    tokenizer: Any
    model: ModelSettings
    data: DataSettings
    train: TrainSettings
    masking: MaskingStrategy
    precision: str
    fingerprint: Fingerprint
    training_key: str
    training_payload: dict
    make_trainer: Callable[..., Any]
    make_logger: Callable[[], Any]
    config: dict
    run_name: str
    started_at: float


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


@dataclass
class JobParts:
    """What the first pass (:func:`read_job`) read and built, unbound; a field is ``None`` where building
    it failed (its error is among the collected problems)."""

    config: dict
    seed: int
    enabled: bool
    built: Built
    source: DataSource | None = None
    masking: MaskingStrategy | None = None
    masked_strategy: MaskingStrategy | None = None
    candidates: CandidateSource | None = None


def _adversarial_candidates(spec: dict) -> CandidateSource:
    """The candidate source of ``train.adversarial_augmentation`` (``spec``, enabled), built unbound."""
    check_adversarial_keys(spec)
    node = spec.get("candidates")
    if not node:
        return EmbeddingNeighbours()
    path = "train.adversarial_augmentation.candidates"
    check_registered_name(node, path)
    return build(node, path, CandidateSource)


def read_job(config: dict, overrides: list[str], problems: Problems) -> JobParts:
    """The first pass of a job's settings: what needs no tokenizer, checked, and its components built.

    Args:
        config: the resolved config (a plain dict).
        overrides: the command line's overrides (``HydraConfig``'s ``overrides.task``).
        problems: collects the errors.
    """
    with problems.collect():
        check_added_keys(overrides, config)
    problems.add(config_problems(config))  # the seed's range and type among them
    value = config.get("seed")
    seed = value if isinstance(value, int) and check_seed_value("seed", value) is None else 0  # 0: a stand-in
    enabled = True
    with problems.collect():
        enabled = _train_enabled(config["train"])
    if config["model"].get("pretrain") is not None:
        problems.add(check_pretrain_node(config["model"]["pretrain"]))
        if not enabled:
            problems.add(
                [
                    "model.pretrain (continued MLM pretraining) makes an encoder to fine-tune, but "
                    "train.enabled=false evaluates model.pretrained as it is: set train.enabled=true, or choose "
                    "a model without pretrain"
                ]
            )
    parts = JobParts(config, seed, enabled, Built())
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


def _fine_tuning(parts: JobParts, tokenizer, problems: Problems) -> TrainSettings:
    """The ``train`` settings with masked and adversarial fine-tuning assembled (errors collected)."""
    train, pretrained = parts.config["train"], str(parts.config["model"]["pretrained"])
    augmentation = adversarial = None
    if parts.masked_strategy is not None:
        with problems.collect():
            augmentation = masked_fine_tuning(
                train["masking_augmentation"], parts.masked_strategy, tokenizer, parts.seed
            )
    if parts.candidates is not None:
        spec = train["adversarial_augmentation"]
        with problems.collect():
            architecture = classifier_architecture(pretrained)
            adversarial = adversarial_fine_tuning(spec, parts.candidates, tokenizer, architecture, parts.seed)
    every = train.get("checkpoint_every_n_steps")
    return TrainSettings(
        bool(train["keep_lightning_checkpoints"]),
        int(every) if every else None,
        augmentation,
        adversarial,
        parts.enabled,
    )


def bind_job(parts: JobParts, problems: Problems, started_at: float) -> dict:
    """The second pass: the tokenizer loaded, the components bound and checked against it and the model's
    config; returns the fields of :class:`TrainJobSettings`.

    Raises:
        ValueError, OSError: the errors of this pass, together (:meth:`Problems.raise_if_any`)."""
    config, source = parts.config, _set(parts.source)
    model, pretrained = config["model"], str(config["model"]["pretrained"])
    tokenizer = load_tokenizer(pretrained)
    model_config = load_model_config(pretrained)
    with problems.collect():
        check_vocabulary(tokenizer, model_config, pretrained)
    with problems.collect():
        pairs = bool(getattr(source, "text_pair_column", None))
        check_max_length(int(model["max_length"]), tokenizer, model_config, pretrained, pairs=pairs)
    fingerprint = Fingerprint()
    with problems.collect():
        fingerprint = Fingerprint.of(source, pretrained)
    pretrain = None
    if model.get("pretrain") is not None:
        with problems.collect():
            base_path = resolve_pretrained(pretrained)
            mlm_architecture(base_path, pretrained)  # word embeddings to tie the head to, before any work
            pretrain = pretrain_settings(config, fingerprint, source, base_path)
    trainer, processes = config["trainer"], 1
    with problems.collect():  # before the pretraining stage, which runs a trainer too
        if (problem := distributed_problem(trainer, hydra_multirun())) is not None:
            raise SettingsError([problem])
        processes = trainer_processes(trainer)
    problems.raise_if_any()
    make_trainer = _trainer_factory(config["trainer"])
    encoder = pretrained
    if pretrain is not None:  # the continued-pretraining stage (cached), then the MLM components use its output
        encoder = str(get_or_pretrain(pretrain, tokenizer, make_trainer, _pretrain_logger(config, pretrain)))
        for component in [*parts.built.components(), parts.candidates]:
            use_pretrained_mlm(component, pretrained, encoder)
    with problems.collect():
        parts.built.bind_all(tokenizer)
    train = _fine_tuning(parts, tokenizer, problems)
    problems.raise_if_any()
    key, payload = training_key(
        config, fingerprint, parts.seed, processes, pretrain.key if pretrain is not None else None
    )
    return dict(
        task_name=str(config["task_name"]),
        seed=parts.seed,
        cache_dir=Path(str(config["cache_dir"])).expanduser(),
        lock_timeout=_lock_timeout(config),
        output_dir=Path(str(config["output_dir"])),
        tokenizer=tokenizer,
        model=ModelSettings(
            model["name"],
            encoder,
            int(model["max_length"]),
            int(model["finetune"]["batch_size"]),
            dict(model["finetune"]["optimizer"]),
            pretrained if pretrain is not None else None,
            pretrain.key if pretrain is not None else None,
        ),
        # without fine-tuning the training split only feeds analyses (the OOD fit draws its own subset)
        data=DataSettings(
            config["dataset"]["name"],
            source,
            int(config["data"]["eval_batch_size"]),
            int(config["data"]["num_workers"]),
            config["train"]["max_train_examples"] if parts.enabled else None,
        ),
        train=train,
        masking=_set(parts.masking),
        precision=str(trainer.get("precision", "32-true")),
        fingerprint=fingerprint,
        training_key=key,
        training_payload=payload,
        make_trainer=make_trainer,
        make_logger=job_logger(config, run_name(config), key),
        config=config,
        run_name=run_name(config),
        started_at=started_at,
    )


def _trainer_factory(trainer: dict) -> Callable[..., Any]:
    """A function building the Lightning trainer of ``cfg.trainer`` with keyword overrides."""
    return lambda **overrides: hydra.utils.instantiate(trainer, **overrides)


def _pretrain_logger(config: dict, pretrain: PretrainSettings) -> Callable[[], Any]:
    """The tracker run of the continued-pretraining stage: its own run (task ``pretrain``, the pretraining
    seed), shared by every fine-tuning of the pretrained encoder."""
    stage = {k: v for k, v in config.items() if k not in ("saliency", "masking")}
    stage.update(task_name="pretrain", seed=int(pretrain.options.get("seed", 0)))
    return job_logger(stage, run_name(stage))


def _lock_timeout(config: dict) -> float:
    """``cache_lock_timeout`` in seconds (``-1``: forever, for ``null``; checked by ``config_problems``)."""
    value = config.get("cache_lock_timeout")
    return -1.0 if value is None else float(value)


def hydra_multirun() -> bool:
    """Whether the running Hydra job is a job of a multirun (``-m``)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def hydra_overrides() -> list[str]:
    """The command line's overrides of the running Hydra job (none outside one)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def train_settings(cfg: DictConfig) -> TrainJobSettings:
    """The settings stage of ``train.py``.

    Raises:
        ValueError: ``train.enabled=false`` (nothing to do: that is for ``evaluate.py``); every bad setting
            of a pass together (see the module docstring); FileNotFoundError for missing data files or model
            directories.
    """
    started_at = time.time()
    config = plain(cfg)
    if config["train"].get("enabled", True) is False:
        raise ValueError(
            "train.py fine-tunes, but train.enabled=false: evaluate a classifier without fine-tuning "
            "with evaluate.py train.enabled=false model.pretrained=<directory or hub id>"
        )
    problems = Problems()
    parts = read_job(config, hydra_overrides(), problems)
    problems.raise_if_any()
    return TrainJobSettings(**bind_job(parts, problems, started_at))


def training_key_of(cfg: DictConfig) -> tuple[str, dict]:
    """The checkpoint key of a composed config and what it hashes (:func:`itermask.storage.keys.training_key`),
    its data source built here.

    Raises:
        ValueError: for a missing or non-integer seed, or the data source's error."""
    config = plain(cfg)
    seed = check_seed(config)
    source = build(config["dataset"]["source"], "dataset.source")
    pretrained = str(config["model"]["pretrained"])
    fingerprint = Fingerprint.of(source, pretrained)
    pretrain_key = None
    if config["model"].get("pretrain") is not None:
        pretrain_key = pretrain_settings(config, fingerprint, source, resolve_pretrained(pretrained)).key
    processes = trainer_processes(config["trainer"])
    return training_key(config, fingerprint, seed, processes, pretrain_key)
