"""What ``train.py`` and ``evaluate.py`` do, as a short sequence of stages.

An evaluation job is four stages, each a function with typed inputs and outputs:

1. **settings** (:func:`itermask.settings.evaluate_settings`): the Hydra config becomes typed settings,
   every component built once and every option checked once, before any work;
2. **model** (:func:`get_model`): the cached fine-tuned checkpoint, or a fine-tuning (:func:`get_or_train`,
   after :func:`load_data` has loaded the data and checked the settings that need it); with
   ``train.enabled=false`` the given classifier as it is (:func:`given_classifier`);
3. **evaluate** (:func:`evaluate`): the test accuracy, the masking stage (its typed output, the masking
   curves, goes to every analysis), then the analyses (per-example tables, then the configured ones such
   as ``ood``), each returning its part of the result and its artifacts;
4. **record** (:func:`record`): the result file, the results store and the tracker.

A job whose result is already stored (:func:`stored_result`) skips stages 2 and 3. Data flows one way: data
-> model -> saliency -> masking -> metrics/statistics -> tracking/result file. No stage sees the Hydra
config.
"""

from __future__ import annotations

import logging
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytorch_lightning as pl
from omegaconf import DictConfig
from pytorch_lightning.callbacks import ModelCheckpoint

from itermask import console, tracking
from itermask.analyses import (
    AnalysisInputs,
    Artifacts,
    EvaluationContext,
    PerExampleAnalysis,
    evaluate_accuracy,
    evaluate_curves,
)
from itermask.core.saliency import prepare_for_saliency
from itermask.data.datamodule import TextClassificationDataModule
from itermask.engine.accuracy import model_check
from itermask.jobs import config_errors, note_progress
from itermask.models.loading import class_mapping
from itermask.settings import EvaluateSettings, TrainJobSettings, evaluate_settings, plain, train_settings
from itermask.storage.cache import CheckpointCache, config_hash
from itermask.storage.derived import DerivedStore
from itermask.storage.files import environment, write_json_atomic
from itermask.storage.store import SCHEMA_VERSION, ResultStore
from itermask.training.classifier import SequenceClassifier
from itermask.training.distributed import process_rank
from itermask.training.resume import AUGMENTATIONS, ExactResume, resume_checkpoint

if TYPE_CHECKING:
    from transformers import PreTrainedModel

log = logging.getLogger(__name__)

__all__ = [
    "TrainedModel",
    "Evaluation",
    "seed",
    "load_data",
    "tracked",
    "get_model",
    "get_or_train",
    "given_classifier",
    "evaluate",
    "record",
    "stored_result",
    "record_stored",
    "run_train",
    "run_evaluate",
    "run_pretrain",
]


@dataclass
class TrainedModel:
    """The classifier the evaluation loads: a fine-tuned one in the cache (its checkpoint key,
    ``save_pretrained`` directory and ``meta.json``), or a given classifier evaluated as it is (the key of
    its identity, its ``model.pretrained`` and the metadata of :func:`given_classifier`)."""

    key: str
    model_dir: Path | str
    meta: dict

    @property
    def fine_tuned(self) -> bool:
        return self.meta.get("fine_tuned", True)

    @property
    def class_order(self) -> list[int] | None:
        """A given classifier's class index of each of the data's classes (``None`` when fine-tuned here)."""
        return None if self.fine_tuned else self.meta["classes"]["order"]


@dataclass
class Evaluation:
    """What the evaluate stage produced: the analyses' parts of the result and their artifacts."""

    result: dict
    artifacts: Artifacts


def run_train(cfg: DictConfig) -> float:
    """``train.py``: fine-tune (or reuse) the model for ``cfg``; returns its best validation accuracy."""
    with config_errors():
        settings = train_settings(cfg)
    data = load_data(settings)
    with tracked(settings) as logger:
        trained = get_or_train(settings, data, logger)
        tracking.log_summary(logger, {"best_val_acc": trained.meta["val_acc"]})
    return trained.meta["val_acc"]


