"""The per-example views' data (:class:`ExampleView`, :class:`MethodView`, :class:`Trajectory`,
:class:`ExampleViews`, :class:`Html`) and their HTML (:func:`render_example`, :func:`render_page`).

The HTML uses inline CSS and inline SVG only: no JavaScript, no external assets, so it can be mailed, put in
a W&B ``wandb.Html`` or shown in a notebook. The markup is in Jinja2 templates (``views/templates``) with
autoescaping on: every text from the data (tokens, class names, method names, reasons) is escaped. Tokens sit
in ``<bdi>`` inside ``dir="auto"`` blocks, so right-to-left text displays in its own direction without
reordering its neighbours. Texts longer than ``max_tokens`` (default :data:`MAX_TOKENS`) are cut, with a
visible marker saying how many tokens are not shown. Plain Python (no torch).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

__all__ = [
    "MAX_TOKENS",
    "Html",
    "Trajectory",
    "MethodView",
    "ExampleView",
    "ExampleViews",
    "render_example",
    "render_page",
    "render_result",
]

#: tokens shown per example (heatmap and trajectory rows); longer texts are cut with a visible marker
MAX_TOKENS = 256


#: the stylesheet of every view; class names start with ``imx-`` so that a host page is not affected
CSS = """
.imx{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif;font-size:14px;color:#222;
border:1px solid #ddd;border-radius:6px;padding:10px 12px;margin:12px 0;background:#fff;max-width:1100px}
.imx h3{font-size:15px;margin:0 0 6px 0}
.imx .imx-meta{color:#555;font-size:13px;margin-bottom:8px}
.imx .imx-reason{background:#fff4d6;border-radius:3px;padding:1px 5px}
.imx .imx-method{margin:8px 0 2px 0;font-weight:600}
.imx details>summary{margin:4px 0 2px 0;font-weight:600;cursor:pointer}
.imx .imx-text{line-height:1.9}
.imx .imx-tok{padding:1px 2px;border-radius:3px;white-space:pre-wrap}
.imx .imx-sp{color:#999;font-size:11px}
.imx .imx-seg{display:inline-block;margin:0 6px;color:#888}
.imx .imx-cut{display:inline-block;margin-left:6px;padding:0 5px;border-radius:3px;background:#eee;color:#a00;
font-size:12px;font-weight:600}
.imx .imx-traj{display:flex;flex-wrap:nowrap;gap:12px;align-items:flex-start;margin:4px 0 10px 0}
.imx .imx-traj>div:first-child{flex:0 0 auto}
.imx .imx-traj>div:last-child{flex:1 1 auto;min-width:0}
.imx table{border-collapse:collapse;font-size:12px}
.imx td,.imx th{padding:1px 6px;vertical-align:top;text-align:left;border-bottom:1px solid #f0f0f0}
.imx .imx-steps{line-height:1.7}
.imx .imx-m{background:#333;color:#fff}
.imx .imx-new{outline:2px solid #e08a00}
.imx .imx-flip td{background:#ffe9e9}
.imx svg text{font-size:10px;fill:#444}
"""


def _num(value: float, digits: int = 3) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _display(token: str) -> tuple[str, bool]:
    """``(text, joins)``: the token as shown, and whether it continues the previous word (no space)."""
    if token.startswith("##") and len(token) > 2:
        return token[2:], True
    if token[:1] in ("Ġ", "▁") and len(token) > 1:
        return token[1:], False
    return token, False


def _colour(score: float, scale: float) -> str:
    """A CSS background for ``score``: red for positive, blue for negative, alpha ``|score| / scale``."""
    if score is None or not math.isfinite(score) or scale <= 0:
        return "transparent"
    alpha = min(1.0, abs(score) / scale)
    rgb = "220,40,40" if score > 0 else "40,90,220"
    return f"rgba({rgb},{alpha * 0.85:.3f})"


def _scale(scores: Sequence[float]) -> float:
    return max((abs(s) for s in scores if s is not None and math.isfinite(s)), default=0.0)


@cache
def _templates():
    """The Jinja2 environment of ``views/templates`` (autoescaping on: every value from the data is escaped)."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )


def _cells(view: ExampleView, shown: int, cell) -> list[dict]:
    """The first ``shown`` tokens as the template's cells, ``cell(i) -> (classes, style, title)`` per token: the
    shown text, a segment marker before the first token of the next segment of a sentence pair, a space before a
    token that does not continue the previous word."""
    out, previous_segment = [], None
    special = view.special or [False] * len(view.tokens)
    for i in range(shown):
        text, joins = _display(view.tokens[i])
        segment = view.segments[i]
        mark = segment >= 0 and previous_segment is not None and previous_segment >= 0 and segment != previous_segment
        if segment >= 0:
            previous_segment = segment
        classes, style, title = cell(i)
        classes = f"{classes} imx-sp" if special[i] else classes
        out.append({"pos": i, "text": text, "classes": classes, "style": style, "title": title,
                    "segment_mark": mark, "space": bool(out) and not joins})  # fmt: skip
    return out


def _heatmap(view: ExampleView, method: MethodView, shown: int) -> dict:
    scale = _scale(method.scores[:shown])

    def cell(i: int):
        score, rank = method.scores[i], method.ranks[i]
        title = f"score {_num(score, 4)}" + (f", rank {rank}" if rank is not None else ", not maskable")
        return "imx-heat", f"background:{_colour(score, scale)}", title

    return {"method": method.method, "cells": _cells(view, shown, cell)}


def _curve(trajectory: Trajectory, width: int = 280, height: int = 150) -> dict:
    """The coordinates of the target probability against the grid (the template draws them), the first flip
    marked by a red ring and dashed line."""
    left, right, top, bottom = 34, 10, 10, 28
    xs, ps = trajectory.x, trajectory.probability
    x_lo, x_hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    span = (x_hi - x_lo) or 1.0

    def px(x: float) -> str:
        return f"{left + (x - x_lo) / span * (width - left - right):.1f}"

    def py(p: float) -> str:
        return f"{top + (1 - (0.0 if not math.isfinite(p) else p)) * (height - top - bottom):.1f}"

    dots = [(px(x), py(p)) for x, p in zip(xs, ps) if math.isfinite(p)]
    f, flip = trajectory.flip_step, None
    if f is not None and 0 <= f < len(xs):
        flip = {"x": px(xs[f]), "y": py(ps[f]), "text_x": f"{min(float(px(xs[f])) + 4, width - right - 22):.1f}"}
    return {
        **{"width": width, "height": height, "left": left, "top": top, "x_end": width - right},
        **{"plot_width": width - left - right, "plot_height": height - top - bottom, "bottom_y": height - bottom},
        "schedule": trajectory.schedule,
        "grid": [{"y": py(p), "label_y": f"{float(py(p)) + 3:.1f}", "label": f"{p:g}"} for p in (0.0, 0.5, 1.0)],
        "x_lo": _num(x_lo, 2),
        "x_hi": _num(x_hi, 2),
        "x_mid": f"{(left + width - right) / 2:.0f}",
        "label": "masked fraction" if trajectory.steps == "fraction" else "tokens masked",
        "points": " ".join(f"{x},{y}" for x, y in dots),
        "dots": dots,
        "flip": flip,
    }


def _trajectory(view: ExampleView, method: MethodView, trajectory: Trajectory, shown: int) -> dict:
    """The steps (x, probability, masked tokens) beside the curve, folded in the template's ``<details>`` whose
    summary names the method, the schedule and the first decision flip."""
    unit = "fraction" if trajectory.steps == "fraction" else "tokens"
    rows, before = [], set()
    for s, (x, p) in enumerate(zip(trajectory.x, trajectory.probability)):
        cells = None
        if trajectory.masked is not None:
            now = set(trajectory.masked[s])

            def cell(i: int, now=now, before=before):
                if i in now:
                    return ("imx-m imx-new" if i not in before else "imx-m"), "", "masked"
                return "", "", ""

            cells, before = _cells(view, shown, cell), now
        rows.append({"x": _num(x, 2), "p": _num(p), "flip": s == trajectory.flip_step, "cells": cells})
    flip = (
        f"decision flips at step {trajectory.flip_step} ({unit} {_num(trajectory.x[trajectory.flip_step], 2)})"
        if trajectory.flip_step is not None
        else "the decision never flips"
    )
    return {"method": method.method, "schedule": trajectory.schedule, "unit": unit, "rows": rows, "flip": flip,
            "svg": _curve(trajectory)}  # fmt: skip


def render_example(view: ExampleView, max_tokens: int = MAX_TOKENS) -> str:
    """One example as a self-contained HTML fragment (a ``<section class="imx">`` with its ``<style>``; the
    template ``views/templates/example.html.j2``), showing ``max_tokens`` tokens (at least 1) in the heatmaps and
    trajectory rows; a longer text is cut after them with a visible "… N more tokens not shown" marker.

    Raises:
        ValueError: if ``max_tokens < 1``.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    shown = min(len(view.tokens), int(max_tokens))
    data = {
        "example_id": view.example_id,
        "reason": view.reason,
        "label": view.class_name(view.label) if view.label is not None else "unknown",
        "prediction": view.class_name(view.prediction),
        "target": view.class_name(view.target),
        "probability": _num(view.clean_probability),
        "n_tokens": len(view.tokens),
        "shown": shown,
        "hidden": len(view.tokens) - shown,
        "heatmaps": [_heatmap(view, m, shown) for m in view.methods.values()],
        "trajectories": [
            _trajectory(view, m, t, shown) for m in view.methods.values() for t in m.trajectories.values()
        ],
    }
    return _templates().get_template("example.html.j2").render(v=data, css=CSS)


def render_page(views: Iterable[ExampleView], title: str = "itermask examples", max_tokens: int = MAX_TOKENS) -> str:
    """A complete UTF-8 HTML document of ``views`` (:func:`render_example` each; ``views/templates/page.html.j2``)."""
    from markupsafe import Markup

    body = Markup("\n".join(render_example(v, max_tokens) for v in views))
    return _templates().get_template("page.html.j2").render(title=title, body=body) + "\n"


def render_result(warnings: Sequence[str], table: str, views: str) -> str:
    """The notebook view of a facade result (``views/templates/result.html.j2``): the ``warnings`` (escaped),
    then ``table`` and ``views``, HTML the caller built (pandas' ``to_html``, :meth:`ExampleViews.html`)."""
    from markupsafe import Markup

    return (
        _templates().get_template("result.html.j2").render(warnings=warnings, table=Markup(table), views=Markup(views))
    )


class Html(str):
    """An HTML fragment (a :class:`str`) that a tracker shows as HTML: a cell of a table logged with
    :func:`itermask.tracking.log_artifacts` becomes a ``wandb.Html``."""


@dataclass
class Trajectory:
    """One schedule's masking of one example under one method.

    Attributes:
        schedule: the schedule's name (``"one_shot"``, ``"recursive"``).
        steps: ``"fraction"`` or ``"count"``: what ``x`` holds.
        x: ``S`` grid values (masking fractions, or token counts).
        masked: ``S`` lists of the token positions (indices into :attr:`ExampleView.tokens`) masked at each
            step (all masked positions, not only the new ones); ``None`` when the positions were not
            recorded (the curve is still drawn).
        probability: ``S`` probabilities of the target class after masking, in [0, 1].
        flip_step: index of the first step whose prediction differs from the clean prediction, ``None`` if
            the decision never flips.
    """

    schedule: str
    steps: str
    x: list[float]
    masked: list[list[int]] | None
    probability: list[float]
    flip_step: int | None = None


@dataclass
class MethodView:
    """One saliency method on one example.

    Attributes:
        scores: ``L`` saliency scores per token (``NaN`` where a token is not scored, e.g. special tokens).
        ranks: ``L`` masking ranks on the clean input (1 = masked first), ``None`` for tokens that are not
            maskable (the one-shot schedule masks in this order; the recursive one re-ranks).
        trajectories: ``{schedule: Trajectory}``.
    """

    method: str
    scores: list[float]
    ranks: list[int | None]
    trajectories: dict[str, Trajectory] = field(default_factory=dict)


@dataclass
class ExampleView:
    """What a view of one example needs.

    Attributes:
        example_id: the example's stable id.
        tokens: ``L`` token strings as the tokenizer writes them (``##`` continuation pieces, ``Ġ``/``▁``
            word starts are displayed joined).
        segments: ``L`` segment per token: ``0``/``1`` for the first/second text of a sentence pair, ``-1``
            for special tokens (all ``0`` for single texts).
        target: the class the curves follow.
        prediction: the predicted class on the clean input.
        label: the gold label, ``None`` if unknown.
        clean_probability: the target class's probability on the clean input.
        class_names: names of the classes by id (``None``: the ids are shown).
        reason: why the example is shown (e.g. "largest decision flip"), shown in its header.
        special: ``L`` flags of special tokens (``[CLS]``, ``<s>``...), shown dimmed; default none.
    """

    example_id: int
    tokens: list[str]
    token_ids: list[int]
    segments: list[int]
    methods: dict[str, MethodView]
    target: int
    prediction: int
    label: int | None = None
    clean_probability: float = math.nan
    class_names: list[str] | None = None
    reason: str = ""
    special: list[bool] | None = None

    def __post_init__(self) -> None:
        n = len(self.tokens)
        for name in ("token_ids", "segments"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries, tokens has {n}")
        for method, view in self.methods.items():
            if len(view.scores) != n or len(view.ranks) != n:
                raise ValueError(f"method {method!r}: scores/ranks need {n} entries (one per token)")

    def class_name(self, index: int | None) -> str:
        """The name of class ``index`` (its id without names; ``"?"`` for ``None``)."""
        if index is None:
            return "?"
        if self.class_names is not None and 0 <= index < len(self.class_names):
            return str(self.class_names[index])
        return str(index)

    def _repr_html_(self) -> str:
        return render_example(self)


class ExampleViews(Sequence):
    """Several :class:`ExampleView` s in display order, ``max_tokens`` tokens shown of each (:data:`MAX_TOKENS`);
    shows them in a notebook (``_repr_html_``) and writes a page."""

    def __init__(self, views: Iterable[ExampleView], max_tokens: int = MAX_TOKENS) -> None:
        self.views = list(views)
        self.max_tokens = int(max_tokens)

    def __len__(self) -> int:
        return len(self.views)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ExampleViews(self.views[index], self.max_tokens)
        return self.views[index]

    def __iter__(self) -> Iterator[ExampleView]:
        return iter(self.views)

    def html(self) -> str:
        """The views as one HTML fragment (one ``<section>`` per example)."""
        return "\n".join(render_example(v, self.max_tokens) for v in self.views)

    _repr_html_ = html

    def page(self, title: str = "itermask examples") -> str:
        """A complete HTML document (see :func:`render_page`)."""
        return render_page(self.views, title, self.max_tokens)

    def save(self, path: str | Path, title: str = "itermask examples") -> Path:
        """Write :meth:`page` to ``path`` (UTF-8); returns the path.

        Raises:
            OSError: ``path``'s folder is missing or not writable, named with the path."""
        path = Path(path)
        try:
            path.write_text(self.page(title), encoding="utf-8")
        except OSError as error:
            raise type(error)(f"cannot write the views page to {path}: {error.strerror or error}") from None
        return path
