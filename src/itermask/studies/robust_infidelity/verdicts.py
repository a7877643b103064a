"""The claims' verdict sentences (:func:`verdict1`, :func:`verdict2`, :func:`verdict3`; the criteria are in
:mod:`itermask.studies.robust_infidelity`), generated from the numbers (never from the paper), each ending with
its conditions (models, dataset, seeds, examples, score). Every direction word comes from its statistic's sign
and interval (:func:`direction`), and every verdict says the smallest effect its design detects at 80 % power
(:func:`~itermask.studies.robust_infidelity.statistics.detectable_effect`)."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from itermask.formatting import number
from itermask.reporting.attack_link import caveat
from itermask.reporting.model import records, series_rows
from itermask.studies.robust_infidelity.comparisons import few_seeds, with_holm
from itermask.studies.robust_infidelity.runs import select
from itermask.studies.robust_infidelity.settings import ADVERSARIAL, STANDARD
from itermask.studies.robust_infidelity.statistics import TOST_ALPHA, detectable_effect, equivalence_margin

if TYPE_CHECKING:
    from itermask.studies.robust_infidelity.claims import Claims

__all__ = ["verdict1", "verdict2", "verdict3", "conditions", "direction", "RISES", "RAISES"]

#: direction words (up, down, no detectable change, no change at all) of :func:`direction`: RISES for a
#: statistic that moves ("AOPC rises with ..."), RAISES for a treatment acting on one ("... lowers that")
RISES = ("rises", "falls", "does not change detectably", "does not change")
RAISES = ("raises", "lowers", "does not detectably change", "does not change")
#: the power every verdict states its smallest detectable effect at
POWER = 0.8
#: the factor around :data:`TOST_ALPHA` within which an equivalence test's p counts as close: claim 1's verdict
#: then says what it would read were that pair decided the other way (:func:`_gate_note`)
CLOSE = 2.0


def interval(row, key: str = "difference", digits: int = 4) -> str:
    """``row[key] [ci_low, ci_high]`` with ``digits`` decimals."""
    return f"{number(row[key], digits)} [{number(row['ci_low'], digits)}, {number(row['ci_high'], digits)}]"


def _excludes_zero(row) -> bool:
    return bool(row["ci_low"] > 0 or row["ci_high"] < 0)


def direction(
    estimate: float, low: float = math.nan, high: float = math.nan, words=RISES, name: str = "the estimate"
) -> str:
    """The direction word of a statistic from its sign and interval: NaN says it cannot be judged, exactly 0
    says so (a tie), an interval ``[low, high]`` that contains 0 gives "does not change detectably", else
    the sign picks ``words[0]`` (up) or ``words[1]`` (down). A NaN interval is not used (the sign decides)."""
    if math.isnan(estimate):
        return f"cannot be judged ({name} is not computable)"
    if estimate == 0:
        return f"{words[3]} ({name} is exactly 0)"
    if not (math.isnan(low) or math.isnan(high)) and low <= 0 <= high:
        return words[2]
    return words[0] if estimate > 0 else words[1]


def _detectable(design: str, n_a, n_b, sd, alpha: float, digits: int = 4) -> str:
    """The smallest effect :func:`detectable_effect` finds at :data:`POWER`, as a number or why not."""
    n_a = float(n_a) if design == "wald_t" else int(n_a)  # a Welch-Satterthwaite df need not be whole
    effect, why = detectable_effect(design, n_a, None if n_b is None else int(n_b), float(sd), alpha, POWER)
    return number(effect, digits) if why is None else f"not computable ({why})"


def _detectable_difference(row, alpha: float, digits: int = 4) -> str:
    """The smallest difference of two means over seeds that Welch's test of ``row`` (:func:`compare_samples`:
    its ``se`` and Welch-Satterthwaite ``df``) detects at :data:`POWER`: ``(t_{1-alpha/2, df} + t_{power, df})
    se`` (``detectable_effect("wald_t")``). On the test's own df it is never narrower than the Welch interval's
    half-width; the pooled-variance t-test's power (``"two_sample"``) claimed 0.096 beside a half-width of 0.16
    when one group's seeds spread far more than the other's (2 seeds each: Welch df 1.1, not 2)."""
    return _detectable("wald_t", row.get("df", math.nan), None, row.get("se", math.nan), alpha, digits)


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
    higher = top["a"] if top["difference"] > 0 else top["b"]
    return (
        f"the {top['method']} {measure} differs between {top['a']} and {top['b']} by {interval(top)} "
        f"(a - b, higher for {higher}; {int(claims.confidence * 100)} % mixed-model interval over every example "
        f"of every seed, Holm p = {number(top['p_holm'], 3)}; {chance})"
    )


def _claim1_power(claims: Claims, tested: pd.DataFrame) -> str:
    """Claim 1's smallest detectable between-model difference at :data:`POWER`, at Holm's strictest step: from
    each mixed-model contrast's standard error and degrees of freedom (``detectable_effect("wald_t")``)."""
    alpha, m = 1 - claims.confidence, max(len(tested), 1)
    sized = [
        detectable_effect("wald_t", float(r["df"]), None, float(r["se"]), alpha / m, POWER)[0]
        for r in series_rows(tested)
        if math.isfinite(float(r.get("se", math.nan))) and math.isfinite(float(r.get("df", math.nan)))
    ]
    sized = [d for d in sized if math.isfinite(d)]
    if not sized:
        return " The smallest detectable difference is not computable (no contrast has a standard error)."
    dfs = tested["df"].to_numpy(dtype=float)
    df = f"{np.nanmin(dfs):.3g}" + (f"-{np.nanmax(dfs):.3g}" if np.nanmax(dfs) - np.nanmin(dfs) > 0.05 else "")
    return (
        f" At {POWER * 100:.0f} % power this design (two-sided alpha {alpha:g}/{m} = {alpha / m:.2g}, Holm's "
        f"strictest step; t on {df} df) detects a difference of {number(min(sized))} to "
        f"{number(max(sized))} in the {claims.settings.score} across the {len(sized)} comparisons; smaller true "
        "differences can go unseen."
    )