def run_pretrain(cfg: DictConfig) -> float:
    """``pretrain.py``: the continued-pretraining stage of ``cfg.model`` alone (run, or reused from the cache,
    by the settings stage: :mod:`itermask.training.pretraining`); returns the held-out masked-token accuracy
    after it.

    Raises:
        ValueError: if ``model`` has no ``pretrain`` node (before any work)."""
    model = plain(cfg.model)
    if model.get("pretrain") is None:
        raise ValueError(
            f"pretrain.py runs continued MLM pretraining, but model={model.get('name')} has no pretrain settings: "
            "choose model=minilm_mlm or model=minilm_cda (or a model config with a pretrain node)"
        )
    with config_errors():
        settings = train_settings(cfg)
    assert settings.model.pretrain_key is not None  # the model has a pretrain node
    meta = CheckpointCache(settings.cache_dir / "pretrain").meta(settings.model.pretrain_key) or {}
    log.info(
        "pretrained encoder %s: held-out masked-token accuracy %.4f with the head alone, %.4f after joint "
        "pretraining (%.0f s)",
        settings.model.pretrained,
        meta.get("mlm_acc_head_only", float("nan")),
        meta.get("mlm_acc_joint", float("nan")),
        meta.get("pretrain_seconds", float("nan")),
    )
    return float(meta.get("mlm_acc_joint", float("nan")))


def run_evaluate(cfg: DictConfig) -> dict:
    """``evaluate.py``: settings, model, evaluate, record (see the module docstring); returns the result."""
    with config_errors():
        settings = evaluate_settings(cfg)
    stored = stored_result(settings)
    if stored is not None:
        return record_stored(settings, stored)
    data = load_data(settings)
    with tracked(settings) as logger:
        trained = get_model(settings, data, logger)
        evaluation = evaluate(settings, data, trained)
        return record(settings, trained, evaluation, logger) if evaluation is not None else {}


# -- stages ------------------------------------------------------------------------------------------


def seed(value: int) -> int:
    """Seed every generator (Python, NumPy, torch, data loader workers) with ``value``."""
    return pl.seed_everything(value, workers=True)


def load_data(settings: TrainJobSettings) -> TextClassificationDataModule:
    """Seed, load and tokenize the data, and check the settings that need it (before any fine-tuning). The
    data source's errors are config errors (:func:`~itermask.jobs.config_errors`): a single run prints one
    message.

    Raises:
        ValueError: from the data source (missing columns, empty texts, labels) or a setting checked
            against the data (see :meth:`~itermask.settings.EvaluateSettings.check_against_data`).
    """
    seed(settings.seed)
    data = TextClassificationDataModule(
        source=settings.data.source,
        tokenizer=settings.tokenizer,
        max_length=settings.model.max_length,
        batch_size=settings.model.batch_size,
        eval_batch_size=settings.data.eval_batch_size,
        max_train_examples=settings.data.max_train_examples,
        seed=settings.seed,
        num_workers=settings.data.num_workers,
    )
    with config_errors():  # the data source's errors name the file and the fix: one message, no traceback
        data.setup()
    if isinstance(settings, EvaluateSettings):
        with config_errors():
            settings.check_against_data(data)
    return data


@contextmanager
def tracked(settings: TrainJobSettings):
    """The job's tracker run (the Lightning logger, or ``None``) with the resolved config logged; finished
    on exit, and marked failed (with the error in its summary) when the block raises."""
    logger = settings.make_logger()
    try:
        tracking.log_config(logger, settings.config)
        yield logger
    except BaseException as error:
        tracking.finish(logger, failed=True, error=f"{type(error).__name__}: {error}")
        raise
    tracking.finish(logger)


def get_model(settings: TrainJobSettings, data: TextClassificationDataModule, logger=None) -> TrainedModel:
    """The model stage: the fine-tuned model (:func:`get_or_train`), or with ``train.enabled=false`` the given
    classifier as it is (:func:`given_classifier`)."""
    return get_or_train(settings, data, logger) if settings.train.enabled else given_classifier(settings, data)


