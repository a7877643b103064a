"""The report's "Which measure to trust" section: the question the paper leaves open (how should sensitivity
to iterative masking be read?) answered per faithfulness measure, on the same models, seeds and examples.

For every measure of :data:`MEASURES` that the runs hold (a per-example column of ``per_example/scores.parquet``;
the decision-flip fraction from ``per_example/steps.parquet``, the mean of ``flip_rate`` over the grid's steps as
the sanity benchmark computes it), over the standard fine-tuning runs of the section's models:

- **between-model share** (claim 1): the model component of the nested ANOVA variance components (models x seeds
  within model x examples, :func:`~itermask.studies.robust_infidelity.statistics.nested_components`), the mean
  over the saliency methods; and the **largest between-model difference at equivalent accuracy**: the largest
  ``|a - b|`` of the mixed-model differences (:func:`~itermask.studies.robust_infidelity.comparisons.
  mixed_differences`) over the methods and the pairs of models whose test accuracies are equivalent within
  ``accuracy_margin`` (TOST), in the measure's unit and in standard deviations of its per-example values, with
  its Holm-adjusted p-value over that family;
- **seed share**: the seed-within-model component (with one model: the seed component of
  :func:`~itermask.reporting.seeds.seed_share`), the mean over the methods;
- **OOD AUROC of its inputs** (claim 2): the mean Mahalanobis AUROC (final layer) of the masked inputs over the
  grid's steps strictly between 0 and 1 of the methods' runs (the comprehensiveness direction: the sufficiency
  direction keeps the complementary shares). The soft measures feed the model embeddings with dropped
  dimensions: their AUROC is that of their own inputs, every draw (``ood.soft_inputs``,
  :func:`itermask.analyses.ood.soft_input_aurocs`), the mean over the methods' runs; F-Fidelity feeds a second,
  removal-fine-tuned classifier, and its AUROC is that of its sampled FFid+ (FFid-) inputs on that copy, by a
  detector fitted on the copy's own training embeddings (``ffidelity.ood_fit_examples``); "not measured" where
  the runs hold none;
- **sanity rho**: each run's Spearman rho of the measure with the degradation level
  (:mod:`itermask.analyses.sanity`), the mean over runs, and in how many runs its bootstrap interval is on the
  expected side of 0;
- **Kendall's W** of the methods' mean scores with every (model, seed) run as a rater
  (:func:`~itermask.studies.robust_infidelity.statistics.kendall_w`): do models and seeds rank the methods alike?

One sentence per measure is generated from these numbers (:func:`sentence`). Settings:
``hydra.callbacks.report.trust`` (:class:`TrustSettings`), whose ``_target_`` names :class:`MeasureTrust`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from itermask.formatting import md_table, number
from itermask.reporting.seeds import seed_share
from itermask.studies.robust_infidelity.comparisons import accuracy_rows, mixed_differences, with_holm
from itermask.studies.robust_infidelity.runs import method_of, select, value, variant
from itermask.studies.robust_infidelity.settings import OOD_STATISTIC, STANDARD, known_keys
from itermask.studies.robust_infidelity.statistics import kendall_w, nested_components

if TYPE_CHECKING:
    from itermask.reporting.model import Report
    from itermask.reporting.sweep import Run

__all__ = ["MeasureTrust", "TrustSettings", "Measure", "MEASURES", "trust_table", "sentence"]

#: the decision-flip fraction's column (as :mod:`itermask.analyses.sanity` names it)
FLIP = "decision_flip_fraction"
#: Kendall's W at or above which models and seeds "rank the methods alike", and below which "not alike"
W_ALIKE, W_UNLIKE = 0.7, 0.4
#: the OOD AUROC at or above which a measure's inputs read as out of distribution, and at or below which as close
AUROC_OOD, AUROC_CLOSE = 0.7, 0.6
#: the share of runs whose sanity interval must be on the expected side for "ranks the known order"
SANITY_RUNS = 0.8
#: the model share of variance at or above which a measure "varies with the model" (not "holds up")
MODEL_SHARE = 0.5
#: each verdict as the sentence words it
VERDICTS = {
    "holds up": "holds up",
    "mixed": "gives a mixed picture",
    "does not hold up": "does not hold up",
    "not judged": "is not judged (no sanity benchmark in these runs: sanity=on)",
}


@dataclass(frozen=True)
class Measure:
    """One faithfulness measure of the table: its readable ``name``, its per-example ``column``, whether a
    higher value is more faithful, and what its inputs are (``masked``, ``soft`` or ``ffidelity``)."""

    name: str
    column: str
    higher_is_better: bool
    inputs: str = "masked"


#: the measures of the table, in its order (those the runs hold are shown)
MEASURES = (
    Measure("AOPC comprehensiveness", "aopc_comprehensiveness_prob", True),
    Measure("AOPC sufficiency", "aopc_sufficiency_prob", False),
    Measure("NAOPC comprehensiveness", "naopc_comprehensiveness_prob", True),
    Measure("NAOPC sufficiency", "naopc_sufficiency_prob", False),
    Measure("SRG", "srg_prob", True),
    Measure("soft comprehensiveness", "soft_comprehensiveness", True, "soft"),
    Measure("soft sufficiency", "soft_sufficiency", True, "soft"),
    Measure("FFid+ (probability)", "ffid_plus_prob", True, "ffidelity"),
    Measure("FFid- (probability)", "ffid_minus_prob", False, "ffidelity"),
    Measure("decision-flip fraction", FLIP, True),
    Measure("log-odds drop", "aopc_log_odds_drop", True),
)
NOT_MEASURED = {
    "soft": "not measured (the runs hold no OOD AUROC of the soft inputs: the ood analysis was off, or too old)",
    "ffidelity": "not measured (the runs hold no OOD AUROC of F-Fidelity's inputs on its removal-fine-tuned copy: "
    "ffidelity.ood_fit_examples=0, or too old)",
}
#: the table's columns
COLUMNS = [
    *("measure", "column", "n_runs", "n_models", "n_seeds", "n_methods", "model_share", "seed_share"),
    *("largest_difference", "difference_in_sd", "difference_pair", "difference_method", "difference_p_holm"),
    *("ood_auroc", "ood_note", "sanity_rho", "sanity_runs_ranking", "sanity_runs", "kendall_w", "kendall_p"),
    *("verdict", "sentence", "why"),
]


@dataclass
class TrustSettings:
    """What the section compares (``hydra.callbacks.report.trust``).

    Args:
        schedule: the masking schedule whose per-example scores are read (the soft measures and F-Fidelity are
            one-shot only).
        models: the models in report order (``None``: every model with standard runs, sorted).
        accuracy_margin: equivalence margin of test accuracies (fraction) for the largest difference.
        measures: per-example columns of :data:`MEASURES` to show (``None``: every one the runs hold).
        confidence: the mixed-model intervals' confidence level.
    """

    schedule: str = "one_shot"
    models: list[str] | None = None
    accuracy_margin: float = 0.02
    measures: list[str] | None = None
    confidence: float = 0.95

    @classmethod
    def from_dict(cls, node: dict | None) -> TrustSettings:
        """From a config node.

        Raises:
            ValueError: an unknown key, or a bad value (naming ``hydra.callbacks.report.trust.<key>``)."""
        settings = cls(**known_keys(cls, node, "hydra.callbacks.report.trust"))
        columns = [m.column for m in MEASURES]
        from itermask.core.schedules import SCHEDULES

        problems = [
            (settings.schedule not in SCHEDULES, "schedule", f"one of {', '.join(SCHEDULES)}"),
            (settings.models == [], "models", "model names, or null for every model with standard runs"),
            (not 0 < settings.accuracy_margin < 1, "accuracy_margin", "a fraction in (0, 1)"),
            (not 0 < settings.confidence < 1, "confidence", "a level in (0, 1)"),
            (
                settings.measures is not None and not set(settings.measures) <= set(columns),
                "measures",
                f"null or a list of {', '.join(columns)}",
            ),
        ]
        for bad, key, allowed in problems:
            if bad:
                raise ValueError(
                    f"hydra.callbacks.report.trust.{key}={getattr(settings, key)!r} is not allowed: {allowed}"
                )
        return settings


def _standard_runs(runs: list[Run], models: list[str] | None) -> list[Run]:
    return [r for r in runs if variant(r.result) == STANDARD and (models is None or str(r.result["model"]) in models)]


def _per_example(runs: list[Run], schedule: str) -> pd.DataFrame:
    """``model, seed, job, method, accuracy, example_id`` and every per-example measure column of the runs'
    main explanations (``random`` left out: the table compares the methods under study)."""
    parts = []
    for run in runs:
        method = method_of(run.result)
        path = run.per_example("scores")
        if not path.is_file():
            continue
        scores = pd.read_parquet(path)
        mine = scores[(scores.saliency == method) & (scores.schedule == schedule)].set_index("example_id")
        steps_path = run.per_example("steps")
        if steps_path.is_file():
            steps = pd.read_parquet(steps_path, columns=["saliency", "schedule", "example_id", "flip_rate"])
            steps = steps[(steps.saliency == method) & (steps.schedule == schedule)]
            mine = mine.join(steps.groupby("example_id").flip_rate.mean().rename(FLIP))
        mine = mine.reset_index()
        meta = {"model": str(run.result["model"]), "seed": run.seed, "job": run.job, "method": method}
        parts.append(mine.assign(**meta, accuracy=value(run.result["accuracy"].get("test"))))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _series(frame: pd.DataFrame, method: str, column: str) -> dict[tuple[str, int], pd.Series]:
    """``{(model, seed): per-example values}`` of one method's ``column``."""
    mine = select(frame, frame.method == method)
    out: dict[tuple[str, int], pd.Series] = {}
    for (model, seed), rows in mine.groupby(["model", "seed"], sort=True):  # pyright: ignore[reportGeneralTypeIssues] (pandas: a tuple per group)
        out[(str(model), int(seed))] = pd.Series(rows[column].to_numpy(dtype=float), index=rows["example_id"])
    return out