def _gate_note(claims: Claims, verdict: str) -> str:
    """Claim 1's accuracy gate in words: each pair's TOST p, shown equivalent or not; and, for each pair whose
    p lies within a factor :data:`CLOSE` of :data:`TOST_ALPHA`, the verdict's word were that pair decided the
    other way (its comparisons joining or leaving Holm's family), when that word differs from ``verdict``'s.
    The bf16 rerun of the three-seed preset moved ``minilm - minilm_cda``'s p from 0.051 to 0.030, and with it
    claim 1's word from "supports in part" to "supports"; this names such a hinge in the verdict itself."""
    acc = claims.accuracy
    shown = [f"{r.a} - {r.b} (p = {number(r.p_value, 3)})" for r in records(acc) if r.equivalent]
    not_shown = [f"{r.a} - {r.b} (p = {number(r.p_value, 3)})" for r in records(acc) if not r.equivalent]
    parts = [", ".join(shown) or "none"] + ([f"not shown: {', '.join(not_shown)}"] if not_shown else [])
    margin = claims.settings.accuracy_margin
    note = f" Accuracy shown equivalent within ±{margin:g} (TOST, alpha {TOST_ALPHA:g}): {'; '.join(parts)}."
    word = verdict.split(":")[0]
    for i, r in enumerate(records(acc)):
        if not TOST_ALPHA / CLOSE <= float(r.p_value) < CLOSE * TOST_ALPHA:
            continue
        flipped = acc.copy()
        flipped.loc[flipped.index[i], "equivalent"] = not r.equivalent
        other = copy.copy(claims)
        other.accuracy = flipped
        other.model_differences = with_holm(claims.model_differences.drop(columns="p_holm"), flipped)
        alternative = _claim1_body(other, "").split(":")[0]
        if alternative != word:
            decided = "shown equivalent" if r.equivalent else "not shown equivalent"
            note += (
                f" The word hinges on a close equivalence test: {r.a} - {r.b} is {decided} at p = "
                f"{number(r.p_value, 3)} (within a factor {CLOSE:g} of {TOST_ALPHA:g}); decided the other way, "
                f'the verdict would read "{alternative}".'
            )
    return note