def given_classifier(settings: TrainJobSettings, data: TextClassificationDataModule) -> TrainedModel:
    """The model stage without fine-tuning: ``model.pretrained`` (a sequence classifier's local directory or
    hub id) evaluated as it is. Its classes are matched to the data's (:func:`~itermask.models.loading.class_mapping`;
    a different order is logged and undone when the evaluation loads it). Its identity is the name and, for a
    local directory, the SHA-256 of its files (``settings.fingerprint.model_files``, also part of the results
    key); ``meta`` records ``fine_tuned: false``, no validation accuracy, and the class mapping.

    Raises:
        ValueError: see :func:`~itermask.models.loading.class_mapping`.
    """
    pretrained = settings.model.pretrained
    mapping = class_mapping(pretrained, data.label_names)
    if mapping.remapped:
        log.info(
            "the classes of %s %s are put in the dataset's order %s (class order %s)",
            pretrained,
            list(mapping.model_labels),
            list(mapping.data_labels),
            list(mapping.order),
        )
    elif mapping.matched_by == "count":
        log.info(
            "%s has generic class names %s: only their number is checked against the dataset's %s; "
            "the order is taken as it is",
            pretrained,
            list(mapping.model_labels),
            list(mapping.data_labels),
        )
    identity = {"pretrained": pretrained, "files": dict(settings.fingerprint.model_files)}
    log.info("evaluating %s as it is (train.enabled=false): no fine-tuning", pretrained)
    meta = {
        "fine_tuned": False,
        **identity,
        "val_acc": None,
        "label_names": list(data.label_names),
        "classes": mapping.to_dict(),
    }
    return TrainedModel(config_hash(identity), pretrained, meta)


def get_or_train(settings: TrainJobSettings, data: TextClassificationDataModule, logger=None) -> TrainedModel:
    """The model stage: the cached fine-tuned model of ``settings.training_key``, fine-tuned (under the
    entry's file lock) if missing or damaged (:meth:`~itermask.storage.cache.CheckpointCache.reusable` moves a
    damaged entry aside with a warning). An interrupted fine-tuning resumes exactly from the entry's last
    checkpoint (:mod:`itermask.training.resume`). The lock waits at most ``cache_lock_timeout`` seconds
    (:meth:`~itermask.storage.cache.CheckpointCache.lock`).

    Under DDP (:mod:`itermask.training.distributed`) only rank 0 takes the lock, reuses, fine-tunes and
    exports; the other ranks, launched inside rank 0's ``fit``, join that fine-tuning and wait on the barrier
    after the export (or read the entry rank 0 reused), never on the lock."""
    key = settings.training_key
    cache = CheckpointCache(settings.cache_dir, lock_timeout=settings.lock_timeout)
    entry = cache.entry(key)
    if process_rank() != 0:  # DDP: rank 0 owns the cache; the others join its fine-tuning or read its entry
        meta = cache.meta(key)
        if meta is None:
            log.info("rank %d: joining rank 0's fine-tuning of %s", process_rank(), entry)
            _fine_tune(settings, data, cache, logger)  # ends at a barrier after rank 0's export
            meta = cache.meta(key)
        if meta is None:
            raise RuntimeError(f"rank {process_rank()}: rank 0 wrote no checkpoint to {entry} (see its log)")
        return TrainedModel(key, entry / "model", meta)
    with cache.lock(key):
        meta = cache.reusable(key)
        if meta is not None:
            log.info("reusing fine-tuned checkpoint %s", entry)
            return TrainedModel(key, entry / "model", meta)
        log.info("fine-tuning %s on %s, seed %s -> %s", settings.model.name, settings.data.name, settings.seed, entry)
        note_progress(resumable=entry / "checkpoints" / "last.ckpt")
        _fine_tune(settings, data, cache, logger)
        note_progress(f"the fine-tuned checkpoint {entry}")
    meta = cache.meta(key)
    assert meta is not None  # finished by _fine_tune
    return TrainedModel(key, entry / "model", meta)


