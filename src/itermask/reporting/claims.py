"""The report's "Claims" section (``experiment=paper``): the three claims of Crothers, Viktor & Japkowicz,
"Robust Infidelity" (arXiv 2308.06795), each as a question, the statistic that answers it with a confidence
interval, a figure, and a verdict sentence generated from the numbers (never from the paper), with its
conditions (models, dataset, seeds, examples).

1. *Do faithfulness scores differ between comparable models?* Standard fine-tuning of each model
   (``claims.models``, e.g. MiniLM, MiniLM with continued MLM pretraining, and with counterfactual
   augmentation): for every saliency method and ``random`` the between-model difference of its score, and
   of method - random, with a Welch interval over seeds (:func:`~itermask.reporting.statistics.
   compare_samples`); the nested variance components model / seed within model / example with bootstrap
   intervals (:func:`~itermask.reporting.claim_stats.nested_components_ci`); Kendall's W of the methods'
   ranking across models (:func:`~itermask.reporting.claim_stats.kendall_w`); and whether the models'
   test accuracies are equivalent within a stated margin (TOST, :func:`~itermask.reporting.claim_stats.
   tost_welch`). The claim is supported when, between two models of equivalent accuracy, some method's
   score (or method - random) differs after Holm's correction for every comparison made at equivalent
   accuracy (:func:`~itermask.reporting.claim_stats.holm`); supported in part when some intervals exclude 0
   but no difference survives the correction. The verdict says whether the differences are in the raw
   scores only (the random explanation's included: the models' sensitivity to masking) or in method - random.
2. *Are masked inputs out of distribution, and does masked fine-tuning change that?* The base model with
   standard vs masked fine-tuning: the Mahalanobis OOD AUROC (final layer) per masking step; supported
   when the standard model's mean AUROC over the masked steps is above 0.5 (interval) and masked
   fine-tuning lowers it (interval of the difference above 0).
3. *Does faithfulness track attack efficiency, and does adversarial fine-tuning change faithfulness?*
   Spearman's rho across the methods between the score and the attack success rate (per model, with a
   bootstrap interval over seeds and the exact permutation p-value), and standard vs adversarial
   fine-tuning of the base model: the difference of attack success rate and of the score.

The runs are read from the report's sweep; a run's *variant* (standard, masked, adversarial) comes from its
results config (``train.masking_augmentation.enabled``, ``train.adversarial_augmentation.enabled``), so
grouping labels do not matter. Settings: ``hydra.callbacks.report.claims`` (:class:`ClaimSettings`), read
from the sweep's ``multirun.yaml`` when the report is built from the command line.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from itermask.reporting.attack_link import caveat
from itermask.reporting.claim_stats import COMPONENTS, holm, kendall_w, nested_components_ci, tost_welch
from itermask.reporting.markdown import md_table, number
from itermask.reporting.model import records, series_rows
from itermask.reporting.statistics import compare_samples, seed_interval
from itermask.reporting.sweep import Run

__all__ = ["ClaimSettings", "Claims", "claim_settings", "compute_claims", "claims_markdown", "write_claim_figures"]

STANDARD, MASKED, ADVERSARIAL = "standard", "masked", "adversarial"
OOD_STATISTIC = "final/auroc_mahalanobis"


@dataclass
class ClaimSettings:
    """What the Claims section compares (``hydra.callbacks.report.claims``).

    Args:
        score: the faithfulness score (a key of ``scores[method][schedule]``), e.g. AOPC comprehensiveness.
        schedule: the masking schedule whose score is read.
        accuracy_margin: equivalence margin of test accuracies (fraction: 0.02 = 2 accuracy points).
        models: the models of claim 1 in report order (``None``: every model with standard runs, sorted).
        base_model: the model of claims 2 and 3 (``None``: the model with masked or adversarial runs).
        n_resamples: bootstrap resamples of the variance components and of Spearman's rho.
    """

    score: str = "aopc_comprehensiveness_prob"
    schedule: str = "one_shot"
    accuracy_margin: float = 0.02
    models: list[str] | None = None
    base_model: str | None = None
    n_resamples: int = 2000

    @classmethod
    def from_dict(cls, node: dict | None) -> ClaimSettings:
        """From a config node; unknown keys raise ``ValueError`` naming them and the known ones."""
        node = dict(node or {})
        known = {f.name for f in fields(cls)}
        if unknown := sorted(set(node) - known):
            raise ValueError(
                f"hydra.callbacks.report.claims has unknown key(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}"
            )
        if "models" in node and node["models"] is not None:
            node["models"] = [str(m) for m in node["models"]]
        return cls(**node)


def claim_settings(report) -> ClaimSettings | None:
    """The report's claim settings: ``report.settings["claims"]`` (set by the report callback), else the
    sweep's ``multirun.yaml`` ``hydra.callbacks.report.claims``; ``None`` when neither has any."""
    node = report.settings.get("claims")
    if node is None:
        path = Path(report.sweep.root) / "multirun.yaml"
        if path.is_file():
            from omegaconf import OmegaConf

            found = OmegaConf.select(OmegaConf.load(path), "hydra.callbacks.report.claims", default=None)
            node = OmegaConf.to_container(found, resolve=False) if found is not None else None
    if node is None:
        return None
    return node if isinstance(node, ClaimSettings) else ClaimSettings.from_dict(node)  # pyright: ignore[reportArgumentType]


