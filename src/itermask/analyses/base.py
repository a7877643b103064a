"""The interface of the evaluate stage's analyses.

The evaluate stage (:func:`itermask.pipeline.evaluate`) runs the masking stage
(:func:`itermask.engine.masking.evaluate_curves`), then every :class:`Analysis` on its :class:`EvaluatedCurves`,
the narrow :class:`AnalysisInputs` and the fine-tuned model (:class:`EvaluationContext`): the built-in
``per_example`` analysis, then those the config names under ``analyses`` (each a top-level config node with a
``_target_`` subclass of :class:`Analysis`, e.g. ``ood``). Each returns an :class:`AnalysisOutput`.

A new analysis is one module (a subclass with a ``name``, registering itself in :data:`ANALYSES`; the name is
also its section of the result) plus one config node. Its report and console hooks read a stored result, so they
work from results files without running anything (:func:`analysis_classes` finds the classes a result names).
This module imports no torch, and neither may the module of an analysis at import.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from itermask.core.registry import Registered, Registry

if TYPE_CHECKING:  # imported for annotations only
    import datasets
    import pandas as pd
    import pytorch_lightning as pl
    import torch
    from transformers import PreTrainedTokenizerBase

    from itermask.core.curves import MaskingCurves
    from itermask.core.evaluation import IterativeMaskingEvaluator
    from itermask.core.evaluation_settings import EvaluationSettings
    from itermask.core.masking import MaskingStrategy
    from itermask.data.datamodule import TextClassificationDataModule
    from itermask.models.trained import TrainedModel
    from itermask.storage.derived import DerivedStore

__all__ = [
    "Analysis",
    "AnalysisInputs",
    "AnalysisOutput",
    "Artifacts",
    "EvaluatedCurves",
    "EvaluationContext",
    "ANALYSES",
    "analysis_classes",
    "RANDOM",
    "baseline_fingerprint",
    "checked_max_examples",
    "eval_mode",
    "example_subset",
    "subset_lines",
    "steps_bar",
]


#: the random explanation's name among a job's evaluators (beside the methods under study)
RANDOM = "random"


def baseline_fingerprint(inputs: AnalysisInputs, context: EvaluationContext) -> dict | None:
    """What a value of the random baseline depends on besides the classifier, for the values that every method's
    job on one classifier shares (the random explanation is seeded by the job seed): the job's settings through
    :attr:`AnalysisInputs.baseline_key` (the results key without the saliency method), the evaluated examples
    through the digest of their inputs, labels and ids, and the batch size; each user adds its own settings.
    ``None`` when the value is not shared: no random baseline beside the method, no store or settings key, or a
    distributed run (every rank runs the loops' collectives)."""
    if RANDOM not in inputs.evaluators or inputs.method == RANDOM or inputs.baseline_key is None:
        return None
    if not context.can_reuse or context.trainer.world_size > 1:
        return None
    return {
        "settings": inputs.baseline_key,
        "examples": context.data.input_digest(context.examples),
        "eval_batch_size": context.data.eval_batch_size,
    }


def checked_max_examples(value, option: str) -> int | None:
    """``value`` of an analysis's ``max_examples`` setting (``option``, e.g. ``"sanity.max_examples"``): ``None``
    (every evaluated example) or a whole number >= 1.

    Raises:
        ValueError: naming ``option``, for anything else."""
    if value is not None and (not _whole(value) or value < 1):
        raise ValueError(
            f"{option}={value!r}: give a whole number >= 1 (measure that many of the evaluated examples) or null "
            "(None in Python: every evaluated example)"
        )
    return None if value is None else int(value)


def example_subset(curves: EvaluatedCurves, max_examples: int | None) -> tuple[EvaluatedCurves, int, int]:
    """``(curves, measured, evaluated)``: the evaluated ``curves`` restricted to the ``max_examples`` examples an
    analysis measures (``None``: all), chosen by :func:`itermask.core.aopc_bounds.bounded_subset` (the rule
    :data:`~itermask.core.aopc_bounds.SUBSET_RULE`: by example id alone, so every analysis, seed, method and job
    with the same ``max_examples`` measures the same examples, the same as ``naopc.max_examples`` bounds, and a
    larger value keeps a smaller one's), with the number of examples measured and evaluated."""
    import torch

    from itermask.core.aopc_bounds import bounded_subset

    first = next(iter(curves.curves[curves.method].values()))
    evaluated = len(first)
    if max_examples is None or max_examples >= evaluated:
        return curves, evaluated, evaluated
    kept = {
        name: {
            schedule: c.select(torch.from_numpy(bounded_subset(c.example_ids.cpu().numpy(), max_examples)))
            for schedule, c in by_schedule.items()
        }
        for name, by_schedule in curves.items()
    }
    return EvaluatedCurves(kept, curves.method, curves.random, curves.steps, curves.grid), max_examples, evaluated


def subset_lines(section: dict, option: str) -> list[str]:
    """One console line when an analysis's result ``section`` measured a subset of the evaluated examples
    (:func:`example_subset`, its ``examples`` entry), naming the setting ``option``; none otherwise."""
    examples = section.get("examples") or {}
    measured, evaluated = examples.get("measured"), examples.get("evaluated")
    if measured is None or evaluated is None or measured >= evaluated:
        return []
    return [f"  measured on {measured} of the {evaluated} evaluated examples ({option}; {examples.get('rule')})"]


@contextmanager
def eval_mode(model):
    """``model`` in eval mode (no dropout) for the block, its former mode restored after (Lightning's test
    loop restores the training mode a freshly loaded module starts in)."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


@contextmanager
def steps_bar(context: EvaluationContext, active: int, description: str):
    """A ``progress(k, steps)`` callback advancing a tqdm bar of the masking steps, where the job shows progress
    bars (a trainer with Lightning's bar, as the masking stage's) and ``active`` examples take steps; else
    ``None``."""
    if not active or getattr(getattr(context, "trainer", None), "progress_bar_callback", None) is None:
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(desc=description, unit="step", dynamic_ncols=True)

    def progress(k: int, steps: int) -> None:
        bar.total = steps
        bar.update(1)

    try:
        yield progress
    finally:
        bar.close()


@dataclass
class Artifacts:
    """What an analysis leaves besides its part of the result file.

    Attributes:
        images: ``{tracker key: PNG path}`` figures, already written into the job folder.
        tables: ``{tracker key: (columns, rows)}`` tables for the tracker.
        summary: ``{tracker key: number}`` final values for the tracker's run summary.
        files: ``{path relative to the job folder: path}`` files that are part of the result (e.g. the
            per-example tables): kept with it in the results store and restored when it is reused.
        curves: ``{key prefix: {saliency: {schedule: series}}}`` per-step series for the tracker's history,
            charted against the masking step: each ``series`` holds ``steps`` (``"fraction"`` or
            ``"count"``), the grid ``x`` and lists of one value per step
            (:func:`itermask.tracking.curve_history`).
    """

    images: dict[str, Path] = field(default_factory=dict)
    tables: dict[str, tuple[list[str], list[list[Any]]]] = field(default_factory=dict)
    summary: dict[str, float] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    curves: dict[str, dict] = field(default_factory=dict)

    def update(self, other: Artifacts) -> Artifacts:
        """Add ``other``'s entries to this one (in place); returns ``self``."""
        for part in fields(self):
            getattr(self, part.name).update(getattr(other, part.name))
        return self


@dataclass
class AnalysisOutput:
    """``result``: JSON-ready entries merged into the result file (an analysis's own section under its
    name, or top-level entries for the built-in stages); ``artifacts``: see :class:`Artifacts`."""

    result: dict
    artifacts: Artifacts = field(default_factory=Artifacts)


@dataclass(frozen=True)
class AnalysisInputs:
    """What the analyses read of the job's plan and its bound components (built once by
    :func:`itermask.engine.prepare`).

    Attributes:
        evaluation: the masking evaluation's settings (split, subset, grid, schedules, target, quantity).
        evaluators: ``{explanation: evaluator}``, the method under study first, then ``random`` when compared.
        pretrained: the classifier's encoder (``model.pretrained``, or the folder continued pretraining wrote).
        output_dir: the job folder, where analyses write their files (``None``: nothing is written).
        baseline_key: the results key of the job's settings without its saliency method: equal for jobs whose
            random baseline curves are equal (``None``: the curves are never shared between jobs).
        analyses: the job's configured analyses, in config order (the sanity benchmark calls their
            :meth:`Analysis.explanation_measures`).
    """

    evaluation: EvaluationSettings
    tokenizer: PreTrainedTokenizerBase
    masking: MaskingStrategy
    evaluators: Mapping[str, IterativeMaskingEvaluator]
    method: str
    pretrained: str
    output_dir: Path | None
    baseline_key: str | None = None
    analyses: tuple[Analysis, ...] = ()

    @property
    def folder(self) -> Path:
        """The job folder, for an analysis that writes files.

        Raises:
            ValueError: the job writes no files (:func:`itermask.evaluate`)."""
        if self.output_dir is None:
            raise ValueError("this analysis writes files, but the job has no output folder")
        return self.output_dir


@dataclass(frozen=True)
class EvaluationContext:
    """The classifier the analyses of one evaluation run on.

    Attributes:
        data: the set-up data module (:class:`~itermask.data.datamodule.TextClassificationDataModule`).
        trained: the classifier's checkpoint (:class:`~itermask.models.trained.TrainedModel`).
        model: the classifier itself (a Hugging Face sequence classifier, or a module handed over).
        trainer: the Lightning trainer that runs evaluation loops (``inference_mode=False``).
        subset: the evaluation subset of the data (drawn once, sorted by length).
        derived: the :class:`~itermask.storage.derived.DerivedStore` where values that depend only on the
            classifier and fixed inputs are kept for the other jobs on it (``None``: computed every time).
        classifier: the Lightning module wrapping ``model`` (the test accuracy's loop), ``None`` for a module
            handed over in Python.
    """

    data: TextClassificationDataModule
    trained: TrainedModel | None
    model: torch.nn.Module
    trainer: pl.Trainer
    subset: datasets.Dataset | None = None
    derived: DerivedStore | None = None
    classifier: pl.LightningModule | None = None

    @property
    def examples(self) -> datasets.Dataset:
        """The evaluation subset (drawn once by :func:`itermask.engine.prepare.prepare`)."""
        assert self.subset is not None, "the evaluation subset is drawn by prepare()"
        return self.subset

    def reuse(self, kind: str, fingerprint: dict, compute):
        """``compute()``, or the value an earlier job on this classifier stored for the same ``kind`` and
        ``fingerprint`` (everything besides the classifier that determines the value: input digests,
        settings). The classifier enters through its checkpoint key, the digest of its weight files'
        manifest, its attention implementation (``eager``, which the attention methods switch to, rounds
        otherwise than ``sdpa``) and its device type, so a reused value is bit for bit the one this job would
        compute. Parallel jobs compute it once (the others wait for the first: :class:`DerivedStore`), except
        the ranks of a distributed run, which all run the computation's collectives. Without a store (or a
        classifier with a key) the value is computed every time."""
        if not self.can_reuse:
            return compute()
        assert self.derived is not None and self.trained is not None  # can_reuse
        exclusive = getattr(self.trainer, "world_size", 1) == 1
        key, fingerprint = self.trained.key, self._fingerprint(fingerprint)
        return self.derived.get_or_compute(key, kind, fingerprint, compute, exclusive=exclusive)

    @property
    def can_reuse(self) -> bool:
        """Whether values are kept for other jobs (a store and a classifier with a key; a module handed over
        has none)."""
        return self.derived is not None and self.trained is not None and bool(self.trained.key)

    def stored(self, kind: str, fingerprint: dict):
        """The value of :meth:`reuse` an earlier job stored, or ``None`` (also when nothing can be reused), for
        a value that is not computed by one call: see :meth:`keep`."""
        if not self.can_reuse:
            return None
        assert self.derived is not None and self.trained is not None  # can_reuse
        return self.derived.get(self.trained.key, kind, self._fingerprint(fingerprint))

    def keep(self, kind: str, fingerprint: dict, value) -> None:
        """Store ``value`` for the other jobs on this classifier (see :meth:`reuse`); nothing without a store."""
        if self.can_reuse:
            assert self.derived is not None and self.trained is not None  # can_reuse
            self.derived.put(self.trained.key, kind, self._fingerprint(fingerprint), value)

    def _fingerprint(self, fingerprint: dict) -> dict:
        from itermask.storage.cache import config_hash

        model: Any = self.model  # a torch module, or None in tests without one
        parameter = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
        meta = self.trained.meta if self.trained is not None else {}
        return {
            **fingerprint,
            "weights": config_hash(meta.get("files")),
            "attention": getattr(getattr(model, "config", None), "_attn_implementation", None),
            "device": None if parameter is None else parameter.device.type,  # a GPU rounds otherwise than a CPU
        }


@dataclass(frozen=True)
class EvaluatedCurves:
    """The masking stage's output: every explanation's masking curves on the evaluation subset.

    Attributes:
        curves: ``{explanation: {schedule: MaskingCurves}}``, the method under study first; each
            :class:`~itermask.core.evaluation.MaskingCurves` holds ``[B, S]`` per-step values of the ``B``
            evaluated examples (the same for every explanation and schedule) at the ``S`` steps of the grid.
        random: the random baseline's name, or ``None`` when it is not compared (``compare_random=false``).
        steps: ``"fraction"`` (the grid is masking fractions) or ``"count"`` (token counts).
        grid: the ``S`` steps of the grid.
    """

    curves: Mapping[str, Mapping[str, MaskingCurves]]
    method: str
    random: str | None
    steps: str
    grid: tuple[float, ...]

    def __getitem__(self, explanation: str) -> Mapping[str, MaskingCurves]:
        """``{schedule: MaskingCurves}`` of ``explanation``.

        Raises:
            KeyError: for an explanation that was not evaluated.
        """
        return self.curves[explanation]

    def __iter__(self) -> Iterator[str]:
        return iter(self.curves)

    def items(self):
        """``(explanation, {schedule: MaskingCurves})`` pairs, the method under study first."""
        return self.curves.items()

    @classmethod
    def of(cls, curves: Mapping[str, Mapping[str, MaskingCurves]], method: str | None = None) -> EvaluatedCurves:
        """Wrap ``{explanation: {schedule: MaskingCurves}}`` (``method``: the method under study, default the
        first explanation; the random baseline is ``"random"`` when evaluated beside another method).

        Raises:
            ValueError: for no curves.
        """
        if not curves:
            raise ValueError("no masking curves")
        method = method if method is not None else next(iter(curves))
        first = next(iter(curves[method].values()))
        random = "random" if "random" in curves and method != "random" else None
        return cls(dict(curves), method, random, first.steps, tuple(float(x) for x in first.grid.tolist()))


#: every analysis class by name (subclasses of :class:`Analysis` add themselves)
ANALYSES: Registry[type[Analysis]] = Registry("analysis")


class Analysis(Registered, ABC):
    """One analysis of the evaluate stage. Subclasses set :attr:`name` (registering them in :data:`ANALYSES`)
    and implement :meth:`run`; their constructor takes the settings of their config node, checked there.
    The class methods :meth:`report_measures`, :meth:`headline_lines` and :meth:`summary_lines` declare what
    the report and the console show of the analysis's result section; they show nothing by default.

    Class attributes:
        name: the result section the analysis writes (and its config node's name, for configured ones).
    """

    registry = ANALYSES

    @property
    def representations(self) -> bool | str:
        """Which representations the masking evaluation must record for this analysis: ``False`` (none, the
        default), ``"final"`` (the final linear layer's input) or ``"all"`` (every hidden layer too); see
        :mod:`itermask.core.representations`."""
        return False

    def check(self, inputs: AnalysisInputs) -> None:
        """Check the analysis's settings against the job's, before any data is loaded.

        Raises:
            ValueError: naming the setting.
        """

    def check_data(self, data) -> None:
        """Check the analysis's settings against the loaded data, before any fine-tuning.

        Raises:
            ValueError: naming the setting.
        """

    @abstractmethod
    def run(self, inputs: AnalysisInputs, context: EvaluationContext, curves: EvaluatedCurves) -> AnalysisOutput:
        """Analyse the fine-tuned model of ``context`` and its masking ``curves``."""

    def explanation_measures(
        self, inputs: AnalysisInputs, context: EvaluationContext, curves: MaskingCurves
    ) -> dict[str, torch.Tensor]:
        """Per-example values ``{column: [B] float tensor}`` of this analysis's faithfulness measures for ONE
        explanation, given as its one-shot ``curves`` (its clean ranking: ``curves.scores`` / ``curves.rank``
        ``[B, L]``, examples ``curves.example_ids``, targets ``curves.target``), on ``context.model``; ``{}``
        by default (an analysis that scores no explanation). Each column's unit and direction are readable by
        :func:`itermask.core.metrics.metric_info`. The sanity benchmark (:mod:`itermask.analyses.sanity`)
        calls it for degraded explanations; an analysis's own :meth:`run` should compute its per-example values
        through it too."""
        return {}

    def artifacts_from(self, result: dict, output_dir: Path) -> Artifacts:
        """The artifacts a stored ``result`` (a reused job) still allows, drawn into ``output_dir``; none by
        default."""
        return Artifacts()

    @classmethod
    def report_measures(cls, result: dict) -> dict[tuple[str, str, str], float]:
        """Rows for the report: ``{(explanation, schedule, score): value}`` from a result file's section;
        the report aggregates each over seeds. None by default."""
        return {}

    @classmethod
    def headline_lines(cls, summary: pd.DataFrame) -> list[str]:
        """Markdown lines for one group's part of the report's headline, from ``summary``: that group's rows
        of the report's summary table (columns ``explanation, schedule, score, n, mean, std, ci_low,
        ci_high``; the scores of :meth:`report_measures` among them). None by default."""
        return []

    @classmethod
    def summary_lines(cls, result: dict) -> list[str]:
        """Lines for the console summary at the end of a job, from its result (the analysis's section may
        be missing: the analysis was off). None by default."""
        return []

    @classmethod
    def report_bounds(cls, score: str) -> tuple[float, float] | None:
        """The range ``(lo, hi)`` of the report row ``score`` of :meth:`report_measures` (ends may be infinite),
        for intervals that stay inside it, or ``None`` (unbounded, or not this analysis's row; the default)."""
        return None


def _import_target(target: str) -> type | None:
    """The class a ``_target_`` names (``package.module.Class``), or ``None`` if it cannot be imported."""
    module, _, name = target.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    return found if isinstance(found, type) else None


def analysis_classes(result: dict) -> list[type[Analysis]]:
    """The analysis classes of a stored result: those of the configured analyses its config names under
    ``analyses`` (imported by their ``_target_``, so an analysis defined outside itermask is found without
    registering it anywhere), then every other registered one, each once. Classes whose module cannot be
    imported are left out."""
    config = result.get("config") or {}
    found: list[type[Analysis]] = []
    for name in config.get("analyses") or []:
        node = config.get(name)
        target = node.get("_target_") if isinstance(node, dict) else None
        cls = _import_target(target) if isinstance(target, str) else None
        if cls is not None and issubclass(cls, Analysis) and cls not in found:
            found.append(cls)
    import itermask.analyses  # noqa: F401  (registers the built-in analyses)

    return found + [cls for cls in ANALYSES.values() if cls not in found]


def _whole(value) -> bool:
    """A whole number (Python's or NumPy's), not a bool."""
    import numpy as np

    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
