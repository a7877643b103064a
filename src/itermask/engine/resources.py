"""What :func:`itermask.engine.prepare` loaded for a plan (:class:`Resources`), and the checks that need it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from itermask.analyses.base import Analysis, AnalysisInputs, EvaluationContext
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.evaluation_settings import check_target_policy
from itermask.core.masking import MaskingStrategy
from itermask.core.saliency.base import SaliencyMethod
from itermask.data.datamodule import TextClassificationDataModule
from itermask.engine.keys import Keys
from itermask.models.loading import ClassMapping
from itermask.models.trained import TrainedModel
from itermask.plan import EvaluationPlan
from itermask.training.augmentation import AdversarialAugmentation, RandomMaskingAugmentation

__all__ = ["Resources"]


@dataclass
class Resources:
    """Everything a plan needs, loaded (:func:`itermask.engine.prepare` fills it step by step).

    Attributes:
        tokenizer: the Hugging Face tokenizer; ``model_config`` the classifier's ``transformers`` config (``None``
            for a module handed over without one).
        max_length: tokens per example after truncation.
        keys: the cache keys (``None`` for a plan without a config, as :func:`itermask.evaluate` builds).
        encoder: ``model.pretrained``, or the folder continued pretraining wrote.
        make_trainer: builds the plan's Lightning trainer from keyword overrides.
        masking, saliency, analyses: the plan's components, bound copies.
        masked_fine_tuning, adversarial_fine_tuning: fine-tuning's augmentations (``None``: off).
        evaluators: ``{explanation: evaluator}``, the methods under study, then ``random`` when compared.
        stored: a stored result of the same results key (then nothing below is loaded).
        data: the set-up data module; ``subset`` the evaluation subset (drawn once); ``classes`` a given
            classifier's class mapping to the data's classes.
        trained: the classifier's checkpoint (fine-tuned, or given); ``classifier`` its Lightning module (``None``
            for a handed-over module); ``model`` the classifier itself.
        trainer: the evaluation's Lightning trainer (``inference_mode=False``); ``logger`` the tracker run.
        derived: the store of values computed once per checkpoint (``None``: computed every time).
    """

    tokenizer: Any
    model_config: Any
    max_length: int
    keys: Keys | None
    encoder: str
    make_trainer: Callable[..., Any]
    model: Any = None
    masking: MaskingStrategy | None = None
    saliency: tuple[SaliencyMethod, ...] = ()
    analyses: tuple[Analysis, ...] = ()
    masked_fine_tuning: RandomMaskingAugmentation | None = None
    adversarial_fine_tuning: AdversarialAugmentation | None = None
    evaluators: dict[str, IterativeMaskingEvaluator] = field(default_factory=dict)
    stored: dict | None = None
    data: TextClassificationDataModule | None = None
    subset: Any = None
    classes: ClassMapping | None = None
    trained: TrainedModel | None = None
    classifier: Any = None
    trainer: Any = None
    logger: Any = None
    derived: Any = None

    @property
    def loaded_data(self) -> TextClassificationDataModule:
        """The data module (loaded by the data step)."""
        assert self.data is not None, "the data are loaded by prepare()"
        return self.data

    def inputs(self, plan: EvaluationPlan) -> AnalysisInputs:
        """What the analyses read of the plan and the bound components."""
        assert plan.evaluation is not None and self.masking is not None
        return AnalysisInputs(
            evaluation=plan.evaluation,
            tokenizer=self.tokenizer,
            masking=self.masking,
            evaluators=dict(self.evaluators),
            method=plan.method,
            pretrained=self.encoder,
            output_dir=plan.job.output_dir,
            baseline_key=None if self.keys is None else self.keys.baseline,
            analyses=tuple(self.analyses),
        )

    def context(self) -> EvaluationContext:
        """The analyses' view of the prepared classifier."""
        return EvaluationContext(
            data=self.loaded_data,
            trained=self.trained,
            model=self.model,
            trainer=self.trainer,
            subset=self.subset,
            derived=self.derived,
            classifier=self.classifier,
        )

    def check_against_data(self, plan: EvaluationPlan):
        """The settings that need the data (target class, split and subset size, segments, tokens to mask, the
        analyses' built by now: those built later check the data then), checked before any fine-tuning; returns
        the evaluation subset.

        Raises:
            ValueError: naming the setting."""
        e, data = plan.evaluation, self.loaded_data
        assert e is not None
        try:
            check_target_policy(e.target, len(data.label_names))
        except ValueError as error:
            raise ValueError(f"evaluation.target={e.target}: {error}") from None
        try:
            subset = data.evaluation_subset(e.n_examples, e.subset_seed, e.split)  # unknown split, size <= 0
        except ValueError as error:
            raise ValueError(f"evaluation.split={e.split}: {error}") from None
        if e.segments is not None and not data.has_text_pairs and e.segments != [0]:
            given = plan.data.name == "given"  # itermask.evaluate's texts
            raise ValueError(
                f"evaluation.segments={e.segments}, but {'the texts given are' if given else plan.data.name + ' has'} "
                "single texts (segment 0 only); use evaluation.segments=null (segments=None), or "
                + ("text pairs" if given else "a sentence-pair dataset (text_pair_column)")
            )
        if e.features == "word" and not getattr(self.tokenizer, "is_fast", False):
            raise ValueError(
                f"evaluation.features=word needs a fast tokenizer's word ids, but the tokenizer "
                f"{type(self.tokenizer).__name__} is not fast (no word_ids()); use evaluation.features=token"
            )
        data.check_maskable(e.split, e.n_examples, e.subset_seed, e.segments)  # tokens to mask, before fine-tuning
        for analysis in self.analyses:
            analysis.check_data(data)
        return subset
