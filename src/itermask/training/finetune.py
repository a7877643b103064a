"""The fine-tuning stage: the cached fine-tuned classifier of a checkpoint key, or a fine-tuning with Lightning into
the cache entry, resumed exactly when it was interrupted (:mod:`itermask.training.resume`), and its best checkpoint
exported as a ``save_pretrained`` folder (:func:`get_or_train`)."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint

from itermask.data.datamodule import TextClassificationDataModule
from itermask.models.trained import TrainedModel
from itermask.progress import note_progress
from itermask.storage.cache import CheckpointCache
from itermask.training.augmentation import AdversarialAugmentation, RandomMaskingAugmentation
from itermask.training.classifier import SequenceClassifier
from itermask.training.distributed import process_rank
from itermask.training.resume import AUGMENTATIONS, ExactResume, last_checkpoint_every, resume_checkpoint

log = logging.getLogger(__name__)

__all__ = ["FineTuning", "seed_everything", "get_or_train"]


def seed_everything(value: int) -> int:
    """Seed every generator (Python, NumPy, torch, data loader workers) with ``value``."""
    return pl.seed_everything(value, workers=True)


@dataclass(frozen=True)
class FineTuning:
    """What a fine-tuning needs besides the data.

    Attributes:
        key: the checkpoint key and ``payload`` what it hashes (``meta.json`` records it).
        encoder: the encoder to fine-tune (``model.pretrained``, or the output of continued pretraining).
        name, dataset, seed: the model's and the dataset's names (for the log) and the experiment seed.
        optimizer: :class:`~itermask.training.classifier.SequenceClassifier`'s optimiser settings.
        cache_dir: the checkpoint cache; ``lock_timeout`` the seconds to wait for its entry's lock (-1: forever).
        keep_lightning_checkpoints: keep Lightning's checkpoints after the export.
        checkpoint_every_n_steps: also write ``last.ckpt`` every N steps (``None``: per epoch).
        masking_augmentation, adversarial_augmentation: masked and adversarial fine-tuning (``None``: off).
        make_trainer: builds the Lightning trainer from keyword overrides.
        tokenizer: saved beside the exported classifier."""

    key: str
    payload: dict
    encoder: str
    name: str
    dataset: str
    seed: int
    optimizer: Mapping[str, Any]
    cache_dir: Path
    lock_timeout: float
    keep_lightning_checkpoints: bool
    checkpoint_every_n_steps: int | None
    masking_augmentation: RandomMaskingAugmentation | None
    adversarial_augmentation: AdversarialAugmentation | None
    make_trainer: Callable[..., pl.Trainer]
    tokenizer: Any


def get_or_train(stage: FineTuning, data: TextClassificationDataModule, logger=None) -> TrainedModel:
    """The cached fine-tuned model of ``stage.key``, fine-tuned under the entry's file lock if missing or damaged
    (:meth:`~itermask.storage.cache.CheckpointCache.reusable`), resumed exactly if interrupted.

    Under DDP only rank 0 takes the lock, reuses, fine-tunes and exports; the other ranks, launched inside rank
    0's ``fit``, join that fine-tuning and wait on the barrier after the export (or read the entry rank 0
    reused), never on the lock."""
    cache = CheckpointCache(stage.cache_dir, lock_timeout=stage.lock_timeout)
    entry = cache.entry(stage.key)
    if process_rank() != 0:  # DDP: rank 0 owns the cache; the others join its fine-tuning or read its entry
        meta = cache.meta(stage.key)
        if meta is None:
            log.info("rank %d: joining rank 0's fine-tuning of %s", process_rank(), entry)
            _fine_tune(stage, data, cache, logger)  # ends at a barrier after rank 0's export
            meta = cache.meta(stage.key)
        if meta is None:
            raise RuntimeError(f"rank {process_rank()}: rank 0 wrote no checkpoint to {entry} (see its log)")
        return TrainedModel(stage.key, entry / "model", meta)
    with cache.lock(stage.key):
        meta = cache.reusable(stage.key)
        if meta is not None:
            log.info("reusing fine-tuned checkpoint %s", entry)
            note_progress(f"the fine-tuned checkpoint {entry} (reused)")
            return TrainedModel(stage.key, entry / "model", meta)
        log.info("fine-tuning %s on %s, seed %s -> %s", stage.name, stage.dataset, stage.seed, entry)
        note_progress(resumable=entry / "checkpoints" / "last.ckpt")
        _fine_tune(stage, data, cache, logger)
        note_progress(f"the fine-tuned checkpoint {entry}")
    meta = cache.meta(stage.key)
    assert meta is not None  # finished by _fine_tune
    return TrainedModel(stage.key, entry / "model", meta)


def _callbacks(stage: FineTuning, entry: Path) -> tuple[ModelCheckpoint, ExactResume, list]:
    """The best-checkpoint callback, the exact-resume callback and every callback of the fit."""
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
    callbacks: list = [best, resume]
    if stage.checkpoint_every_n_steps:  # last.ckpt also every N steps: an interrupted epoch resumes part-way
        callbacks.append(last_checkpoint_every(entry, stage.checkpoint_every_n_steps))
    return best, resume, callbacks


def _fine_tune(stage: FineTuning, data: TextClassificationDataModule, cache: CheckpointCache, logger) -> None:
    """Fine-tune with Lightning into the cache entry and export the best checkpoint (rank 0)."""
    start = time.time()
    entry = cache.entry(stage.key)
    seed_everything(stage.seed)
    classifier = SequenceClassifier(
        pretrained=stage.encoder,
        num_labels=len(data.label_names),
        label_names=data.label_names,
        masking_augmentation=stage.masking_augmentation,
        adversarial_augmentation=stage.adversarial_augmentation,
        **stage.optimizer,
    )
    best, resume, callbacks = _callbacks(stage, entry)
    trainer = stage.make_trainer(callbacks=callbacks, logger=logger if logger is not None else False)
    enabled = tuple(name for name in AUGMENTATIONS if getattr(classifier, name, None) is not None)
    if process_rank() == 0:
        last = resume_checkpoint(cache, stage.key, enabled)
    else:  # launched inside rank 0's fit, after rank 0 chose (and moved aside what it could not resume from)
        last = entry / "checkpoints" / "last.ckpt"
        last = last if last.is_file() else None
    trainer.fit(classifier, datamodule=data, ckpt_path=str(last) if last is not None else None, weights_only=True)
    if trainer.global_rank == 0:
        resumed = None if last is None else {"checkpoint": str(last), "exact": True, **(resume.resumed or {})}
        _export(stage, data, cache, best, start, resumed)
    trainer.strategy.barrier()


def _export(
    stage: FineTuning,
    data: TextClassificationDataModule,
    cache: CheckpointCache,
    best: ModelCheckpoint,
    start: float,
    resumed: dict | None = None,
) -> None:
    """Save the best checkpoint's classifier and tokenizer as ``model/`` and finish the entry (``meta.json``,
    with ``resumed``: ``None``, or where an interrupted fine-tuning resumed)."""
    entry = cache.entry(stage.key)
    model = SequenceClassifier.load_from_checkpoint(best.best_model_path, map_location="cpu", weights_only=True)
    cache.write_model(stage.key, model.model, stage.tokenizer)
    assert best.best_model_score is not None  # set with best_model_path
    assert data.tokenized is not None  # set up before fine-tuning
    meta = {
        "key": stage.key,
        "config": stage.payload,
        "val_acc": float(best.best_model_score),
        "label_names": data.label_names,
        "train_examples": len(data.splits["train"]),
        "train_seconds": time.time() - start,
        "resumed": resumed,
    }
    if not stage.keep_lightning_checkpoints:
        shutil.rmtree(entry / "checkpoints", ignore_errors=True)
    cache.finish(stage.key, meta)
