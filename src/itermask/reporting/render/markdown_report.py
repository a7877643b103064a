"""The report as Markdown (``report.md``, and the body of ``report.html``): the report's sections first
(:mod:`itermask.reporting.sections`, e.g. the Claims of ``experiment=paper``), the first screen, then the
headline (score minus random, seed share of variance, OOD AUROC), failed and missing jobs, seed
sensitivity, the scores over seeds per group with their masking-curve figures, faithfulness vs attack
efficiency, the model comparisons, and the examples last. Every string from data or config (names, labels,
paths, messages) goes in escaped (:func:`~itermask.formatting.md_escape`; tables:
:func:`~itermask.formatting.md_table`): ``report.html`` renders this Markdown keeping raw HTML."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import pandas as pd

from itermask.analyses.base import analysis_classes
from itermask.analyses.model_check import model_check_line
from itermask.core.metrics import metric_info
from itermask.formatting import md_escape, md_table, mean_pm, number
from itermask.ood.bounds import statistic_unit
from itermask.reporting.attack_link import COLUMNS, caveat
from itermask.reporting.model import MEASURE, Report, of_group, of_measure, records, series_rows
from itermask.reporting.sections import ReportSection

__all__ = ["render_markdown", "main_table"]


def _ci(row) -> str:
    return f"[{number(row['ci_low'])}, {number(row['ci_high'])}]"


def _merged_schedules(rows: pd.DataFrame, per_seed: pd.DataFrame) -> list[tuple[str, Any]]:
    """``(schedules, row)`` for the rows of one group, a row whose per-seed values equal another row's of the
    same explanation and score (e.g. the random explanation under both schedules) shown once, its schedules
    joined as ``one_shot = recursive``."""
    seen: dict[tuple, list] = {}
    for row in series_rows(rows):
        same = of_measure(per_seed, row.explanation, row.schedule, row.score)
        values = same.sort_values("seed").value.round(12).tolist()
        nan_safe = tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in values)
        seen.setdefault((row.explanation, row.score, nan_safe), []).append(row)
    return [(" = ".join(r["schedule"] or "-" for r in group), group[0]) for group in seen.values()]


def main_table(report: Report, label: tuple) -> str:
    """The Markdown table of one group: each measure's n, mean, std and CI over seeds (rows identical to
    another row shown once)."""
    header = ["explanation", "schedule", "score", "unit", "n", "mean", "std", f"{report.percent} % CI"]
    merged = _merged_schedules(of_group(report.summary, label), of_group(report.per_seed, label))
    body = [
        [r["explanation"], schedules, r["score"], _unit(r["score"]), number(r["n"]), number(r["mean"])]
        + [number(r["std"]), _ci(r)]
        for schedules, r in merged
    ]
    return md_table(header, body)


def _unit(score: str) -> str:
    if score.startswith("accuracy_"):
        return "fraction"
    info = metric_info(score)
    if info is None and score.startswith("ood ") and " @" in score:  # ood <statistic> @<p>%
        return statistic_unit(score[4:].rsplit(" @", 1)[0])
    return info.unit if info is not None else ("AUROC" if "auroc" in score else "")


def _seed_table(report: Report, label: tuple) -> str:
    rows = of_group(report.per_seed, label)
    order = list(dict.fromkeys(zip(*(rows[c] for c in MEASURE))))
    wide = rows.set_index([*MEASURE, "seed"])["value"].unstack("seed").reindex(order)
    seeds = list(wide.columns)
    return md_table(
        ["explanation", "schedule", "score", *[f"seed {s}" for s in seeds]],
        [[e, s or "-", sc, *[number(v) for v in values]] for (e, s, sc), values in zip(wide.index, wide.to_numpy())],
    )


def _comparison_table(report: Report, frame: pd.DataFrame) -> str:
    name = "Welch t" if report.settings["test"] == "welch" else "mean diff."
    header = ["explanation", "schedule", "score", "n a/b", "mean a", "mean b", "a - b", f"{report.percent} % CI"]
    rows = [
        [r.explanation, r.schedule or "-", r.score, f"{r.n_a}/{r.n_b}", number(r.mean_a), number(r.mean_b)]
        + [number(r.difference), _ci(r._asdict()), number(r.statistic, 3), number(r.p_value, 4)]
        + [number(r.difference_in_seed_sd, 2)]
        for r in records(frame)
    ]
    return md_table([*header, name, "p", "in seed sd"], rows)


def _direction(row) -> str:
    flag = row["higher_is_more_faithful"]
    if flag is None or (isinstance(flag, float) and math.isnan(flag)):
        return ""
    return ", higher = more faithful" if flag else ", lower = more faithful"


def _headline_table(report: Report, label: tuple) -> list[str]:
    """One group's headline table: per schedule and headline score, method − random and the seed share."""
    rows, method, pct = of_group(report.headline, label), label[2], report.percent
    if not len(rows):
        return []
    header = ["schedule", "score", method, f"{method} − random ({pct} % CI)", "p (paired t, seeds)"]
    body = []
    for r in series_rows(rows):
        better = f"{int(r['n_better'])} of {int(r['n_seeds'])} seeds" if pd.notna(r["n_better"]) else "n/a"
        share = f"{number(r['seed_share'], 3)} [{number(r['share_ci_low'], 3)}, {number(r['share_ci_high'], 3)}]"
        score = f"{r['score']} ({r['unit']}{_direction(r)})"
        difference = f"{number(r['difference'])} {_ci(r)}"
        body.append([r["schedule"], score, number(r["mean"]), difference, number(r["p_value"], 3), better, share])
    return [md_table([*header, "better than random", f"seed share of variance ({pct} % CI)"], body), ""]