def _rows(frame: pd.DataFrame, mask: Any) -> pd.DataFrame:
    """``frame[mask]`` typed as a frame (pandas' stubs cannot tell a boolean mask from a column key)."""
    return cast(pd.DataFrame, frame[mask])


# -- reading the runs ------------------------------------------------------------------------------------


def variant(result: dict) -> str:
    """``standard``, ``masked`` or ``adversarial`` fine-tuning of a result (``masked+adversarial`` for both)."""
    train = (result.get("config") or {}).get("train") or {}
    masked = bool((train.get("masking_augmentation") or {}).get("enabled"))
    adversarial = bool((train.get("adversarial_augmentation") or {}).get("enabled"))
    return "+".join(n for n, on in ((MASKED, masked), (ADVERSARIAL, adversarial)) if on) or STANDARD


def _method(result: dict) -> str:
    saliency = result["saliency"]
    return str(saliency.get("name") if isinstance(saliency, dict) else saliency)


def _value(x: Any) -> float:
    return math.nan if x is None else float(x)


def _success_rate(result: dict, method: str) -> float:
    entry = ((result.get("attack") or {}).get("methods") or {}).get(method) or {}
    return _value((entry.get("summary") or {}).get("success_rate"))


def run_table(runs: Sequence[Run], s: ClaimSettings) -> pd.DataFrame:
    """One row per run and explanation (its method and ``random``): ``model, variant, seed, method, job,
    score, minus_random, accuracy, success_rate``; ``random`` rows repeated across a model's method jobs
    with one seed (the same seeded explanation) are kept once."""
    rows = []
    for run in runs:
        r, method = run.result, _method(run.result)
        relative = ((r.get("relative_to_random") or {}).get(s.schedule) or {}).get(s.score)
        for explanation in (method, "random"):
            summary = (r["scores"].get(explanation) or {}).get(s.schedule) or {}
            rows.append(
                {
                    "model": str(r["model"]),
                    "variant": variant(r),
                    "seed": run.seed,
                    "method": explanation,
                    "job": run.job,
                    "score": _value(summary.get(s.score)),
                    "minus_random": _value(relative) if explanation == method else math.nan,
                    "accuracy": _value(r["accuracy"].get("test")),
                    "success_rate": _success_rate(r, explanation),
                }
            )
    frame = pd.DataFrame(
        rows,
        columns=["model", "variant", "seed", "method", "job", "score", "minus_random", "accuracy", "success_rate"],
    )
    return frame.drop_duplicates(["model", "variant", "seed", "method"]).reset_index(drop=True)


def _per_example(runs: Sequence[Run], method: str, s: ClaimSettings) -> dict[tuple[str, int], pd.Series]:
    """``{(model, seed): per-example score of method}`` from the runs' ``per_example/scores.parquet``."""
    from itermask.storage.per_example import FOLDER

    out = {}
    for run in runs:
        if (run.result["model"], run.seed) in out or method not in (_method(run.result), "random"):
            continue
        path = run.path.parent / FOLDER / "scores.parquet"
        if not path.is_file():
            continue
        frame = pd.read_parquet(path)
        rows = frame[(frame.saliency == method) & (frame.schedule == s.schedule)]
        if s.score in rows:
            out[(str(run.result["model"]), run.seed)] = rows.set_index("example_id")[s.score].astype(float)
    return out


# -- the claims ------------------------------------------------------------------------------------------


@dataclass
class Claims:
    """The claims' tables (pandas) and verdicts; see the module docstring."""

    settings: ClaimSettings
    conditions: dict = field(default_factory=dict)
    table: pd.DataFrame = field(default_factory=pd.DataFrame)
    model_differences: pd.DataFrame = field(default_factory=pd.DataFrame)
    components: pd.DataFrame = field(default_factory=pd.DataFrame)
    concordance: dict = field(default_factory=dict)
    accuracy: pd.DataFrame = field(default_factory=pd.DataFrame)
    ood_steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    ood_summary: dict = field(default_factory=dict)
    attack_link: pd.DataFrame = field(default_factory=pd.DataFrame)
    adversarial: pd.DataFrame = field(default_factory=pd.DataFrame)
    verdicts: dict[int, str] = field(default_factory=dict)
    confidence: float = 0.95


def _accuracy_rows(table: pd.DataFrame, pairs: list[tuple[str, str]], key: str, margin: float) -> pd.DataFrame:
    """TOST of the test accuracies of each pair (``key``: the column naming the groups)."""
    rows = []
    for a, b in pairs:
        acc = [_rows(table, table[key] == g).drop_duplicates(["seed"]).accuracy.tolist() for g in (a, b)]
        means = {"mean_a": float(np.mean(acc[0])), "mean_b": float(np.mean(acc[1]))}
        rows.append({"a": a, "b": b, **means, **tost_welch(acc[0], acc[1], margin)})
    return pd.DataFrame(rows)


