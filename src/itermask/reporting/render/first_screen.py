"""The report's first screen: what the run found in words (:func:`findings`) and one figure (:func:`forest_figure`),
a method-by-method table in readable names (:func:`method_table_html`, :func:`readable_name`), and notes on the
AOPC bins that mask no token for most examples (:func:`empty_bin_notes`). Everything here renders the aggregated
:class:`~itermask.reporting.model.Report`; nothing is recomputed from the model.
"""

from __future__ import annotations

import math
import re
import textwrap
from typing import cast

import pandas as pd

from itermask.core.metrics import QUANTITY_SUFFIXES, RACU, ScoreKey, metric_info
from itermask.formatting import number
from itermask.reporting.empty_bins import empty_bins
from itermask.reporting.model import GROUP, Report, series_rows
from itermask.reporting.render.plots import png, pyplot
from itermask.reporting.render.templates import render

__all__ = ["readable_name", "findings", "forest_figure", "method_table_html", "empty_bin_notes"]

#: readable names of the registered metrics (the key's base, without ``aopc_``/``_prob``...)
NAMES = {
    "comprehensiveness": "comprehensiveness",
    "sufficiency": "sufficiency",
    "log_odds_drop": "log-odds drop",
    "target": "target output",
    "flip_rate": "decision-flip rate",
    "accuracy": "accuracy under masking",
    "first_flip_fraction": "share masked at the first decision flip",
    "first_flip_count": "tokens masked at the first decision flip",
    "never_flip_rate": "share of examples never flipped",
    "auc": "area under the target curve",
    RACU: "RACU without retraining",
}
#: the words of a score's aggregate over the steps
AGGREGATE_WORDS = {"aopc": "AOPC ", "aopc_full": "AOPC over every step, "}


def readable_name(key: str) -> str:
    """A score key in words: ``aopc_comprehensiveness_prob`` -> "AOPC comprehensiveness (probability)",
    ``aopc_full_sufficiency_logit`` -> "AOPC over every step, sufficiency (logit)", ``auc_prob`` -> "area under the
    target curve (probability)", ``accuracy_test`` -> "test accuracy"; an unknown key is returned as it is."""
    if key.startswith("accuracy_"):
        return f"{key.removeprefix('accuracy_').replace('_', ' ')} accuracy"
    parsed = ScoreKey.parse(key)
    if parsed is not None and parsed.metric in NAMES:
        quantity = f" ({parsed.quantity})" if parsed.quantity else ""
        return f"{AGGREGATE_WORDS.get(parsed.aggregate or '', '')}{NAMES[parsed.metric]}{quantity}"
    racu = next((q for q, suffix in QUANTITY_SUFFIXES.items() if key == f"{RACU}_{suffix}"), None)
    return f"{NAMES[RACU]} ({racu})" if racu is not None else key


def _label(row) -> str:
    return f"{row['saliency']} ({row['model']}, {row['dataset']}, {row['masking']}), {row['schedule']}"


def _verdict(row, pct: int) -> str:
    """What the interval of method − random says, in the score's faithful direction."""
    lo, hi, flag = row["ci_low"], row["ci_high"], row["higher_is_more_faithful"]
    if not (isinstance(lo, float) and isinstance(hi, float)) or math.isnan(lo) or math.isnan(hi):
        return "too few seeds for an interval"
    if flag is None or (isinstance(flag, float) and math.isnan(flag)):
        return f"{pct} % CI [{number(lo)}, {number(hi)}]"
    better = lo > 0 if flag else hi < 0
    worse = hi < 0 if flag else lo > 0
    if better:
        return f"more faithful than random (the {pct} % CI excludes 0)"
    if worse:
        return f"less faithful than random (the {pct} % CI excludes 0)"
    return f"not distinguishable from random (the {pct} % CI contains 0)"


