"""The ``per_example`` analysis: every job's per-example values as Parquet tables in its folder
(:mod:`itermask.storage.per_example`), so scores can be resampled over examples, paired between methods or
models on the same examples, and inspected example by example."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from itermask.analyses.base import (
    Analysis,
    AnalysisInputs,
    AnalysisOutput,
    Artifacts,
    EvaluatedCurves,
    EvaluationContext,
)
from itermask.core import metrics
from itermask.storage.per_example import FOLDER, write_per_example

if TYPE_CHECKING:
    from itermask.core.evaluation import MaskingCurves
    from itermask.core.metrics import Quantity

__all__ = ["PerExampleAnalysis", "step_frame", "score_frame", "token_frame"]


def _per_example_values(curves: MaskingCurves, quantity: Quantity, bins) -> tuple[dict, dict]:
    """``(per-step values [B, S], scalar values [B])`` by key: every registered metric's per-example value,
    without the grid descriptors and the target curve (given as ``target_prob``/``target_logit``)."""
    skip = {metrics.METRICS["target"].key(quantity)}
    per_step, scalar = {}, {}
    for key, values in metrics.per_example(curves, quantity, bins).items():
        info = metrics.metric_info(key, quantity)
        if key in skip or (info is not None and info.per_step and info.higher_is_more_faithful is None):
            continue
        (per_step if values.dim() == 2 else scalar)[key] = values.detach().cpu().numpy()
    return per_step, scalar


def step_frame(method: str, curves: MaskingCurves, quantity: Quantity, bins) -> pd.DataFrame:
    """One row per (example, step) of one method's and schedule's curves (see
    :mod:`itermask.storage.per_example` for the columns)."""
    size, steps = curves.k.shape
    per_step, _ = _per_example_values(curves, quantity, bins)
    repeat = lambda t: np.repeat(t.detach().cpu().numpy(), steps)  # noqa: E731
    frame = pd.DataFrame(
        {
            "saliency": method,
            "schedule": curves.schedule,
            "example_id": repeat(curves.example_ids),
            "label": repeat(curves.labels),
            "target": repeat(curves.target),
            "n_maskable": repeat(curves.n_maskable),
            "step": np.tile(np.arange(steps), size),
            "x": np.tile(curves.grid.numpy(), size),
            "k": curves.k.reshape(-1).cpu().numpy(),
            "target_prob": metrics.target_output(curves.logits, curves.target, "probability").reshape(-1).cpu().numpy(),
            "target_logit": metrics.target_output(curves.logits, curves.target, "logit").reshape(-1).cpu().numpy(),
        }
    )
    for key, values in per_step.items():
        frame[key] = values.reshape(-1)
    return frame


def score_frame(method: str, curves: MaskingCurves, quantity: Quantity, bins) -> pd.DataFrame:
    """One row per example of one method's and schedule's curves with its scalar scores."""
    _, scalar = _per_example_values(curves, quantity, bins)
    frame = pd.DataFrame(
        {
            "saliency": method,
            "schedule": curves.schedule,
            "example_id": curves.example_ids.cpu().numpy(),
            "prediction": curves.clean_logits.argmax(dim=-1).cpu().numpy(),
            "clean_prob": metrics.target_output(curves.clean_logits, curves.target, "probability").cpu().numpy(),
        }
    )
    for key, values in scalar.items():
        frame[key] = values
    # the clean input's saliency diagnostics (itermask.core.saliency.Attribution), where recorded
    for column in ("saliency_zero", "completeness_gap", "output_difference"):
        if (values := getattr(curves, column)) is not None:
            frame[column] = values.detach().cpu().numpy()
    return frame


def token_frame(method: str, by_schedule: Mapping[str, MaskingCurves], tokenizer) -> pd.DataFrame | None:
    """One row per (example, token) of one method's curves: what a per-example view needs besides the
    per-step probabilities (:mod:`itermask.storage.per_example` for the columns).

    Args:
        method: the saliency method's name.
        by_schedule: ``{schedule: MaskingCurves}`` of the method (the clean input's tokens, scores and ranks
            are shared by every schedule; each schedule adds its ``masked_step_<schedule>`` column).
        tokenizer: the job's tokenizer (``convert_ids_to_tokens``).

    Returns:
        The frame, or ``None`` when the curves do not record their tokens.
    """
    first = next(iter(by_schedule.values()))
    if first.token_ids is None or first.scores is None or first.rank is None:
        return None
    ids = first.token_ids.cpu()
    real = ids >= 0  # [B, L], padding dropped
    rows, positions = real.nonzero(as_tuple=True)
    flat_ids = ids[real].tolist()
    frame = pd.DataFrame(
        {
            "saliency": method,
            "example_id": first.example_ids.cpu()[rows].numpy(),
            "position": positions.numpy().astype(np.int16),
            "token_id": np.asarray(flat_ids, dtype=np.int32),
            "token": tokenizer.convert_ids_to_tokens(flat_ids),
            "segment": first.token_segments.cpu()[real].numpy().astype(np.int8)
            if first.token_segments is not None
            else np.zeros(len(flat_ids), dtype=np.int8),
            "score": first.scores.cpu()[real].numpy().astype(np.float32),
            "rank": first.rank.cpu()[real].numpy().astype(np.int16),
        }
    )
    for schedule, curves in by_schedule.items():
        if curves.masked_step is not None:
            frame[f"masked_step_{schedule}"] = curves.masked_step.cpu()[real].numpy().astype(np.int16)
    return frame


def _table(frame: pd.DataFrame) -> tuple[list[str], list[list]]:
    """``(columns, rows)`` of ``frame`` for the tracker, NaN as ``None``."""
    table = frame.astype(object).where(frame.notna(), None)
    return list(table.columns), table.values.tolist()


class PerExampleAnalysis(Analysis):
    """Writes ``per_example/steps.parquet``, ``scores.parquet``, ``examples.parquet`` (texts once per
    example) and ``tokens.parquet`` (tokens, saliency, ranks and masked steps) into the job folder, logs the scores table to the tracker, and records the files' rows and
    size under ``per_example`` in the result. The files are kept with the result in the results store."""

    name = "per_example"

    def run(self, inputs: AnalysisInputs, context: EvaluationContext, curves: EvaluatedCurves) -> AnalysisOutput:
        e = inputs.evaluation
        parts = [(method, c) for method, by_schedule in curves.items() for c in by_schedule.values()]
        steps = pd.concat([step_frame(m, c, e.quantity, e.aopc_bins) for m, c in parts], ignore_index=True)
        scores = pd.concat([score_frame(m, c, e.quantity, e.aopc_bins) for m, c in parts], ignore_index=True)
        examples = self._examples(context, e.split, sorted(set(scores["example_id"].tolist())))
        tables = {"steps": steps, "scores": scores, "examples": examples}
        tokens = [token_frame(m, by_schedule, inputs.tokenizer) for m, by_schedule in curves.items()]
        if tokens and all(t is not None for t in tokens):
            tables["tokens"] = pd.concat(tokens, ignore_index=True)
        written = write_per_example(inputs.output_dir, tables)
        section = {
            "folder": FOLDER,
            "rows": {name: len(frame) for name, frame in tables.items()},
            "bytes": sum(path.stat().st_size for path in written.values()),
        }
        artifacts = Artifacts(tables={"per_example_scores": _table(scores)}, files=written)
        return AnalysisOutput({"per_example": section}, artifacts)

    def artifacts_from(self, result: dict, output_dir) -> Artifacts:
        """The scores table for the tracker, read back from the restored per-example files."""
        path = Path(output_dir) / FOLDER / "scores.parquet"
        if not path.is_file():
            return Artifacts()
        return Artifacts(tables={"per_example_scores": _table(pd.read_parquet(path))})

    @staticmethod
    def _examples(context: EvaluationContext, split: str, example_ids: list[int]) -> pd.DataFrame:
        """The evaluated examples' texts and gold labels (of ``split``), one row each."""
        data = context.data.tokenized[split]
        position = {example_id: row for row, example_id in enumerate(data["example_id"])}
        rows = data.select([position[example_id] for example_id in example_ids])
        frame = pd.DataFrame({"example_id": rows["example_id"], "split": split, "text": rows["text"]})
        if "text_pair" in rows.column_names:
            frame["text_pair"] = rows["text_pair"]
        names = context.data.label_names
        frame["label"] = rows["label"]
        frame["label_name"] = [names[label] if 0 <= label < len(names) else None for label in rows["label"]]
        return frame