def _differences(table: pd.DataFrame, pairs, key: str, methods, columns, confidence: float) -> pd.DataFrame:
    """Welch differences ``a - b`` over seeds of each column for each method and pair of groups."""
    rows = []
    for (a, b), method, column in itertools.product(pairs, methods, columns):
        values = [_rows(table, (table[key] == g) & (table.method == method))[column].dropna().tolist() for g in (a, b)]
        if not values[0] or not values[1]:
            continue
        diff = compare_samples(values[0], values[1], confidence)
        rows.append({"a": a, "b": b, "method": method, "measure": column, **diff})
    return pd.DataFrame(rows)


def _with_holm(diffs: pd.DataFrame, accuracy: pd.DataFrame) -> pd.DataFrame:
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


def _claim1(claims: Claims, runs: Sequence[Run], table: pd.DataFrame) -> None:
    s, conf = claims.settings, claims.confidence
    standard = _rows(table, table.variant == STANDARD)
    models = [m for m in (s.models or sorted(set(standard.model))) if m in set(standard.model)]
    methods = ["random", *sorted(set(standard.method) - {"random"})]
    claims.conditions["models"] = models
    pairs = list(itertools.combinations(models, 2))
    sub = _rows(standard, standard.model.isin(models))
    claims.accuracy = _accuracy_rows(sub, pairs, "model", s.accuracy_margin)
    claims.model_differences = _with_holm(
        _differences(sub, pairs, "model", methods, ["score", "minus_random"], conf), claims.accuracy
    )
    means = sub.groupby(["model", "method"]).score.mean().unstack("method").reindex(index=models, columns=methods)
    claims.concordance = {"methods": methods, "models": models, **kendall_w(means.to_numpy(dtype=float))}
    rows = []
    std_runs = [r for r in runs if variant(r.result) == STANDARD and str(r.result["model"]) in models]
    for method in methods:
        per_example = _per_example(std_runs, method, s)
        seeds = sorted(set.intersection(*({sd for m2, sd in per_example if m2 == m} for m in models)))
        why = None
        if len(models) < 2 or len(seeds) < 2:
            why = f"needs 2 models and 2 common seeds with per-example scores, got {len(models)} and {len(seeds)}"
        else:
            series = [per_example[(m, sd)] for m in models for sd in seeds]
            common = sorted(set.intersection(*(set(x.dropna().index) for x in series)))
            if len(common) < 2:
                why = f"fewer than 2 examples with a {s.score} in every run"
            else:
                y = np.array([[per_example[(m, sd)].loc[common].to_numpy() for sd in seeds] for m in models])
                result = nested_components_ci(y, conf, s.n_resamples)
                for name in COMPONENTS:
                    rows.append(
                        {
                            "method": method,
                            "component": name,
                            "n_models": len(models),
                            "n_seeds": len(seeds),
                            "n_examples": len(common),
                            **result[name],
                            "share": result[f"{name}_share"]["estimate"],
                            "share_ci_low": result[f"{name}_share"]["ci_low"],
                            "share_ci_high": result[f"{name}_share"]["ci_high"],
                            "why": None,
                        }
                    )
                continue
        rows.append({"method": method, "component": None, "why": why})
    claims.components = pd.DataFrame(rows)
    claims.verdicts[1] = _verdict1(claims)


def _few_seeds(table: pd.DataFrame, *variants: str) -> str | None:
    """Why intervals over seeds cannot be computed (a model and variant with fewer than 2 seeds), or ``None``."""
    sub = _rows(table, table.variant.isin(variants))
    counts = sub.groupby(["model", "variant"]).seed.nunique()
    if len(counts) and counts.min() >= 2:
        return None
    if not len(counts):
        return f"no {' or '.join(variants)} runs"
    (model, kind), n = counts.idxmin(), int(counts.min())
    return f"{model} ({kind} fine-tuning) has {n} seed(s); the intervals need at least 2"


def _fmt_ci(row) -> str:
    return f"{number(row['difference'])} [{number(row['ci_low'])}, {number(row['ci_high'])}]"


def _excludes_zero(row) -> bool:
    return bool(row["ci_low"] > 0 or row["ci_high"] < 0)


def _conditions(claims: Claims, models: Sequence[str] | None = None) -> str:
    c, s = claims.conditions, claims.settings
    models = models if models is not None else c.get("models", [])
    return (
        f"(models {', '.join(models)}; dataset {c.get('dataset')}; seeds {c.get('seeds')}; "
        f"{c.get('n_examples')} test examples; {s.score}, {s.schedule} masking with {c.get('masking')})"
    )