def _model_warnings(report: Report) -> list[str]:
    """The verdict box's first sentences: each group with a seed whose classifier learnt nothing
    (:func:`~itermask.analyses.model_check.model_check_line` of its stored result), once per group."""
    from itermask.analyses.model_check import model_check_line

    out = []
    for label, members in report.groups.items():
        bad = [(run.seed, line) for run in members if (line := model_check_line(run.result)) is not None]
        if bad:
            seeds = ", ".join(str(seed) for seed, _ in bad)
            out.append(f"{' / '.join(label)}, seed(s) {seeds}: {bad[0][1]}.")
    return out


def findings(report: Report) -> list[str]:
    """One sentence per headline score (group x schedule x score of ``report.headline``), e.g. "gradient
    (minilm, rt_snippets, mask_token), one_shot: AOPC comprehensiveness (probability) 0.094, 0.041 above
    random [0.020, 0.062] over 3 seeds: more faithful than random (...); better than random in 3 of 3 seeds.".
    First, for each group with a classifier that learnt nothing, the warning (:func:`_model_warnings`)."""
    frame = report.headline
    out = _model_warnings(report)
    if frame.empty:
        return out
    pct = report.percent
    for row in series_rows(frame):
        difference = row["difference"]
        if isinstance(difference, float) and math.isnan(difference):
            out.append(f"{_label(row)}: {readable_name(row['score'])} {number(row['mean'])} (no random baseline).")
            continue
        side = "above" if difference >= 0 else "below"
        seeds = int(row["n_seeds"])
        better = (
            f"; better than random in {int(row['n_better'])} of {seeds} seed(s)" if pd.notna(row["n_better"]) else ""
        )
        out.append(
            f"{_label(row)}: {readable_name(row['score'])} {number(row['mean'])}, {number(abs(difference))} "
            f"{side} random [{pct} % CI of the difference {number(row['ci_low'])}, {number(row['ci_high'])}] "
            f"over {seeds} seed(s): {_verdict(row, pct)}{better}."
        )
    return out


def _forest_label(label: str, width: int = 52) -> str:
    """A forest-plot row label that fits its margin: a group's override keys shortened to the part that names
    them (``train.masking_augmentation.enabled=True`` -> ``masking_augmentation=True``), wrapped at ``width``."""

    def short(match: re.Match) -> str:
        parts = [p for p in match.group(1).split(".") if p != "enabled"]
        return f"{parts[-1]}={match.group(2)}"

    label = re.sub(r"([A-Za-z_][\w.]*)=([^,\]]+)", short, label)
    return "\n".join(textwrap.wrap(label, width, break_long_words=False, break_on_hyphens=False)) or label