def _components(series: dict[tuple[str, int], pd.Series], models: list[str]) -> tuple[float, float, str | None]:
    """(model share, seed share, why) of one method: the nested components across ``models`` (2 or more), or the
    seed share of the one model; NaN and a reason where they cannot be computed."""
    seeds = sorted(set.intersection(*({s for m2, s in series if m2 == m} for m in models))) if models else []
    if len(seeds) < 2:
        return math.nan, math.nan, f"needs 2 seeds of every model, got {len(seeds)}"
    values = [series[(m, s)] for m in models for s in seeds]
    common = sorted(set.intersection(*(set(x.dropna().index) for x in values)))
    if len(common) < 2:
        return math.nan, math.nan, "fewer than 2 examples with a value in every run"
    y = np.array([[series[(m, s)].loc[common].to_numpy() for s in seeds] for m in models])
    if len(models) < 2:
        share = seed_share(y[0], n_resamples=1)
        return math.nan, float(share["share"]), "one model: no between-model share"
    out = nested_components(y)
    return float(out["model_share"]), float(out["seed_within_model_share"]), None


def _largest_difference(series_by_method: dict, models: list[str], accuracy: pd.DataFrame, confidence: float):
    """The largest ``|a - b|`` (mixed model) at equivalent accuracy: ``(difference, pair, method, p_holm)``, or
    NaNs and a reason."""
    pairs = list(itertools.combinations(models, 2))
    if not pairs:
        return math.nan, None, None, math.nan, "one model: no between-model difference"
    equivalent = {(r["a"], r["b"]) for r in accuracy.to_dict("records") if r.get("equivalent")}
    if not equivalent:
        return math.nan, None, None, math.nan, "no pair of models with equivalent test accuracy"
    diffs = mixed_differences(series_by_method, [p for p in pairs if p in equivalent], confidence)
    if diffs.empty or "difference" not in diffs:
        return math.nan, None, None, math.nan, "no mixed-model difference could be fitted"
    diffs = with_holm(select(diffs, diffs.measure == "score"), accuracy)
    diffs = select(diffs, diffs["difference"].notna())
    if diffs.empty:
        return math.nan, None, None, math.nan, "no mixed-model difference could be fitted"
    row = diffs.loc[pd.Series(diffs["difference"], dtype=float).abs().idxmax()]
    return float(row["difference"]), f"{row['a']} vs {row['b']}", str(row["method"]), float(row["p_holm"]), None