def _verdict1(claims: Claims) -> str:
    s, diffs, acc = claims.settings, claims.model_differences, claims.accuracy
    conditions = _conditions(claims)
    if diffs.empty or acc.empty:
        return f"cannot answer: fewer than 2 models with standard fine-tuning runs {conditions}."
    if (few := _few_seeds(claims.table, STANDARD)) is not None:
        return f"cannot answer: {few}, so no interval over seeds {conditions}."
    equivalent = {(r.a, r.b) for r in records(acc) if r.equivalent}
    comp = claims.components
    share = _rows(comp, comp.component == "model") if not comp.empty else None
    w = claims.concordance.get("w", math.nan)
    extra = f" Kendall's W of the methods' ranking across models is {number(w, 3)}" + (
        f" (permutation p = {number(claims.concordance.get('p_permutation'), 3)})." if not math.isnan(w) else "."
    )
    if share is not None and len(share):
        best = share.sort_values(by="share", ascending=False).iloc[0]
        extra += (
            f" The largest model share of variance is {number(best['share'], 3)} "
            f"[{number(best['share_ci_low'], 3)}, {number(best['share_ci_high'], 3)}] ({best['method']})."
        )
    if not equivalent:
        worst = acc.iloc[0]
        return (
            f"does not support: no pair of models has equivalent test accuracy within ±{s.accuracy_margin:g} "
            f"(TOST; e.g. {worst['a']} - {worst['b']}: {_fmt_ci(worst)} at 90 %, p = {number(worst['p_value'], 3)}),"
            f" so score differences cannot be separated from accuracy differences {conditions}.{extra}"
        )
    tested = _rows(diffs, diffs["p_holm"].notna())
    alpha = 1 - claims.confidence
    hits = _rows(tested, [_excludes_zero(r) for r in series_rows(tested)])
    chance = f"{len(hits)} of {len(tested)} intervals exclude 0 (about {alpha * len(tested):.1f} expected by chance)"
    if hits.empty:
        return (
            f"does not support: between models of equivalent accuracy (margin ±{s.accuracy_margin:g}) no "
            f"method's {s.score} or method - random differs: every {int(claims.confidence * 100)} % interval "
            f"over seeds includes 0 ({chance}) {conditions}.{extra}"
        )
    corrected = _rows(tested, tested["p_holm"] < alpha)
    shown = corrected if not corrected.empty else hits
    top = shown.loc[shown["difference"].abs().idxmax()]
    measure = s.score if top["measure"] == "score" else f"{s.score} minus random"
    found = (
        f"the {top['method']} {measure} differs between {top['a']} and {top['b']} by {_fmt_ci(top)} "
        f"({int(claims.confidence * 100)} % Welch interval over seeds, Holm p = {number(top['p_holm'], 3)}; "
        f"{chance})"
    )
    where = (
        " The differences are in the raw scores only, the random explanation's included, not in method - random:"
        " the models differ in how their outputs respond to masking, not in how far the methods beat random."
        if set(shown["measure"]) == {"score"}
        else ""
    )
    if corrected.empty:
        return (
            f"supports in part: at equivalent test accuracy (margin ±{s.accuracy_margin:g}, TOST), {found}, but "
            f"no difference survives Holm's correction for the {len(tested)} comparisons (smallest Holm p = "
            f"{number(float(np.nanmin(tested['p_holm'].to_numpy(dtype=float))), 3)}) {conditions}.{where}{extra}"
        )
    return (
        f"supports: at equivalent test accuracy (margin ±{s.accuracy_margin:g}, TOST), {found}; "
        f"{len(corrected)} of {len(tested)} differences survive Holm's correction {conditions}.{where}{extra}"
    )


def _ood_curves(
    runs: Sequence[Run], base: str, method: str, s: ClaimSettings
) -> dict[str, dict[int, tuple[list, list]]]:
    """``{variant: {seed: (fractions, OOD AUROC per step)}}`` of the base model's runs of ``method`` (the
    masked inputs of its ranking; one run per seed)."""
    out: dict[str, dict[int, tuple[list, list]]] = {}
    for run in runs:
        r = run.result
        if str(r["model"]) != base or _method(r) != method:
            continue
        stats = ((((r.get("ood") or {}).get("statistics") or {}).get(_method(r)) or {}).get(s.schedule)) or {}
        values = (stats.get("values") or {}).get(OOD_STATISTIC)
        if values is None:
            continue
        out.setdefault(variant(r), {}).setdefault(run.seed, (list(stats["fraction"]), [_value(v) for v in values]))
    return out


