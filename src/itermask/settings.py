"""The settings stage: a composed Hydra config becomes typed settings, every component built once and every
option checked once, before any data is loaded or any model trained.

This is the one place (with the entry points) that reads the Hydra config: the later stages of
:mod:`itermask.pipeline` receive a :class:`TrainJobSettings` or :class:`EvaluateSettings`, never a
``DictConfig``. Components (saliency method, masking strategy, data source, analyses, trainer, logger) are
built from their config nodes with ``_target_`` and bound to the tokenizer (:class:`itermask.core.tokens.TokenizerBound`).

Keys: the checkpoint key hashes what determines the fine-tuned weights, the results key every setting that
changes an evaluation's numbers (:mod:`itermask.storage.store`); both hash each component's config name and
settings, never its ``_target_`` (module paths), plus the contents of the local files it reads.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf

from itermask.analyses import Analysis, AnalysisInputs
from itermask.core.adversarial import FirstOrderAttack
from itermask.core.candidates import build_candidate_source, input_embedding_matrix, word_start_vocabulary
from itermask.core.evaluation import IterativeMaskingEvaluator, check_target_policy, off_grid
from itermask.core.forwards import DEFAULT_TOKEN_BUDGET
from itermask.core.masking import MaskingStrategy
from itermask.core.saliency import RandomSaliency, SaliencyMethod
from itermask.core.tokens import segment_list
from itermask.storage.cache import config_hash
from itermask.storage.store import component_settings, results_key
from itermask.training import attack_sources  # noqa: F401  (registers the wordnet and mlm candidate sources)
from itermask.training.augmentation import AdversarialAugmentation, RandomMaskingAugmentation
from itermask.training.models import class_mapping, classifier_architecture, load_model_config, load_tokenizer
from itermask.training.sources import REPAIR_SWITCHES, DataSource
from itermask.validation import (
    QUANTITIES,
    SettingsError,
    check_added_keys,
    check_config,
    check_max_length,
    check_seed_value,
    check_vocabulary,
)

__all__ = [
    "check_seed",
    "plain",
    "ModelSettings",
    "DataSettings",
    "TrainSettings",
    "EvaluationSettings",
    "TrainJobSettings",
    "EvaluateSettings",
    "train_settings",
    "evaluate_settings",
    "data_fingerprint",
    "training_key",
    "build",
]


def plain(node: DictConfig) -> Any:
    """A config node as plain containers, interpolations resolved and enum values (the ``evaluation`` schema's
    choices) as their names: what keys hash and results record."""
    return OmegaConf.to_container(node, resolve=True, enum_to_str=True)


def check_seed(cfg: DictConfig) -> int:
    """``cfg.seed`` as an int.

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
    ``package:<module>``; ``optimizer`` holds the :class:`~itermask.training.models.SequenceClassifier`
    keyword arguments (learning rate, weight decay, warm-up ratio)."""

    name: str
    pretrained: str
    max_length: int
    batch_size: int
    optimizer: dict


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
    adversarial: AdversarialAugmentation | None = None
    enabled: bool = True


@dataclass(frozen=True)
class EvaluationSettings:
    """The masking evaluation (``evaluation``): which examples, which steps, what is compared.

    ``grid`` is the masking fractions (``steps="fraction"``) or token counts (``steps="count"``);
    ``segments`` is ``None`` (every segment) or a list of segment ids; ``aopc_bins`` is ``None`` when AOPC over
    bins is skipped (``evaluation.aopc_bins=null``)."""

    split: str
    n_examples: int | None
    subset_seed: int
    steps: str
    fractions: tuple[float, ...]
    counts: tuple[int, ...]
    aopc_bins: tuple[float, ...] | None
    segments: list[int] | None
    schedules: tuple[str, ...]
    target: str | int
    quantity: str
    compare_random: bool
    chunk_size: int
    forwards: str = "bucketed"
    token_budget: int = DEFAULT_TOKEN_BUDGET

    @classmethod
    def from_config(cls, node: DictConfig) -> EvaluationSettings:
        """Read ``cfg.evaluation`` (typed by :class:`itermask.validation.EvaluationSchema` at composition; the
        numbers are checked by :func:`itermask.validation.check_config`).

        Raises:
            ValueError: for an unknown quantity, AOPC bins off a fraction grid, or bad segments.
        """
        e = plain(node)
        if e["quantity"] not in QUANTITIES:
            raise ValueError(f"evaluation.quantity must be 'probability' or 'logit', got {e['quantity']!r}")
        bins = e["aopc_bins"]
        settings = cls(
            split=e["split"],
            n_examples=e["n_examples"],
            subset_seed=int(e["subset_seed"]),
            steps=e["steps"],
            fractions=tuple(e["fractions"]),
            counts=tuple(e["counts"]),
            aopc_bins=None if bins is None else tuple(bins),
            segments=segment_list(e["segments"]),
            schedules=tuple(e["schedules"]),
            target=e["target"],
            quantity=e["quantity"],
            compare_random=bool(e["compare_random"]),
            chunk_size=int(e["chunk_size"]),
            forwards=e.get("forwards", "bucketed"),
            token_budget=int(e.get("token_budget", DEFAULT_TOKEN_BUDGET)),
        )
        with _naming(f"evaluation.target={settings.target}"):
            check_target_policy(settings.target)
        if (
            settings.steps == "fraction"
            and settings.aopc_bins
            and (off := off_grid(settings.aopc_bins, settings.fractions))
        ):
            raise ValueError(
                f"evaluation.aopc_bins {off} are not among evaluation.fractions {list(settings.fractions)}: "
                "add them to the fractions or change evaluation.aopc_bins (null: no AOPC)"
            )
        return settings


@dataclass
class TrainJobSettings:
    """Everything a fine-tuning job needs, built and checked (see :func:`train_settings`).

    ``make_trainer(**overrides)`` builds the Lightning trainer of ``cfg.trainer``; ``make_logger()`` starts
    the job's tracker run (or returns ``None``); ``config`` is the resolved config as recorded with results."""

    task_name: str
    seed: int
    cache_dir: Path
    output_dir: Path
    tokenizer: Any
    model: ModelSettings
    data: DataSettings
    train: TrainSettings
    masking: MaskingStrategy
    precision: str
    training_key: str
    training_payload: dict
    make_trainer: Callable[..., Any]
    make_logger: Callable[[], Any]
    config: dict
    run_name: str
    started_at: float = field(default_factory=time.time)


