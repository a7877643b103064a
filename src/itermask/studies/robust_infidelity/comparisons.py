"""The comparisons the three claims share. A *group* is the runs with one value of a column of the run table (a
model, or a fine-tuning variant)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from itermask.reporting.model import records
from itermask.reporting.statistics import compare_samples
from itermask.studies.robust_infidelity.runs import select
from itermask.studies.robust_infidelity.statistics import holm, tost_welch

__all__ = ["accuracy_rows", "differences", "with_holm", "few_seeds"]


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