def _headline_group(report: Report, label: tuple, members: list) -> list[str]:
    first, summary = members[0].result, of_group(report.summary, label)
    acc = summary[(summary.explanation == "model") & (summary.score == "accuracy_test")]
    skipped = first.get("n_skipped_no_maskable") or 0
    scored = (first.get("accuracy") or {}).get("n_scored") or first.get("n_test")  # all but under limit_test_batches
    n_test = f"{scored:,}" if isinstance(scored, int) else "n/a"
    seeds = md_escape(", ".join(str(r.seed) for r in members))
    out = [
        f"**{md_escape(' / '.join(label))}**, {len(members)} seed(s) ({seeds}): test "
        f"accuracy {mean_pm(acc.iloc[0]) if len(acc) else 'n/a'} (mean ± std over seeds) on "
        f"{n_test} test examples; the scores below on {md_escape(first.get('n_evaluated', 'n/a'))} "
        f"evaluation examples" + (f" ({md_escape(skipped)} without a maskable token skipped)." if skipped else "."),
        "",
    ]
    meaningless = [(run.seed, line) for run in members if (line := model_check_line(run.result)) is not None]
    out += [
        f"> **Warning** (seed {md_escape(s)}): {md_escape(line.removeprefix('WARNING: '))}." for s, line in meaningless
    ]
    out += [""] if meaningless else []
    out += _headline_table(report, label)
    for analysis in _group_analyses(members):
        out += analysis.headline_lines(summary)
    return out


def _group_analyses(members: list) -> list:
    """The analysis classes of a group's results (:func:`~itermask.analyses.base.analysis_classes`), each once."""
    found: list = []
    for run in members:
        found += [cls for cls in analysis_classes(run.result) if cls not in found]
    return found


#: below this many seeds the percentile bootstrap of a mean is too narrow to be a confidence interval
BOOTSTRAP_MIN_SEEDS = 5


def few_seeds_warning(report: Report) -> str:
    """With the percentile bootstrap (``--bootstrap``) and a group of fewer than :data:`BOOTSTRAP_MIN_SEEDS`
    runs: why its intervals are not to be read as confidence intervals (the resampled means of 2 seeds are the
    two values and their mean, so the interval is their range; of n seeds it covers well under its nominal
    level), else ``""``."""
    if report.settings["interval"] != "bootstrap" or not report.groups:
        return ""
    fewest = min(len(runs) for runs in report.groups.values())
    if fewest >= BOOTSTRAP_MIN_SEEDS:
        return ""
    return (
        f". **Warning**: a group has only {fewest} seed(s): a percentile bootstrap over so few is about the range "
        f"of the values (with 2 seeds exactly [min, max]) and covers well under {report.percent} %; read the "
        "t-interval (the default) or run at least 5 seeds"
    )


def _headline(report: Report) -> list[str]:
    out = ["## Headline", ""]
    out += [f"> **Note:** {md_escape(note)}" for note in report.notes] + ([""] if report.notes else [])
    for label, members in report.groups.items():
        out += _headline_group(report, label, members)
    out += [
        "*Seed share of variance*: the share of a score's variance over seeds x examples that comes from "
        "the fine-tuning seed (two-way random-effects ANOVA; 0: the seeds agree, 1: only the seed matters; "
        "interval: bootstrap over examples). *p*: paired t-test over seeds of the difference to the seeded "
        "random explanation evaluated on the same examples.",
        "",
    ]
    return out


