"""``report.html``: the page (:func:`render_html`, HTML from the report's Markdown) and what it adds to the
Markdown report (:func:`build`): a figure-first first screen (:mod:`itermask.reporting.render.first_screen`) and
the examples section with the per-example views (:mod:`itermask.reporting.render.examples`). ``report.html`` is
self-contained: every figure is a base64 ``data:`` URI (:func:`embedded`), the views are inline HTML and CSS,
nothing is fetched. ``report.md`` gets the same first screen and the list of chosen examples. The markup is in
Jinja2 templates (``reporting/render/templates``, autoescaped)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup

from itermask.formatting import md_escape
from itermask.reporting.examples import pick_examples
from itermask.reporting.model import Report
from itermask.reporting.render.examples import examples_html, examples_markdown
from itermask.reporting.render.first_screen import empty_bin_notes, findings, forest_figure, method_table_html
from itermask.reporting.render.templates import render
from itermask.reporting.sweep import FILES
from itermask.storage.files import write_bytes_atomic

__all__ = ["Page", "build", "embedded", "render_html", "MARKER", "FOREST"]

#: where the first screen goes in the report's HTML (an HTML comment the Markdown carries through)
MARKER = "<!-- itermask:first-screen -->"
#: the forest plot's image key and file name under ``report_files/``
FOREST = "forest"


@dataclass
class Page:
    """The report's added parts, as Markdown lines and HTML fragments."""

    first_screen_markdown: list[str]
    first_screen_html: str
    examples_markdown: list[str]
    examples_html: str


def embedded(images: dict[str, str], out: Path) -> dict[str, str]:
    """``images`` (keys to paths relative to ``out``) as ``data:image/png;base64,...`` URIs."""
    return {
        key: "data:image/png;base64," + base64.b64encode((out / path).read_bytes()).decode("ascii")
        for key, path in images.items()
    }


def build(report: Report, files: Path, written: dict, images: dict[str, str]) -> Page:
    """The first screen and the examples section of ``report``; writes the forest plot into ``files``
    (``report_files/forest.png``, added to ``written`` and, as ``images[FOREST]``, to ``images``)."""
    forest = forest_figure(report)
    if forest is not None:
        written[f"{FOREST}.png"] = write_bytes_atomic(files / f"{FOREST}.png", forest)
        images[FOREST] = f"{FILES}/{FOREST}.png"
    notes, sentences = empty_bin_notes(report), findings(report)
    picks, pick_notes = pick_examples(report)
    markdown = ["## What this run found", ""]
    markdown += [f"- {md_escape(s)}" for s in sentences] + ([""] if sentences else [])
    if forest is not None:
        markdown += [f"![method minus random, every method, schedule and model]({images[FOREST]})", ""]
    lines = [f"{' / '.join(label)}, {score}: {note}" for (label, score), texts in notes.items() for note in texts]
    markdown += [f"> **AOPC bins:** {md_escape(line)}" for line in lines] + ([""] if notes else [])
    uri = None if forest is None else "data:image/png;base64," + base64.b64encode(forest).decode("ascii")
    table = Markup(method_table_html(report, notes))
    first = render("first_screen.html.j2", findings=sentences, forest=uri, table=table)
    return Page(markdown, first, examples_markdown(picks, pick_notes), examples_html(report, picks, pick_notes))


def render_html(markdown: str, title: str, first_screen: str = "", appendix: str = "") -> str:
    """HTML from the report's Markdown (markdown-it-py, CommonMark with tables; raw HTML kept), with the
    ``first_screen`` and ``appendix`` HTML fragments before and after it."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    # the first screen goes where the Markdown marks it (under the title), else first
    body = body.replace(MARKER, first_screen, 1) if MARKER in body else first_screen + body
    return render("report.html.j2", title=title, body=Markup(f"{body}\n{appendix}"))