@dataclass
class EvaluateSettings(TrainJobSettings):
    """A fine-tuning job's settings plus the evaluation's (see :func:`evaluate_settings`): the saliency
    method, one evaluator per explanation (the method, and ``random`` when compared), the configured
    analyses, and the results key."""

    reuse_results: bool = True
    results_key: str = ""
    saliency: SaliencyMethod | None = None
    evaluation: EvaluationSettings | None = None
    evaluators: dict[str, IterativeMaskingEvaluator] = field(default_factory=dict)
    analyses: list[Analysis] = field(default_factory=list)

    @property
    def method(self) -> str:
        """The name of the saliency method under study (the first evaluator)."""
        return next(iter(self.evaluators))

    def check_against_data(self, data) -> None:
        """Settings that need the data (target class, split, subset size, segments, the analyses', and with
        ``train.enabled=false`` the given classifier's classes, :func:`~itermask.training.models.class_mapping`),
        checked before any fine-tuning or evaluation.

        Raises:
            ValueError: naming the setting."""
        e = self.evaluation
        with _naming(f"evaluation.target={e.target}"):
            check_target_policy(e.target, len(data.label_names))
        with _naming(f"evaluation.split={e.split}"):
            data.evaluation_subset(e.n_examples, e.subset_seed, e.split)  # unknown split, size <= 0
        if e.segments is not None and not data.has_text_pairs and e.segments != [0]:
            raise ValueError(
                f"evaluation.segments={e.segments}, but {self.data.name} has single texts (segment 0 only); "
                "use evaluation.segments=null, or a sentence-pair dataset (text_pair_column)"
            )
        if not self.train.enabled:  # the given classifier's classes against the data's (its config only)
            class_mapping(self.model.pretrained, data.label_names)
        for analysis in self.analyses:
            analysis.check_data(data)


