"""The report's HTML templates (Jinja2, autoescaped): :func:`render`."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["render"]


@cache
def _environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def render(name: str, **values: Any) -> str:
    """The template ``name`` of this folder rendered with ``values``; every value is escaped unless it is a
    ``markupsafe.Markup`` (HTML the caller built, itself from templates or markdown-it)."""
    return _environment().get_template(name).render(**values)