def forest_figure(report: Report) -> bytes | None:
    """A PNG forest plot of method − random (mean over seeds, confidence-interval bars) for every group and schedule,
    one panel per headline score, the faithful direction written under each panel; ``None`` without headline rows."""
    frame = report.headline
    if frame.empty:
        return None
    plt = pyplot()
    scores = list(dict.fromkeys(frame["score"]))
    rows = max(len(frame[frame.score == s]) for s in scores)
    labels = {
        score: [
            _forest_label(f"{r['saliency']} · {r['model']} · {r['schedule']}")
            for r in series_rows(cast(pd.DataFrame, frame[frame["score"] == score]))
        ]
        for score in scores
    }
    lines = max((len(line) for ls in labels.values() for label in ls for line in label.split("\n")), default=0)
    margin = min(0.3 + 0.062 * lines, 4.5)  # inches for the tick labels, left of each panel (fontsize 8)
    height = 0.9 + 0.42 * rows * max((label.count("\n") + 1 for ls in labels.values() for label in ls), default=1)
    fig, axes = plt.subplots(1, len(scores), figsize=((4.2 + margin) * len(scores), height), squeeze=False)
    pct = report.percent
    for ax, score in zip(axes[0], scores):
        sub = cast(pd.DataFrame, frame[frame["score"] == score]).reset_index(drop=True)
        y = list(range(len(sub)))[::-1]
        for i, row in zip(y, series_rows(sub)):
            mean, lo, hi = row["difference"], row["ci_low"], row["ci_high"]
            if pd.isna(mean):
                continue
            flag = row["higher_is_more_faithful"]
            colour = "#1f5fbf"
            if pd.notna(lo) and pd.notna(hi) and flag in (True, False):
                better = lo > 0 if flag else hi < 0
                worse = hi < 0 if flag else lo > 0
                colour = "#1a8a3a" if better else "#c0392b" if worse else "#666666"
            if pd.notna(lo) and pd.notna(hi):
                ax.plot([lo, hi], [i, i], color=colour, linewidth=2.2, solid_capstyle="butt")
            ax.plot([mean], [i], "o", color=colour, markersize=6)
        ax.axvline(0.0, color="#333", linewidth=0.9, linestyle="--")
        ax.set_yticks(y)
        ax.set_yticklabels(labels[score], fontsize=8)
        info = metric_info(score)
        faithful = None if info is None else info.higher_is_more_faithful
        direction = "" if faithful is None else f"{'right' if faithful else 'left'} of 0 = more faithful"
        ax.set_title(f"{readable_name(score)}\nmethod − random ({direction})", fontsize=9)
        ax.set_xlabel(f"difference, {info.unit if info else ''} (dot: mean over seeds; bar: {pct} % CI)", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
        ax.set_ylim(-0.7, len(sub) - 0.3)
    return png(fig)


def empty_bin_notes(report: Report) -> dict[tuple, list[str]]:
    """``{(group label, score key): [note]}``: a sentence per empty bin (:func:`empty_bins`) of a headline
    score, to place next to that AOPC score, e.g. "the 1 % bin masks 0 tokens in 98 of 100 examples (short
    texts), so it acts as a second k = 0 term: AOPC 0.0935 with it, 0.1170 without it"."""
    notes: dict[tuple, list[str]] = {}
    shown = set(report.headline["score"]) if not report.headline.empty else set()
    for e in empty_bins(report):
        if e.score not in shown:  # only next to the scores the first screen shows
            continue
        notes.setdefault((e.label, e.score), []).append(
            f"the {e.bin * 100:g} % AOPC bin masks 0 tokens in {e.n_empty} of {e.n_examples} examples (texts too "
            f"short for it), so it acts as a second k = 0 term: {readable_name(e.score)} "
            f"{e.with_bin:.4f} with it, {e.without_bin:.4f} without it (one-shot schedule, mean over seeds)"
        )
    return notes


def method_table_html(report: Report, notes: dict[tuple, list[str]] | None = None) -> str:
    """A method-by-method HTML table of the headline scores: one row per group and schedule, one column
    per score in readable names (the metric key in the header's tooltip and in a footnote): the method's
    mean over seeds and its difference to random with the interval; ``notes`` (:func:`empty_bin_notes`)
    are shown next to the score they concern, marked with a dagger."""
    frame = report.headline
    if frame.empty:
        return ""
    notes = notes or {}
    scores = list(dict.fromkeys(frame["score"]))
    rows, marks = [], {}
    for keys, sub in frame.groupby([*GROUP, "schedule"], sort=False):
        key = cast(tuple, keys)  # grouped by a list of columns: a tuple
        label, schedule = key[: len(GROUP)], key[-1]
        cells = []
        for score in scores:
            row = sub[sub.score == score]
            if row.empty:
                cells.append(None)
                continue
            r = row.iloc[0]
            for note in notes.get((label, score), []):
                marks.setdefault(note, "†" * (len(marks) + 1))
            cells.append({"mean": number(r["mean"]), "difference": number(r["difference"]),
                          "low": number(r["ci_low"]), "high": number(r["ci_high"]),
                          "notes": [{"note": n, "mark": marks[n]} for n in notes.get((label, score), [])]})  # fmt: skip
        where = " · ".join(str(label[i]) for i in (0, 1, 3))
        rows.append({"method": label[2], "where": where, "schedule": str(schedule), "cells": cells})
    return render(
        "method_table.html.j2",
        scores=[{"key": s, "name": readable_name(s)} for s in scores],
        rows=rows,
        pct=report.percent,
        marks=[{"note": n, "mark": m} for n, m in marks.items()],
    )