@contextmanager
def _naming(option: str):
    """Prefix the message of a ``ValueError`` raised inside with the option it is about (``option: ...``)."""
    try:
        yield
    except SettingsError:
        raise
    except ValueError as error:
        raise ValueError(f"{option}: {error}") from error


# -- building -----------------------------------------------------------------------------------------


def build(node: DictConfig | dict, **kwargs):
    """Build a component from its config node (``_target_``, nested nodes as plain containers); its ``name``
    field labels results and is not an argument.

    Raises:
        ValueError, OSError: the component's own error for a bad setting (not wrapped by Hydra).
    """
    spec = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    spec.pop("name", None)
    try:
        return hydra.utils.instantiate(spec, _convert_="all", **kwargs)
    except InstantiationException as error:
        if isinstance(error.__cause__, (ValueError, OSError)):
            raise error.__cause__ from None
        raise


def _bound(node: DictConfig, tokenizer, built: dict):
    """The component of ``node`` bound to ``tokenizer``, built once per distinct config (``built`` caches
    them: the evaluation's masking strategy and masked fine-tuning's are one object, so an MLM loads once)."""
    key = config_hash(OmegaConf.to_container(node, resolve=True))
    if key not in built:
        built[key] = build(node).bind(tokenizer)
    return built[key]


