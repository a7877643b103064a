"""The interface of the evaluate stage's analyses.

An :class:`Analysis` runs on a fine-tuned model (the :class:`EvaluationContext`) and returns an
:class:`AnalysisOutput`: a JSON-ready part of the result file plus its :class:`Artifacts` (files it wrote,
tables, figures and summary values for the tracker). The evaluate stage always runs the built-in
``accuracy``, ``masking`` and ``per_example`` analyses, then those the config names under ``analyses`` (each a top-level
config node with a ``_target_`` subclass of :class:`Analysis`, e.g. ``ood``). A new analysis is one
subclass plus its config node: it registers itself in :data:`ANALYSES` by its ``name``, which is also its
section of the result, and the report reads its rows through :meth:`Analysis.report_measures`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from itermask.core.registry import Registered, Registry

if TYPE_CHECKING:  # the stages' types; imported for annotations only
    from itermask.settings import EvaluateSettings

__all__ = ["Analysis", "AnalysisOutput", "Artifacts", "EvaluationContext", "ANALYSES", "eval_mode"]


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
        self.images.update(other.images)
        self.tables.update(other.tables)
        self.summary.update(other.summary)
        self.files.update(other.files)
        self.curves.update(other.curves)
        return self


@dataclass
class AnalysisOutput:
    """``result``: JSON-ready entries merged into the result file (an analysis's own section under its
    name, or top-level entries for the built-ins); ``artifacts``: see :class:`Artifacts`."""

    result: dict
    artifacts: Artifacts = field(default_factory=Artifacts)


@dataclass
class EvaluationContext:
    """What the analyses of one evaluation share.

    Attributes:
        settings: the job's settings.
        data: the set-up data module (:class:`~itermask.training.datamodule.TextClassificationDataModule`).
        trained: the fine-tuned checkpoint (:class:`~itermask.pipeline.TrainedModel`).
        classifier: the Lightning module wrapping the classifier (``classifier.model``), in eval mode.
        trainer: the Lightning trainer that runs evaluation loops (``inference_mode=False``).
        shared: what earlier analyses hand to later ones, e.g. ``shared["curves"]`` (the masking curves,
            ``{saliency: {schedule: MaskingCurves}}``).
    """

    settings: EvaluateSettings
    data: Any
    trained: Any
    classifier: Any
    trainer: Any
    shared: dict[str, Any] = field(default_factory=dict)

    @property
    def model(self):
        """The classifier itself (a Hugging Face sequence classifier)."""
        return self.classifier.model

    @property
    def output_dir(self) -> Path:
        return self.settings.output_dir


#: every analysis class by name (subclasses of :class:`Analysis` add themselves)
ANALYSES: Registry[type[Analysis]] = Registry("analysis")


class Analysis(Registered, ABC):
    """One analysis of the evaluate stage. Subclasses set :attr:`name` (registering them in :data:`ANALYSES`)
    and implement :meth:`run`; their constructor takes the settings of their config node, checked there.

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

    def check(self, settings: EvaluateSettings) -> None:
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
    def run(self, context: EvaluationContext) -> AnalysisOutput:
        """Analyse the fine-tuned model of ``context``."""

    def artifacts_from(self, result: dict, output_dir: Path) -> Artifacts:
        """The artifacts a stored ``result`` (a reused job) still allows, drawn into ``output_dir``; none by
        default."""
        return Artifacts()

    @classmethod
    def report_measures(cls, result: dict) -> dict[tuple[str, str, str], float]:
        """Rows for the report: ``{(explanation, schedule, score): value}`` from a result file's section;
        none by default."""
        return {}

    @classmethod
    def report_bounds(cls, score: str) -> tuple[float, float] | None:
        """The range ``(lo, hi)`` of the report row ``score`` of :meth:`report_measures` (ends may be infinite),
        for intervals that stay inside it, or ``None`` (unbounded, or not this analysis's row; the default)."""
        return None