def _seed_sensitivity_table(report: Report, rows: pd.DataFrame) -> str:
    """One group's seed-sensitivity table, a row identical to another row's (but for the schedule) shown
    once, its schedules joined as ``one_shot = recursive``."""
    merged: dict[tuple, list] = {}
    for r in series_rows(rows):
        share = round(r["share"], 12) if pd.notna(r["share"]) else None
        friedman = round(r["friedman_statistic"], 9) if pd.notna(r["friedman_statistic"]) else None
        merged.setdefault((r["explanation"], r["score"], share, r["n_examples"], friedman), []).append(r)
    header = ["explanation", "schedule", "score", "n used / dropped", f"seed share ({report.percent} % CI)"]
    body = []
    for group in merged.values():
        r = group[0]
        share = f"{number(r['share'], 3)} [{number(r['ci_low'], 3)}, {number(r['ci_high'], 3)}]"
        schedules, used = " = ".join(g["schedule"] for g in group), f"{r['n_examples']} / {r['n_dropped']}"
        row = [r["explanation"], schedules, r["score"], used, share, number(r["friedman_p"], 4)]
        note = r["why"] if isinstance(r["why"], str) else ""  # None or pandas' NaN: no note, never "nan"
        body.append([*row, number(r["mean_spearman"], 3), note])
    return md_table([*header, "Friedman p", "Spearman", "note"], body)


def _rank_stability_lines(report: Report) -> list[str]:
    """Kendall's W of the saliency methods' ranking by each seed (none without it)."""
    if report.rank_stability.empty:
        return []
    columns = ["model", "dataset", "masking", "schedule", "score", "methods"]
    rows = [
        [*(getattr(r, c) for c in columns), number(r.w, 3), number(r.p_value, 4)]
        for r in records(report.rank_stability)
    ]
    intro = (
        "Kendall's W of the methods' ranking by each seed (1: every seed ranks them alike). "
        "Few methods give a weak test."
    )
    return ["### Rank stability of the saliency methods", "", intro, "", md_table([*columns, "W", "p"], rows), ""]


def _seed_sensitivity_section(report: Report) -> list[str]:
    frame = report.seed_sensitivity
    if frame.empty:
        return []
    out = [
        "## Seed sensitivity",
        "",
        "Every per-example score over seeds x examples (examples where the score is "
        "undefined in some seed, e.g. never flipped, are dropped: n used / dropped). Friedman: test that the "
        "seeds' per-example scores differ. Spearman: mean rank correlation of the per-example scores between "
        "seeds. Rows identical to another row are shown once.",
        "",
    ]
    for label in report.groups:
        rows = of_group(frame, label)
        if not rows.empty:
            out += [f"### {md_escape(' / '.join(label))}", "", _seed_sensitivity_table(report, rows), ""]
    return out + _rank_stability_lines(report)


def _group_sections(report: Report, images: dict[str, str]) -> list[str]:
    out = []
    for label, members in report.groups.items():
        title = " / ".join(label)
        seeds = f"Seeds: {', '.join(str(r.seed) for r in members)} (jobs {', '.join(r.job for r in members)})."
        out += [f"## {md_escape(title)}", "", md_escape(seeds), ""]
        for key, path in images.items():
            if key.startswith(f"curves::{title}::"):
                out += [f"![{md_escape('masking curves ' + title + ' ' + key.rsplit('::', 1)[1])}]({path})", ""]
        out += [main_table(report, label), "", "<details><summary>per seed</summary>", "", _seed_table(report, label)]
        out += ["", "</details>", ""]
    return out