def _claim1_body(claims: Claims, extra: str) -> str:
    """Claim 1's verdict (before :func:`_gate_note`) once every model has 2+ seeds."""
    if not any(r.equivalent for r in records(claims.accuracy)):
        return _claim1_not_equivalent(claims, extra)
    return _claim1_judged(claims, extra)


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
    extra = _claim1_power(claims, tested) + extra
    if hits.empty:
        return (
            f"does not support: between models of equivalent accuracy (margin ±{s.accuracy_margin:g}) no "
            f"method's {s.score} or method - random differs detectably: every {int(claims.confidence * 100)} % "
            f"mixed-model interval includes 0 ({chance}) {text}.{extra}"
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
    acc, text = claims.accuracy, conditions(claims)
    if claims.model_differences.empty or acc.empty:
        return f"cannot answer: fewer than 2 models with standard fine-tuning runs {text}."
    if (few := few_seeds(claims.table, STANDARD)) is not None:
        return f"cannot answer: {few}, so no interval over seeds {text}."
    verdict = _claim1_body(claims, _concordance_note(claims))
    return verdict + _gate_note(claims, verdict)


def _claim1_not_equivalent(claims: Claims, extra: str) -> str:
    """Claim 1's verdict when no pair of models is shown equivalent in test accuracy: "does not support" when
    every pair's 90 % interval lies outside the margin (the models are not comparable), else "cannot answer"
    with the margin this design's TOST could show at :data:`POWER` (:func:`equivalence_margin`): too few seeds
    is not evidence of different accuracies."""
    s, acc, text = claims.settings, claims.accuracy, conditions(claims)
    m = s.accuracy_margin
    first = acc.iloc[0]
    example = f"e.g. {first['a']} - {first['b']}: {interval(first)} at 90 %, p = {number(first['p_value'], 3)}"
    if all(r.ci_low >= m or r.ci_high <= -m for r in records(acc)):
        return (
            f"does not support: no pair of models has equivalent test accuracy: every pair's 90 % interval lies "
            f"outside ±{m:g} (TOST; {example}), so the models are not comparable and score differences cannot be "
            f"separated from accuracy differences {text}.{extra}"
        )
    margins = [equivalence_margin(float(r.se), float(r.df), 0.05, POWER) for r in records(acc)]
    margins = [x for x in margins if math.isfinite(x)]
    if not margins:
        reach = "the margin this design's TOST could show is not computable"
    else:
        span = f"±{number(min(margins))} to ±{number(max(margins))}"
        powered = sum(x <= m for x in margins)
        reach = (
            f"at {POWER * 100:.0f} % power this design's TOST shows identical accuracies equivalent only within "
            f"{span}, wider than ±{m:g}: more seeds are needed"
            if not powered
            else f"at {POWER * 100:.0f} % power this design's TOST would show identical accuracies equivalent "
            f"within ±{m:g} for {powered} of {len(margins)} pairs (margins {span}), whose accuracies differ too "
            "much to show it" + ("; the others need more seeds" if powered < len(margins) else "")
        )
    return (
        f"cannot answer: no pair of models is shown equivalent in test accuracy within ±{m:g} (TOST; {example}); "
        f"{reach}, so score differences cannot be separated from accuracy differences {text}.{extra}"
    )


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
    alpha = 1 - claims.confidence
    power = (
        f"; at {POWER * 100:.0f} % power (two-sided alpha {alpha:g}) this design detects a mean AUROC "
        f"{_detectable('one_sample', std['n'], None, std['std'], alpha, 3)} away from 0.5 ({std['n']} seeds) "
        f"and a standard - masked difference of "
        f"{_detectable_difference(diff, alpha, 3)}"
    )
    numbers = (
        f"mean OOD AUROC over the masked steps {interval(std, 'mean')} after standard and "
        f"{interval(masked, 'mean')} after masked fine-tuning (difference {interval(diff)}, "
        f"{int(claims.confidence * 100)} % intervals over seeds; test accuracy "
        f"{'equivalent' if bool(acc.iloc[0].equivalent) else 'not shown equivalent'} within ±{s.accuracy_margin:g}"
        f"{power})"
    )
    # masked - standard: "lowers" when standard - masked lies above 0
    effect = direction(-diff["difference"], -diff["ci_high"], -diff["ci_low"], RAISES, "the difference")
    if std["ci_low"] > 0.5 and diff["ci_low"] > 0:
        return (
            f"supports: masked inputs are out of distribution for the standard fine-tuned {base} and masked "
            f"fine-tuning lowers that: {numbers} {text}."
        )
    if std["ci_low"] > 0.5:
        return (
            f"supports in part: masked inputs are out of distribution for the standard fine-tuned {base}, "
            f"but masked fine-tuning {effect} that: {numbers} {text}."
        )
    where = "includes 0.5" if std["ci_high"] >= 0.5 else "lies below 0.5"
    return (
        f"does not support: the standard fine-tuned {base} does not separate masked from clean inputs "
        f"beyond chance (its AUROC interval {where}): {numbers} {text}."
    )


def _link_model(r, score: str) -> str:
    """One model's attack link in words: its direction from rho's sign and usable interval (NaN, ties said)."""
    if r.get("why") is not None or math.isnan(r["rho"]):
        return f"{r['model']}: rho cannot be computed ({r.get('why') or 'not computable'})"
    usable = r.get("ci_why") is None and not math.isnan(r["ci_low"])
    low, high = (r["ci_low"], r["ci_high"]) if usable else (math.nan, math.nan)
    ci = (
        f" [{number(r['ci_low'], 3)}, {number(r['ci_high'], 3)}]"
        if usable
        else f" (no usable interval over seeds: {r['ci_why']})"
        if r.get("ci_why")
        else ""
    )
    return (
        f"{r['model']}: {score} {direction(r['rho'], low, high, RISES, 'rho')} with the attack success rate, "
        f"rho = {number(r['rho'], 3)}{ci} (exact p = {number(r['p_value'], 3)}, {len(r['methods'])} methods)"
    )


def _attack_link_part(claims: Claims) -> str:
    """Claim 3's verdict on the attack link across methods."""
    link, alpha = claims.attack_link, 1 - claims.confidence
    if link.empty:
        return "the attack link cannot be computed (no attacked methods)"
    rows = list(series_rows(link))
    usable = [r for r in rows if r.get("ci_why") is None and not math.isnan(r["ci_low"])]
    positive = [r for r in usable if r["ci_low"] > 0]
    significant = [r for r in positive if r["p_value"] < alpha]
    # "supports": rho's interval over seed resamples above 0 for every model and the permutation test at
    # alpha for one; above 0 without a significant permutation test (few methods) or for some models: "in part"
    verdict = (
        "cannot judge (no interval over seeds: fewer than 2 seeds)"
        if link.ci_low.isna().all() and link.rho.notna().any()
        else "cannot judge (no model has a usable interval over seeds)"
        if not usable
        else "supports"
        if len(positive) == len(link) and significant
        else "supports in part"
        if positive
        else "does not support"
    )
    n_methods = max(len(m) for m in link.methods)
    rho = _detectable("rank_correlation", n_methods, None, math.nan, alpha, 3)
    rho += "" if rho.startswith("not") else f" (Fisher z, two-sided alpha {alpha:g}, {n_methods} methods)"
    text = "; ".join(_link_model(r, claims.settings.score) for r in rows)
    return (
        f"{verdict} the attack link (across methods, the score rising with the attack success rate): {text} "
        f"({int(claims.confidence * 100)} % bootstrap intervals over seeds; {caveat(n_methods)}; the smallest "
        f"rho this design detects at {POWER * 100:.0f} % power is {rho})"
    )


def _adversarial_lead(score, equivalent: bool, rate) -> str:
    """How adversarial fine-tuning's effect compares with the paper's claim that it does NOT consistently
    change faithfulness (``score``/``rate``: the adversarial - standard rows of the score and success rate)."""
    if score is None or not _excludes_zero(score):
        lead = "agrees with the paper: adversarial fine-tuning is not shown to change faithfulness"
    elif equivalent:
        verb = direction(score["difference"], score["ci_low"], score["ci_high"], RAISES)
        lead = f"differs from the paper: adversarial fine-tuning {verb} faithfulness at equivalent accuracy"
    else:
        lead = (
            "adversarial fine-tuning changes faithfulness, but test accuracy changes too, so this run cannot "
            "separate the two (the paper reports no consistent change)"
        )
    if rate is not None and rate["ci_high"] < 0:
        return lead
    raises = rate is not None and rate["ci_low"] > 0
    return f"{lead} (and it {'raises' if raises else 'is not shown to lower'} the attack success rate)"


def _adversarial_power(claims: Claims, score, rate) -> str:
    """The smallest adversarial - standard differences this design detects at :data:`POWER`."""
    alpha = 1 - claims.confidence
    parts = [
        f"{_detectable_difference(r, alpha)} in the {name}"
        for name, r in ((claims.settings.score, score), ("attack success rate", rate))
        if r is not None
    ]
    detects = f"this design detects differences of {' and '.join(parts)}"
    return f"; at {POWER * 100:.0f} % power (two-sided alpha {alpha:g}) {detects}"


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
    found = {m: list(series_rows(select(d, d.measure == m))) for m in ("score", "success_rate")}
    score, rate = (found[m][0] if found[m] else None for m in ("score", "success_rate"))
    pct = int(claims.confidence * 100)
    numbers = (
        f"adversarial - standard {method} {s.score} {interval(score) if score is not None else 'n/a'}, "
        f"attack success rate {interval(rate) if rate is not None else 'n/a'} ({pct} % Welch intervals over "
        f"seeds), test accuracy {'equivalent' if bool(acc.equivalent) else 'not shown equivalent'} within "
        f"±{s.accuracy_margin:g} ({interval(acc)} at 90 %){_adversarial_power(claims, score, rate)}"
    )
    lead = _adversarial_lead(score, bool(acc.equivalent), rate)
    return f"{lead}: {numbers} {conditions(claims, [str(base)])}"


def verdict3(claims: Claims, base: str | None, method: str | None) -> str:
    """Claim 3's verdict (module docstring): the attack link, then adversarial fine-tuning."""
    return f"{_attack_link_part(claims)} {conditions(claims)}; {_adversarial_part(claims, base, method)}."
