"""The ``per_example`` analysis: every job's per-example values as Parquet tables in its folder
(:mod:`itermask.storage.per_example`), so scores can be resampled over examples, paired between methods or
models on the same examples, and inspected example by example."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

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
from itermask.core import measures, metrics
from itermask.core.evaluation_settings import QUANTITIES
from itermask.storage.per_example import FOLDER, PerExample, load_per_example, write_per_example

if TYPE_CHECKING:
    from itermask.core.curves import MaskingCurves
    from itermask.core.evaluation_settings import Quantity

__all__ = ["PerExampleAnalysis", "step_frame", "score_frame", "token_frame", "examples_table", "EXAMPLES_TABLE"]

#: the tracker's table of the examples: one row per example with its per-example view (W&B: ``wandb.Html``)
EXAMPLES_TABLE = "examples"


def _per_example_values(curves: MaskingCurves, quantity: Quantity, bins) -> tuple[dict, dict]:
    """``(per-step values [B, S], scalar values [B])`` by key: every registered metric's per-example value,
    without the grid descriptors and the target curve (given as ``target_prob``/``target_logit``)."""
    skip = {str(metrics.ScoreKey.of("target", quantity))}
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
        }
    )
    for q in QUANTITIES:  # the target curve in both quantities
        target = measures.target_output(curves.logits, curves.target, q)
        frame[str(metrics.ScoreKey.of("target", q))] = target.reshape(-1).cpu().numpy()
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
            "clean_prob": measures.target_output(curves.clean_logits, curves.target, "probability").cpu().numpy(),
        }
    )
    for key, values in scalar.items():
        frame[key] = values
    # the clean input's saliency diagnostics (itermask.core.saliency.Attribution), where recorded
    for column in ("saliency_zero", "completeness_gap", "output_difference"):
        if (values := getattr(curves, column)) is not None:
            frame[column] = values.detach().cpu().numpy()
    return frame


def token_frame(curves: Mapping[str, Mapping[str, MaskingCurves]], method: str, tokenizer) -> pd.DataFrame | None:
    """One row per (example, token of the clean input) with every explanation's scores, ranks and masked
    steps as columns (:mod:`itermask.storage.per_example`), or ``None`` when the curves do not record their
    tokens. Tokens are stored once, and the one-shot schedule's masked steps not at all (they follow from
    ``rank`` and the step's ``k``), to keep the file small. Curves of word features (their ``word_ids``) give
    one row per word instead (:func:`_words`).

    Args:
        curves: ``{explanation: {schedule: MaskingCurves}}`` over the same examples in the same order.
        method: the method under study: its columns are ``explained_*``, the baseline's ``random_*``
            (:func:`itermask.tracking.role`).

    Raises:
        ValueError: if the explanations' curves are over different examples.
    """
    from itermask.tracking import role

    first = next(iter(curves[method].values()))
    if first.token_ids is None or first.scores is None or first.rank is None:
        return None
    ids = first.token_ids.cpu()
    real = ids >= 0  # [B, L], padding dropped; real tokens come first in each row (right padding)
    rows = real.nonzero(as_tuple=True)[0]
    flat_ids = ids[real].tolist()
    frame = pd.DataFrame(
        {
            "example_id": first.example_ids.cpu()[rows].numpy().astype(np.int64),
            "token_id": np.asarray(flat_ids, dtype=np.int32),
            "token": tokenizer.convert_ids_to_tokens(flat_ids),
        }
    )
    segments = first.token_segments
    if segments is not None and bool((segments == 1).any()):  # sentence pairs keep their segment per token
        frame["segment"] = segments.cpu()[real].numpy().astype(np.int8)
    for name, by_schedule in curves.items():
        prefix = role(name, method)
        one = next(iter(by_schedule.values()))
        if one.scores is None or one.rank is None or not one.example_ids.cpu().equal(first.example_ids.cpu()):
            raise ValueError(f"the curves of {name!r} are not over the examples of {method!r}, or record no tokens")
        frame[f"{prefix}_score"] = one.scores.cpu()[real].numpy().astype(np.float32)
        frame[f"{prefix}_rank"] = one.rank.cpu()[real].numpy().astype(np.int16)
        for schedule, c in by_schedule.items():
            if schedule != "one_shot" and c.masked_step is not None:
                dtype = np.int8 if c.k.shape[1] < 127 else np.int16
                frame[f"{prefix}_masked_step_{schedule}"] = c.masked_step.cpu()[real].numpy().astype(dtype)
    return frame if first.word_ids is None else _words(frame, first.word_ids.cpu()[real].numpy(), tokenizer)


def _words(frame: pd.DataFrame, word_ids: np.ndarray, tokenizer) -> pd.DataFrame:
    """``frame`` (one row per token, :func:`token_frame`) with one row per word instead: a word's pieces (adjacent
    tokens of one ``word_ids`` entry >= 0; special tokens stay rows of their own) joined into its text
    (``tokenizer.convert_tokens_to_string``), the first piece's id, and a ``word_id`` column; the other columns
    are equal across a word's pieces (its summed score, rank and masked step)."""
    examples = frame["example_id"].to_numpy()
    starts = np.r_[True, (word_ids[1:] != word_ids[:-1]) | (word_ids[1:] < 0) | (examples[1:] != examples[:-1])]
    unit = np.cumsum(starts) - 1
    pieces = frame["token"].groupby(unit).agg(list).tolist()
    words = cast(pd.DataFrame, frame[starts]).reset_index(drop=True)
    words["token"] = [
        p[0] if w < 0 else tokenizer.convert_tokens_to_string(p).strip() for p, w in zip(pieces, word_ids[starts])
    ]
    words.insert(1, "word_id", word_ids[starts].astype(np.int32))
    return words