def _fine_tune(settings: TrainJobSettings, data: TextClassificationDataModule, cache: CheckpointCache, logger) -> None:
    """Fine-tune with Lightning into the cache entry and export the best checkpoint (rank 0)."""
    start = time.time()
    entry = cache.entry(settings.training_key)
    seed(settings.seed)
    classifier = SequenceClassifier(
        pretrained=settings.model.pretrained,
        num_labels=len(data.label_names),
        label_names=data.label_names,
        masking_augmentation=settings.train.augmentation,
        adversarial_augmentation=settings.train.adversarial,
        **settings.model.optimizer,
    )
    best = ModelCheckpoint(
        dirpath=entry / "checkpoints",
        filename="best",
        monitor="val_acc",
        mode="max",
        save_top_k=1,
        save_last=True,
        enable_version_counter=False,
    )
    resume = ExactResume()  # records the sampler position and random generators in every checkpoint
    callbacks = [best, resume]
    if settings.train.checkpoint_every_n_steps:  # last.ckpt also every N steps: an interrupted epoch resumes part-way
        callbacks.append(
            ModelCheckpoint(
                dirpath=entry / "checkpoints",
                every_n_train_steps=settings.train.checkpoint_every_n_steps,
                save_top_k=0,
                save_last=True,
                enable_version_counter=False,
            )
        )
    trainer = settings.make_trainer(callbacks=callbacks, logger=logger if logger is not None else False)
    enabled = tuple(name for name in AUGMENTATIONS if getattr(classifier, name, None) is not None)
    if process_rank() == 0:
        last = resume_checkpoint(cache, settings.training_key, enabled)
    else:  # launched inside rank 0's fit, after rank 0 chose (and moved aside what it could not resume from)
        last = cache.entry(settings.training_key) / "checkpoints" / "last.ckpt"
        last = last if last.is_file() else None
    trainer.fit(classifier, datamodule=data, ckpt_path=str(last) if last is not None else None)
    if trainer.global_rank == 0:
        resumed = None if last is None else {"checkpoint": str(last), "exact": True, **(resume.resumed or {})}
        _export(settings, data, cache, best, start, resumed)
    trainer.strategy.barrier()


def _export(
    settings: TrainJobSettings,
    data,
    cache: CheckpointCache,
    best: ModelCheckpoint,
    start: float,
    resumed: dict | None = None,
) -> None:
    """Save the best checkpoint's classifier and tokenizer as ``model/`` and finish the entry (``meta.json``,
    with ``resumed``: ``None``, or where an interrupted fine-tuning resumed)."""
    entry = cache.entry(settings.training_key)
    model = SequenceClassifier.load_from_checkpoint(best.best_model_path, map_location="cpu")
    tmp = entry / "model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    cast("PreTrainedModel", model.model).save_pretrained(tmp)
    settings.tokenizer.save_pretrained(tmp)
    shutil.rmtree(entry / "model", ignore_errors=True)
    tmp.rename(entry / "model")
    assert best.best_model_score is not None  # set with best_model_path
    meta = {
        "key": settings.training_key,
        "config": settings.training_payload,
        "val_acc": float(best.best_model_score),
        "label_names": data.label_names,
        "train_examples": len(data.tokenized["train"]),
        "train_seconds": time.time() - start,
        "resumed": resumed,
    }
    if not settings.train.keep_lightning_checkpoints:
        shutil.rmtree(entry / "checkpoints", ignore_errors=True)
    cache.finish(settings.training_key, meta)