def data_fingerprint(source: DataSource, pretrained: str) -> dict[str, str]:
    """SHA-256 of every local file the data source reads (:meth:`DataSource.local_files`) and of a local
    ``pretrained`` directory's files, so editing a data file or a local model changes the keys (the config
    alone names only the path)."""
    files = dict(source.local_files())
    directory = Path(str(pretrained))
    if directory.is_dir():
        files.update({f"model:{p.name}": str(p) for p in sorted(directory.iterdir()) if p.is_file()})
    digests = {}
    for name, file in files.items():
        digest = hashlib.sha256()
        with open(file, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        digests[name] = digest.hexdigest()
    return digests


def _run_name(cfg: DictConfig) -> str:
    parts = [cfg.task_name, cfg.model.name, cfg.dataset.name]
    if "saliency" in cfg:
        parts += [cfg.saliency.name, cfg.masking.name]
    return "-".join(str(p) for p in parts) + f"-seed{cfg.seed}"


def _tags(cfg: DictConfig) -> list[str]:
    """W&B tags of a job: ``model:<name>``, ``dataset:<name>``, (evaluations) ``saliency:<name>`` and
    ``masking:<name>``, and ``seed:<n>``."""
    tags = [f"model:{cfg.model.name}", f"dataset:{cfg.dataset.name}"]
    if "saliency" in cfg:
        tags += [f"saliency:{cfg.saliency.name}", f"masking:{cfg.masking.name}"]
    return tags + [f"seed:{cfg.seed}"]


def _make_logger(cfg: DictConfig, run_name: str) -> Callable[[], Any]:
    """A function starting the job's Lightning logger from ``cfg.logger`` (``None`` without one), with the
    run name, the W&B group (one per multirun sweep), job type (the task) and tags filled in where the config
    leaves them ``null``, and ``init_timeout`` passed as W&B's setting of that name. The run falls back to
    offline logging when an online start fails (:func:`itermask.tracking.start`)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from itermask import tracking

    if cfg.get("logger") is None:
        return lambda: None
    spec = OmegaConf.to_container(cfg.logger, resolve=True)
    if "group" in spec and spec["group"] is None:
        hydra_cfg = HydraConfig.get() if HydraConfig.initialized() else None
        multirun = hydra_cfg is not None and hydra_cfg.mode == RunMode.MULTIRUN
        spec["group"] = tracking.group_name(cfg.task_name, hydra_cfg.sweep.dir if multirun else None)
    filled = {"name": run_name, "job_type": str(cfg.task_name), "tags": _tags(cfg)}
    spec.update({key: value for key, value in filled.items() if key in spec and spec[key] is None})
    timeout = spec.pop("init_timeout", None)
    if timeout is not None:
        spec["settings"] = {**(spec.get("settings") or {}), "init_timeout": float(timeout)}
    # _convert_="all": W&B takes plain dicts and lists (settings, tags), not OmegaConf containers
    return lambda: tracking.start(
        lambda **overrides: hydra.utils.instantiate(spec, _convert_="all", **overrides), spec.get("mode")
    )


def _augmentation(cfg: DictConfig, tokenizer, built: dict, seed: int) -> RandomMaskingAugmentation | None:
    spec = cfg.train.get("masking_augmentation")
    if spec is None or not spec.enabled:
        return None
    strategy = _bound(spec.strategy, tokenizer, built)
    return RandomMaskingAugmentation(strategy, tokenizer.all_special_ids, spec.batch_share, seed=seed)


#: the keys of ``train.adversarial_augmentation``
ADVERSARIAL_KEYS = {"enabled", "batch_share", "budget", "word_initial_only", "candidates"}


def _adversarial_augmentation(cfg: DictConfig, tokenizer, seed: int) -> AdversarialAugmentation | None:
    """Adversarial fine-tuning of ``cfg.train.adversarial_augmentation`` (``None`` when disabled or absent):
    its candidate source built and bound (``wordnet``/``mlm`` load here), the model's input embeddings
    checked on the architecture. Its batch choice has its own seed, drawn apart from masked fine-tuning's.

    Raises:
        ValueError: an unknown key, a bad batch share or budget, a source without token ids (``mask``), a
            model without an input-embedding matrix, or the source's own error."""
    spec = cfg.train.get("adversarial_augmentation")
    if spec is None or not spec.get("enabled", False):
        return None
    s = OmegaConf.to_container(spec, resolve=True)
    if unknown := sorted(set(s) - ADVERSARIAL_KEYS):
        raise ValueError(
            f"unknown train.adversarial_augmentation setting(s) {unknown}: known are {sorted(ADVERSARIAL_KEYS)}"
        )
    source = build_candidate_source(s.get("candidates") or {"name": "embedding_neighbors"})
    attack = FirstOrderAttack(source, tokenizer.all_special_ids, None, s.get("budget", 0.2))  # settings checked first
    source.bind(tokenizer)
    if s.get("word_initial_only", True):
        attack.word_start = word_start_vocabulary(tokenizer)
    input_embedding_matrix(classifier_architecture(str(cfg.model.pretrained)), "train.adversarial_augmentation")
    stream = int(hashlib.sha256(f"adversarial_augmentation:{seed}".encode()).hexdigest()[:12], 16)
    return AdversarialAugmentation(attack, s.get("batch_share", 0.5), seed=stream)


def training_key(cfg: DictConfig, source: DataSource | None = None) -> tuple[str, dict]:
    """The checkpoint-cache key and what it hashes: everything that determines the fine-tuned weights (model,
    dataset source and the contents of its local files, training settings, trainer precision, seed), from
    the config alone (``source``: the built data source, built here when not given).
    ``train.masking_augmentation`` and ``train.adversarial_augmentation`` count only when enabled, so
    standard fine-tuning keeps its key, and ``train.enabled`` only when false; the data sources' repair switches
    (:data:`~itermask.training.sources.REPAIR_SWITCHES`) never count: off, the job fails on data they would
    repair, so the data of a finished job are the same either way.

    Raises:
        ValueError: for a missing or non-integer seed."""
    seed = check_seed(cfg)
    source = build(cfg.dataset.source) if source is None else source
    fingerprint = data_fingerprint(source, cfg.model.pretrained)
    train = component_settings(OmegaConf.to_container(cfg.train, resolve=True))
    for augmentation in ("masking_augmentation", "adversarial_augmentation"):
        if not (train.get(augmentation) or {}).get("enabled", False):
            train.pop(augmentation, None)
    if train.get("enabled", True) is True:  # the default leaves the keys as they were before the option
        train.pop("enabled", None)
    source_settings = component_settings(OmegaConf.to_container(cfg.dataset.source, resolve=True))
    for switch in REPAIR_SWITCHES:
        source_settings.pop(switch, None)
    payload = {
        "model": component_settings(OmegaConf.to_container(cfg.model, resolve=True)),
        "dataset": {"name": cfg.dataset.name, "source": source_settings},
        "data_files": fingerprint,
        "train": train,
        "precision": str(cfg.trainer.get("precision", "32-true")),
        "seed": seed,
    }
    return config_hash(payload), payload


def _job_fields(cfg: DictConfig, built: dict) -> dict:
    """The fields of :class:`TrainJobSettings` (tokenizer loaded, data source and masking strategy built),
    after every numeric setting has been checked (:func:`itermask.validation.check_config`, before the
    tokenizer loads) and ``model.max_length`` against the tokenizer and the model's config."""
    from hydra.core.hydra_config import HydraConfig

    started_at = time.time()
    if HydraConfig.initialized():
        check_added_keys(list(HydraConfig.get().overrides.task))
    config = plain(cfg)
    check_config(config)  # every bad number and seed at once, the seed included
    seed = check_seed(cfg)
    tokenizer = load_tokenizer(cfg.model.pretrained)
    source = build(cfg.dataset.source)
    model_config = load_model_config(cfg.model.pretrained)
    check_vocabulary(tokenizer, model_config, str(cfg.model.pretrained))
    check_max_length(
        int(cfg.model.max_length),
        tokenizer,
        model_config,
        str(cfg.model.pretrained),
        pairs=bool(getattr(source, "text_pair_column", None)),
    )
    key, payload = training_key(cfg, source)
    finetune = cfg.model.finetune
    enabled = _train_enabled(cfg)
    trainer_spec = OmegaConf.to_container(cfg.trainer, resolve=True)
    every = cfg.train.get("checkpoint_every_n_steps")
    return dict(
        task_name=str(cfg.task_name),
        seed=seed,
        cache_dir=Path(str(cfg.cache_dir)).expanduser(),
        output_dir=Path(str(cfg.output_dir)),
        tokenizer=tokenizer,
        model=ModelSettings(
            cfg.model.name,
            str(cfg.model.pretrained),
            int(cfg.model.max_length),
            int(finetune.batch_size),
            OmegaConf.to_container(finetune.optimizer, resolve=True),
        ),
        # without fine-tuning the training split only feeds analyses (the OOD fit draws its own subset)
        data=DataSettings(
            cfg.dataset.name,
            source,
            int(cfg.data.eval_batch_size),
            int(cfg.data.num_workers),
            cfg.train.max_train_examples if enabled else None,
        ),
        train=TrainSettings(
            bool(cfg.train.keep_lightning_checkpoints),
            int(every) if every else None,
            _augmentation(cfg, tokenizer, built, seed),
            _adversarial_augmentation(cfg, tokenizer, seed),
            enabled,
        ),
        masking=_bound(cfg.masking, tokenizer, built),
        precision=str(cfg.trainer.get("precision", "32-true")),
        training_key=key,
        training_payload=payload,
        make_trainer=lambda **overrides: hydra.utils.instantiate(trainer_spec, **overrides),
        make_logger=_make_logger(cfg, _run_name(cfg)),
        config=config,
        run_name=_run_name(cfg),
        started_at=started_at,
    ), payload["data_files"]


def _train_enabled(cfg: DictConfig) -> bool:
    """``train.enabled`` (default true).

    Raises:
        ValueError: if it is not a boolean, or it is false with masked fine-tuning switched on."""
    enabled = cfg.train.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"train.enabled must be true or false, got {enabled!r}")
    if not enabled and (cfg.train.get("masking_augmentation") or {}).get("enabled", False):
        raise ValueError(
            "train.masking_augmentation.enabled=true is masked fine-tuning, but train.enabled=false "
            "evaluates model.pretrained without fine-tuning: switch one of them"
        )
    return enabled