def _table(frame: pd.DataFrame) -> tuple[list[str], list[list]]:
    """``(columns, rows)`` of ``frame`` for the tracker, NaN as ``None``."""
    table = frame.astype(object).where(frame.notna(), None)
    return list(table.columns), table.values.tolist()


def examples_table(tables: PerExample, method: str | None, steps: str = "fraction") -> tuple[list[str], list[list]]:
    """The examples as one tracker table: a row per example with ``example_id``, ``text`` (and
    ``text_pair``), ``label``, ``prediction`` (class names where known), ``target_prob`` on the clean input,
    every per-example score of every (explanation, schedule) as ``<role>/<schedule>/<score>`` (``<role>``:
    ``explained`` for ``method``, ``random`` for the baseline; :func:`itermask.tracking.role`), so the
    tracker's filters and sorting work on them, and ``view``: the example's per-example view
    (:func:`itermask.views.render_example`, an :class:`itermask.views.Html` cell: W&B shows it as HTML; left out
    when ``tables`` have no ``tokens``). Returns ``(columns, rows)``, NaN as ``None``.
    """
    from itermask.tracking import role
    from itermask.views import Html, views_from_tables

    scores = tables.scores
    keys = [c for c in scores.columns if metrics.metric_info(c) is not None]
    wide = scores.assign(explanation=[role(str(s), method) for s in scores["saliency"]]).pivot_table(
        index="example_id", columns=["explanation", "schedule"], values=keys, aggfunc="first", dropna=False
    )
    wide.columns = [f"{e}/{s}/{k}" for k, e, s in wide.columns]
    wide = wide[[c for c in wide.columns if bool(wide[c].notna().any())]]
    of_first = cast(pd.DataFrame, scores[scores["saliency"] == scores["saliency"].iloc[0]])
    first = of_first.drop_duplicates(subset=["example_id"]).set_index("example_id")
    examples = tables.examples.set_index("example_id")
    names = {
        int(label): name
        for label, name in zip(tables.examples["label"], tables.examples["label_name"])
        if isinstance(name, str)
    }
    frame = pd.DataFrame(index=examples.index)
    frame["text"] = examples["text"]
    if "text_pair" in examples:
        frame["text_pair"] = examples["text_pair"]
    frame["label"] = [names.get(int(v), str(v)) if int(v) >= 0 else None for v in examples["label"]]
    if "prediction" in first:
        frame["prediction"] = [names.get(int(v), str(v)) for v in first["prediction"].reindex(frame.index)]
        frame["target_prob"] = first["clean_prob"].reindex(frame.index)
    frame = frame.join(wide)
    columns, rows = _table(frame.reset_index())
    if tables.tokens is not None:  # added after _table, which would turn the Html cells into plain strings
        views = views_from_tables(tables, list(frame.index), steps=steps, method=method)
        columns.append("view")
        rows = [[*row, Html(view._repr_html_())] for row, view in zip(rows, views)]
    return columns, rows


