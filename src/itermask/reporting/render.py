"""Writing a :class:`~itermask.reporting.aggregate.Report`: masking-curve plots with a band over seeds,
Markdown and HTML, and the CSV tables, all atomically."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from itermask.reporting.aggregate import GROUP, MEASURE, Report, _curves, _model_pairs
from itermask.reporting.attack_link import caveat
from itermask.reporting.statistics import seed_interval
from itermask.reporting.sweep import FILES, Run
from itermask.storage.files import write_bytes_atomic, write_text_atomic

__all__ = ["write_report", "render_markdown", "render_html", "main_table"]


def _curve_band(runs: list[Run], key: tuple[str, str], series: str, confidence: float, interval: str,
                n_resamples: int, seed: int):
    rows = [_curves(r.result).get(key, {}) for r in runs]
    rows = [r for r in rows if series in r and "fraction" in r]
    if not rows:
        return None
    fraction = np.asarray(rows[0].get("x", rows[0]["fraction"]), dtype=float)  # the step grid
    matrix = np.array([[math.nan if x is None else x for x in r[series]] for r in rows], dtype=float)
    aggs = [seed_interval(matrix[:, j], confidence, interval, n_resamples, seed) for j in range(matrix.shape[1])]
    mean = np.array([a["mean"] for a in aggs])
    low = np.array([a["ci_low"] for a in aggs])
    high = np.array([a["ci_high"] for a in aggs])
    return fraction, mean, low, high


def _panels(runs: list[Run]) -> list[str]:
    """The per-step series to plot: the usual ones first, then any other (``x``, ``fraction`` and
    ``mean_k`` describe the grid and are not plotted)."""
    names: list[str] = []
    for run in runs:
        for series in _curves(run.result).values():
            names += [n for n in series if n not in names]
    order = ["target_prob", "target_logit", "comprehensiveness_prob", "comprehensiveness_logit",
             "sufficiency_prob", "sufficiency_logit", "flip_rate", "accuracy"]
    grid = ("x", "fraction", "mean_k")
    return [n for n in order if n in names] + [n for n in names if n not in order and n not in grid]


def _x_label(runs: list[Run]) -> str:
    steps = {s.get("steps", "fraction") for r in runs for by in r.result["scores"].values() for s in by.values()}
    return "tokens masked" if steps == {"count"} else "masking fraction"


def _plot(lines: list[tuple[str, list[Run], tuple[str, str], dict]], title: str, report: Report) -> bytes:
    """A PNG: one panel per curve series, one line per (legend, runs, (explanation, schedule), matplotlib
    style), band = the confidence interval over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = report.settings
    panels = _panels([r for _, runs, _, _ in lines for r in runs])
    x_label = _x_label([r for _, runs, _, _ in lines for r in runs])
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.3 * nrows + 0.6), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, series in zip(axes.flat, panels):
        for legend, runs, key, style in lines:
            band = _curve_band(runs, key, series, s["confidence"], s["interval"], s["n_resamples"], s["seed"])
            if band is None:
                continue
            fraction, mean, low, high = band
            (line,) = ax.plot(fraction, mean, marker="o", markersize=3, label=f"{legend} (n={len(runs)})", **style)
            if np.isfinite(low).any():
                ax.fill_between(fraction, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_xlabel(x_label)
        ax.set_title(series)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{title}\n(mean over seeds; band: {int(round(s['confidence'] * 100))} % "
                 f"{'t' if s['interval'] == 't' else 'bootstrap'} interval)", fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _slug(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "_".join(p for p in parts if p)).strip("-")



def _num(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{value:.{digits}f}"


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _ci(row) -> str:
    return f"[{_num(row['ci_low'])}, {_num(row['ci_high'])}]"


def main_table(report: Report, label: tuple) -> str:
    """The Markdown table of one group: each measure's n, mean, std, CI and seed-spread ratio."""
    rows = report.summary[(report.summary[list(GROUP)] == pd.Series(dict(zip(GROUP, label)))).all(axis=1)]
    pct = int(round(report.settings["confidence"] * 100))
    header = ["explanation", "schedule", "score", "n", "mean", "std", f"{pct} % CI", "spread ratio"]
    return _md_table(header, [
        [r.explanation, r.schedule or "-", r.score, _num(r.n), _num(r.mean), _num(r.std), _ci(r._asdict()),
         _num(r.spread_ratio, 2)] for r in rows.itertuples()
    ])


def _seed_table(report: Report, label: tuple) -> str:
    rows = report.per_seed[(report.per_seed[list(GROUP)] == pd.Series(dict(zip(GROUP, label)))).all(axis=1)]
    order = list(dict.fromkeys(zip(*(rows[c] for c in MEASURE))))
    wide = rows.set_index([*MEASURE, "seed"])["value"].unstack("seed").reindex(order)
    seeds = list(wide.columns)
    return _md_table(["explanation", "schedule", "score", *[f"seed {s}" for s in seeds]], [
        [e, s or "-", sc, *[_num(v) for v in values]] for (e, s, sc), values in zip(wide.index, wide.to_numpy())
    ])


def _comparison_table(report: Report, frame: pd.DataFrame) -> str:
    pct = int(round(report.settings["confidence"] * 100))
    name = "Welch t" if report.settings["test"] == "welch" else "mean diff."
    return _md_table(
        ["explanation", "schedule", "score", "n a/b", "mean a", "mean b", "a - b", f"{pct} % CI", name, "p"],
        [[r.explanation, r.schedule or "-", r.score, f"{r.n_a}/{r.n_b}", _num(r.mean_a), _num(r.mean_b),
          _num(r.difference), _ci(r._asdict()), _num(r.statistic, 3), _num(r.p_value, 4)]
         for r in frame.itertuples()])


def render_markdown(report: Report, images: dict[str, str]) -> str:
    """The report as Markdown; ``images`` maps image keys to paths relative to the report."""
    s = report.settings
    sweep = report.sweep
    pct = int(round(s["confidence"] * 100))
    interval = ("Student's t-interval over seeds" if s["interval"] == "t"
                else f"percentile bootstrap over seeds ({s['n_resamples']} resamples)")
    out = [f"# itermask report: `{sweep.root}`", ""]
    expected = f" of {sweep.n_expected} expected" if sweep.n_expected is not None else ""
    out += [f"{len(sweep.runs)} finished run(s){expected} in {len(report.groups)} group(s). "
            f"Mean, sample standard deviation and {pct} % confidence interval ({interval}) of each measure. "
            "*Spread ratio*: standard deviation over seeds of the score divided by that of test accuracy "
            "(> 1: the score varies more between seeds than the model's accuracy does). "
            "`<method> - random`: the score minus that of the seeded random explanation of the same run.", ""]
    missing = sweep.missing_lines()
    if missing:
        out += ["## Missing", "", *[f"- {line}" for line in missing], ""]
    for label, members in report.groups.items():
        title = " / ".join(label)
        out += [f"## {title}", "", f"Seeds: {', '.join(str(r.seed) for r in members)} "
                f"(jobs {', '.join(r.job for r in members)}).", "", main_table(report, label), ""]
        for key, path in images.items():
            if key.startswith(f"curves::{title}::"):
                out += [f"![masking curves {title} {key.rsplit('::', 1)[1]}]({path})", ""]
        out += ["<details><summary>per seed</summary>", "", _seed_table(report, label), "", "</details>", ""]
    out += _attack_section(report)
    if not report.comparisons.empty:
        test = ("Welch's t-test (unequal variances)" if s["test"] == "welch"
                else f"permutation test of the mean difference ({s['n_resamples']} resamples), bootstrap interval")
        out += ["## Model comparisons", "", f"Difference of the means over seeds (a - b), {pct} % confidence "
                f"interval and two-sided p-value of {test}.", ""]
        for (a, b), frame in report.comparisons.groupby(["model_a", "model_b"], sort=False):
            for (dataset, saliency, masking), sub in frame.groupby(["dataset", "saliency", "masking"], sort=False):
                title = f"{a} vs {b}: {dataset} / {saliency} / {masking}"
                out += [f"### {title}", "", _comparison_table(report, sub), ""]
                key = f"compare::{a}::{b}::{dataset}::{saliency}::{masking}"
                if key in images:
                    out += [f"![{title}]({images[key]})", ""]
    return "\n".join(out)


def _attack_section(report: Report) -> list[str]:
    """The rank correlation across saliency methods of faithfulness and attack efficiency (none without it)."""
    links = report.attack_links
    if links.empty:
        return []
    out = ["## Faithfulness vs attack efficiency (across saliency methods)", "",
           "Spearman's rank correlation, across the saliency methods of a model/dataset/masking, between the "
           "seed mean of AOPC comprehensiveness and the seed mean of an attack efficiency (success rate: higher "
           "is more efficient; perturbed fraction of the successful attacks: lower is more efficient), with the "
           "exact permutation p-value. If faithfulness partly measures how easily the model is attacked along "
           "the ranking, rho is positive for the success rate and negative for the perturbed fraction. "
           f"Caveat: {caveat(int(links['n_methods'].max()))}.", ""]
    rows = [[r.model, r.dataset, r.masking, r.schedule, r.faithfulness, r.efficiency,
             ", ".join(f"{m} ({_num(f, 3)}, {_num(e, 3)})" for m, f, e in zip(r.methods, r.faithfulness_means, r.efficiency_means)),
             _num(r.spearman_rho, 3), _num(r.p_value, 3)] for r in links.itertuples()]
    header = ["model", "dataset", "masking", "schedule", "faithfulness", "efficiency", "methods (faithfulness, efficiency)",
              "rho", "p"]
    return [*out, _md_table(header, rows), ""]


HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; }}
table {{ border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }}
th, td {{ border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }}
th {{ background: #f3f3f3; }} td:nth-child(-n+3) {{ text-align: left; }}
img {{ max-width: 100%; }} code {{ background: #f3f3f3; }}
</style></head><body>
{body}
</body></html>
"""


def render_html(markdown: str, title: str) -> str:
    """HTML from the report's Markdown (markdown-it-py, CommonMark with tables; raw HTML kept)."""
    from html import escape

    from markdown_it import MarkdownIt

    return HTML.format(title=escape(title), body=MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))


def write_report(report: Report, out_dir: str | Path | None = None) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and, under ``report_files/``, the PNG plots and the CSV tables
    (``summary.csv``, ``per_seed.csv``, ``comparisons.csv``, and ``attack_links.csv`` with attacks), all atomically, into ``out_dir`` (default:
    the multirun folder). Returns the written paths by name."""
    out = Path(out_dir) if out_dir is not None else report.sweep.root
    files = out / FILES
    written: dict[str, Path] = {}
    images: dict[str, str] = {}
    for label, members in report.groups.items():
        title = " / ".join(label)
        schedules = sorted({k[1] for r in members for k in _curves(r.result)})
        for schedule in schedules:
            methods = sorted({k[0] for r in members for k in _curves(r.result) if k[1] == schedule},
                             key=lambda m: (m != label[2], m))
            lines = [(m, members, (m, schedule), {"color": f"C{i}"}) for i, m in enumerate(methods)]
            name = f"curves_{_slug(*label, schedule)}.png"
            written[name] = write_bytes_atomic(files / name, _plot(lines, f"{title} ({schedule})", report))
            images[f"curves::{title}::{schedule}"] = f"{FILES}/{name}"
    for label_a, label_b in _model_pairs(report.groups):
        schedules = sorted({k[1] for r in report.groups[label_a] for k in _curves(r.result)})
        lines = [(f"{lab[0]} {s}", report.groups[lab], (label_a[2], s), {"color": f"C{i}", "linestyle": ("-", "--", ":")[j % 3]})
                 for j, s in enumerate(schedules) for i, lab in enumerate((label_a, label_b))]
        name = f"compare_{_slug(label_a[0], 'vs', label_b[0], *label_a[1:])}.png"
        written[name] = write_bytes_atomic(
            files / name, _plot(lines, f"{label_a[0]} vs {label_b[0]}: {' / '.join(label_a[1:])}", report))
        images[f"compare::{label_a[0]}::{label_b[0]}::{'::'.join(label_a[1:])}"] = f"{FILES}/{name}"
    for name in ("summary", "per_seed", "comparisons", "attack_links"):
        if name == "attack_links" and report.attack_links.empty:
            continue
        written[f"{name}.csv"] = write_text_atomic(files / f"{name}.csv", getattr(report, name).to_csv(index=False))
    markdown = render_markdown(report, images)
    written["report.md"] = write_text_atomic(out / "report.md", markdown + "\n")
    written["report.html"] = write_text_atomic(out / "report.html", render_html(markdown, f"itermask report {report.sweep.root}"))
    return written