def train_settings(cfg: DictConfig) -> TrainJobSettings:
    """The settings stage of ``train.py``.

    Raises:
        ValueError: for a missing or non-integer seed, an unknown masking strategy setting, bad masked or
            adversarial fine-tuning settings, ``train.enabled=false`` (nothing to do: that is for
            ``evaluate.py``); FileNotFoundError for missing data files or model directories.
    """
    if not _train_enabled(cfg):
        raise ValueError(
            "train.py fine-tunes, but train.enabled=false: evaluate a classifier without fine-tuning "
            "with evaluate.py train.enabled=false model.pretrained=<directory or hub id>"
        )
    fields, _ = _job_fields(cfg, {})
    return TrainJobSettings(**fields)


def _analyses(cfg: DictConfig) -> list[Analysis]:
    """The configured analyses: the top-level nodes named in ``cfg.analyses``, each built with its
    ``_target_`` unless absent or switched off (``enabled: false`` or ``level: none``; its other settings
    are then not checked)."""
    analyses = []
    for name in cfg.get("analyses") or []:
        node = cfg.get(name)
        if node is None or node.get("enabled", True) is False or node.get("level") == "none":
            continue
        analysis = build(node)
        if not isinstance(analysis, Analysis):
            raise ValueError(f"{name}._target_ must name an itermask.analyses.Analysis, got {type(analysis).__name__}")
        analyses.append(analysis)
    return analyses