def _ood(runs: list[Run], schedule: str) -> float:
    """The mean OOD AUROC of the masked inputs over the grid's steps strictly between 0 and 1, over the runs."""
    means = []
    for run in runs:
        stats = ((run.result.get("ood") or {}).get("statistics") or {}).get(method_of(run.result)) or {}
        entry = stats.get(schedule) or {}
        values, fractions = (entry.get("values") or {}).get(OOD_STATISTIC), entry.get("fraction") or []
        if values is None:
            continue
        inner = [value(v) for v, f in zip(values, fractions) if 0 < f < 1]
        inner = [v for v in inner if math.isfinite(v)]
        if inner:
            means.append(float(np.mean(inner)))
    return float(np.mean(means)) if means else math.nan


def _own_ood(runs: list[Run], measure: Measure) -> float:
    """The mean over the runs of the OOD AUROC of the inputs a soft or F-Fidelity measure feeds its model: the
    soft inputs' (``ood.soft_inputs[method][column]``), FFid+ / FFid-'s on the removal-fine-tuned copy
    (``ffidelity.methods[method].one_shot.ood_auroc_plus`` / ``_minus``); NaN where no run has it."""
    found = []
    for run in runs:
        method = method_of(run.result)
        if measure.inputs == "soft":
            entry, key = ((run.result.get("ood") or {}).get("soft_inputs") or {}).get(method) or {}, measure.column
        else:
            methods = (run.result.get("ffidelity") or {}).get("methods") or {}
            entry = (methods.get(method) or {}).get("one_shot") or {}
            key = "ood_auroc_plus" if "plus" in measure.column else "ood_auroc_minus"
        if entry.get(key) is not None and math.isfinite(v := value(entry[key])):
            found.append(v)
    return float(np.mean(found)) if found else math.nan


