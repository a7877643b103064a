"""What ``train.py`` and ``evaluate.py`` do, given a composed Hydra config.

Data flows one way: data -> model -> saliency -> masking -> metrics -> tracking/result file.
"""

from __future__ import annotations

import logging
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import hydra
import pytorch_lightning as pl
import torch
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.callbacks import ModelCheckpoint

from itermask import metrics, ood_analysis, tracking
from itermask.augmentation import RandomMaskingAugmentation
from itermask.cache import CheckpointCache, config_hash
from itermask.data import TextClassificationDataModule
from itermask.evaluation import IterativeMaskingEvaluator, check_target_policy, off_grid
from itermask.lightning_evaluation import MaskingEvaluationModule
from itermask.models import SequenceClassifier, load_tokenizer
from itermask.results import environment, write_json_atomic
from itermask.saliency import RandomSaliency, prepare_for_saliency
from itermask.store import ResultStore, results_key

log = logging.getLogger(__name__)

__all__ = ["TrainedModel", "training_key", "prepare", "get_or_train", "run_train", "run_evaluate"]


@dataclass
class TrainedModel:
    """A fine-tuned classifier in the cache: its key, ``save_pretrained`` directory and metadata."""

    key: str
    model_dir: Path
    meta: dict


def data_fingerprint(cfg: DictConfig) -> dict[str, str]:
    """SHA-256 of every local file the dataset (``path``/``train``/``validation``/``test``) or a local
    ``model.pretrained`` directory's ``config.json``/weights name, so editing a data file or a local model
    invalidates cached checkpoints and results (the config alone names only the path)."""
    import hashlib

    files = {}
    source = cfg.dataset.source
    for field in ("path", "train", "validation", "test"):
        value = source.get(field) if hasattr(source, "get") else None
        if value and Path(str(value)).is_file():
            files[field] = str(value)
    if "shipped_source" in str(source.get("_target_", "")):
        files.update({s: f for s, f in hydra.utils.instantiate(source).files.items()})
    pretrained = Path(str(cfg.model.pretrained))
    if pretrained.is_dir():
        files.update({f"model:{p.name}": str(p) for p in sorted(pretrained.iterdir()) if p.is_file()})
    digests = {}
    for name, file in files.items():
        digest = hashlib.sha256()
        with open(file, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        digests[name] = digest.hexdigest()
    return digests


def training_key(cfg: DictConfig) -> tuple[str, dict]:
    """The checkpoint-cache key: a hash of everything that determines the fine-tuned weights
    (model, dataset source, training settings, trainer precision, seed).

    ``train.masking_augmentation`` counts only when enabled, so standard fine-tuning keeps its key."""
    train = OmegaConf.to_container(cfg.train, resolve=True)
    if not (train.get("masking_augmentation") or {}).get("enabled", False):
        train.pop("masking_augmentation", None)
    payload = {
        "model": OmegaConf.to_container(cfg.model, resolve=True),
        "dataset": OmegaConf.to_container(cfg.dataset.source, resolve=True),
        "data_files": data_fingerprint(cfg),
        "train": train,
        "precision": str(cfg.trainer.get("precision", "32-true")),
        "seed": int(cfg.seed),
    }
    return config_hash(payload), payload


def check_seed(cfg: DictConfig) -> int:
    """``cfg.seed`` as an int.

    Raises:
        ValueError: if the seed is missing (``seed=null``) or not an integer."""
    seed = cfg.get("seed")
    if seed is None or isinstance(seed, bool) or isinstance(seed, float) and not seed.is_integer():
        raise ValueError(f"seed must be set to an integer (seed=0 is a valid seed), got seed={seed!r}")
    try:
        return int(seed)
    except (TypeError, ValueError):
        raise ValueError(f"seed must be set to an integer (seed=0 is a valid seed), got seed={seed!r}") from None


def _seed(cfg: DictConfig) -> int:
    return pl.seed_everything(check_seed(cfg), workers=True)


def _trainer(cfg: DictConfig, **overrides) -> pl.Trainer:
    return hydra.utils.instantiate(cfg.trainer, **overrides)


def _logger(cfg: DictConfig):
    """The Lightning logger from ``cfg.logger`` (or ``None``), with the run name and group filled in."""
    if cfg.get("logger") is None:
        return None
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    overrides = {}
    if "group" in cfg.logger and cfg.logger.group is None:
        hydra_cfg = HydraConfig.get() if HydraConfig.initialized() else None
        if hydra_cfg is not None and hydra_cfg.mode == RunMode.MULTIRUN:
            overrides["group"] = tracking.group_name(cfg.task_name, hydra_cfg.sweep.dir)
        else:
            overrides["group"] = tracking.group_name(cfg.task_name, None)
    if "name" in cfg.logger and cfg.logger.name is None:
        overrides["name"] = run_name(cfg)
    return tracking.start(hydra.utils.instantiate(cfg.logger, **overrides))


@contextmanager
def _tracked(cfg: DictConfig):
    """The job's logger (see :func:`_logger`) with the resolved config logged; finished on exit, and
    marked failed when the block raises."""
    logger = _logger(cfg)
    try:
        tracking.log_config(logger, OmegaConf.to_container(cfg, resolve=True))
        yield logger
    except BaseException:
        tracking.finish(logger, failed=True)
        raise
    tracking.finish(logger)


def run_name(cfg: DictConfig) -> str:
    parts = [cfg.task_name, cfg.model.name, cfg.dataset.name]
    if "saliency" in cfg:
        parts += [cfg.saliency.name, cfg.masking.name]
    return "-".join(str(p) for p in parts) + f"-seed{cfg.seed}"


def prepare(cfg: DictConfig, tokenizer=None):
    """Seed, tokenizer (loaded unless given) and data module (set up) for ``cfg``."""
    _seed(cfg)
    tokenizer = load_tokenizer(cfg.model.pretrained) if tokenizer is None else tokenizer
    datamodule = TextClassificationDataModule(
        source=hydra.utils.instantiate(cfg.dataset.source),
        tokenizer=tokenizer,
        max_length=cfg.model.max_length,
        batch_size=cfg.model.finetune.batch_size,
        eval_batch_size=cfg.data.eval_batch_size,
        max_train_examples=cfg.train.max_train_examples,
        seed=int(cfg.seed),
        num_workers=cfg.data.num_workers,
    )
    datamodule.setup()
    return tokenizer, datamodule


def get_or_train(cfg: DictConfig, datamodule: TextClassificationDataModule, tokenizer, logger=None) -> TrainedModel:
    """The cached fine-tuned model for ``cfg``; trains it (under the entry's file lock) if missing.

    An interrupted training resumes from the entry's last Lightning checkpoint.
    """
    key, payload = training_key(cfg)
    cache = CheckpointCache(cfg.cache_dir)
    entry = cache.entry(key)
    with cache.lock(key):
        meta = cache.meta(key)
        if meta is not None:
            log.info("reusing fine-tuned checkpoint %s", entry)
            return TrainedModel(key, entry / "model", meta)
        log.info("fine-tuning %s on %s, seed %s -> %s", cfg.model.name, cfg.dataset.name, cfg.seed, entry)
        start = time.time()
        _seed(cfg)
        classifier = SequenceClassifier(
            pretrained=cfg.model.pretrained,
            num_labels=len(datamodule.label_names),
            label_names=datamodule.label_names,
            masking_augmentation=_masking_augmentation(cfg, tokenizer),
            **cfg.model.finetune.optimizer,
        )
        checkpoints = ModelCheckpoint(
            dirpath=entry / "checkpoints",
            filename="best",
            monitor="val_acc",
            mode="max",
            save_top_k=1,
            save_last=True,
            enable_version_counter=False,
        )
        callbacks = [checkpoints]
        every = cfg.train.get("checkpoint_every_n_steps")
        if every:  # last.ckpt also every N optimizer steps, so an interrupted epoch resumes part-way
            callbacks.append(ModelCheckpoint(
                dirpath=entry / "checkpoints", every_n_train_steps=int(every), save_top_k=0, save_last=True,
                enable_version_counter=False,
            ))
        trainer = _trainer(cfg, callbacks=callbacks, logger=logger if logger is not None else False)
        last = entry / "checkpoints" / "last.ckpt"
        if last.is_file():
            log.info("resuming interrupted fine-tuning from %s", last)
        trainer.fit(classifier, datamodule=datamodule, ckpt_path=str(last) if last.is_file() else None)
        if trainer.global_rank == 0:
            best = SequenceClassifier.load_from_checkpoint(checkpoints.best_model_path, map_location="cpu")
            tmp = entry / "model.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            best.model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            shutil.rmtree(entry / "model", ignore_errors=True)
            tmp.rename(entry / "model")
            meta = {
                "key": key,
                "config": payload,
                "val_acc": float(checkpoints.best_model_score),
                "label_names": datamodule.label_names,
                "train_examples": len(datamodule.tokenized["train"]),
                "train_seconds": time.time() - start,
            }
            if not cfg.train.keep_lightning_checkpoints:
                shutil.rmtree(entry / "checkpoints", ignore_errors=True)
            cache.finish(key, meta)
        trainer.strategy.barrier()
    return TrainedModel(key, entry / "model", cache.meta(key))


def _masking_augmentation(cfg: DictConfig, tokenizer) -> RandomMaskingAugmentation | None:
    """Masked fine-tuning from ``cfg.train.masking_augmentation`` (``None`` when absent or disabled)."""
    spec = cfg.train.get("masking_augmentation")
    if spec is None or not spec.enabled:
        return None
    strategy = _build(spec.strategy)(tokenizer=tokenizer)
    return RandomMaskingAugmentation(strategy, tokenizer.all_special_ids, spec.batch_share, seed=int(cfg.seed))


def run_train(cfg: DictConfig) -> float:
    """``train.py``: fine-tune (or reuse) the model for ``cfg``; returns its best validation accuracy."""
    check_seed(cfg)
    tokenizer, datamodule = prepare(cfg)
    _masking_augmentation(cfg, tokenizer)  # checks train.masking_augmentation before the logger starts
    with _tracked(cfg) as logger:
        trained = get_or_train(cfg, datamodule, tokenizer, logger)
        tracking.log_summary(logger, {"best_val_acc": trained.meta["val_acc"]})
    return trained.meta["val_acc"]


def _build(node: DictConfig, **kwargs):
    """Instantiate a config-group node; its ``name`` field labels results and is not an argument."""
    spec = OmegaConf.to_container(node, resolve=True)
    spec.pop("name", None)
    return hydra.utils.instantiate(spec, **kwargs)


def _segments(value) -> list[int] | None:
    """``evaluation.segments``: ``null``, one segment id or a list of them."""
    if value is None:
        return None
    return [int(value)] if isinstance(value, int) else [int(v) for v in value]


def _evaluators(cfg: DictConfig, tokenizer) -> dict[str, IterativeMaskingEvaluator]:
    saliency = _build(cfg.saliency).bind(tokenizer)
    strategy = _build(cfg.masking)(tokenizer=tokenizer)
    e = cfg.evaluation
    if e.quantity not in ("probability", "logit"):
        raise ValueError(f"evaluation.quantity must be 'probability' or 'logit', got {e.quantity!r}")
    if e.steps == "fraction":
        off = off_grid(e.aopc_bins, e.fractions)
        if off:
            raise ValueError(
                f"evaluation.aopc_bins {off} are not among evaluation.fractions {list(e.fractions)}: "
                "add them to the fractions or change evaluation.aopc_bins"
            )
    if _ood_enabled(cfg):
        ood_analysis.check_settings(cfg.ood, e)
    methods = {saliency.name: saliency}
    if e.compare_random and saliency.name != "random":
        methods["random"] = RandomSaliency(seed=int(cfg.seed))
    return {
        name: IterativeMaskingEvaluator(
            method,
            strategy,
            fractions=list(e.fractions),
            special_ids=tokenizer.all_special_ids,
            schedules=list(e.schedules),
            target=e.target,
            chunk_size=e.chunk_size,
            steps=e.steps,
            counts=list(e.counts),
            segments=_segments(e.segments),
            collect_representations=_ood_enabled(cfg),
        )
        for name, method in methods.items()
    }


def _check_against_data(cfg: DictConfig, datamodule: TextClassificationDataModule) -> None:
    """Evaluation settings that need the data (target class, split, subset size, segments), checked before
    any fine-tuning.

    Raises:
        ValueError: naming the setting."""
    e = cfg.evaluation
    check_target_policy(e.target, len(datamodule.label_names))
    datamodule.evaluation_subset(e.n_examples, e.subset_seed, e.split)  # unknown split, size <= 0
    if _ood_enabled(cfg):
        ood_analysis.check_settings(cfg.ood, e, splits=list(datamodule.tokenized))
    segments = _segments(e.segments)
    if segments is not None and not datamodule.has_text_pairs and segments != [0]:
        raise ValueError(
            f"evaluation.segments={segments}, but {cfg.dataset.name} has single texts (segment 0 only); "
            "use evaluation.segments=null, or a sentence-pair dataset (text_pair_column)"
        )
    if segments is not None and any(s not in (0, 1) for s in segments):
        raise ValueError(f"evaluation.segments must hold 0 (first text) and/or 1 (second text), got {segments}")


def _ood_enabled(cfg: DictConfig) -> bool:
    return bool(cfg.get("ood") is not None and cfg.ood.enabled)


def _relative_to_random(scores: dict, method: str) -> dict:
    if method == "random" or "random" not in scores:
        return {}
    return {
        schedule: metrics.relative_to_random(summary, scores["random"][schedule])
        for schedule, summary in scores[method].items()
    }


def run_evaluate(cfg: DictConfig) -> dict:
    """``evaluate.py``: get (or train) the checkpoint, measure accuracy, run the masking evaluation,
    write ``<output_dir>/results.json`` atomically and log everything; returns the result dict."""
    start = time.time()
    check_seed(cfg)
    key = results_key({**OmegaConf.to_container(cfg, resolve=True), "data_files": data_fingerprint(cfg)})
    store = ResultStore(cfg.cache_dir)
    if cfg.get("reuse_results", True) and (reused := store.reuse(key, cfg.output_dir)) is not None:
        with _tracked(cfg) as logger:
            tracking.log_evaluation(logger, reused)
            if "ood" in reused:  # the figures that the stored statistics allow (not the UMAP: no embeddings)
                images = {}
                if cfg.ood.plots.enabled:
                    method = reused["saliency"]["name"]
                    images = ood_analysis.statistics_figures(reused["ood"]["statistics"], method, Path(cfg.output_dir))
                tracking.log_ood(logger, reused["ood"], images)
        return reused
    # fail fast on bad saliency/masking settings, before loading data or training
    tokenizer = load_tokenizer(cfg.model.pretrained)
    evaluators = _evaluators(cfg, tokenizer)
    _masking_augmentation(cfg, tokenizer)  # checks train.masking_augmentation
    tokenizer, datamodule = prepare(cfg, tokenizer)
    _check_against_data(cfg, datamodule)
    with _tracked(cfg) as logger:
        trained = get_or_train(cfg, datamodule, tokenizer, logger)
        classifier = SequenceClassifier(
            pretrained=str(trained.model_dir),
            num_labels=len(datamodule.label_names),
            label_names=datamodule.label_names,
        )
        # eager attention when a method reads attention weights; every method checks it can run (fail fast)
        prepare_for_saliency(classifier.model, [evaluator.saliency for evaluator in evaluators.values()])
        trainer = _trainer(cfg, logger=logger if logger is not None else False, inference_mode=False)
        test_acc = trainer.test(classifier, dataloaders=datamodule.test_dataloader(), verbose=False)[0]["test_acc"]
        module = MaskingEvaluationModule(classifier.model, evaluators)
        e = cfg.evaluation
        loader = datamodule.evaluation_dataloader(e.n_examples, e.subset_seed, e.split)
        trainer.test(module, dataloaders=loader, verbose=False)
        if not trainer.is_global_zero:
            return {}
        scores = {
            name: {
                schedule: metrics.summarize(curves, quantity=e.quantity, bins=list(e.aopc_bins))
                for schedule, curves in by_schedule.items()
            }
            for name, by_schedule in module.curves.items()
        }
        method = next(iter(evaluators))
        if not module.curves:
            raise ValueError(
                f"no example could be evaluated: all {module.n_skipped} have no maskable token "
                f"(check evaluation.segments={list(e.segments) if e.segments is not None else None} and the data)"
            )
        test_labels = torch.tensor(datamodule.tokenized["test"]["label"])
        train_labels = torch.tensor(datamodule.tokenized["train"]["label"])
        majority = int(torch.bincount(train_labels).argmax())
        result = {
            "task": cfg.task_name,
            "seed": int(cfg.seed),
            "model": cfg.model.name,
            "dataset": cfg.dataset.name,
            "saliency": evaluators[method].saliency.describe(),
            "masking": cfg.masking.name,
            "target_policy": e.target,
            "quantity": e.quantity,
            "steps": e.steps,
            "segments": _segments(e.segments),
            "checkpoint_key": trained.key,
            "config_hash": key,
            "accuracy": {
                "test": float(test_acc),
                "validation": trained.meta["val_acc"],
                "majority_class_test": float((test_labels == majority).float().mean()),
            },
            "label_names": list(datamodule.label_names),  # class id -> name (string labels: the mapping)
            "n_test": len(test_labels),
            "n_evaluated": len(next(iter(module.curves[method].values()))) if module.curves else 0,
            "n_skipped_no_maskable": module.n_skipped,
            "example_ids": next(iter(module.curves[method].values())).example_ids.tolist() if module.curves else [],
            "scores": scores,
            # racu_without_retraining_*: Madsen et al. 2022's RACU on curves without retraining
            "relative_to_random": _relative_to_random(scores, method),
            "seconds": None,
            "environment": environment(),
            "config": OmegaConf.to_container(cfg, resolve=True),
        }
        images = {}
        if _ood_enabled(cfg):
            result["ood"], images = ood_analysis.run(cfg, classifier.model, datamodule, module.curves, method)
        result["seconds"] = time.time() - start
        path = write_json_atomic(Path(cfg.output_dir) / "results.json", result)
        store.put(key, result)
        log.info("wrote %s (test accuracy %.4f)", path, test_acc)
        tracking.log_evaluation(logger, result)
        if "ood" in result:
            tracking.log_ood(logger, result["ood"], images)
        return result
