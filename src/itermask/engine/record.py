"""``record(plan, resources, evaluation)``: the result of an evaluation, the same for both doors: assembled from the
plan and the evaluation, written to the job folder and the results store (atomically) when the plan has them, its
summary logged, and logged to the tracker run with the artifacts; a reused result is logged the same way."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from itermask.analyses.base import Artifacts
from itermask.console import summary_lines
from itermask.engine.resources import Resources
from itermask.engine.run import Evaluation
from itermask.plan import EvaluationPlan
from itermask.storage.files import environment, write_json_atomic
from itermask.storage.keys import fixes
from itermask.storage.store import SCHEMA_VERSION, ResultStore
from itermask.tracking import explained_method, log_artifacts, log_evaluation

log = logging.getLogger(__name__)

__all__ = ["result_of", "record", "record_stored"]


def _model_entries(resources: Resources) -> dict:
    """The result's entries about the evaluated classifier: fine-tuned here (its checkpoint key) or given."""
    trained = resources.trained
    assert trained is not None
    if trained.fine_tuned:
        return {"fine_tuned": True, "checkpoint_key": trained.key}
    given = {k: trained.meta[k] for k in ("pretrained", "files", "classes") if k in trained.meta}
    return {"fine_tuned": False, "checkpoint_key": None, "evaluated_model": {"key": trained.key, **given}}


def result_of(plan: EvaluationPlan, resources: Resources, evaluation: Evaluation) -> dict:
    """The result of an evaluation: what it ran (seed, model, data, explanation, masking, evaluation settings,
    classifier), the evaluation's parts, the time it took, the environment and the resolved config."""
    e = plan.evaluation
    assert e is not None and resources.masking is not None
    return {
        "schema_version": SCHEMA_VERSION,
        "task": plan.job.task,
        "seed": plan.job.seed,
        "model": plan.model.name,
        "dataset": plan.data.name,
        "saliency": resources.saliency[0].describe(),
        "masking": resources.masking.name,
        "target_policy": e.target,
        "quantity": e.quantity,
        "steps": e.steps,
        "segments": e.segments,
        **({} if e.features == "token" else {"features": e.features}),  # results of token features as before
        **_model_entries(resources),
        "precision": str(plan.trainer.options.get("precision", "32-true")),  # trainer.precision: bf16 autocast
        "config_hash": None if resources.keys is None else resources.keys.results,
        # the fixes of storage.keys.fixes this job's numbers have (the report refuses results that lack one)
        **({"fixes": changed} if (changed := fixes(dict(plan.job.config))) else {}),
        # the local files' contents the results key hashes instead of their paths (the report compares by them)
        **({} if resources.keys is None else {"data_files": resources.keys.fingerprint.hashed()}),
        **evaluation.result,
        "seconds": time.time() - plan.job.started_at,
        "environment": environment(),
        "config": dict(plan.job.config),
    }


def _log_summary(result: dict, job_dir: Path | None) -> None:
    """The job's score summary (:func:`itermask.console.summary_lines`, with where to look in ``job_dir``) in its
    log and console."""
    for line in summary_lines(result, job_dir):
        log.info(line)


def record(plan: EvaluationPlan, resources: Resources, evaluation: Evaluation) -> dict:
    """Assemble the result (:func:`result_of`); write ``<output_dir>/results.json`` and the results store when the
    plan has a job folder and a cache; log it to the tracker; returns the result."""
    result = result_of(plan, resources, evaluation)
    if plan.job.output_dir is None:
        return result
    path = write_json_atomic(plan.job.output_dir / "results.json", result)
    if plan.job.cache_dir is not None and resources.keys is not None and resources.keys.results is not None:
        ResultStore(plan.job.cache_dir).put(resources.keys.results, result, evaluation.artifacts.files)
    log.info("wrote %s", path)
    _log_summary(result, plan.job.output_dir)
    log_evaluation(resources.logger, result)
    log_artifacts(resources.logger, evaluation.artifacts, explained_method(result))
    return result


def record_stored(plan: EvaluationPlan, resources: Resources) -> dict:
    """Log a reused result (``resources.stored``) to the job's tracker run, with the artifacts its analyses can
    rebuild from it; returns it."""
    stored = resources.stored
    assert stored is not None and plan.job.output_dir is not None
    artifacts = Artifacts()
    for analysis in plan.analyses:
        if analysis.name in stored:
            artifacts.update(analysis.artifacts_from(stored, plan.job.output_dir))
    log_evaluation(resources.logger, stored)
    log_artifacts(resources.logger, artifacts, explained_method(stored))
    _log_summary(stored, plan.job.output_dir)
    return stored
