"""What :func:`itermask.evaluate` returns: :class:`EvaluationResult`, the masking curves and scores of a notebook
evaluation with its tables (``to_pandas``) and per-example views (``views``, shown as HTML in a notebook); values
only (the engine that produced them is :mod:`itermask.engine`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from itermask.core.evaluation_settings import EvaluationSettings

if TYPE_CHECKING:
    import pandas as pd

    from itermask.core.curves import MaskingCurves
    from itermask.core.saliency import SaliencyMethod
    from itermask.core.tokens import TokenBatch
    from itermask.views import ExampleViews

__all__ = ["EvaluationResult", "SHOWN_EXAMPLES"]

#: examples shown by the notebook view of a result (:meth:`EvaluationResult._repr_html_`)
SHOWN_EXAMPLES = 3


@dataclass
class EvaluationResult:
    """What :func:`evaluate` measured.

    Attributes:
        curves: ``{explanation: {schedule: MaskingCurves}}`` (the methods, then ``random``), each over the
            evaluated examples (those with a maskable token), ordered by example id; example ids are the
            positions of the examples in the given data.
        scores: ``{explanation: {schedule: summary}}`` (:func:`itermask.core.metrics.summarize`: means over the
            examples; ``<q>`` in the keys is ``prob`` or ``logit`` after ``quantity``).
        relative_to_random: ``{method: {schedule: {score: method minus random}}}``
            (:func:`itermask.engine.masking.relative_to_random`); empty without ``compare_random``.
        evaluation: the masking evaluation's settings (grid, schedules, target, quantity, AOPC bins).
        n_skipped: examples skipped because they have no maskable token.
        texts: the given texts, by example id.
        class_names: the classifier's class names by id (``None`` if it has none).
        result: the whole result, as ``results.json`` of ``evaluate.py`` holds it (``model_check`` among it).
    """

    curves: dict[str, dict[str, MaskingCurves]]
    scores: dict[str, dict[str, dict]]
    relative_to_random: dict[str, dict[str, dict]]
    evaluation: EvaluationSettings
    n_skipped: int
    texts: list[str]
    class_names: list[str] | None
    result: dict = field(repr=False, default_factory=dict)
    _model: Any = field(repr=False, default=None)
    _tokenizer: Any = field(repr=False, default=None)
    _methods: dict[str, SaliencyMethod] = field(repr=False, default_factory=dict)
    _batch_of: Callable[[list[int]], TokenBatch] | None = field(repr=False, default=None)
    #: the views already built, by (example ids, max_tokens) (:meth:`views`)
    _views: dict = field(repr=False, default_factory=dict)

    @property
    def methods(self) -> list[str]:
        """The explanations evaluated (the methods, then ``random`` when compared)."""
        return list(self.curves)

    @property
    def warnings(self) -> list[str]:
        """What makes these scores unreadable, as sentences: a classifier that predicts one class for every
        given text (:func:`itermask.analyses.model_check`); empty when nothing is wrong. The notebook view shows
        them first."""
        from itermask.analyses.model_check import model_check_line

        line = model_check_line(self.result)
        return [] if line is None else [line]

    def to_pandas(self, kind: str = "examples") -> pd.DataFrame:
        """The result as a table.

        Args:
            kind: ``"examples"``: one row per example, explanation and schedule, with every per-example score
                (AUC, first flip, AOPC per example, ...; :func:`~itermask.analyses.per_example.score_frame`), the
                gold label (``-1``: unknown), the prediction on the clean input and the text; ``"steps"``: one
                row per example, explanation, schedule and masking step
                (:func:`~itermask.analyses.per_example.step_frame`); ``"aggregate"``: one row per explanation
                and schedule with the mean scores (:attr:`scores`, the scalar ones) and, for a method,
                ``<score>_minus_random`` per score compared with random and ``racu_without_retraining_*``
                (:func:`itermask.core.metrics.relative_to_random`).

        Raises:
            ValueError: for another ``kind``.
        """
        import pandas as pd

        from itermask.analyses.per_example import score_frame, step_frame

        e = self.evaluation
        if kind in ("examples", "steps"):
            make = score_frame if kind == "examples" else step_frame
            parts = [make(name, c, e.quantity, e.aopc_bins) for name, by in self.curves.items() for c in by.values()]
            frame = pd.concat(parts, ignore_index=True)
            if kind == "examples":
                first = next(iter(next(iter(self.curves.values())).values()))
                ids = first.example_ids.tolist()
                label = dict(zip(ids, first.labels.tolist()))
                predicted = dict(zip(ids, first.clean_logits.argmax(dim=-1).tolist()))
                frame["label"] = [label[int(i)] for i in frame["example_id"]]  # -1: unknown
                frame["prediction"] = [predicted[int(i)] for i in frame["example_id"]]  # on the clean input
                frame["text"] = [self.texts[int(i)] for i in frame["example_id"]]
            return frame
        if kind == "aggregate":
            rows = []
            for name, by_schedule in self.scores.items():
                for schedule, summary in by_schedule.items():
                    row: dict[str, Any] = {"saliency": name, "schedule": schedule}
                    row.update({k: v for k, v in summary.items() if isinstance(v, int | float | str)})
                    versus = (self.relative_to_random.get(name) or {}).get(schedule) or {}
                    for k, v in versus.items():
                        if isinstance(v, int | float):
                            row[k if k.startswith("racu_") else f"{k}_minus_random"] = v
                    rows.append(row)
            return pd.DataFrame(rows)
        raise ValueError(f"kind must be 'examples', 'steps' or 'aggregate', got {kind!r}")

    def views(self, example_ids: Sequence[int] | None = None, max_tokens: int | None = None) -> ExampleViews:
        """The per-example views (:class:`itermask.views.ExampleViews`: a heatmap of each explanation's scores
        and, per schedule, the masking trajectory beside the target probability curve), shown as HTML in a
        notebook, ``.save(path)`` writes a page.

        Args:
            example_ids: which examples (ids: positions in the given data, or one id; default the first
                :data:`SHOWN_EXAMPLES` evaluated).
            max_tokens: tokens shown per example (default :data:`itermask.views.MAX_TOKENS`).

        Raises:
            ValueError: for an id that is not a whole number, or was not evaluated (no maskable token, or out of
                range).
        """
        import torch

        from itermask.core.evaluation import saliency_scores
        from itermask.views import MAX_TOKENS, views_from_curves

        if example_ids is not None and _whole(example_ids):  # one id: result.views(3)
            example_ids = [int(cast(int, example_ids))]
        if example_ids is not None and not isinstance(example_ids, Iterable):
            raise ValueError(
                f"example_ids must be a list of ids (positions in the given data), got {example_ids!r:.60}"
            )
        if example_ids is not None and (bad := [i for i in example_ids if not _whole(i)]):
            raise ValueError(f"example_ids must be whole numbers (positions in the given data), got {bad}")
        key = (None if example_ids is None else tuple(int(i) for i in example_ids), max_tokens)
        if key in self._views:  # a notebook displays a result again and again: explained once
            return self._views[key]
        first = next(iter(next(iter(self.curves.values())).values()))
        evaluated = first.example_ids.tolist()
        wanted = evaluated[:SHOWN_EXAMPLES] if example_ids is None else [int(i) for i in example_ids]
        unknown = [i for i in wanted if i not in evaluated]
        if unknown:
            raise ValueError(f"example ids {unknown} were not evaluated (evaluated: {evaluated[:20]}...)")
        rows = torch.tensor([evaluated.index(i) for i in wanted], dtype=torch.long)
        assert self._batch_of is not None, "a result built by itermask.evaluate can show its examples"
        batch = self._batch_of(wanted)
        curves = {name: {s: c.select(rows) for s, c in by.items()} for name, by in self.curves.items()}
        device = next(self._model.parameters()).device
        scores = {}
        for name, by_schedule in curves.items():
            c = next(iter(by_schedule.values()))
            scores[name] = saliency_scores(
                self._methods[name], self._model, batch.to(device), c.target.to(device), c.example_ids.to(device)
            ).cpu()
        self._views[key] = views_from_curves(
            curves,
            batch,
            self._tokenizer,
            scores,
            segments=self.evaluation.segments,
            class_names=self.class_names,
            max_tokens=max_tokens or MAX_TOKENS,
        )
        return self._views[key]

    def _repr_html_(self) -> str:
        """The notebook view: the aggregate scores, then the views of the first examples."""
        columns = ["saliency", "schedule", "n_examples"]
        frame = self.to_pandas("aggregate")
        from itermask.core.metrics import ScoreKey

        e = self.evaluation
        aggregate = "aopc" if e.steps == "fraction" and e.aopc_bins else "aopc_full"
        keys = [ScoreKey.of(m, e.quantity, aggregate) for m in ("comprehensiveness", "sufficiency")]
        keys += [ScoreKey.of("auc", e.quantity), ScoreKey.of("never_flip_rate", e.quantity)]
        wanted = [str(key) for key in keys]
        wanted += [f"{k}_minus_random" for k in wanted[:2]]
        table = frame[[c for c in columns + wanted if c in frame.columns]].to_html(index=False, float_format="%.3f")
        from itermask.views.page import render_result

        return render_result(self.warnings, table, self.views().html())


def _whole(value) -> bool:
    """Whether ``value`` is a whole number (an int, or a NumPy or torch scalar equal to one; not a bool or a
    string)."""
    try:
        return not isinstance(value, bool | str | bytes) and int(value) == value
    except (TypeError, ValueError):
        return False
