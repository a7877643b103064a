"""A plan's cache keys (:mod:`itermask.storage.keys` says what each hashes), read from the local files and the
word list only: no tokenizer, data or model is loaded, so a stored result is found before anything expensive runs."""

from __future__ import annotations

from dataclasses import dataclass

from itermask.models.loading import resolve_pretrained
from itermask.plan import EvaluationPlan
from itermask.storage.keys import Fingerprint, results_key, training_key
from itermask.training.distributed import trainer_processes
from itermask.training.pretraining import PretrainSettings, pretrain_settings

__all__ = ["Keys", "job_keys"]


@dataclass(frozen=True)
class Keys:
    """What a plan's caches are keyed by.

    Attributes:
        fingerprint: the contents of the data source's local files and of a local ``model.pretrained`` folder.
        training: the checkpoint key and ``training_payload`` what it hashes.
        results: the results key (``None`` for a job that does not evaluate); ``baseline`` the results key of
            the same settings without the saliency method (what the random baseline's curves depend on).
        pretrain: the continued-pretraining stage's settings (``None`` without one).
    """

    fingerprint: Fingerprint
    training: str
    training_payload: dict
    results: str | None
    baseline: str | None
    pretrain: PretrainSettings | None


def job_keys(plan: EvaluationPlan) -> Keys:
    """The keys of ``plan`` (its ``job.config`` is what they hash; a plan without a config, as
    :func:`itermask.evaluate` builds, has keys that no cache is looked up under).

    Raises:
        OSError: a local file that cannot be read; FileNotFoundError a CDA word list that does not exist.
        ValueError: a malformed word list, a ``trainer.devices`` that is no count."""
    config = dict(plan.job.config)
    fingerprint = Fingerprint.of(plan.data.source, plan.model.pretrained)
    pretrain = None
    if plan.model.pretrain is not None:
        base = resolve_pretrained(plan.model.pretrained)
        pretrain = pretrain_settings(config, fingerprint, plan.data.source, base)
    processes = trainer_processes(dict(plan.trainer.options))
    key, payload = training_key(config, fingerprint, plan.job.seed, processes, pretrain.key if pretrain else None)
    results = baseline = None
    if plan.evaluation is not None:
        keyed = config if pretrain is None else {**config, "pretrained_encoder": pretrain.key}
        results = results_key(keyed, fingerprint)
        baseline = results_key({**keyed, "saliency": "<not the random baseline's>"}, fingerprint)
    return Keys(fingerprint, key, payload, results, baseline, pretrain)