def _sanity(runs: list[Run], column: str) -> tuple[float, int, int, str | None]:
    """(mean rho over the runs with a defined rho, runs whose interval is on the expected side, runs with a defined
    rho, why some runs have none): a run whose rho is undefined (a constant measure, e.g. no decision flips) is
    not counted as failing the benchmark."""
    rhos, ranking, undefined = [], 0, []
    for run in runs:
        entry = (((run.result.get("sanity") or {}).get("methods") or {}).get(method_of(run.result)) or {}).get(column)
        if not entry:
            continue
        rho = value(entry.get("rho"))
        if not math.isfinite(rho):
            undefined.append(str(entry.get("reason") or "undefined"))
            continue
        rhos.append(rho)
        ranking += bool(entry.get("ranks_known_order"))
    why = None
    if undefined:
        reasons = "; ".join(dict.fromkeys(undefined))
        why = f"sanity rho undefined in {len(undefined)} of {len(undefined) + len(rhos)} runs ({reasons})"
    return (float(np.mean(rhos)) if rhos else math.nan), ranking, len(rhos), why


def _concordance(frame: pd.DataFrame, column: str) -> tuple[float, float, str | None]:
    """Kendall's W (and its permutation p-value) of the methods' mean ``column`` with each (model, seed) run as
    a rater; NaN and why with fewer than 2 methods or raters (or when every rater ties every method)."""
    means = frame.pivot_table(index=["model", "seed"], columns="method", values=column, aggfunc="mean").dropna()
    if means.shape[1] < 2 or means.shape[0] < 2:
        return (
            math.nan,
            math.nan,
            (f"Kendall's W needs 2 methods and 2 runs with a value, got {means.shape[1]} and {means.shape[0]}"),
        )
    w = kendall_w(means.to_numpy(dtype=float), n_permutations=999)
    return float(w["w"]), float(w["p_permutation"]), w["why"]


def _verdict(row: dict) -> str:
    """:data:`VERDICTS`' key for a table row: ``not judged`` without the sanity benchmark; ``does not hold up``
    when fewer than half its runs rank the known order; ``holds up`` when at least :data:`SANITY_RUNS` of them do,
    models and seeds rank the methods alike (W at least :data:`W_ALIKE`, where computed) and the model explains
    under :data:`MODEL_SHARE` of its variance (where computed); ``mixed`` otherwise."""
    runs, ranking, w, share = row["sanity_runs"], row["sanity_runs_ranking"], row["kendall_w"], row["model_share"]
    if not runs:
        return "not judged"
    if ranking < runs / 2:
        return "does not hold up"
    alike = not math.isfinite(w) or w >= W_ALIKE
    if ranking >= SANITY_RUNS * runs and alike and (not math.isfinite(share) or share < MODEL_SHARE):
        return "holds up"
    return "mixed"


