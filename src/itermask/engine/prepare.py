"""``prepare(plan)``: the only place that loads what a plan names and trains what it needs, in steps, each before
any more expensive one, every error of a step collected and raised together: :func:`bind` (tokenizer, model config,
keys), :func:`stored_result`, :func:`pretrain`, :func:`components`, :func:`load_data` (before :func:`pretrain` when
there is continued pretraining to wait for), :func:`tracked`, and the classifier (fine-tuned or reused,
:func:`~itermask.training.finetune.get_or_train`, or given as it is with ``train.enabled=false``), loaded and made
to serve every saliency method."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import hydra

from itermask.core.saliency.base import prepare_for_saliency
from itermask.data.datamodule import TextClassificationDataModule
from itermask.engine.evaluators import build_evaluators
from itermask.engine.keys import job_keys
from itermask.engine.resources import Resources
from itermask.models.loading import (
    class_mapping,
    classifier_architecture,
    load_model_config,
    load_tokenizer,
    num_classes,
    resolve_pretrained,
)
from itermask.models.mlm import mlm_architecture
from itermask.models.trained import TrainedModel
from itermask.plan import EvaluationPlan, Spec
from itermask.problems import Problems, config_errors
from itermask.storage.cache import config_hash
from itermask.storage.derived import DerivedStore
from itermask.storage.store import ResultStore
from itermask.tracking import finish, log_config
from itermask.tracking.runs import start_logger
from itermask.training.augmentation import adversarial_fine_tuning, masked_fine_tuning
from itermask.training.classifier import SequenceClassifier
from itermask.training.finetune import FineTuning, get_or_train, seed_everything
from itermask.training.pretraining import get_or_pretrain, use_pretrained_mlm
from itermask.validation import check_max_length, check_vocabulary, longest_input

log = logging.getLogger(__name__)

__all__ = ["prepare", "bind", "pretrain", "trainer_factory"]


def trainer_factory(spec: Spec):
    """A function building the Lightning trainer of ``spec`` with keyword overrides."""
    return lambda **overrides: hydra.utils.instantiate({"_target_": spec.target, **spec.options}, **overrides)


def bind(plan: EvaluationPlan, given: tuple[Any, Any] | None = None) -> Resources:
    """Step 1: the tokenizer and the model's config loaded and checked, the keys read.

    Args:
        given: a ``(model, tokenizer)`` pair handed over in Python (:func:`itermask.evaluate`), or ``None``.

    Raises:
        ValueError, OSError: every problem together (a tokenizer that is not the model's, ``model.max_length``
            out of range, files that cannot be read, a base model without word embeddings to pretrain)."""
    problems, pretrained = Problems(), plan.model.pretrained
    if given is not None:
        model, tokenizer = given
        model_config = getattr(model, "config", None)
    else:
        model, tokenizer, model_config = None, load_tokenizer(pretrained), load_model_config(pretrained)
    with problems.collect():
        check_vocabulary(tokenizer, model_config, pretrained, model)
    max_length = plan.model.max_length
    pairs = bool(getattr(plan.data.source, "text_pair_column", None))
    with problems.collect():
        if max_length is None:
            max_length = longest_input(tokenizer, model_config)
        else:
            check_max_length(max_length, tokenizer, model_config, pretrained, pairs=pairs)
    keys = None
    with problems.collect():
        keys = job_keys(plan) if plan.job.config else None
    if plan.model.pretrain is not None:
        with problems.collect():
            mlm_architecture(resolve_pretrained(pretrained), pretrained)  # word embeddings to tie the head to
        if (corpus_length := plan.model.pretrain.get("max_length")) is not None:
            with problems.collect():
                check_max_length(corpus_length, tokenizer, model_config, pretrained, option="model.pretrain.max_length")
    problems.raise_if_any()
    return Resources(
        tokenizer=tokenizer,
        model_config=model_config,
        max_length=int(max_length),
        keys=keys,
        encoder=pretrained,
        make_trainer=trainer_factory(plan.trainer),
        model=model,
    )


def pretrain(plan: EvaluationPlan, resources: Resources) -> None:
    """Step 3: continued MLM pretraining of ``model.pretrained`` (cached), when the model has a ``pretrain`` node;
    ``resources.encoder`` becomes the pretrained encoder's folder."""
    settings = None if resources.keys is None else resources.keys.pretrain
    if settings is None:
        return
    logger = plan.pretrain_logger

    def make_logger():
        return None if logger is None else start_logger(logger.target, logger.options)

    folder = get_or_pretrain(settings, resources.tokenizer, resources.make_trainer, make_logger)
    resources.encoder = str(folder)


def _bound_components(plan: EvaluationPlan, resources: Resources) -> tuple:
    """Copies of the plan's components (one copy per object: the evaluation's masking strategy and masked
    fine-tuning's stay one), pointed at the pretrained encoder where they use the base model's MLM."""
    parts = (plan.masking, plan.train.masked_strategy, plan.train.candidates, plan.saliency, plan.analyses)
    masking, masked, candidates, saliency, analyses = copy.deepcopy(parts)
    if resources.encoder != plan.model.pretrained:  # continued pretraining: the MLM components use its output
        for component in (masking, masked, candidates, *analyses):
            use_pretrained_mlm(component, plan.model.pretrained, resources.encoder)
    return masking, masked, candidates, tuple(saliency), tuple(analyses)