def evaluate_settings(cfg: DictConfig) -> EvaluateSettings:
    """The settings stage of ``evaluate.py``: every component built and bound, every option checked.

    Raises:
        ValueError: naming the setting (seed, saliency, masking, evaluation grid, schedules, target
            policy, quantity, AOPC bins, segments, analyses' settings, masked and adversarial fine-tuning).
    """
    built: dict = {}
    fields, fingerprint = _job_fields(cfg, built)
    settings = EvaluateSettings(**fields, reuse_results=bool(cfg.get("reuse_results", True)))
    settings.saliency = build(cfg.saliency).bind(settings.tokenizer)
    settings.evaluation = e = EvaluationSettings.from_config(cfg.evaluation)
    settings.analyses = _analyses(cfg)
    methods = {settings.saliency.name: settings.saliency}
    if e.compare_random and settings.saliency.name != "random":
        methods["random"] = RandomSaliency(seed=settings.seed)
    wanted = {analysis.representations for analysis in settings.analyses}
    collect = "all" if "all" in wanted else "final" if "final" in wanted else False
    settings.evaluators = {
        name: IterativeMaskingEvaluator(
            method,
            settings.masking,
            fractions=list(e.fractions),
            special_ids=settings.tokenizer.all_special_ids,
            schedules=list(e.schedules),
            target=e.target,
            chunk_size=e.chunk_size,
            steps=e.steps,
            forwards=e.forwards,
            token_budget=e.token_budget,
            counts=list(e.counts),
            segments=e.segments,
            collect_representations=collect,
        )
        for name, method in methods.items()
    }
    for analysis in settings.analyses:
        analysis.check(AnalysisInputs.from_settings(settings))
    settings.results_key = results_key({**settings.config, "data_files": fingerprint})
    return settings
