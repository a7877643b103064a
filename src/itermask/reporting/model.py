"""The report's model: what one result file gives the report (its *measures*, :func:`result_measures`, and
per-step *curves*, :func:`result_curves`) and the aggregated :class:`Report`. A run's *group* is its (model,
dataset, saliency, masking): the runs of a group differ only in the seed. Reading results needs no torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from itermask.analyses.base import analysis_classes

if TYPE_CHECKING:
    from itermask.reporting.sweep import Run, Sweep

__all__ = [
    "GROUP",
    "MEASURE",
    "ACCURACY",
    "TABLES",
    "Report",
    "result_measures",
    "result_curves",
    "measure_order",
    "of_group",
    "of_measure",
    "records",
    "series_rows",
]

#: a group's label: the runs of one group differ only in the seed
GROUP = ("model", "dataset", "saliency", "masking")
#: a measure's key within a group
MEASURE = ("explanation", "schedule", "score")
ACCURACY = ("test", "validation")
#: the report's tables (:class:`Report` fields), written as CSV under ``report_files/`` and logged to W&B
TABLES = ("summary", "per_seed", "comparisons", "headline", "seed_sensitivity", "rank_stability", "attack_links")


def result_measures(result: dict) -> dict[tuple[str, str, str], float]:
    """Scalar measures of one result: accuracies, per-method scores, differences to random, and the rows each
    analysis section of ``result`` adds (:meth:`itermask.analyses.Analysis.report_measures` of the analyses of
    :func:`itermask.analyses.analysis_classes` whose section the result holds); ``None`` values as NaN."""
    out = {}
    for name in ACCURACY:
        value = result["accuracy"].get(name)
        out[("model", "", f"accuracy_{name}")] = math.nan if value is None else float(value)
    for method, by_schedule in result["scores"].items():
        for schedule, summary in by_schedule.items():
            for key, value in summary.items():
                if key == "n_examples" or isinstance(value, (bool, str, list, dict)):
                    continue
                out[(method, schedule, key)] = math.nan if value is None else float(value)
    main = result["saliency"]["name"] if isinstance(result["saliency"], dict) else str(result["saliency"])
    for schedule, deltas in (result.get("relative_to_random") or {}).items():
        for key, value in deltas.items():
            out[(f"{main} - random", schedule, key)] = math.nan if value is None else float(value)
    for analysis in analysis_classes(result):
        if analysis.name in result:
            out.update(analysis.report_measures(result))
    return out


def measure_order(label: tuple, key: tuple[str, str, str]):
    """The sort key of a measure in the tables of group ``label``: the model's, the method's, the other
    explanations', then the differences to random."""
    explanation, schedule, score = key
    saliency = label[2]
    rank = (
        0 if explanation == "model" else 1 if explanation == saliency else 3 if explanation.endswith(" - random") else 2
    )
    return (rank, explanation, schedule, score)


def result_curves(result: dict) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per (explanation, schedule): ``fraction`` and every per-step series of the summary."""
    out = {}
    for method, by_schedule in result["scores"].items():
        for schedule, summary in by_schedule.items():
            if "fraction" in summary:
                out[(method, schedule)] = {k: v for k, v in summary.items() if isinstance(v, list)}
    return out


def of_group(frame: pd.DataFrame, label: tuple) -> pd.DataFrame:
    """The rows of ``frame`` of the group ``label`` (its :data:`GROUP` columns)."""
    if frame.empty:
        return frame
    return cast(pd.DataFrame, frame[(frame[list(GROUP)] == pd.Series(dict(zip(GROUP, label)))).all(axis=1)])


def of_measure(frame: pd.DataFrame, explanation: str, schedule: str, score: str) -> pd.DataFrame:
    """The rows of ``frame`` of the measure ``(explanation, schedule, score)`` (its :data:`MEASURE` columns)."""
    same = (frame.explanation == explanation) & (frame.schedule == schedule) & (frame.score == score)
    return cast(pd.DataFrame, frame[same])


def records(frame: pd.DataFrame) -> Iterable[Any]:
    """``frame.itertuples()``, typed ``Any``: the named tuples' fields are the frame's columns, which pandas'
    stubs cannot know."""
    return frame.itertuples()


def series_rows(frame: pd.DataFrame) -> Iterator[Any]:
    """``frame``'s rows as :class:`pandas.Series` (``frame.iterrows()`` without the index), typed ``Any``: a
    row's cells have the types of the frame's columns, which pandas' stubs cannot know."""
    return (row for _, row in frame.iterrows())


@dataclass
class Report:
    """Aggregated tables of one multirun folder (pandas DataFrames in long format).

    ``summary``: one row per group x measure: ``model, dataset, saliency, masking, explanation, schedule,
    score, n, mean, std, ci_low, ci_high``. ``per_seed``: ``... , seed, job, value``.
    ``comparisons``: ``dataset, saliency, masking, model_a, model_b, explanation, schedule, score, n_a, n_b,
    mean_a, mean_b, difference, ci_low, ci_high, statistic, p_value, difference_in_seed_sd``.
    ``seed_sensitivity``, ``headline``, ``rank_stability``: see :mod:`itermask.reporting.headline`.
    ``attack_links``: across saliency methods, the rank correlation of faithfulness and attack efficiency
    (:func:`~itermask.reporting.attack_link.faithfulness_vs_attack`; empty without attacks).
    ``notes``: warnings the report shows at its top (few seeds, missing per-example files).
    """

    sweep: Sweep
    groups: dict[tuple, list[Run]]
    summary: pd.DataFrame
    per_seed: pd.DataFrame
    comparisons: pd.DataFrame
    settings: dict
    seed_sensitivity: pd.DataFrame = field(default_factory=pd.DataFrame)
    headline: pd.DataFrame = field(default_factory=pd.DataFrame)
    rank_stability: pd.DataFrame = field(default_factory=pd.DataFrame)
    attack_links: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)

    @property
    def percent(self) -> int:
        """The intervals' confidence level in percent, rounded (95)."""
        return int(round(self.settings["confidence"] * 100))