def _comparison_sections(report: Report, images: dict[str, str]) -> list[str]:
    if report.comparisons.empty:
        return []
    s, pct = report.settings, report.percent
    test = (
        "Welch's t-test (unequal variances)"
        if s["test"] == "welch"
        else f"permutation test of the mean difference ({s['n_resamples']} resamples), bootstrap interval"
    )
    out = [
        "## Model comparisons",
        "",
        f"Difference of the means over seeds (a - b), {pct} % confidence interval, "
        f"two-sided p-value of {test}, and the difference in units of the pooled within-group seed standard "
        "deviation (*in seed sd*).",
        "",
    ]
    # pandas' stubs type a group key as ``Hashable``; grouped by a list of columns it is a tuple
    for (a, b), frame in report.comparisons.groupby(["model_a", "model_b"], sort=False):  # pyright: ignore[reportGeneralTypeIssues]
        for (dataset, saliency, masking), sub in frame.groupby(["dataset", "saliency", "masking"], sort=False):  # pyright: ignore[reportGeneralTypeIssues]
            title = md_escape(f"{a} vs {b}: {dataset} / {saliency} / {masking}")
            out += [f"### {title}", "", _comparison_table(report, sub), ""]
            key = f"compare::{a}::{b}::{dataset}::{saliency}::{masking}"
            if key in images:
                out += [f"![{title}]({images[key]})", ""]
    return out


def render_markdown(
    report: Report,
    images: dict[str, str],
    first_screen: list[str] | None = None,
    appendix: list[str] | None = None,
    sections: Sequence[ReportSection] = (),
) -> str:
    """The report as Markdown, its parts in the order of the module docstring: the ``sections``' lines (their
    figures already written) first, ``first_screen`` lines (:func:`itermask.reporting.render.html_page.build`)
    next and ``appendix`` lines (the examples section) last; ``images`` maps image keys to paths or data URIs."""
    s, sweep, pct = report.settings, report.sweep, report.percent
    interval = (
        "Student's t-interval over seeds (on the logit scale of a bounded measure's range, e.g. a probability, "
        "AUROC or rate, so that it stays inside it)"
        if s["interval"] == "t"
        else f"percentile bootstrap over seeds ({s['n_resamples']} resamples)" + few_seeds_warning(report)
    )
    expected = f" of {sweep.n_expected} expected" if sweep.n_expected is not None else ""
    runs = f"{len(sweep.runs)} finished run(s){expected} in {len(report.groups)} group(s)."
    out = [f"# itermask report: {md_escape(sweep.root)}", "", runs, ""]
    for section in sections:  # e.g. experiment=paper: the claims first
        out += section.markdown(report, images)
    out += first_screen or []
    out += _headline(report)
    if sweep.failed:
        out += [
            "## Failed jobs",
            "",
            f"{len(sweep.failed)} job(s) failed; each folder holds `failed.json` with the "
            "traceback (also in the job's log). They are not in the tables below.",
            "",
            *[f"- {md_escape(line)}" for line in sweep.failed_lines()],
            "",
        ]
    missing = sweep.missing_lines()
    if missing:
        out += ["## Missing", "", *[f"- {md_escape(line)}" for line in missing], ""]
    out += _seed_sensitivity_section(report)
    out += [
        "## Scores over seeds",
        "",
        f"Mean, sample standard deviation and {pct} % confidence interval "
        f"({interval}) of each measure. `<method> - random`: the score minus that of the seeded random "
        "explanation of the same run.",
        "",
    ]
    out += _group_sections(report, images)
    out += _attack_section(report)
    out += _comparison_sections(report, images)
    out += appendix or []
    return "\n".join(out)


def _attack_section(report: Report) -> list[str]:
    """The rank correlation across saliency methods of faithfulness and attack efficiency (none without it)."""
    links = report.attack_links
    if links.empty:
        return []
    n_methods = int(cast(float, links["n_methods"].max()))
    out = [
        "## Faithfulness vs attack efficiency (across saliency methods)",
        "",
        "Spearman's rank correlation, across the saliency methods of a model/dataset/masking, between the "
        "seed mean of AOPC comprehensiveness and the seed mean of an attack efficiency (success rate: higher "
        "is more efficient; perturbed fraction of the successful attacks: lower is more efficient), with the "
        "exact permutation p-value. If faithfulness partly measures how easily the model is attacked along "
        "the ranking, rho is positive for the success rate and negative for the perturbed fraction. "
        f"Caveat: {caveat(n_methods)}.",
        "",
    ]
    rows = []
    for r in records(links):
        means = zip(r.methods, r.faithfulness_means, r.efficiency_means)
        methods = ", ".join(f"{m} ({number(f, 3)}, {number(e, 3)})" for m, f, e in means)
        rows.append([*(getattr(r, c) for c in COLUMNS[:6]), methods, number(r.spearman_rho, 3), number(r.p_value, 3)])
    header = [*COLUMNS[:6], "methods (faithfulness, efficiency)", "rho", "p"]  # model ... efficiency
    return [*out, md_table(header, rows), ""]