def _claim2(claims: Claims, runs: Sequence[Run], table: pd.DataFrame, base: str | None) -> None:
    s, conf = claims.settings, claims.confidence
    masked_runs = [r for r in runs if str(r.result["model"]) == base and variant(r.result) == MASKED]
    method = _method(masked_runs[0].result) if masked_runs else None
    curves = _ood_curves(runs, base, method, s) if base and method else {}
    if not base or STANDARD not in curves or MASKED not in curves:
        claims.verdicts[2] = (
            f"cannot answer: no standard and masked fine-tuning runs of the base model with OOD statistics "
            f"(model {base}; use ood=final or ood=full) {_conditions(claims, [str(base)])}."
        )
        return
    rows = []
    grid = next(iter(curves[STANDARD].values()))[0]
    per_seed_mean = {}
    for v in (STANDARD, MASKED):
        matrix = np.array([curves[v][sd][1] for sd in sorted(curves[v])], dtype=float)
        masked_steps = [j for j, f in enumerate(grid) if f > 0]
        per_seed_mean[v] = np.nanmean(matrix[:, masked_steps], axis=1)
        for j, fraction in enumerate(grid):
            agg = seed_interval(matrix[:, j], conf, bounds=(0.0, 1.0))
            rows.append({"variant": v, "fraction": fraction, **agg})
    claims.ood_steps = pd.DataFrame(rows)
    std = seed_interval(per_seed_mean[STANDARD], conf, bounds=(0.0, 1.0))
    masked = seed_interval(per_seed_mean[MASKED], conf, bounds=(0.0, 1.0))
    diff = compare_samples(per_seed_mean[STANDARD], per_seed_mean[MASKED], conf, bounds=(0.0, 1.0))
    sub = _rows(table, (table.model == base) & table.variant.isin([STANDARD, MASKED]))
    acc = _accuracy_rows(sub, [(STANDARD, MASKED)], "variant", s.accuracy_margin)
    score = _differences(sub, [(STANDARD, MASKED)], "variant", [method], ["score"], conf)
    claims.ood_summary = {"standard": std, "masked": masked, "difference": diff, "accuracy": acc, "score": score}
    claims.ood_summary["method"] = method
    if (few := _few_seeds(sub, STANDARD, MASKED)) is not None:
        claims.verdicts[2] = f"cannot answer: {few} {_conditions(claims, [str(base)])}."
        return
    pct = int(claims.confidence * 100)
    conditions = _conditions(claims, [base])
    ood = std["ci_low"] > 0.5
    lowered = diff["ci_low"] > 0
    numbers = (
        f"mean OOD AUROC over the masked steps {number(std['mean'])} [{number(std['ci_low'])}, "
        f"{number(std['ci_high'])}] after standard and {number(masked['mean'])} [{number(masked['ci_low'])}, "
        f"{number(masked['ci_high'])}] after masked fine-tuning (difference {_fmt_ci(diff)}, {pct} % intervals "
        f"over seeds; test accuracy {'equivalent' if bool(acc.iloc[0].equivalent) else 'not shown equivalent'} "
        f"within ±{s.accuracy_margin:g})"
    )
    if ood and lowered:
        claims.verdicts[2] = (
            f"supports: masked inputs are out of distribution for the standard fine-tuned {base} and masked "
            f"fine-tuning lowers that: {numbers} {conditions}."
        )
    elif ood:
        claims.verdicts[2] = (
            f"supports in part: masked inputs are out of distribution for the standard fine-tuned {base}, "
            f"but masked fine-tuning is not shown to lower that: {numbers} {conditions}."
        )
    else:
        claims.verdicts[2] = (
            f"does not support: the standard fine-tuned {base} does not separate masked from clean inputs "
            f"beyond chance (interval includes or is below 0.5): {numbers} {conditions}."
        )


def _spearman_ci(sub: pd.DataFrame, methods: list[str], n_resamples: int, confidence: float, seed: int = 0):
    """A percentile bootstrap interval of Spearman's rho of the methods' seed means (score vs success
    rate), resampling seeds (every method's values of a seed together: they share its fine-tuned model)."""
    from scipy import stats

    score = sub.pivot_table(index="seed", columns="method", values="score").reindex(columns=methods)
    rate = sub.pivot_table(index="seed", columns="method", values="success_rate").reindex(columns=methods)
    keep = score.notna().all(axis=1) & rate.notna().all(axis=1)
    x, y = score[keep].to_numpy(), rate[keep].to_numpy()
    if len(x) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    rhos = []
    for idx in rng.integers(0, len(x), size=(n_resamples, len(x))):
        a, b = x[idx].mean(axis=0), y[idx].mean(axis=0)
        if np.ptp(a) > 0 and np.ptp(b) > 0:
            rhos.append(float(stats.spearmanr(a, b).statistic))  # pyright: ignore[reportAttributeAccessIssue]
    if not rhos:
        return math.nan, math.nan
    alpha = (1 - confidence) / 2
    low, high = np.quantile(rhos, [alpha, 1 - alpha])
    return float(low), float(high)


def _claim3(claims: Claims, runs: Sequence[Run], table: pd.DataFrame, base: str | None) -> None:
    from itermask.reporting.attack_link import spearman_exact

    s, conf = claims.settings, claims.confidence
    rows = []
    standard = _rows(table, (table.variant == STANDARD) & table.success_rate.notna())
    for model in [m for m in claims.conditions.get("models", []) if m in set(standard.model)]:
        sub = _rows(standard, standard.model == model)
        means = cast(pd.DataFrame, sub.groupby("method")[["score", "success_rate"]].mean()).dropna()
        methods = list(means.index)
        x, y = means.score.tolist(), means.success_rate.tolist()
        rho = p = low = high = math.nan
        if len(methods) >= 3 and len(set(x)) > 1 and len(set(y)) > 1:
            rho, p = spearman_exact(x, y)
            low, high = _spearman_ci(sub, methods, s.n_resamples, conf)
        rows.append(
            {
                "model": model,
                "methods": methods,
                "score_means": x,
                "success_means": y,
                "rho": rho,
                "ci_low": low,
                "ci_high": high,
                "p_value": p,
            }
        )
    claims.attack_link = pd.DataFrame(rows)
    adv = _rows(table, (table.model == str(base)) & table.variant.isin([STANDARD, ADVERSARIAL]))
    method = next(
        (_method(r.result) for r in runs if str(r.result["model"]) == base and variant(r.result) == ADVERSARIAL), None
    )
    if method is not None:
        diffs = _differences(adv, [(ADVERSARIAL, STANDARD)], "variant", [method], ["score", "success_rate"], conf)
        acc = _accuracy_rows(adv, [(ADVERSARIAL, STANDARD)], "variant", s.accuracy_margin)
        claims.adversarial = pd.concat([diffs.assign(kind="difference"), acc.assign(kind="accuracy")])
    claims.verdicts[3] = _verdict3(claims, base, method)


