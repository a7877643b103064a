"""Per-example views: one self-contained HTML rendering of what masking did to one example.

A view shows, for one example,

- the text as a heatmap of each saliency method's scores (red: positive, blue: negative, opacity: the
  score's size relative to the largest absolute score of that method on that example; hover for the score
  and the masking rank), and
- per method and schedule, the masking trajectory (one row per step: which tokens are masked, the newly
  masked ones outlined) next to the target probability curve (inline SVG) with the first decision flip
  marked.

The HTML uses inline CSS and inline SVG only: no JavaScript, no external assets, so it can be mailed, put in
a W&B ``wandb.Html`` or shown in a notebook (:class:`ExampleViews` has ``_repr_html_``); every text from the
data is escaped, and texts longer than ``max_tokens`` (default :data:`MAX_TOKENS`) are cut with a visible
marker (see :mod:`itermask.views.page`).

Modules:

- :mod:`itermask.views.page`: the views' dataclasses (:class:`Trajectory`, :class:`MethodView`,
  :class:`ExampleView`, :class:`ExampleViews`, :class:`Html`) and their HTML (:func:`render_example`,
  :func:`render_page`, :data:`MAX_TOKENS`);
- :mod:`itermask.views.curves`: views from an evaluation in memory (:func:`views_from_curves`, torch, from
  the evaluator's :class:`~itermask.core.evaluation.MaskingCurves`, the clean batch, the saliency scores
  and the masks; :func:`masking_ranks`);
- :mod:`itermask.views.tables`: views from a job's stored per-example tables (:func:`views_from_tables`,
  :func:`load`; no torch).

Rendering is plain Python; importing this package imports no torch.
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