def evaluate(
    settings: EvaluateSettings, data: TextClassificationDataModule, trained: TrainedModel
) -> Evaluation | None:
    """The evaluate stage: load the fine-tuned classifier, make it serve every saliency method (failing
    before any work if one cannot run), measure the test accuracy, run the masking stage
    (:func:`~itermask.engine.masking.evaluate_curves`), then hand its curves to the analyses in order:
    per-example tables, the configured ones. Returns ``None`` on processes other than rank 0 of a
    distributed run. Nothing is logged here: the record stage logs the result."""
    classifier = SequenceClassifier(
        pretrained=str(trained.model_dir),
        num_labels=len(data.label_names),
        label_names=data.label_names,
        class_order=trained.class_order,
    )
    # eager attention when a method reads attention weights; every method checks it can run (fail fast)
    prepare_for_saliency(classifier.model, [evaluator.saliency for evaluator in settings.evaluators.values()])
    # no logger: a new trainer's step restarts at 0, which would run the training x-axis backwards; the
    # accuracies reach the tracker with the result (tracking.log_evaluation)
    trainer = settings.make_trainer(logger=False, inference_mode=False)
    context = EvaluationContext(data, trained, classifier, trainer, DerivedStore(settings.cache_dir))
    inputs = AnalysisInputs.from_settings(settings)
    evaluation = Evaluation({}, Artifacts())
    accuracy = evaluate_accuracy(context)
    curves, masking = evaluate_curves(inputs, context)  # every rank takes part; rank 0 gets the gathered curves
    if curves is None or not trainer.is_global_zero:
        return None
    for output in (accuracy, masking):
        evaluation.result.update(output.result)
    evaluation.result.update(model_check(evaluation.result, curves).result)  # a classifier that learnt nothing
    for analysis in (PerExampleAnalysis(), *settings.analyses):
        output = analysis.run(inputs, context, curves)
        if not trainer.is_global_zero:
            return None
        evaluation.result.update(output.result)
        evaluation.artifacts.update(output.artifacts)
    return evaluation


def record(settings: EvaluateSettings, trained: TrainedModel, evaluation: Evaluation, logger=None) -> dict:
    """The record stage: write ``<output_dir>/results.json`` and the results store (both atomically), then
    log the result and the artifacts to the tracker; returns the result."""
    e = settings.evaluation
    result = {
        "schema_version": SCHEMA_VERSION,
        "task": settings.task_name,
        "seed": settings.seed,
        "model": settings.model.name,
        "dataset": settings.data.name,
        "saliency": settings.saliency.describe(),
        "masking": settings.masking.name,
        "target_policy": e.target,
        "quantity": e.quantity,
        "steps": e.steps,
        "segments": e.segments,
        "fine_tuned": trained.fine_tuned,
        "checkpoint_key": trained.key if trained.fine_tuned else None,
        **(
            {}
            if trained.fine_tuned
            else {
                "evaluated_model": {
                    "key": trained.key,
                    **{k: trained.meta[k] for k in ("pretrained", "files", "classes")},
                }
            }
        ),
        "config_hash": settings.results_key,
        **evaluation.result,
        "seconds": time.time() - settings.started_at,
        "environment": environment(),
        "config": settings.config,
    }
    path = write_json_atomic(settings.output_dir / "results.json", result)
    ResultStore(settings.cache_dir).put(settings.results_key, result, evaluation.artifacts.files)
    log.info("wrote %s", path)
    _log_summary(result)
    tracking.log_evaluation(logger, result)
    tracking.log_artifacts(logger, evaluation.artifacts, tracking.explained_method(result))
    return result


def _log_summary(result: dict) -> None:
    """The job's three-line score summary (:func:`itermask.console.summary_lines`) in its log and console."""
    for line in console.summary_lines(result):
        log.info(line)


def stored_result(settings: EvaluateSettings) -> dict | None:
    """The stored result of ``settings.results_key`` copied into the job folder (``reused_from`` set), or
    ``None`` when there is none or ``reuse_results`` is off."""
    if not settings.reuse_results:
        return None
    return ResultStore(settings.cache_dir).reuse(settings.results_key, settings.output_dir)


def record_stored(settings: EvaluateSettings, stored: dict) -> dict:
    """Log a reused result to the job's tracker run, with the artifacts its analyses can rebuild from it."""
    with tracked(settings) as logger:
        artifacts = Artifacts()
        for analysis in (PerExampleAnalysis(), *settings.analyses):
            if analysis.name in stored:
                artifacts.update(analysis.artifacts_from(stored, settings.output_dir))
        tracking.log_evaluation(logger, stored)
        tracking.log_artifacts(logger, artifacts, tracking.explained_method(stored))
    _log_summary(stored)
    return stored