def _verdict3(claims: Claims, base: str | None, method: str | None) -> str:
    s, pct = claims.settings, int(claims.confidence * 100)
    parts = []
    link = claims.attack_link.dropna(subset=["rho"]) if not claims.attack_link.empty else claims.attack_link
    if link.empty:
        parts.append("the attack link cannot be computed (no attacked methods with varying means)")
    else:
        positive = [r for r in series_rows(link) if r["ci_low"] > 0]
        text = "; ".join(
            f"{r['model']}: rho = {number(r['rho'], 3)} [{number(r['ci_low'], 3)}, {number(r['ci_high'], 3)}] "
            f"(exact p = {number(r['p_value'], 3)}, {len(r['methods'])} methods)"
            for r in series_rows(link)
        )
        significant = [r for r in positive if r["p_value"] < 0.05]
        # "supports": rho above 0 (over seed resamples) for every model and the permutation test at 5 % for
        # one; above 0 without a significant permutation test (few methods) or for some models: "in part"
        verdict = (
            "cannot judge (no interval over seeds: fewer than 2 seeds)"
            if link.ci_low.isna().all()
            else "supports"
            if len(positive) == len(link) and significant
            else "supports in part"
            if positive
            else "does not support"
        )
        parts.append(
            f"{verdict} the attack link: across methods, {s.score} rises with the attack success rate "
            f"({text}; {pct} % bootstrap intervals over seeds; {caveat(max(len(m) for m in link.methods))})"
        )
    adv = claims.adversarial
    few = _few_seeds(_rows(claims.table, claims.table.model == str(base)), STANDARD, ADVERSARIAL)
    if adv.empty or method is None:
        parts.append("adversarial vs standard fine-tuning is not in this run")
    elif few is not None:
        parts.append(f"adversarial vs standard fine-tuning cannot be answered: {few}")
    else:
        d = _rows(adv, adv.kind == "difference")
        acc = _rows(adv, adv.kind == "accuracy").iloc[0]
        score = _rows(d, d.measure == "score")
        rate = _rows(d, d.measure == "success_rate")
        changed = len(score) and _excludes_zero(score.iloc[0])
        robust = len(rate) and rate.iloc[0]["ci_high"] < 0
        numbers = (
            f"adversarial - standard {method} {s.score} {_fmt_ci(score.iloc[0]) if len(score) else 'n/a'}, "
            f"attack success rate {_fmt_ci(rate.iloc[0]) if len(rate) else 'n/a'} ({pct} % Welch intervals over "
            f"seeds), test accuracy {'equivalent' if bool(acc.equivalent) else 'not shown equivalent'} within "
            f"±{s.accuracy_margin:g} ({_fmt_ci(acc)} at 90 %)"
        )
        # the paper's claim is that adversarial training does NOT consistently change faithfulness
        if not changed:
            lead = "agrees with the paper: adversarial fine-tuning is not shown to change faithfulness"
        elif bool(acc.equivalent):
            lead = "differs from the paper: adversarial fine-tuning changes faithfulness at equivalent accuracy"
        else:
            lead = (
                "adversarial fine-tuning changes faithfulness, but test accuracy changes too, so this run cannot "
                "separate the two (the paper reports no consistent change)"
            )
        lead += "" if robust else " (and it is not shown to lower the attack success rate)"
        parts.append(f"{lead}: {numbers} {_conditions(claims, [str(base)])}")
    return "; ".join(parts[:1]) + f" {_conditions(claims)}; " + "; ".join(parts[1:]) + "."


def compute_claims(report, settings: ClaimSettings) -> Claims:
    """The three claims of the report's sweep (module docstring)."""
    runs = report.sweep.runs
    claims = Claims(settings, confidence=report.settings.get("confidence", 0.95))
    table = run_table(runs, settings)
    claims.table = table
    claims.conditions = {
        "dataset": ", ".join(sorted({str(r.result["dataset"]) for r in runs})),
        "masking": ", ".join(sorted({str(r.result["masking"]) for r in runs})),
        "seeds": ", ".join(str(x) for x in sorted({r.seed for r in runs})),
        "n_examples": ", ".join(str(x) for x in sorted({r.result.get("n_evaluated") for r in runs}, key=str)),
    }
    base = settings.base_model or next(
        (str(r.result["model"]) for r in runs if variant(r.result) in (MASKED, ADVERSARIAL)), None
    )
    claims.conditions["base_model"] = base
    _claim1(claims, runs, table)
    _claim2(claims, runs, table, base)
    _claim3(claims, runs, table, base)
    return claims


# -- figures ---------------------------------------------------------------------------------------------


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_claim1(claims: Claims) -> bytes:
    """Per method, each model's score per seed (dots) and mean with its interval over seeds."""
    plt = _plt()
    models, methods = claims.conditions.get("models", []), claims.concordance.get("methods", [])
    table = _rows(claims.table, claims.table.variant == STANDARD)
    fig, axes = plt.subplots(1, max(1, len(methods)), figsize=(3.2 * max(1, len(methods)), 3.4), squeeze=False)
    for ax, method in zip(axes[0], methods):
        for i, model in enumerate(models):
            values = _rows(table, (table.model == model) & (table.method == method)).score.dropna().to_numpy()
            ax.plot(np.full(len(values), i), values, "o", alpha=0.4, color=f"C{i}")
            agg = seed_interval(values, claims.confidence)
            if not math.isnan(agg["mean"]):
                low = agg["mean"] - agg["ci_low"] if not math.isnan(agg["ci_low"]) else 0
                high = agg["ci_high"] - agg["mean"] if not math.isnan(agg["ci_high"]) else 0
                ax.errorbar([i + 0.15], [agg["mean"]], yerr=[[low], [high]], fmt="s", color=f"C{i}", capsize=3)
        ax.set_xticks(range(len(models)), models, rotation=30, fontsize=8)
        ax.set_title(method, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"{claims.settings.score} ({claims.settings.schedule})")
    fig.suptitle(f"Claim 1: score by model (dots: seeds; squares: mean, {int(claims.confidence * 100)} % CI)")
    return _png(fig)