def _percent(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{100 * x:.0f} %"


def _p(x: float) -> str:
    return "n/a" if not math.isfinite(x) else "< 0.001" if x < 0.001 else f"{x:.3f}"


def sentence(row: dict) -> str:
    """One sentence about a measure, from its table row: its verdict, then the sanity benchmark, Kendall's W, the
    between-model and seed shares and the OOD AUROC, each stated only where computed and worded by its size."""
    parts = []
    runs, ranking = row["sanity_runs"], row["sanity_runs_ranking"]
    if runs:
        verb = "ranks" if ranking >= SANITY_RUNS * runs else "does not consistently rank"
        parts.append(
            f"{verb} degraded explanations in their known order ({ranking} of {runs} runs, mean rho "
            f"{number(row['sanity_rho'], 2, True)})"
        )
    w = row["kendall_w"]
    if math.isfinite(w):
        alike = "alike" if w >= W_ALIKE else "partly alike" if w >= W_UNLIKE else "differently"
        parts.append(f"models and seeds rank the methods {alike} (W {number(w, 2)})")
    if math.isfinite(row["model_share"]):
        share = (
            "the model moves it: " if row["model_share"] >= MODEL_SHARE else ""
        ) + f"models explain {_percent(row['model_share'])} of its variance"
        if math.isfinite(row["difference_in_sd"]):
            share += (
                f" (largest difference at equivalent accuracy {number(row['difference_in_sd'], 2)} example sd, "
                f"p_Holm {_p(row['difference_p_holm'])})"
            )
        parts.append(share)
    if math.isfinite(row["seed_share"]):
        parts.append(f"seeds {_percent(row['seed_share'])}")
    auroc = row["ood_auroc"]
    if math.isfinite(auroc):
        where = (
            "out of distribution"
            if auroc >= AUROC_OOD
            else "near the training data"
            if auroc <= AUROC_CLOSE
            else "partly out of distribution"
        )
        parts.append(f"its inputs are {where} (AUROC {number(auroc, 2)})")
    if not parts:
        return f"{row['measure']}: {row['why'] or 'not enough data'}."
    return f"{row['measure']} {VERDICTS[row['verdict']]} on this run: " + "; ".join(parts) + "."


def trust_table(report: Report, settings: TrustSettings) -> pd.DataFrame:
    """One row per measure the runs hold (:data:`COLUMNS`, module docstring), in :data:`MEASURES` order."""
    runs = _standard_runs(list(report.sweep.runs), settings.models)
    frame = _per_example(runs, settings.schedule)
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    present = sorted(set(frame.model))
    models = [m for m in (settings.models or present) if m in present]
    methods = sorted(set(frame.method))
    table = frame.drop_duplicates(["model", "seed"])[["model", "seed", "accuracy"]].assign(method="any")
    pairs = list(itertools.combinations(models, 2))
    accuracy = accuracy_rows(table, pairs, "model", settings.accuracy_margin) if pairs else pd.DataFrame()
    auroc = _ood(runs, settings.schedule)
    rows = []
    for m in MEASURES:
        if m.column not in frame or not pd.Series(frame[m.column]).notna().any():
            continue
        if settings.measures is not None and m.column not in settings.measures:
            continue
        by_method = {method: _series(frame, method, m.column) for method in methods}
        shares = [_components(by_method[method], models) for method in methods]
        model_share = [s[0] for s in shares if math.isfinite(s[0])]
        seed_shares = [s[1] for s in shares if math.isfinite(s[1])]
        difference, pair, method, p_holm, why = _largest_difference(by_method, models, accuracy, settings.confidence)
        sd = float(np.nanstd(frame[m.column].to_numpy(dtype=float), ddof=1))
        rho, ranking, n_sanity, why_sanity = _sanity(runs, m.column)
        w, p_w, why_w = _concordance(frame, m.column)
        own = auroc if m.inputs == "masked" else _own_ood(runs, m)  # the AUROC of the inputs it feeds a model
        row = {
            "measure": m.name,
            "column": m.column,
            "n_runs": int(frame.drop_duplicates(["model", "seed", "method"]).shape[0]),
            "n_models": len(models),
            "n_seeds": int(frame.seed.nunique()),
            "n_methods": len(methods),
            "model_share": float(np.mean(model_share)) if model_share else math.nan,
            "seed_share": float(np.mean(seed_shares)) if seed_shares else math.nan,
            "largest_difference": difference,
            "difference_in_sd": abs(difference) / sd if math.isfinite(difference) and sd > 0 else math.nan,
            "difference_pair": pair,
            "difference_method": method,
            "difference_p_holm": p_holm,
            "ood_auroc": own,
            "ood_note": None if m.inputs == "masked" or math.isfinite(own) else NOT_MEASURED[m.inputs],
            "sanity_rho": rho,
            "sanity_runs_ranking": ranking,
            "sanity_runs": n_sanity,
            "kendall_w": w,
            "kendall_p": p_w,
            "why": "; ".join(dict.fromkeys(r for r in (why, *(s[2] for s in shares), why_sanity, why_w) if r)) or None,
        }
        row["verdict"] = _verdict(row)
        row["sentence"] = sentence(row)
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def _cell(x, digits: int = 2, signed: bool = False) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else number(x, digits, signed)


def trust_markdown(table: pd.DataFrame, unlearnt: tuple[int, int] = (0, 0)) -> list[str]:
    """The section's Markdown lines: a heading, a warning when ``unlearnt`` (runs from a classifier that learnt
    nothing, runs) counts any, how to read it, the table and one sentence per measure."""
    lines = ["## Which measure to trust", ""]
    if unlearnt[0]:
        lines += [
            f"> **Warning:** {unlearnt[0]} of these {unlearnt[1]} runs come from a classifier that learnt nothing "
            "(see each job's model check): their measures say nothing about faithfulness, and the verdicts below "
            "include them.",
            "",
        ]
    if table.empty:
        return [
            *lines,
            "No run of this multirun holds per-example scores of the standard fine-tuning: nothing to compare.",
            "",
        ]
    first = table.iloc[0]
    lines += [
        f"Every faithfulness measure on the same runs ({first.n_models} model(s), {first.n_seeds} seed(s), "
        f"{first.n_methods} method(s); standard fine-tuning): does it rank explanations degraded by known amounts "
        "in their order (sanity), do models and seeds rank the methods alike (Kendall's W), how much of its "
        "variance comes from the model and from the seed, and how far out of distribution its inputs are "
        "(Mahalanobis AUROC, mean over the masked steps). Largest difference: between models of equivalent test "
        "accuracy, in standard deviations of the measure's per-example values.",
        "",
    ]
    header = ["measure", "verdict", "sanity rho (runs ranking)", "Kendall's W", "model share", "largest difference"]
    rows = []
    for r in table.to_dict("records"):
        sanity = (
            f"{_cell(r['sanity_rho'], 2, True)} ({r['sanity_runs_ranking']}/{r['sanity_runs']})"
            if r["sanity_runs"]
            else "n/a"
        )
        diff = "n/a" if not math.isfinite(r["difference_in_sd"]) else f"{number(r['difference_in_sd'], 2)} sd"
        ood = "not measured" if isinstance(r["ood_note"], str) else _cell(r["ood_auroc"])
        rows.append([r["measure"], r["verdict"], sanity, _cell(r["kendall_w"]), _percent(r["model_share"]), diff])
        rows[-1] += [_percent(r["seed_share"]), ood]
    lines.append(md_table([*header, "seed share", "OOD AUROC"], rows, ["left"] * 2 + ["right"] * 6))
    lines += ["", *(f"- {r['sentence']}" for r in table.to_dict("records"))]
    notes = sorted({r[k] for r in table.to_dict("records") for k in ("ood_note", "why") if isinstance(r[k], str)})
    if notes:
        lines += ["", "Notes: " + "; ".join(notes) + "."]
    return [*lines, ""]


class MeasureTrust:
    """The report's "Which measure to trust" section (module docstring; ``experiment=paper``).

    Args:
        settings: the keys of :class:`TrustSettings`; an unknown key raises ``ValueError`` naming it.
    """

    def __init__(self, **settings) -> None:
        self.settings = TrustSettings.from_dict(settings)
        self._computed: tuple[Report, pd.DataFrame] | None = None

    def check_sweep(self, models: list[str]) -> None:
        """Check ``trust.models`` against the ``models`` the multirun's jobs run.

        Raises:
            ValueError: one line naming the models no job runs and the multirun's models."""
        if lacking := [m for m in self.settings.models or [] if m not in models]:
            raise ValueError(
                f"hydra.callbacks.report.trust.models names {', '.join(lacking)}, which no job of this multirun "
                f"runs: choose from {', '.join(models)}"
            )

    def table(self, report: Report) -> pd.DataFrame:
        """The table of ``report`` (computed on the first call for it)."""
        if self._computed is None or self._computed[0] is not report:
            self._computed = (report, trust_table(report, self.settings))
        return self._computed[1]

    def figures(self, report: Report, files: Path, written: dict[str, Path], images: dict[str, str]) -> None:
        """Write ``measure_trust.csv`` under ``files``."""
        path = files / "measure_trust.csv"
        self.table(report).to_csv(path, index=False)
        written[path.name] = path

    def markdown(self, report: Report, images: dict[str, str]) -> list[str]:
        """The section's Markdown lines (:func:`trust_markdown`), warning of runs whose classifier learnt nothing."""
        runs = _standard_runs(list(report.sweep.runs), self.settings.models)
        unlearnt = sum(not (r.result.get("model_check") or {}).get("meaningful", True) for r in runs)
        return trust_markdown(self.table(report), (unlearnt, len(runs)))