def components(plan: EvaluationPlan, resources: Resources) -> None:
    """Step 4: the components bound, fine-tuning's augmentations assembled, the evaluators built and the
    analyses' own checks run.

    Raises:
        ValueError, OSError: every problem together."""
    problems, tokenizer, seed = Problems(), resources.tokenizer, plan.job.seed
    masking, masked, candidates, saliency, analyses = _bound_components(plan, resources)
    with problems.collect():
        for component in {id(c): c for c in (masking, masked, *saliency) if c is not None}.values():
            component.bind(tokenizer)
    train = plan.train
    with problems.collect():
        if masked is not None:
            resources.masked_fine_tuning = masked_fine_tuning(train.masked, masked, tokenizer, seed)
    if candidates is not None and train.adversarial is not None:
        with problems.collect():
            architecture = classifier_architecture(plan.model.pretrained)
            resources.adversarial_fine_tuning = adversarial_fine_tuning(
                train.adversarial, candidates, tokenizer, architecture, seed
            )
    problems.raise_if_any()
    resources.masking, resources.saliency, resources.analyses = masking, saliency, analyses
    if plan.evaluation is None:
        return
    special = tokenizer.all_special_ids
    resources.evaluators = build_evaluators(plan.evaluation, saliency, masking, special, seed, analyses)
    for analysis in analyses:
        with problems.collect():
            analysis.check(resources.inputs(plan))
            if resources.data is not None:
                analysis.check_data(resources.data)
    problems.raise_if_any()


def _data_module(plan: EvaluationPlan, resources: Resources) -> TextClassificationDataModule:
    """The data module of the plan's source (for a given classifier, read for its classes), set up."""
    source = plan.data.source
    if not plan.train.enabled:  # the given texts of itermask.evaluate read their labels as the classifier's classes
        config = resources.model_config
        names = [str(n) for n in (getattr(config, "id2label", None) or {}).values()]
        source = source.for_classifier(names or None, num_classes(config, resources.model, resources.tokenizer))
    seed_everything(plan.job.seed)
    data = TextClassificationDataModule(
        source=source,
        tokenizer=resources.tokenizer,
        max_length=resources.max_length,
        batch_size=plan.model.batch_size,
        eval_batch_size=plan.data.eval_batch_size,
        max_train_examples=plan.data.max_train_examples,
        group_by_length=plan.data.group_by_length,
        seed=plan.job.seed,
        num_workers=plan.data.num_workers,
    )
    data.setup()
    return data


def load_data(plan: EvaluationPlan, resources: Resources) -> None:
    """Step 5 (step 3 for a model with continued pretraining, whose minutes it then precedes): the data loaded and
    the settings that need them checked, before any fine-tuning; the evaluation subset drawn (once). Analyses
    built after it (:func:`components`) check the data there.

    Raises:
        ValueError: from the data source, or a setting that the data refute (naming it)."""
    data = _data_module(plan, resources)
    resources.data = data
    if not plan.train.enabled and plan.model.pretrained:  # the given classifier's classes against the data's
        resources.classes = class_mapping(plan.model.pretrained, data.label_names, resources.model_config)
    if plan.evaluation is not None:
        resources.subset = resources.check_against_data(plan)


def _given_classifier(plan: EvaluationPlan, resources: Resources) -> TrainedModel:
    """Step 7 without fine-tuning: ``model.pretrained`` (or the module handed over) as it is. Its identity is
    the name and, for a local directory, the SHA-256 of its files (also part of the results key); ``meta``
    records ``fine_tuned: false``, no validation accuracy, and the class mapping."""
    data = resources.loaded_data
    mapping = resources.classes
    if mapping is not None and mapping.remapped:
        log.info(
            "the classes of %s %s are put in the dataset's order %s (class order %s)",
            plan.model.pretrained,
            list(mapping.model_labels),
            list(mapping.data_labels),
            list(mapping.order),
        )
    elif mapping is not None and mapping.matched_by == "count":
        log.info(
            "%s has generic class names %s: only their number is checked against the dataset's %s; "
            "the order is taken as it is",
            plan.model.pretrained,
            list(mapping.model_labels),
            list(mapping.data_labels),
        )
    files = dict(resources.keys.fingerprint.model_files) if resources.keys is not None else {}
    identity = {"pretrained": plan.model.pretrained, "files": files}
    log.info("evaluating %s as it is (train.enabled=false): no fine-tuning", plan.model.pretrained or "the model")
    order = list(mapping.order) if mapping is not None else list(range(len(data.label_names)))
    classes = mapping.to_dict() if mapping is not None else {"order": order}
    meta = {"fine_tuned": False, **identity, "val_acc": None, "label_names": list(data.label_names), "classes": classes}
    key = config_hash(identity) if plan.model.pretrained else ""
    return TrainedModel(key, plan.model.pretrained or None, meta)