def figure_claim2(claims: Claims) -> bytes:
    """OOD AUROC per masking step, standard vs masked fine-tuning, mean and band over seeds."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for i, (v, frame) in enumerate(claims.ood_steps.groupby("variant", sort=False)):
        ax.plot(frame.fraction, frame["mean"], "o-", color=f"C{i}", label=f"{v} fine-tuning")
        ax.fill_between(frame.fraction, frame.ci_low, frame.ci_high, color=f"C{i}", alpha=0.2, linewidth=0)
    ax.axhline(0.5, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("masking fraction (share of maskable tokens)")
    ax.set_ylabel("OOD AUROC (Mahalanobis, final layer)")
    ax.set_title(f"Claim 2: {claims.conditions.get('base_model')}, masked vs clean inputs", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def figure_claim3(claims: Claims) -> bytes:
    """Left: each model's method means, score vs attack success rate. Right: per seed, standard vs
    adversarial fine-tuning of the base model (score and success rate)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, row in enumerate(records(claims.attack_link)):
        axes[0].plot(row.success_means, row.score_means, "o", color=f"C{i}", label=row.model)
        for method, x, y in zip(row.methods, row.success_means, row.score_means):
            axes[0].annotate(method, (x, y), fontsize=7)
    axes[0].set_xlabel("attack success rate (share of attacked examples)")
    axes[0].set_ylabel(claims.settings.score)
    axes[0].set_title("faithfulness vs attack efficiency (method means)", fontsize=9)
    if len(claims.attack_link):
        axes[0].legend(fontsize=8)
    table = claims.table
    base = claims.conditions.get("base_model")
    method = None if claims.adversarial.empty else claims.adversarial.iloc[0].get("method")
    for i, v in enumerate((STANDARD, ADVERSARIAL)):
        sub = table[(table.model == base) & (table.variant == v) & (table.method == method)]
        axes[1].plot(sub.success_rate, sub.score, "o", color=f"C{i}", label=f"{v} ({method})")
    axes[1].set_xlabel("attack success rate (share of attacked examples)")
    axes[1].set_ylabel(claims.settings.score)
    axes[1].set_title(f"{base}: adversarial vs standard fine-tuning (seeds)", fontsize=9)
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    return _png(fig)


def write_claim_figures(report, files: Path, written: dict, images: dict) -> None:
    """Compute the claims (when the sweep has claim settings), store them on ``report.settings["claims_result"]``
    and write their figures and tables under ``files``."""
    from itermask.reporting.plots import slug
    from itermask.storage.files import write_bytes_atomic, write_text_atomic

    settings = claim_settings(report)
    if settings is None:
        return
    claims = compute_claims(report, settings)
    report.settings["claims_result"] = claims
    for number_, draw in ((1, figure_claim1), (2, figure_claim2), (3, figure_claim3)):
        if number_ == 2 and claims.ood_steps.empty:
            continue
        name = f"claim{number_}.png"
        written[name] = write_bytes_atomic(files / name, draw(claims))
        images[f"claim::{number_}"] = f"{files.name}/{name}"
    for name in ("model_differences", "components", "accuracy", "ood_steps", "attack_link", "adversarial"):
        frame = getattr(claims, name)
        if not frame.empty:
            file = f"claims_{slug(name)}.csv"
            written[file] = write_text_atomic(files / file, frame.to_csv(index=False))


# -- Markdown --------------------------------------------------------------------------------------------

QUESTIONS = {
    1: "Do faithfulness scores differ between comparable models (same architecture and accuracy, different "
    "pretraining), beyond the fine-tuning seed?",
    2: "Are masked inputs out of distribution for the fine-tuned model, and does masked fine-tuning change that?",
    3: "Does faithfulness track how efficiently the explanation's ranking attacks the model, and does "
    "adversarial fine-tuning change faithfulness?",
}


def _ci_cell(row, digits: int = 4) -> str:
    return f"{number(row['ci_low'], digits)}, {number(row['ci_high'], digits)}"


