"""The report's examples section rendered: the picks of :func:`itermask.reporting.examples.pick_examples`
with their reasons, as Markdown lines (``report.md``) and as HTML with each pick's per-example view
(:mod:`itermask.views`, ``report.html``)."""

from __future__ import annotations

from markupsafe import Markup

from itermask.formatting import md_escape
from itermask.reporting.examples import Pick
from itermask.reporting.model import Report
from itermask.reporting.render.templates import render

__all__ = ["examples_html", "examples_markdown", "MAX_TOKENS"]

#: tokens shown per example in the report (longer texts are cut, with a visible marker)
MAX_TOKENS = 256


def _views_html(picks: list[Pick]) -> str:
    from itermask.views import load

    views = (load(p.run.path.parent, [p.example_id], [p.label[2]], {p.example_id: p.reason}, MAX_TOKENS) for p in picks)
    return "\n".join(view.html() for view in views)


def examples_html(report: Report, picks: list[Pick], notes: list[str]) -> str:
    """The examples section as HTML: per group, its picks' per-example views (the reason in each view's
    header), then the notes."""
    groups = []
    for label in report.groups:
        mine = [p for p in picks if p.label == label]
        if mine:
            groups.append({"label": " / ".join(label), "views": Markup(_views_html(mine))})
    return render("examples.html.j2", groups=groups, notes=notes)


def examples_markdown(picks: list[Pick], notes: list[str]) -> list[str]:
    """The examples section as Markdown lines: the picks with their reasons (the views are in
    ``report.html``), then the notes."""
    out = ["## Examples", "", "Per-example views of these examples are in `report.html`.", ""]
    for pick in picks:
        where = md_escape(f"example {pick.example_id} (job {pick.run.job}): {pick.reason}")
        out.append(f"- **{md_escape(' / '.join(pick.label))}**, {where}")
    out += ["", *[f"*{md_escape(note)}*" for note in notes], ""]
    return out
