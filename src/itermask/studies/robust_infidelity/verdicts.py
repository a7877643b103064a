"""The claims' verdict sentences (:func:`verdict1`, :func:`verdict2`, :func:`verdict3`; the criteria are in
:mod:`itermask.studies.robust_infidelity`), generated from the numbers (never from the paper), each ending with
its conditions (models, dataset, seeds, examples, score)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from itermask.formatting import number
from itermask.reporting.attack_link import caveat
from itermask.reporting.model import records, series_rows
from itermask.studies.robust_infidelity.comparisons import few_seeds
from itermask.studies.robust_infidelity.runs import select
from itermask.studies.robust_infidelity.settings import ADVERSARIAL, STANDARD

if TYPE_CHECKING:
    from itermask.studies.robust_infidelity.claims import Claims

__all__ = ["verdict1", "verdict2", "verdict3", "conditions"]


def interval(row, key: str = "difference", digits: int = 4) -> str:
    """``row[key] [ci_low, ci_high]`` with ``digits`` decimals."""
    return f"{number(row[key], digits)} [{number(row['ci_low'], digits)}, {number(row['ci_high'], digits)}]"


def _excludes_zero(row) -> bool:
    return bool(row["ci_low"] > 0 or row["ci_high"] < 0)


def conditions(claims: Claims, models: Sequence[str] | None = None) -> str:
    """The conditions a verdict holds under: models (``claims.conditions``' unless given), dataset, seeds,
    examples, score, schedule and masking."""
    c, s = claims.conditions, claims.settings
    models = models if models is not None else c.get("models", [])
    return (
        f"(models {', '.join(models)}; dataset {c.get('dataset')}; seeds {c.get('seeds')}; "
        f"{c.get('n_examples')} test examples; {s.score}, {s.schedule} masking with {c.get('masking')})"
    )


#: claim 1's note when every difference shown is in the raw scores (the random explanation's included)
RAW_ONLY = (
    " The differences are in the raw scores only, the random explanation's included, not in method - random:"
    " the models differ in how their outputs respond to masking, not in how far the methods beat random."
)


def _concordance_note(claims: Claims) -> str:
    """Claim 1's verdict's last sentences: Kendall's W across models and the largest model share of variance."""
    w = claims.concordance.get("w", math.nan)
    extra = f" Kendall's W of the methods' ranking across models is {number(w, 3)}" + (
        f" (permutation p = {number(claims.concordance.get('p_permutation'), 3)})." if not math.isnan(w) else "."
    )
    comp = claims.components
    share = select(comp, comp.component == "model") if not comp.empty else None
    if share is not None and len(share):
        best = share.sort_values(by="share", ascending=False).iloc[0]
        extra += (
            f" The largest model share of variance is {number(best['share'], 3)} "
            f"[{number(best['share_ci_low'], 3)}, {number(best['share_ci_high'], 3)}] ({best['method']})."
        )
    return extra


def _model_difference_found(claims: Claims, shown: pd.DataFrame, chance: str) -> str:
    """The largest of the ``shown`` between-model differences, in words."""
    s = claims.settings
    top = shown.loc[shown["difference"].abs().idxmax()]
    measure = s.score if top["measure"] == "score" else f"{s.score} minus random"
    return (
        f"the {top['method']} {measure} differs between {top['a']} and {top['b']} by {interval(top)} "
        f"({int(claims.confidence * 100)} % mixed-model interval over every example of every seed, Holm p = "
        f"{number(top['p_holm'], 3)}; "
        f"{chance})"
    )


def _claim1_judged(claims: Claims, extra: str) -> str:
    """Claim 1's verdict when some pair of models has equivalent accuracy and every model has 2+ seeds."""
    s, diffs, text = claims.settings, claims.model_differences, conditions(claims)
    tested = select(diffs, diffs["p_holm"].notna())
    if tested.empty:  # every comparison at equivalent accuracy failed to fit (its reason says why)
        why = "; ".join(sorted(set(diffs["reason"].dropna())))
        return f"cannot answer: no between-model difference could be estimated ({why}) {text}.{extra}"
    alpha = 1 - claims.confidence
    hits = select(tested, [_excludes_zero(r) for r in series_rows(tested)])
    chance = f"{len(hits)} of {len(tested)} intervals exclude 0 (about {alpha * len(tested):.1f} expected by chance)"
    if hits.empty:
        return (
            f"does not support: between models of equivalent accuracy (margin ±{s.accuracy_margin:g}) no "
            f"method's {s.score} or method - random differs: every {int(claims.confidence * 100)} % mixed-model "
            f"interval includes 0 ({chance}) {text}.{extra}"
        )
    corrected = select(tested, tested["p_holm"] < alpha)
    shown = corrected if not corrected.empty else hits
    found = _model_difference_found(claims, shown, chance)
    where = RAW_ONLY if set(shown["measure"]) == {"score"} else ""
    if corrected.empty:
        return (
            f"supports in part: at equivalent test accuracy (margin ±{s.accuracy_margin:g}, TOST), {found}, but "
            f"no difference survives Holm's correction for the {len(tested)} comparisons (smallest Holm p = "
            f"{number(float(np.nanmin(tested['p_holm'].to_numpy(dtype=float))), 3)}) {text}.{where}{extra}"
        )
    return (
        f"supports: at equivalent test accuracy (margin ±{s.accuracy_margin:g}, TOST), {found}; "
        f"{len(corrected)} of {len(tested)} differences survive Holm's correction {text}.{where}{extra}"
    )


def verdict1(claims: Claims) -> str:
    """Claim 1's verdict (module docstring)."""
    s, acc, text = claims.settings, claims.accuracy, conditions(claims)
    if claims.model_differences.empty or acc.empty:
        return f"cannot answer: fewer than 2 models with standard fine-tuning runs {text}."
    if (few := few_seeds(claims.table, STANDARD)) is not None:
        return f"cannot answer: {few}, so no interval over seeds {text}."
    extra = _concordance_note(claims)
    if not any(r.equivalent for r in records(acc)):
        worst = acc.iloc[0]
        return (
            f"does not support: no pair of models has equivalent test accuracy within ±{s.accuracy_margin:g} "
            f"(TOST; e.g. {worst['a']} - {worst['b']}: {interval(worst)} at 90 %, p = {number(worst['p_value'], 3)}),"
            f" so score differences cannot be separated from accuracy differences {text}.{extra}"
        )
    return _claim1_judged(claims, extra)


def verdict2(claims: Claims, base: str | None, few: str | None) -> str:
    """Claim 2's verdict (module docstring); ``few``: why intervals over seeds cannot be computed."""
    text = conditions(claims, [str(base)])
    if not claims.ood_summary:
        return (
            f"cannot answer: no standard and masked fine-tuning runs of the base model with OOD statistics "
            f"(model {base}; use ood=final or ood=full) {text}."
        )
    if few is not None:
        return f"cannot answer: {few} {text}."
    s, summary = claims.settings, claims.ood_summary
    std, masked, diff, acc = summary["standard"], summary["masked"], summary["difference"], summary["accuracy"]
    numbers = (
        f"mean OOD AUROC over the masked steps {interval(std, 'mean')} after standard and "
        f"{interval(masked, 'mean')} after masked fine-tuning (difference {interval(diff)}, "
        f"{int(claims.confidence * 100)} % intervals over seeds; test accuracy "
        f"{'equivalent' if bool(acc.iloc[0].equivalent) else 'not shown equivalent'} within ±{s.accuracy_margin:g})"
    )
    if std["ci_low"] > 0.5 and diff["ci_low"] > 0:
        return (
            f"supports: masked inputs are out of distribution for the standard fine-tuned {base} and masked "
            f"fine-tuning lowers that: {numbers} {text}."
        )
    if std["ci_low"] > 0.5:
        return (
            f"supports in part: masked inputs are out of distribution for the standard fine-tuned {base}, "
            f"but masked fine-tuning is not shown to lower that: {numbers} {text}."
        )
    return (
        f"does not support: the standard fine-tuned {base} does not separate masked from clean inputs "
        f"beyond chance (interval includes or is below 0.5): {numbers} {text}."
    )


def _attack_link_part(claims: Claims) -> str:
    """Claim 3's verdict on the attack link across methods."""
    link = claims.attack_link.dropna(subset=["rho"]) if not claims.attack_link.empty else claims.attack_link
    if link.empty:
        return "the attack link cannot be computed (no attacked methods with varying means)"
    positive = [r for r in series_rows(link) if r["ci_low"] > 0]
    text = "; ".join(
        f"{r['model']}: rho = {interval(r, 'rho', 3)} (exact p = {number(r['p_value'], 3)}, "
        f"{len(r['methods'])} methods)"
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
    return (
        f"{verdict} the attack link: across methods, {claims.settings.score} rises with the attack success rate "
        f"({text}; {int(claims.confidence * 100)} % bootstrap intervals over seeds; "
        f"{caveat(max(len(m) for m in link.methods))})"
    )


def _adversarial_lead(changed: bool, equivalent: bool, robust: bool) -> str:
    """How adversarial fine-tuning's effect compares with the paper's claim that it does NOT consistently
    change faithfulness."""
    if not changed:
        lead = "agrees with the paper: adversarial fine-tuning is not shown to change faithfulness"
    elif equivalent:
        lead = "differs from the paper: adversarial fine-tuning changes faithfulness at equivalent accuracy"
    else:
        lead = (
            "adversarial fine-tuning changes faithfulness, but test accuracy changes too, so this run cannot "
            "separate the two (the paper reports no consistent change)"
        )
    return lead + ("" if robust else " (and it is not shown to lower the attack success rate)")


def _adversarial_part(claims: Claims, base: str | None, method: str | None) -> str:
    """Claim 3's verdict on adversarial vs standard fine-tuning of the base model."""
    s, adv = claims.settings, claims.adversarial
    few = few_seeds(select(claims.table, claims.table.model == str(base)), STANDARD, ADVERSARIAL)
    if adv.empty or method is None:
        return "adversarial vs standard fine-tuning is not in this run"
    if few is not None:
        return f"adversarial vs standard fine-tuning cannot be answered: {few}"
    d = select(adv, adv.kind == "difference")
    acc = select(adv, adv.kind == "accuracy").iloc[0]
    score, rate = select(d, d.measure == "score"), select(d, d.measure == "success_rate")
    pct = int(claims.confidence * 100)
    numbers = (
        f"adversarial - standard {method} {s.score} {interval(score.iloc[0]) if len(score) else 'n/a'}, "
        f"attack success rate {interval(rate.iloc[0]) if len(rate) else 'n/a'} ({pct} % Welch intervals over "
        f"seeds), test accuracy {'equivalent' if bool(acc.equivalent) else 'not shown equivalent'} within "
        f"±{s.accuracy_margin:g} ({interval(acc)} at 90 %)"
    )
    changed = bool(len(score) and _excludes_zero(score.iloc[0]))
    robust = bool(len(rate) and rate.iloc[0]["ci_high"] < 0)
    lead = _adversarial_lead(changed, bool(acc.equivalent), robust)
    return f"{lead}: {numbers} {conditions(claims, [str(base)])}"


def verdict3(claims: Claims, base: str | None, method: str | None) -> str:
    """Claim 3's verdict (module docstring): the attack link, then adversarial fine-tuning."""
    return f"{_attack_link_part(claims)} {conditions(claims)}; {_adversarial_part(claims, base, method)}."