def _claim1_lines(claims: Claims, images: dict, pct: int) -> list[str]:
    s, out = claims.settings, []
    if not claims.model_differences.empty:
        out += [
            f"Between-model differences a - b of the mean over seeds ({pct} % Welch interval; *minus_random*: "
            "the method's score minus the seeded random explanation's in the same run; *p (Holm)*: adjusted for "
            "every comparison between models of equivalent accuracy, blank for the other pairs):",
            "",
            md_table(
                ["a", "b", "method", "measure", "n a/b", "a - b", f"{pct} % CI", "p", "p (Holm)"],
                [
                    [r.a, r.b, r.method, r.measure, f"{r.n_a}/{r.n_b}", number(r.difference), _ci_cell(r._asdict())]
                    + [number(r.p_value, 3), "" if pd.isna(r.p_holm) else number(r.p_holm, 3)]
                    for r in records(claims.model_differences)
                ],
            ),
            "",
        ]
    comp = claims.components
    if not comp.empty:
        ok = _rows(comp, comp.component.notna())
        out += [
            "Variance components of the per-example score (nested random-effects ANOVA: model, seed within "
            f"model, example, model x example, residual; {pct} % percentile bootstrap resampling seeds within "
            "each model and examples; the models are not resampled):",
            "",
            md_table(
                ["method", "component", "variance", f"{pct} % CI", "share", f"share {pct} % CI"],
                [
                    [r.method, r.component, number(r.estimate, 5), _ci_cell(r._asdict(), 5), number(r.share, 3)]
                    + [f"{number(r.share_ci_low, 3)}, {number(r.share_ci_high, 3)}"]
                    for r in records(ok)
                ],
            )
            if len(ok)
            else "",
            "",
        ]
        out += [
            f"- {r.method}: variance components not computed: {r.why}"
            for r in records(_rows(comp, comp.component.isna()))
        ]
    c = claims.concordance
    if c:
        out += [
            f"Kendall's W of the ranking of {', '.join(c.get('methods', []))} by their mean {s.score} across "
            f"the models {', '.join(c.get('models', []))}: W = {number(c.get('w'), 3)} (tie-corrected; "
            f"chi-square p = {number(c.get('p_chi2'), 3)}, permutation p = {number(c.get('p_permutation'), 3)})"
            + (f"; {c['why']}" if c.get("why") else "")
            + ". 1: every model ranks the methods alike.",
            "",
        ]
    if not claims.accuracy.empty:
        out += [
            f"Test accuracy equivalence (TOST, two one-sided Welch tests at 5 %, margin ±{s.accuracy_margin:g}; "
            "90 % interval of the difference):",
            "",
            md_table(
                ["a", "b", "mean a", "mean b", "a - b", "90 % CI", "TOST p", "equivalent"],
                [
                    [r.a, r.b, number(r.mean_a), number(r.mean_b), number(r.difference), _ci_cell(r._asdict())]
                    + [number(r.p_value, 3), "yes" if r.equivalent else "no"]
                    for r in records(claims.accuracy)
                ],
            ),
            "",
        ]
    if "claim::1" in images:
        out += [f"![claim 1]({images['claim::1']})", ""]
    return out


def _claim2_lines(claims: Claims, images: dict, pct: int) -> list[str]:
    if claims.ood_steps.empty:
        return []
    frame = claims.ood_steps.assign(
        cell=[f"{number(r.mean, 3)} [{number(r.ci_low, 3)}, {number(r.ci_high, 3)}]" for r in records(claims.ood_steps)]
    )
    steps = frame.pivot(index="fraction", columns="variant", values="cell")
    out = [
        f"Mahalanobis OOD AUROC (final layer) of masked vs clean inputs per masking step, mean over seeds "
        f"[{pct} % interval] ({claims.ood_summary.get('method')} ranking; 0.5: indistinguishable):",
        "",
        md_table(
            ["fraction", *[f"{v} fine-tuning" for v in steps.columns]],
            [[number(f, 3), *row] for f, row in zip(steps.index, steps.to_numpy().tolist())],
        ),
        "",
    ]
    if "claim::2" in images:
        out += [f"![claim 2]({images['claim::2']})", ""]
    return out


def _claim3_lines(claims: Claims, images: dict, pct: int) -> list[str]:
    out = []
    if not claims.attack_link.empty:
        out += [
            f"Spearman's rho across methods between the mean {claims.settings.score} and the mean attack "
            f"success rate ({pct} % bootstrap interval over seeds; exact permutation p):",
            "",
            md_table(
                ["model", "methods", "rho", f"{pct} % CI", "p"],
                [
                    [r.model, ", ".join(r.methods), number(r.rho, 3), _ci_cell(r._asdict(), 3), number(r.p_value, 3)]
                    for r in records(claims.attack_link)
                ],
            ),
            "",
        ]
    if "claim::3" in images:
        out += [f"![claim 3]({images['claim::3']})", ""]
    return out


def claims_markdown(report, images: dict) -> list[str]:
    """The "Claims" section's Markdown lines (none when the sweep has no claim settings or
    :func:`write_claim_figures` did not run)."""
    claims = report.settings.get("claims_result")
    if claims is None:
        return []
    pct = int(round(claims.confidence * 100))
    out = [
        "## Claims",
        "",
        "Each claim of Crothers, Viktor & Japkowicz (arXiv 2308.06795) as a question, the statistic that "
        "answers it with its interval, a figure, and what this run supports (the verdict is generated from "
        "the numbers below, not taken from the paper).",
        "",
    ]
    bodies = {1: _claim1_lines, 2: _claim2_lines, 3: _claim3_lines}
    for n in (1, 2, 3):
        out += [f"### Claim {n}: {QUESTIONS[n]}", "", f"**Verdict:** {claims.verdicts.get(n, 'not computed')}", ""]
        out += bodies[n](claims, images, pct)
    return out
