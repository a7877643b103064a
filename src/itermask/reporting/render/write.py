"""Writing a :class:`~itermask.reporting.model.Report` into the sweep folder, every file atomically
(:func:`write_report`), with the masking-curve figures of every group and compared pair of groups."""

from __future__ import annotations

from pathlib import Path

from itermask.reporting.aggregate import model_pairs
from itermask.reporting.model import TABLES, Report, result_curves
from itermask.reporting.render import html_page
from itermask.reporting.render.markdown_report import render_markdown
from itermask.reporting.render.plots import Line, curve_figure, slug
from itermask.reporting.sections import report_sections
from itermask.reporting.sweep import FILES
from itermask.storage.files import write_bytes_atomic, write_text_atomic

__all__ = ["write_report"]


def _group_curve_images(report: Report, files: Path, written: dict, images: dict) -> None:
    """One figure per group and schedule, every explanation of the group in it."""
    for label, members in report.groups.items():
        title = " / ".join(label)
        for schedule in sorted({k[1] for r in members for k in result_curves(r.result)}):
            methods = sorted(
                {k[0] for r in members for k in result_curves(r.result) if k[1] == schedule},
                key=lambda m: (m != label[2], m),
            )
            lines: list[Line] = [(m, members, (m, schedule), {"color": f"C{i}"}) for i, m in enumerate(methods)]
            notes = [] if schedule == "one_shot" else ["sufficiency is not defined for this schedule (no panel)"]
            name = f"curves_{slug(*label, schedule)}.png"
            figure = curve_figure(lines, f"{title} ({schedule})", report.settings, notes)
            written[name] = write_bytes_atomic(files / name, figure)
            images[f"curves::{title}::{schedule}"] = f"{FILES}/{name}"


def _comparison_curve_images(report: Report, files: Path, written: dict, images: dict) -> None:
    """One figure per compared pair of groups (:func:`~itermask.reporting.aggregate.model_pairs`)."""
    for label_a, label_b in model_pairs(report.groups):
        schedules = sorted({k[1] for r in report.groups[label_a] for k in result_curves(r.result)})
        lines: list[Line] = []
        for j, s in enumerate(schedules):
            for i, lab in enumerate((label_a, label_b)):
                style = {"color": f"C{i}", "linestyle": ("-", "--", ":")[j % 3]}
                lines.append((f"{lab[0]} {s}", report.groups[lab], (label_a[2], s), style))
        name = f"compare_{slug(label_a[0], 'vs', label_b[0], *label_a[1:])}.png"
        figure = curve_figure(lines, f"{label_a[0]} vs {label_b[0]}: {' / '.join(label_a[1:])}", report.settings)
        written[name] = write_bytes_atomic(files / name, figure)
        images[f"compare::{label_a[0]}::{label_b[0]}::{'::'.join(label_a[1:])}"] = f"{FILES}/{name}"


def write_report(report: Report, out_dir: str | Path | None = None) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and, under ``report_files/``, the PNG plots and the CSV tables
    (:data:`~itermask.reporting.model.TABLES`, and those of the report's sections), all atomically, into
    ``out_dir`` (default: the multirun folder). Returns the written paths by name."""
    out = Path(out_dir) if out_dir is not None else report.sweep.root
    files = out / FILES
    written: dict[str, Path] = {}
    images: dict[str, str] = {}
    _group_curve_images(report, files, written, images)
    _comparison_curve_images(report, files, written, images)
    sections = report_sections(report)  # e.g. experiment=paper's Claims: its figures first, its text on top
    for section in sections:
        section.figures(report, files, written, images)
    for name in TABLES:
        if name == "attack_links" and report.attack_links.empty:
            continue
        written[f"{name}.csv"] = write_text_atomic(files / f"{name}.csv", getattr(report, name).to_csv(index=False))
    page = html_page.build(report, files, written, images)
    markdown = render_markdown(report, images, page.first_screen_markdown, page.examples_markdown, sections)
    written["report.md"] = write_text_atomic(out / "report.md", markdown + "\n")
    # report.html is self-contained: the figures as data URIs, the first screen and the views inline
    embedded = render_markdown(report, html_page.embedded(images, out), [html_page.MARKER, ""], sections=sections)
    title = f"itermask report {report.sweep.root}"
    page_html = html_page.render_html(embedded, title, page.first_screen_html, page.examples_html)
    written["report.html"] = write_text_atomic(out / "report.html", page_html)
    return written