def fine_tuning(plan: EvaluationPlan, resources: Resources) -> FineTuning:
    """What the fine-tuning stage needs, from the plan and what was loaded."""
    assert resources.keys is not None and plan.job.cache_dir is not None  # a fine-tuning job has a cache
    return FineTuning(
        key=resources.keys.training,
        payload=resources.keys.training_payload,
        encoder=resources.encoder,
        name=plan.model.name,
        dataset=plan.data.name,
        seed=plan.job.seed,
        optimizer=plan.model.optimizer,
        cache_dir=plan.job.cache_dir,
        lock_timeout=plan.job.lock_timeout,
        keep_lightning_checkpoints=plan.train.keep_lightning_checkpoints,
        checkpoint_every_n_steps=plan.train.checkpoint_every_n_steps,
        masking_augmentation=resources.masked_fine_tuning,
        adversarial_augmentation=resources.adversarial_fine_tuning,
        make_trainer=resources.make_trainer,
        tokenizer=resources.tokenizer,
    )


def _classifier(plan: EvaluationPlan, resources: Resources) -> None:
    """The evaluated classifier loaded (a handed-over module is used as it is), made to serve every saliency
    method (failing before any work if one cannot run), with the evaluation's trainer and derived-value store."""
    trained, data = resources.trained, resources.loaded_data
    assert trained is not None
    if resources.model is None:
        classifier = SequenceClassifier(
            pretrained=str(trained.model_dir),
            num_labels=len(data.label_names),
            label_names=data.label_names,
            class_order=trained.class_order,
        )
        resources.classifier, resources.model = classifier, classifier.model
    # eager attention when a method reads attention weights; every method checks it can run (fail fast)
    prepare_for_saliency(resources.model, resources.saliency)
    # no logger: a new trainer's step restarts at 0, which would run the training x-axis backwards; the
    # accuracies reach the tracker with the result (tracking.log_evaluation)
    resources.trainer = resources.make_trainer(logger=False, inference_mode=False)
    if plan.job.cache_dir is not None and trained.key:
        resources.derived = DerivedStore(plan.job.cache_dir, lock_timeout=plan.job.lock_timeout)


@contextmanager
def tracked(plan: EvaluationPlan, resources: Resources) -> Iterator[Resources]:
    """Step 6: the job's tracker run started (``None`` without a ``logger``) with the resolved config logged; it
    is finished on exit, and marked failed (with the error in its summary) when the block raises."""
    if plan.logger is not None:
        key = resources.keys.results or resources.keys.training if resources.keys is not None else None
        run_id = f"{plan.job.task}-{key}" if key else None
        resources.logger = start_logger(plan.logger.target, plan.logger.options, run_id)
    logger = resources.logger
    try:
        log_config(logger, dict(plan.job.config))
        yield resources
    except BaseException as error:
        finish(logger, failed=True, error=f"{type(error).__name__}: {error}")
        raise
    finish(logger)


def stored_result(plan: EvaluationPlan, resources: Resources) -> dict | None:
    """Step 2: the stored result of the results key copied into the job folder (``reused_from`` set), or
    ``None`` when there is none, ``reuse_results`` is off or the job has no cache."""
    if not plan.job.reuse_results or plan.job.cache_dir is None or resources.keys is None:
        return None
    if resources.keys.results is None or plan.job.output_dir is None:
        return None
    data_files = resources.keys.fingerprint.hashed()  # the same files as the stored result's: the key hashes them
    return ResultStore(plan.job.cache_dir).reuse(resources.keys.results, plan.job.output_dir, data_files)


@contextmanager
def prepare(plan: EvaluationPlan, given: tuple[Any, Any] | None = None) -> Iterator[Resources]:
    """Everything ``plan`` needs, loaded and trained (see the module docstring), for the block: ``with
    prepare(plan) as resources: ...``. With a stored result (``resources.stored``) nothing but the tokenizer, the
    keys and the tracker is prepared.

    Args:
        given: a ``(model, tokenizer)`` pair handed over in Python (``train.enabled`` must be false).

    Raises:
        ValueError, OSError: every bad setting of a step together, before the next step's work."""
    with config_errors():  # bad settings: one message, no traceback (itermask.jobs.run_job)
        resources = bind(plan, given)
    resources.stored = stored_result(plan, resources)
    if resources.stored is not None:
        with tracked(plan, resources):
            yield resources
        return
    early = plan.model.pretrain is not None  # the settings the data refute, before minutes of continued pretraining
    if early:
        with config_errors():
            load_data(plan, resources)
    pretrain(plan, resources)
    with config_errors():
        components(plan, resources)
        if not early:
            load_data(plan, resources)
    with tracked(plan, resources):
        if plan.train.enabled:
            resources.trained = get_or_train(fine_tuning(plan, resources), resources.loaded_data, resources.logger)
        else:
            resources.trained = _given_classifier(plan, resources)
        if plan.evaluation is not None:
            _classifier(plan, resources)
        yield resources
