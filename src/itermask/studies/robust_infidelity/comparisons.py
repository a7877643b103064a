"""The comparisons the three claims share. A *group* is the runs with one value of a column of the run table (a
model, or a fine-tuning variant)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from itermask.reporting.model import records
from itermask.reporting.statistics import compare_samples
from itermask.studies.robust_infidelity.runs import select
from itermask.studies.robust_infidelity.statistics import holm, mixed_model_differences, tost_welch

__all__ = ["accuracy_rows", "differences", "mixed_differences", "with_holm", "few_seeds"]


def accuracy_rows(table: pd.DataFrame, pairs: list[tuple[str, str]], key: str, margin: float) -> pd.DataFrame:
    """TOST of the test accuracies of each pair (``key``: the column naming the groups)."""
    out = []
    for a, b in pairs:
        acc = [select(table, table[key] == g).drop_duplicates(["seed"]).accuracy.tolist() for g in (a, b)]
        means = {"mean_a": float(np.mean(acc[0])), "mean_b": float(np.mean(acc[1]))}
        out.append({"a": a, "b": b, **means, **tost_welch(acc[0], acc[1], margin)})
    return pd.DataFrame(out)


def differences(table: pd.DataFrame, pairs, key: str, methods, columns, confidence: float) -> pd.DataFrame:
    """Welch differences ``a - b`` over seeds of each column for each method and pair of groups."""
    out = []
    for (a, b), method, column in itertools.product(pairs, methods, columns):
        values = [select(table, (table[key] == g) & (table.method == method))[column].dropna().tolist() for g in (a, b)]
        if not values[0] or not values[1]:
            continue
        diff = compare_samples(values[0], values[1], confidence)
        out.append({"a": a, "b": b, "method": method, "measure": column, **diff})
    return pd.DataFrame(out)


def _long(series: dict[tuple[str, int], pd.Series], models) -> pd.DataFrame:
    """``score, model, seed, example`` rows of the per-example ``series`` of ``models`` (NaN dropped)."""
    parts = [
        pd.DataFrame({"score": x.to_numpy(dtype=float), "model": m, "seed": sd, "example": x.index})
        for (m, sd), x in series.items()
        if m in models
    ]
    return pd.concat(parts, ignore_index=True).dropna(subset=["score"]) if parts else pd.DataFrame()


def mixed_differences(per_example: dict[str, dict[tuple[str, int], pd.Series]], pairs, confidence: float):
    """Mixed-model differences ``a - b`` (:func:`~itermask.studies.robust_infidelity.statistics.
    mixed_model_differences`, one fit per method and measure) of each method's per-example score
    (``measure`` ``score``) and of its per-example score minus the random explanation's on the same example of
    the same run (``minus_random``), from every example of every seed; ``per_example``: ``{method: {(model,
    seed): per-example scores}}``. A pair without per-example scores of both models gets a row saying so."""
    models = sorted({g for pair in pairs for g in pair})
    random = per_example.get("random", {})
    out = []
    for method, series in per_example.items():
        minus = {k: x - random[k].reindex(x.index) for k, x in series.items() if k in random}
        for measure, values in (("score", series), ("minus_random", minus)):
            if measure == "minus_random" and method == "random":
                continue
            long = _long(values, models)
            have = set(long["model"]) if len(long) else set()
            fit = [p for p in pairs if set(p) <= have]
            rows = (
                mixed_model_differences(long.score, long.model, long.seed, long.example, fit, confidence) if fit else []
            )
            rows += [
                {"a": a, "b": b, "reason": f"no per-example {measure} of {a} and {b}"}
                for a, b in pairs
                if (a, b) not in fit
            ]
            out += [{"method": method, "measure": measure, **r} for r in rows]
    return pd.DataFrame(out).rename(columns={"estimate": "difference"})


def with_holm(diffs: pd.DataFrame, accuracy: pd.DataFrame) -> pd.DataFrame:
    """``diffs`` with ``p_holm``: Holm-adjusted p-values over the comparisons of models whose test accuracies
    are equivalent (the family the verdict reads); NaN for the other pairs."""
    diffs = diffs.copy()
    if diffs.empty:
        diffs["p_holm"] = pd.Series(dtype=float)
        return diffs
    equivalent = {(r.a, r.b) for r in records(accuracy) if r.equivalent} if not accuracy.empty else set()
    tested = np.array([(a, b) in equivalent for a, b in zip(diffs["a"], diffs["b"])])
    p_holm = np.full(len(diffs), np.nan)
    if tested.any():
        p_holm[tested] = holm(diffs.loc[tested, "p_value"].to_numpy(dtype=float))
    diffs["p_holm"] = p_holm
    return diffs


def few_seeds(table: pd.DataFrame, *variants: str) -> str | None:
    """Why intervals over seeds cannot be computed (a model and variant with fewer than 2 seeds), or ``None``."""
    sub = select(table, table.variant.isin(variants))
    counts = sub.groupby(["model", "variant"]).seed.nunique()
    if len(counts) and counts.min() >= 2:
        return None
    if not len(counts):
        return f"no {' or '.join(variants)} runs"
    (model, kind), n = counts.idxmin(), int(counts.min())
    return f"{model} ({kind} fine-tuning) has {n} seed(s); the intervals need at least 2"
