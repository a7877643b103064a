"""What ``evaluate.py``, ``train.py`` and ``pretrain.py`` do: a plan from the config (:mod:`itermask.settings`,
every setting checked before anything is loaded), then the engine (:func:`~itermask.engine.prepare`,
:func:`~itermask.engine.run`, :func:`~itermask.engine.record`); a job whose result is already stored skips the
loading and the run. No stage below the plan sees the Hydra config."""

from __future__ import annotations

import logging

from omegaconf import DictConfig

from itermask.context import JobContext
from itermask.engine.prepare import bind, prepare, pretrain
from itermask.engine.record import record, record_stored
from itermask.engine.run import run
from itermask.formatting import program
from itermask.problems import config_errors
from itermask.settings import evaluation_plan, plain, training_plan
from itermask.storage.cache import CheckpointCache
from itermask.tracking import log_summary

log = logging.getLogger(__name__)

__all__ = ["run_train", "run_evaluate", "run_pretrain"]


def run_evaluate(cfg: DictConfig, context: JobContext | None = None) -> dict:
    """``evaluate.py``: plan, prepare, run, record (see the module docstring); returns the result."""
    with config_errors():
        plan = evaluation_plan(cfg, context)
    with prepare(plan) as resources:
        if resources.stored is not None:
            return record_stored(plan, resources)
        evaluation = run(plan, resources)
        return record(plan, resources, evaluation) if evaluation is not None else {}


def run_train(cfg: DictConfig, context: JobContext | None = None) -> float:
    """``train.py``: fine-tune (or reuse) the model for ``cfg``; returns its best validation accuracy."""
    with config_errors():
        plan = training_plan(cfg, context)
    with prepare(plan) as resources:
        assert resources.trained is not None
        val_acc = resources.trained.meta["val_acc"]
        log_summary(resources.logger, {"best_val_acc": val_acc})
    return val_acc


def run_pretrain(cfg: DictConfig, context: JobContext | None = None) -> float:
    """``pretrain.py``: the continued-pretraining stage of ``cfg.model`` alone (run, or reused from the cache);
    returns the held-out masked-token accuracy after it.

    Raises:
        ValueError: if ``model`` has no ``pretrain`` node (before any work)."""
    model = plain(cfg.model)
    with config_errors():  # a bad setting: one line, no traceback
        if model.get("pretrain") is None:
            raise ValueError(
                f"{program('pretrain')} runs continued MLM pretraining, but model={model.get('name')} has no pretrain "
                "settings: choose model=minilm_mlm or model=minilm_cda (or a model config with a pretrain node)"
            )
        plan = training_plan(cfg, context)
        resources = bind(plan)
    pretrain(plan, resources)
    assert resources.keys is not None and resources.keys.pretrain is not None  # the model has a pretrain node
    meta = CheckpointCache(resources.keys.pretrain.cache_dir / "pretrain").meta(resources.keys.pretrain.key) or {}
    log.info(
        "pretrained encoder %s: held-out masked-token accuracy %.4f with the head alone, %.4f after joint "
        "pretraining (%.0f s)",
        resources.encoder,
        meta.get("mlm_acc_head_only", float("nan")),
        meta.get("mlm_acc_joint", float("nan")),
        meta.get("pretrain_seconds", float("nan")),
    )
    return float(meta.get("mlm_acc_joint", float("nan")))
