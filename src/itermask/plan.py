"""The one description of a job: :class:`EvaluationPlan`, a frozen tree of small dataclasses.

Both doors build it (the scripts from the Hydra config, :mod:`itermask.settings`; :func:`itermask.evaluate` from
its keyword arguments) and run it through the same :func:`itermask.engine.prepare`, :func:`itermask.engine.run` and
:func:`itermask.engine.record`. A plan holds values and built, unbound components (each checked its own parameters
when built); never a tokenizer, a model, a logger, or a Hydra or OmegaConf object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from itermask.analyses.base import Analysis
from itermask.core.candidates import CandidateSource
from itermask.core.evaluation_settings import EvaluationSettings
from itermask.core.masking import MaskingStrategy
from itermask.core.saliency.base import SaliencyMethod
from itermask.data.sources import DataSource

__all__ = ["Spec", "JobPlan", "ModelPlan", "DataPlan", "FineTuningPlan", "EvaluationPlan"]


@dataclass(frozen=True)
class Spec:
    """An object to build when the job runs (a Lightning trainer or logger): its class path and keyword
    arguments (plain values)."""

    target: str
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobPlan:
    """What the job is and where it writes.

    Attributes:
        task: ``"evaluate"``, ``"train"`` or ``"pretrain"`` (the tracker's job type, part of run ids).
        seed: the experiment seed (fine-tuning, the random explanation, seeded methods).
        output_dir: the job folder (``None``: nothing is written, as in :func:`itermask.evaluate`).
        cache_dir: the checkpoint cache, results store and derived values (``None``: no cache).
        lock_timeout: seconds to wait for a cache entry's lock (``-1``: forever).
        reuse_results: return a stored result of the same results key instead of evaluating.
        config: the resolved config as results record it and keys hash it (a plain mapping).
        started_at: when the job started (``time.time()``).
    """

    task: str
    seed: int
    output_dir: Path | None = None
    cache_dir: Path | None = None
    lock_timeout: float = -1.0
    reuse_results: bool = False
    config: Mapping[str, Any] = field(default_factory=dict)
    started_at: float = 0.0


@dataclass(frozen=True)
class ModelPlan:
    """The classifier (``model`` group).

    Attributes:
        name: the model's name in results.
        pretrained: a hub id, a local folder or ``package:<module>`` (``""``: a classifier given as a module to
            :func:`itermask.engine.prepare`).
        max_length: tokens per example after truncation (``None``: what the tokenizer and the model's position
            embeddings allow, at most 512).
        batch_size: fine-tuning batch size.
        optimizer: the fine-tuning module's optimiser settings (learning rate, weight decay, warm-up ratio).
        pretrain: the continued MLM pretraining node (``None``: the encoder as it is).
    """

    name: str
    pretrained: str
    max_length: int | None = None
    batch_size: int = 16
    optimizer: Mapping[str, Any] = field(default_factory=dict)
    pretrain: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class DataPlan:
    """The data: the built source and the loader settings.

    Attributes:
        name: the dataset's name in results.
        source: the built data source (unloaded).
        eval_batch_size: examples per batch of the test loop and the masking evaluation.
        num_workers: data loader workers.
        max_train_examples: fine-tune on a seeded subset of this many examples (``None``: all).
        group_by_length: training batches of examples of similar length (``train.group_by_length``).
    """

    name: str
    source: DataSource
    eval_batch_size: int = 64
    num_workers: int = 0
    max_train_examples: int | None = None
    group_by_length: bool = True


@dataclass(frozen=True)
class FineTuningPlan:
    """Fine-tuning (``train``).

    Attributes:
        enabled: fine-tune ``model.pretrained`` (``False``: evaluate it as it is).
        keep_lightning_checkpoints: keep Lightning's checkpoints after the export.
        checkpoint_every_n_steps: also write ``last.ckpt`` every N steps (``None``: per epoch).
        masked: masked fine-tuning's settings (``None``: off) and ``masked_strategy`` its masking strategy.
        adversarial: adversarial fine-tuning's settings (``None``: off) and ``candidates`` its candidate source.
    """

    enabled: bool = True
    keep_lightning_checkpoints: bool = False
    checkpoint_every_n_steps: int | None = None
    masked: Mapping[str, Any] | None = None
    masked_strategy: MaskingStrategy | None = None
    adversarial: Mapping[str, Any] | None = None
    candidates: CandidateSource | None = None


@dataclass(frozen=True)
class EvaluationPlan:
    """The one description of a job (see the module docstring).

    Attributes:
        job, model, data, train: see :class:`JobPlan`, :class:`ModelPlan`, :class:`DataPlan`,
            :class:`FineTuningPlan`.
        trainer: the Lightning trainer (:class:`Spec`).
        logger: the tracker run (``None``: no tracker), its name, group and tags filled in; ``pretrain_logger``
            the continued-pretraining stage's own run (task ``pretrain``, shared by every fine-tuning of the
            pretrained encoder).
        masking: the masking strategy (also masked fine-tuning's when the config says ``${masking}``).
        evaluation: the masking evaluation (``None``: a job that only fine-tunes or pretrains).
        saliency: the saliency methods under study, in order (``evaluate.py``: one).
        analyses: the analyses run after the masking stage, in order.
        measure_accuracy: measure the test accuracy beside the majority class (needs a training split).
    """

    job: JobPlan
    model: ModelPlan
    data: DataPlan
    train: FineTuningPlan
    trainer: Spec
    masking: MaskingStrategy
    logger: Spec | None = None
    pretrain_logger: Spec | None = None
    evaluation: EvaluationSettings | None = None
    saliency: tuple[SaliencyMethod, ...] = ()
    analyses: tuple[Analysis, ...] = ()
    measure_accuracy: bool = True

    def __post_init__(self) -> None:
        if self.evaluation is not None and not self.saliency:
            raise ValueError("an evaluation needs at least one saliency method")

    @property
    def method(self) -> str:
        """The name of the (first) saliency method under study."""
        return self.saliency[0].name
