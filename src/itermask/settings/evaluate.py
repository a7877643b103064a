"""An evaluation job's settings (``evaluate.py``): a fine-tuning job's (:mod:`itermask.settings.job`) plus
the saliency method, the masking evaluation, one evaluator per explanation and the configured analyses,
read in the same two passes (the analyses' own checks, :meth:`~itermask.analyses.Analysis.check`, last).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from omegaconf import DictConfig

from itermask.analyses import Analysis, AnalysisInputs
from itermask.core.evaluation import IterativeMaskingEvaluator, check_target_policy, off_grid
from itermask.core.forwards import DEFAULT_TOKEN_BUDGET
from itermask.core.masking import MaskingStrategy
from itermask.core.metrics import Quantity
from itermask.core.saliency import RandomSaliency, SaliencyMethod
from itermask.core.tokens import segment_list
from itermask.models.loading import class_mapping
from itermask.settings.components import build, plain
from itermask.settings.job import TrainJobSettings, bind_job, hydra_overrides, read_job
from itermask.settings.problems import Problems
from itermask.storage.keys import results_key
from itermask.tracking.runs import job_logger
from itermask.training.pretraining import use_pretrained_mlm
from itermask.validation import QUANTITIES, SettingsError

__all__ = ["EvaluationSettings", "EvaluateSettings", "evaluate_settings", "build_evaluators"]


@contextmanager
def _naming(option: str) -> Iterator[None]:
    """Prefix the message of a ``ValueError`` raised inside with the option it is about (``option: ...``)."""
    try:
        yield
    except SettingsError:
        raise
    except ValueError as error:
        raise ValueError(f"{option}: {error}") from error


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
    quantity: Quantity
    compare_random: bool
    token_budget: int = DEFAULT_TOKEN_BUDGET

    @classmethod
    def from_config(cls, node: Mapping | DictConfig) -> EvaluationSettings:
        """Read ``evaluation`` (a plain dict, or the ``DictConfig`` node; typed by
        :class:`itermask.validation.EvaluationSchema` at composition, its numbers checked by
        :func:`itermask.validation.config_problems`).

        Raises:
            ValueError: for an unknown quantity or target policy, AOPC bins off a fraction grid, or bad segments.
        """
        e = plain(node) if isinstance(node, DictConfig) else node
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


@dataclass(frozen=True)
class EvaluateSettings(TrainJobSettings):
    """A fine-tuning job's settings plus the evaluation's (see :func:`evaluate_settings`): the saliency
    method, one evaluator per explanation (the method, and ``random`` when compared), the configured
    analyses, and the results key."""

    reuse_results: bool
    results_key: str
    #: the results key of these settings with the saliency method left out: what the random baseline's
    #: curves depend on (jobs of a sweep over methods share them, :mod:`itermask.storage.derived`)
    baseline_key: str
    saliency: SaliencyMethod
    evaluation: EvaluationSettings
    evaluators: dict[str, IterativeMaskingEvaluator]
    analyses: list[Analysis]

    @property
    def method(self) -> str:
        """The name of the saliency method under study (the first evaluator)."""
        return next(iter(self.evaluators))

    def check_against_data(self, data) -> None:
        """Settings that need the data (target class, split, subset size, segments, the analyses', and with
        ``train.enabled=false`` the given classifier's classes, :func:`~itermask.models.loading.class_mapping`),
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
        data.check_maskable(e.split, e.n_examples, e.subset_seed, e.segments)  # tokens to mask, before fine-tuning
        if not self.train.enabled:  # the given classifier's classes against the data's (its config only)
            class_mapping(self.model.pretrained, data.label_names)
        for analysis in self.analyses:
            analysis.check_data(data)


def _analyses(config: dict, problems: Problems) -> list[Analysis]:
    """The configured analyses: the top-level nodes named in ``config["analyses"]``, each built with its
    ``_target_`` unless absent or switched off (``enabled: false`` or ``level: none``; its other settings
    are then not checked). Errors are collected."""
    analyses = []
    for name in config.get("analyses") or []:
        node = config.get(name)
        if node is None or node.get("enabled", True) is False or node.get("level") == "none":
            continue
        with problems.collect():
            analyses.append(build(node, name, Analysis))
    return analyses


def build_evaluators(
    saliency: SaliencyMethod,
    masking: MaskingStrategy,
    e: EvaluationSettings,
    special_ids: list[int],
    seed: int,
    analyses: list[Analysis],
) -> dict[str, IterativeMaskingEvaluator]:
    """One evaluator per explanation: the method under study, and a seeded ``random`` one when compared.

    Raises:
        ValueError: the evaluator's own error (an empty schedule list, an unknown schedule)."""
    methods: dict[str, SaliencyMethod] = {saliency.name: saliency}
    if e.compare_random and saliency.name != "random":
        methods["random"] = RandomSaliency(seed=seed)
    wanted = {analysis.representations for analysis in analyses}
    collect = "all" if "all" in wanted else "final" if "final" in wanted else False
    return {
        name: IterativeMaskingEvaluator(
            method,
            masking,
            fractions=list(e.fractions),
            special_ids=special_ids,
            schedules=list(e.schedules),
            target=e.target,
            steps=e.steps,
            token_budget=e.token_budget,
            counts=list(e.counts),
            segments=e.segments,
            collect_representations=collect,
        )
        for name, method in methods.items()
    }


def evaluate_settings(cfg: DictConfig) -> EvaluateSettings:
    """The settings stage of ``evaluate.py``: every component built and bound, every option checked, in two
    passes (without, then with the tokenizer), each raising all its errors together; then the analyses'
    own checks, together.

    Raises:
        ValueError: naming each bad setting (one :class:`~itermask.validation.SettingsError` listing them when
            there are several); OSError for missing files.
    """
    started_at, problems = time.time(), Problems()
    config = plain(cfg)
    parts = read_job(config, hydra_overrides(), problems)
    saliency = evaluation = None
    with problems.collect():
        saliency = build(config["saliency"], "saliency", SaliencyMethod)
    with problems.collect():
        evaluation = EvaluationSettings.from_config(config["evaluation"])
    analyses = _analyses(config, problems)
    problems.raise_if_any()
    assert saliency is not None and evaluation is not None
    fields = bind_job(parts, problems, started_at)
    model = fields["model"]
    if model.pretrained_from is not None:  # continued pretraining: attack=mlm's default model is its output
        for analysis in analyses:
            use_pretrained_mlm(analysis, model.pretrained_from, model.pretrained)
    saliency.bind(fields["tokenizer"])
    special_ids = fields["tokenizer"].all_special_ids
    evaluators = build_evaluators(saliency, fields["masking"], evaluation, special_ids, parts.seed, analyses)
    keyed = config if model.pretrain_key is None else {**config, "pretrained_encoder": model.pretrain_key}
    key = results_key(keyed, fields["fingerprint"])
    baseline_key = results_key({**keyed, "saliency": "<not the random baseline's>"}, fields["fingerprint"])
    fields["make_logger"] = job_logger(config, fields["run_name"], key)  # the W&B run id follows the results key
    settings = EvaluateSettings(
        **fields,
        reuse_results=bool(config.get("reuse_results", True)),
        results_key=key,
        baseline_key=baseline_key,
        saliency=saliency,
        evaluation=evaluation,
        evaluators=evaluators,
        analyses=analyses,
    )
    inputs = AnalysisInputs.from_settings(settings)
    for analysis in analyses:
        with problems.collect():
            analysis.check(inputs)
    problems.raise_if_any()
    return settings