def _tracker_tables(tables: PerExample, method: str | None, steps: str) -> dict[str, tuple[list[str], list[list]]]:
    """The tracker's scores table and examples table (:func:`examples_table`)."""
    return {"per_example_scores": _table(tables.scores), EXAMPLES_TABLE: examples_table(tables, method, steps)}


class PerExampleAnalysis(Analysis):
    """Writes ``per_example/steps.parquet``, ``scores.parquet``, ``examples.parquet`` (texts once per
    example) and ``tokens.parquet`` (tokens, saliency, ranks and masked steps) into the job folder, logs the
    scores table and the examples table (:func:`examples_table`) to the tracker, and records the files' rows and
    size under ``per_example`` in the result. The files are kept with the result in the results store."""

    name = "per_example"

    def run(self, inputs: AnalysisInputs, context: EvaluationContext, curves: EvaluatedCurves) -> AnalysisOutput:
        e = inputs.evaluation
        parts = [(method, c) for method, by_schedule in curves.items() for c in by_schedule.values()]
        steps = pd.concat([step_frame(m, c, e.quantity, e.aopc_bins) for m, c in parts], ignore_index=True)
        scores = pd.concat([score_frame(m, c, e.quantity, e.aopc_bins) for m, c in parts], ignore_index=True)
        examples = self._examples(context, e.split, sorted(set(scores["example_id"].tolist())))
        tables = {"steps": steps, "scores": scores, "examples": examples}
        tokens = token_frame(curves.curves, curves.method, inputs.tokenizer)
        if tokens is not None:
            tables["tokens"] = tokens
        written = write_per_example(inputs.folder, tables)
        section = {
            "folder": FOLDER,
            "rows": {name: len(frame) for name, frame in tables.items()},
            "bytes": sum(path.stat().st_size for path in written.values()),
        }
        stored = PerExample(**tables)  # pyright: ignore[reportArgumentType] (the tables by name)
        artifacts = Artifacts(tables=_tracker_tables(stored, inputs.method, e.steps), files=written)
        return AnalysisOutput({"per_example": section}, artifacts)

    def artifacts_from(self, result: dict, output_dir) -> Artifacts:
        """The scores and examples tables for the tracker, read back from the restored per-example files."""
        try:
            stored = load_per_example(output_dir)
        except FileNotFoundError:
            return Artifacts()
        from itermask.tracking import explained_method

        steps = ((result.get("config") or {}).get("evaluation") or {}).get("steps", "fraction")
        return Artifacts(tables=_tracker_tables(stored, explained_method(result), steps))

    @staticmethod
    def _examples(context: EvaluationContext, split: str, example_ids: list[int]) -> pd.DataFrame:
        """The evaluated examples' texts and gold labels (of ``split``), one row each."""
        data = context.data.splits[split]
        position = {example_id: row for row, example_id in enumerate(data["example_id"])}
        rows = data.select([position[example_id] for example_id in example_ids])
        frame = pd.DataFrame({"example_id": rows["example_id"], "split": split, "text": rows["text"]})
        if "text_pair" in rows.column_names:
            frame["text_pair"] = rows["text_pair"]
        names = context.data.label_names
        frame["label"] = rows["label"]
        frame["label_name"] = [names[label] if 0 <= label < len(names) else None for label in rows["label"]]
        return frame
