"""Per-example views: one self-contained HTML rendering of what masking did to one example: the text as a heatmap
of each saliency method's scores (red: positive, blue: negative, opacity: the score's size relative to the largest
absolute score of that method on that example; hover for the score and the masking rank) and, per method and
schedule, the masking trajectory folded in a ``<details>`` (one row per step: which tokens are masked, the newly
masked ones outlined) next to the target probability curve (inline SVG) with the first decision flip marked.

Modules: :mod:`itermask.views.page` (the views' dataclasses and their HTML), :mod:`itermask.views.curves` (views
from an evaluation in memory; torch) and :mod:`itermask.views.tables` (from a job's stored per-example tables).
Importing this package imports no torch.
"""

from __future__ import annotations

from itermask.views.curves import masking_ranks, views_from_curves
from itermask.views.page import (
    MAX_TOKENS,
    ExampleView,
    ExampleViews,
    Html,
    MethodView,
    Trajectory,
    render_example,
    render_page,
)
from itermask.views.tables import load, views_from_tables

__all__ = [
    "MAX_TOKENS",
    "Html",
    "Trajectory",
    "MethodView",
    "ExampleView",
    "ExampleViews",
    "render_example",
    "render_page",
    "views_from_curves",
    "masking_ranks",
    "views_from_tables",
    "load",
]
