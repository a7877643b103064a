"""Per-example views: one self-contained HTML rendering of what masking did to one example.

A view shows, for one example,

- the text as a heatmap of each saliency method's scores (red: positive, blue: negative, opacity: the
  score's size relative to the largest absolute score of that method on that example; hover for the score
  and the masking rank), and
- per method and schedule, the masking trajectory (one row per step: which tokens are masked, the newly
  masked ones outlined) next to the target probability curve (inline SVG) with the first decision flip
  marked.

The HTML uses inline CSS and inline SVG only: no JavaScript, no external assets, so it can be mailed, put in
a W&B ``wandb.Html`` or shown in a notebook (:class:`ExampleViews` has ``_repr_html_``). Every text from the
data (tokens, class names, method names, reasons) is escaped (:func:`html.escape` with ``quote=True``);
tokens sit in ``<bdi>`` inside ``dir="auto"`` blocks, so right-to-left text displays in its own direction
without reordering its neighbours. Texts longer than ``max_tokens`` (default :data:`MAX_TOKENS`) are cut,
with a visible marker saying how many tokens are not shown.

Building views from an evaluation: :func:`views_from_curves` (torch, from the evaluator's
:class:`~itermask.core.evaluation.MaskingCurves`, the clean batch, the saliency scores and the masks).
Rendering (:func:`render_example`, :func:`render_page`) is plain Python.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

#: tokens shown per example (heatmap and trajectory rows); longer texts are cut with a visible marker
MAX_TOKENS = 256


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
        method: the method's name.
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
        token_ids: ``L`` token ids.
        segments: ``L`` segment per token: ``0``/``1`` for the first/second text of a sentence pair, ``-1``
            for special tokens (all ``0`` for single texts).
        methods: ``{method: MethodView}``.
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
    """Several :class:`ExampleView` s; shows them in a notebook (``_repr_html_``) and writes a page.

    Args:
        views: the views, in display order.
        max_tokens: tokens shown per example (see :data:`MAX_TOKENS`).
    """

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

    def _repr_html_(self) -> str:
        return self.html()

    def page(self, title: str = "itermask examples") -> str:
        """A complete HTML document (see :func:`render_page`)."""
        return render_page(self.views, title, self.max_tokens)

    def save(self, path: str | Path, title: str = "itermask examples") -> Path:
        """Write :meth:`page` to ``path`` (UTF-8); returns the path."""
        path = Path(path)
        path.write_text(self.page(title), encoding="utf-8")
        return path


# ------------------------------------------------------------------------------------------------
# rendering

#: the stylesheet of every view; class names start with ``imx-`` so that a host page is not affected
CSS = """
.imx{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif;font-size:14px;color:#222;
border:1px solid #ddd;border-radius:6px;padding:10px 12px;margin:12px 0;background:#fff;max-width:1100px}
.imx h3{font-size:15px;margin:0 0 6px 0}
.imx .imx-meta{color:#555;font-size:13px;margin-bottom:8px}
.imx .imx-reason{background:#fff4d6;border-radius:3px;padding:1px 5px}
.imx .imx-method{margin:8px 0 2px 0;font-weight:600}
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


def _esc(text: Any) -> str:
    """``text`` escaped for HTML content and (double- or single-quoted) attribute values."""
    return html.escape(str(text), quote=True)


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
    finite = [abs(s) for s in scores if s is not None and math.isfinite(s)]
    return max(finite) if finite else 0.0


def _tokens_html(view: ExampleView, shown: int, cell) -> str:
    """The first ``shown`` tokens as ``<bdi>`` spans, ``cell(i) -> (classes, style, title)`` per token,
    with a marker between segments of a sentence pair."""
    parts, previous_segment = [], None
    special = view.special or [False] * len(view.tokens)
    for i in range(shown):
        text, joins = _display(view.tokens[i])
        segment = view.segments[i]
        if segment >= 0 and previous_segment is not None and previous_segment >= 0 and segment != previous_segment:
            parts.append('<span class="imx-seg" title="next segment">‖</span>')
        if segment >= 0:
            previous_segment = segment
        classes, style, title = cell(i)
        if special[i]:
            classes = f"{classes} imx-sp"
        if parts and not joins:
            parts.append(" ")
        style_attr = f' style="{style}"' if style else ""
        parts.append(
            f'<bdi class="imx-tok {classes}"{style_attr} title="{_esc(title)}" data-pos="{i}">{_esc(text)}</bdi>'
        )
    return "".join(parts)


def _cut_marker(view: ExampleView, shown: int) -> str:
    hidden = len(view.tokens) - shown
    if hidden <= 0:
        return ""
    return f'<span class="imx-cut" title="text cut at {shown} tokens">… {hidden} more tokens not shown</span>'


def _heatmap(view: ExampleView, method: MethodView, shown: int) -> str:
    scale = _scale(method.scores[:shown])

    def cell(i: int):
        score, rank = method.scores[i], method.ranks[i]
        title = f"score {_num(score, 4)}" + (f", rank {rank}" if rank is not None else ", not maskable")
        return "imx-heat", f"background:{_colour(score, scale)}", title

    return f'<div class="imx-text" dir="auto">{_tokens_html(view, shown, cell)}{_cut_marker(view, shown)}</div>'


def _curve_svg(trajectory: Trajectory, width: int = 280, height: int = 150) -> str:
    """The target probability against the grid, the first flip marked by a red ring and dashed line."""
    left, right, top, bottom = 34, 10, 10, 28
    xs, ps = trajectory.x, trajectory.probability
    x_lo, x_hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    span = (x_hi - x_lo) or 1.0

    def px(x: float) -> float:
        return left + (x - x_lo) / span * (width - left - right)

    def py(p: float) -> float:
        p = 0.0 if not math.isfinite(p) else p
        return top + (1 - p) * (height - top - bottom)

    points = " ".join(f"{px(x):.1f},{py(p):.1f}" for x, p in zip(xs, ps) if math.isfinite(p))
    label = "masked fraction" if trajectory.steps == "fraction" else "tokens masked"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="target probability per masking step ({_esc(trajectory.schedule)})">',
        f'<rect x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}" '
        'fill="#fafafa" stroke="#ccc"/>',
    ]
    for p in (0.0, 0.5, 1.0):
        out.append(
            f'<line x1="{left}" x2="{width - right}" y1="{py(p):.1f}" y2="{py(p):.1f}" stroke="#e4e4e4"/>'
            f'<text x="{left - 4}" y="{py(p) + 3:.1f}" text-anchor="end">{p:g}</text>'
        )
    out.append(f'<text x="{left}" y="{height - 4}">{_num(x_lo, 2)}</text>')
    out.append(f'<text x="{width - right}" y="{height - 4}" text-anchor="end">{_num(x_hi, 2)}</text>')
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 4}" text-anchor="middle">{label}</text>')
    out.append(f'<text x="4" y="{top + 2}" transform="rotate(90 4 {top + 2})">p(target)</text>')
    if points:
        out.append(f'<polyline points="{points}" fill="none" stroke="#1f5fbf" stroke-width="1.8"/>')
        for x, p in zip(xs, ps):
            if math.isfinite(p):
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(p):.1f}" r="2.2" fill="#1f5fbf"/>')
    f = trajectory.flip_step
    if f is not None and 0 <= f < len(xs):
        cx, cy = px(xs[f]), py(ps[f])
        out.append(
            f'<line class="imx-flipline" x1="{cx:.1f}" x2="{cx:.1f}" y1="{top}" y2="{height - bottom}" '
            'stroke="#d22" stroke-dasharray="3,2"/>'
            f'<circle class="imx-flip-point" cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="none" stroke="#d22" '
            'stroke-width="2"/>'
            f'<text x="{min(cx + 4, width - right - 22):.1f}" y="{top + 10}" fill="#d22">flip</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _trajectory(view: ExampleView, method: MethodView, trajectory: Trajectory, shown: int) -> str:
    """The steps table (x, probability, masked tokens) next to the curve."""
    rows = []
    unit = "fraction" if trajectory.steps == "fraction" else "tokens"
    before: set[int] = set()
    for s, (x, p) in enumerate(zip(trajectory.x, trajectory.probability)):
        flip = trajectory.flip_step is not None and s == trajectory.flip_step
        if trajectory.masked is None:
            tokens = "<i>positions not recorded</i>"
        else:
            now = set(trajectory.masked[s])

            def cell(i: int, now=now, before=before):
                if i in now:
                    return ("imx-m imx-new" if i not in before else "imx-m"), "", "masked"
                return "", "", ""

            tokens = f'<div class="imx-steps" dir="auto">{_tokens_html(view, shown, cell)}</div>'
            before = now
        mark, row_class = (" (flip)", ' class="imx-flip"') if flip else ("", "")
        rows.append(f"<tr{row_class}><td>{_num(x, 2)}</td><td>{_num(p)}{mark}</td><td>{tokens}</td></tr>")
    table = (
        f"<table><thead><tr><th>{unit}</th><th>p(target)</th><th>masked (dark; new at the step: outlined)</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    title = f"{_esc(method.method)} · {_esc(trajectory.schedule)}"
    flip = (
        f"decision flips at step {trajectory.flip_step} ({unit} {_num(trajectory.x[trajectory.flip_step], 2)})"
        if trajectory.flip_step is not None
        else "the decision never flips"
    )
    return (
        f'<div class="imx-method">{title} <span class="imx-meta">— {flip}</span></div>'
        f'<div class="imx-traj"><div>{_curve_svg(trajectory)}</div><div>{table}</div></div>'
    )


def render_example(view: ExampleView, max_tokens: int = MAX_TOKENS) -> str:
    """One example as a self-contained HTML fragment (a ``<section class="imx">`` with its ``<style>``).

    Args:
        view: the example.
        max_tokens: tokens shown (heatmaps and trajectory rows); a longer text is cut after them with a
            visible "… N more tokens not shown" marker. At least 1.

    Returns:
        HTML text: inline CSS and SVG, no JavaScript, every data string escaped.

    Raises:
        ValueError: if ``max_tokens < 1``.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    shown = min(len(view.tokens), int(max_tokens))
    label = view.class_name(view.label) if view.label is not None else "unknown"
    meta = (
        f"label <b>{_esc(label)}</b> · prediction <b>{_esc(view.class_name(view.prediction))}</b> · "
        f"target <b>{_esc(view.class_name(view.target))}</b>, p = {_num(view.clean_probability)} on the clean input"
        f" · {len(view.tokens)} tokens"
    )
    reason = f' <span class="imx-reason">{_esc(view.reason)}</span>' if view.reason else ""
    parts = [
        f'<section class="imx" data-example="{_esc(view.example_id)}"><style>{CSS}</style>',
        f"<h3>example {_esc(view.example_id)}{reason}</h3>",
        f'<div class="imx-meta">{meta}</div>',
    ]
    for method in view.methods.values():
        parts.append(f'<div class="imx-method">{_esc(method.method)}: saliency</div>')
        parts.append(_heatmap(view, method, shown))
    for method in view.methods.values():
        for trajectory in method.trajectories.values():
            parts.append(_trajectory(view, method, trajectory, shown))
    parts.append("</section>")
    return "\n".join(parts)


def render_page(views: Iterable[ExampleView], title: str = "itermask examples", max_tokens: int = MAX_TOKENS) -> str:
    """A complete UTF-8 HTML document of ``views`` (:func:`render_example` each)."""
    body = "\n".join(render_example(v, max_tokens) for v in views)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title></head>\n<body>\n"
        f'<h1 style="font-family:system-ui,sans-serif">{_esc(title)}</h1>\n'
        f"{body}\n</body></html>\n"
    )


# ------------------------------------------------------------------------------------------------
# building views from an evaluation


def masking_ranks(scores, maskable) -> list[list[int | None]]:
    """Masking ranks on the clean input, the order :func:`itermask.core.schedules.top_k_mask` masks in:
    descending score, NaN lowest, ties by position (earlier first); 1 = masked first.

    Args:
        scores: ``[B, L]`` saliency.
        maskable: ``[B, L]`` bool.

    Returns:
        ``B`` lists of ``L`` ranks, ``None`` at positions that are not maskable.
    """
    import torch

    ranked = torch.nan_to_num(scores.double(), nan=-torch.inf).masked_fill(~maskable, -torch.inf)
    order = torch.sort(ranked, dim=1, descending=True, stable=True).indices
    out = []
    for positions, ok in zip(order.tolist(), maskable.tolist()):
        # counted over the maskable positions only, so that a NaN score ranks after every scored one
        ranks: list[int | None] = [None] * len(ok)
        for rank, position in enumerate((p for p in positions if ok[p]), start=1):
            ranks[position] = rank
        out.append(ranks)
    return out


@dataclass
class _ScheduleCurves:
    """One schedule's curves of one method, on the CPU, for all rows of the batch.

    Attributes:
        curves: the schedule's :class:`~itermask.core.evaluation.MaskingCurves`.
        masks: ``[S, B, L]`` bool masked positions at each step, ``None`` where not recorded.
        probability: ``[B, S]`` probabilities of the target class after each step.
        flips: ``[B, S]`` bool, whether each step's prediction differs from the clean prediction.
    """

    curves: Any
    masks: Any
    probability: Any
    flips: Any


@dataclass
class _MethodCurves:
    """One method's scores, clean-input ranks and per-schedule curves, for all rows of the batch.

    Attributes:
        scores: ``[B, L]`` saliency on the CPU.
        ranks: ``B`` lists of ``L`` masking ranks (see :func:`masking_ranks`).
        schedules: ``{schedule: _ScheduleCurves}``.
    """

    scores: Any
    ranks: list[list[int | None]]
    schedules: dict[str, _ScheduleCurves]


def _schedule_curves(method: str, schedule: str, curves, scores, maskable, masks) -> _ScheduleCurves:
    """One schedule's probabilities, flips and masks of one method.

    Args:
        method: the method's name (for error messages).
        schedule: the schedule's name.
        curves: the schedule's ``MaskingCurves`` over the ``B`` rows of the batch.
        scores: ``[B, L]`` saliency of the method on the CPU.
        maskable: ``[B, L]`` bool maskable positions on the CPU.
        masks: ``[S, B, L]`` bool recorded masks, or ``None``: read from the curves' ``masked_step`` where
            recorded, else recomputed from ``scores`` for ``"one_shot"``, left ``None`` for any other
            schedule.

    Returns:
        The schedule's :class:`_ScheduleCurves`.

    Raises:
        ValueError: if ``curves`` do not have one example per row of the batch.
    """
    import torch

    from itermask.core.metrics import decision_flips, target_output
    from itermask.core.schedules import SCHEDULES

    size = scores.shape[0]
    if len(curves) != size:
        raise ValueError(f"curves {method}/{schedule} have {len(curves)} examples, the batch {size}")
    if masks is None and curves.masked_step is not None and curves.masked_step.shape == scores.shape:
        # the evaluator records the step that first masks each position (MaskingCurves.masked_step)
        first = curves.masked_step.cpu().long()
        masks = torch.stack([(first >= 0) & (first <= s) for s in range(curves.k.shape[1])])
    if masks is None and schedule == "one_shot":
        # the one-shot masks are the top k of the clean ranking at each step
        masks = SCHEDULES["one_shot"]().masks(scores, maskable, curves.k.T.cpu(), None)
    return _ScheduleCurves(
        curves=curves,
        masks=None if masks is None else masks.cpu(),
        probability=target_output(curves.logits, curves.target, "probability").cpu(),
        flips=decision_flips(curves).cpu(),
    )


def _method_curves(
    method: str,
    by_schedule: Mapping[str, Any],
    scores,
    maskable,
    masks: Mapping[str, Any],
) -> _MethodCurves:
    """Reads one method's scores and ranks, and its curves per schedule.

    Args:
        method: the method's name.
        by_schedule: ``{schedule: MaskingCurves}`` of the method.
        scores: ``[B, L]`` saliency of the method (any device).
        maskable: ``[B, L]`` bool maskable positions on the CPU.
        masks: ``{schedule: [S, B, L] bool}`` the recorded masks of the method.

    Returns:
        The method's :class:`_MethodCurves`.

    Raises:
        ValueError: if ``scores`` or a schedule's curves disagree with the batch's shape.
    """
    scores = scores.detach().cpu()
    if tuple(scores.shape) != tuple(maskable.shape):
        raise ValueError(f"scores of {method!r} have shape {tuple(scores.shape)}, the batch {tuple(maskable.shape)}")
    return _MethodCurves(
        scores=scores,
        ranks=masking_ranks(scores, maskable),
        schedules={
            schedule: _schedule_curves(method, schedule, c, scores, maskable, masks.get(schedule))
            for schedule, c in by_schedule.items()
        },
    )


def _row_trajectory(schedule: str, data: _ScheduleCurves, row: int, where: Mapping[int, int]) -> Trajectory:
    """One schedule's :class:`Trajectory` of one row.

    Args:
        schedule: the schedule's name.
        data: the schedule's curves.
        row: the row of the batch.
        where: ``{source position: index among the row's real tokens}``.

    Returns:
        The row's trajectory, masked positions as indices into the row's real tokens.
    """
    flipped = data.flips[row].nonzero().flatten().tolist()
    masked = None
    if data.masks is not None:
        masked = [[where[p] for p in step[row].nonzero().flatten().tolist()] for step in data.masks]
    return Trajectory(
        schedule=schedule,
        steps=data.curves.steps,
        x=data.curves.grid.tolist(),
        masked=masked,
        probability=data.probability[row].tolist(),
        flip_step=flipped[0] if flipped else None,
    )


def _row_method_view(method: str, data: _MethodCurves, row: int, keep: list[int], maskable) -> MethodView:
    """One method's :class:`MethodView` of one row.

    Args:
        method: the method's name.
        data: the method's curves.
        row: the row of the batch.
        keep: source positions of the row's real tokens (padding dropped).
        maskable: ``[B, L]`` bool maskable positions on the CPU.

    Returns:
        The row's view of the method; scores are ``NaN`` at positions that are not maskable.
    """
    where = {pos: i for i, pos in enumerate(keep)}
    s = data.scores[row]
    return MethodView(
        method=method,
        scores=[float(s[p]) if maskable[row, p] else math.nan for p in keep],
        ranks=[data.ranks[row][p] for p in keep],
        trajectories={
            schedule: _row_trajectory(schedule, schedule_data, row, where)
            for schedule, schedule_data in data.schedules.items()
        },
    )


@dataclass
class _BatchCurves:
    """One evaluation's batch and curves, on the CPU, that the views of its rows are read from.

    Attributes:
        batch: the clean ``TokenBatch`` ``[B, L]``.
        tokenizer: a Hugging Face tokenizer (``convert_ids_to_tokens``).
        special_ids: the tokenizer's special token ids.
        maskable: ``[B, L]`` bool maskable positions.
        methods: ``{method: _MethodCurves}``.
        first: the ``MaskingCurves`` that give each example's id, label, target and clean prediction.
        clean_probability: ``[B]`` the target class's probability on the clean input.
    """

    batch: Any
    tokenizer: Any
    special_ids: set[int]
    maskable: Any
    methods: dict[str, _MethodCurves]
    first: Any
    clean_probability: Any


def _batch_curves(
    curves: Mapping[str, Mapping[str, Any]],
    batch,
    tokenizer,
    scores: Mapping[str, Any],
    masks: Mapping[str, Mapping[str, Any]],
    segments: int | Sequence[int] | None,
) -> _BatchCurves:
    """Reads every method's scores, ranks and curves of one evaluation (see :func:`views_from_curves`).

    Args:
        curves: ``{method: {schedule: MaskingCurves}}``, non-empty.
        batch: the clean ``TokenBatch`` ``[B, L]``.
        tokenizer: a Hugging Face tokenizer (``all_special_ids``).
        scores: ``{method: [B, L] tensor}`` saliency on the clean input, one per method of ``curves``.
        masks: ``{method: {schedule: [S, B, L] bool}}`` the recorded masks.
        segments: the maskable segments of the evaluation.

    Returns:
        The evaluation's :class:`_BatchCurves`.

    Raises:
        ValueError: if shapes disagree with ``batch``.
    """
    from itermask.core.metrics import target_output
    from itermask.core.tokens import maskable_positions

    special_ids = set(int(i) for i in tokenizer.all_special_ids)
    maskable = maskable_positions(batch, special_ids, segments).cpu()
    methods = {
        method: _method_curves(method, by_schedule, scores[method], maskable, masks.get(method) or {})
        for method, by_schedule in curves.items()
    }
    # the first method's first schedule gives each example's id, label, target and clean prediction
    first = next(iter(next(iter(curves.values())).values()))
    clean_probability = target_output(first.clean_logits, first.target, "probability").cpu()
    return _BatchCurves(batch, tokenizer, special_ids, maskable, methods, first, clean_probability)


def _example_view(data: _BatchCurves, row: int, class_names: Sequence[str] | None, reason: str) -> ExampleView:
    """The :class:`ExampleView` of one row of the batch.

    Args:
        data: the evaluation's batch and curves.
        row: the row of the batch.
        class_names: names of the classes by id.
        reason: why the example is shown.

    Returns:
        The row's view, padding dropped.
    """
    batch, first = data.batch, data.first
    keep = batch.attention_mask[row].cpu().bool().nonzero().flatten().tolist()  # real tokens, padding dropped
    ids = batch.input_ids[row, keep].tolist()
    segment_ids = batch.segment_ids if batch.segment_ids is not None else batch.token_type_ids
    segs = [0] * len(keep) if segment_ids is None else segment_ids[row, keep].tolist()
    label = int(first.labels[row])
    return ExampleView(
        example_id=int(first.example_ids[row]),
        tokens=list(data.tokenizer.convert_ids_to_tokens(ids)),
        token_ids=ids,
        segments=[int(x) for x in segs],
        methods={
            method: _row_method_view(method, method_curves, row, keep, data.maskable)
            for method, method_curves in data.methods.items()
        },
        target=int(first.target[row]),
        prediction=int(first.clean_logits[row].argmax()),
        label=None if label < 0 else label,
        clean_probability=float(data.clean_probability[row]),
        class_names=None if class_names is None else list(class_names),
        reason=reason,
        special=[i in data.special_ids for i in ids],
    )


def views_from_curves(
    curves: Mapping[str, Mapping[str, Any]],
    batch,
    tokenizer,
    scores: Mapping[str, Any],
    masks: Mapping[str, Mapping[str, Any]] | None = None,
    segments: int | Sequence[int] | None = None,
    class_names: Sequence[str] | None = None,
    rows: Sequence[int] | None = None,
    reasons: Mapping[int, str] | None = None,
    max_tokens: int = MAX_TOKENS,
) -> ExampleViews:
    """Views of the examples of one evaluation.

    Args:
        curves: ``{method: {schedule: MaskingCurves}}`` (:meth:`IterativeMaskingEvaluator.evaluate` per
            method), every curve over the rows of ``batch`` in its order.
        batch: the clean :class:`~itermask.core.tokens.TokenBatch` ``[B, L]`` the curves were computed on.
        tokenizer: a Hugging Face tokenizer (``convert_ids_to_tokens``, ``all_special_ids``).
        scores: ``{method: [B, L] tensor}`` saliency on the clean input (source positions).
        masks: ``{method: {schedule: [S, B, L] bool}}`` the masked positions at each step. Missing, they are
            read from the curves' ``masked_step`` (recorded by the evaluator); curves without it: for a
            one-shot schedule they are recomputed from ``scores`` (the one-shot masks are the top ``k`` of
            the clean ranking), for another schedule (recursive, which re-ranks on the masked input) the
            trajectory shows the curve without positions.
        segments: the maskable segments of the evaluation (see
            :func:`itermask.core.tokens.maskable_positions`), for the ranks and recomputed masks.
        class_names: names of the classes by id.
        rows: which rows of ``batch`` to view (default all).
        reasons: ``{row: why it is shown}``.
        max_tokens: tokens shown per example (:data:`MAX_TOKENS`).

    Returns:
        :class:`ExampleViews`, one view per row, padding dropped.

    Raises:
        ValueError: if ``curves`` or ``scores`` miss a method, or shapes disagree with ``batch``.
    """
    if set(scores) != set(curves):
        raise ValueError(f"scores are for methods {sorted(scores)}, curves for {sorted(curves)}")
    data = _batch_curves(curves, batch, tokenizer, scores, masks or {}, segments)
    shown = range(batch.input_ids.shape[0]) if rows is None else rows
    views = [_example_view(data, row, class_names, (reasons or {}).get(row, "")) for row in shown]
    return ExampleViews(views, max_tokens)


# ------------------------------------------------------------------------------------------------
# building views from a job's stored per-example files


def _trajectory_from_tables(schedule: str, kind: str, steps, first_step: list[int] | None, ranks) -> Trajectory:
    """One schedule's :class:`Trajectory` of one example and explanation.

    Args:
        schedule: the schedule's name.
        kind: ``"fraction"`` or ``"count"`` steps.
        steps: the example's ``steps.parquet`` rows of the explanation and schedule, sorted by step.
        first_step: per token, the step that first masks it (``-1``: never), ``None`` for the one-shot
            schedule (its tokens of rank ``1..k`` are masked at a step masking ``k``).
        ranks: per token, its masking rank (``None``: not maskable).
    """
    flips = [i for i, v in enumerate(steps["flip_rate"].tolist()) if v == 1.0] if "flip_rate" in steps else []
    if first_step is None:
        masked = [[i for i, r in enumerate(ranks) if r is not None and r <= k] for k in steps["k"].tolist()]
    else:
        masked = [[i for i, at in enumerate(first_step) if 0 <= at <= s] for s in range(len(steps))]
    return Trajectory(
        schedule=schedule,
        steps=kind,
        x=[float(v) for v in steps["x"].tolist()],
        masked=masked,
        probability=[float(v) for v in steps["target_prob"].tolist()],
        flip_step=flips[0] if flips else None,
    )


def _explained_name(tables) -> str:
    """The method under study of per-example tables: the explanation in ``scores.parquet`` other than
    ``random`` (``random`` itself when it is the only one)."""
    names = list(dict.fromkeys(tables.scores["saliency"].tolist()))
    others = [n for n in names if n != "random"]
    return others[0] if others else names[0]


def views_from_tables(
    tables,
    example_ids: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    reasons: Mapping[int, str] | None = None,
    steps: str = "fraction",
    max_tokens: int = MAX_TOKENS,
    method: str | None = None,
) -> ExampleViews:
    """Views of the examples of one job from its per-example tables (no model, no torch).

    Args:
        tables: a :class:`~itermask.storage.per_example.PerExample` (``tokens`` needed).
        example_ids: which examples, in this order (default: every example, by id).
        methods: which explanations, by name (default: the method under study, then ``random``).
        reasons: ``{example_id: why it is shown}``.
        steps: ``"fraction"`` or ``"count"``: what the grid ``x`` of ``steps.parquet`` holds.
        max_tokens: tokens shown per example (:data:`MAX_TOKENS`).
        method: the method under study (its ``tokens.parquet`` columns are ``explained_*``); default: the
            explanation of ``scores.parquet`` other than ``random``.

    Returns:
        :class:`ExampleViews`.

    Raises:
        ValueError: if the tables have no ``tokens`` table (results written before it existed: re-run the
            job with ``reuse_results=false``) or lack a requested example or explanation.
    """
    tokens = tables.tokens
    if tokens is None:
        raise ValueError(
            "these per-example results have no tokens.parquet (written before itermask stored tokens): "
            "re-run the job with reuse_results=false to view its examples"
        )
    method = method or _explained_name(tables)
    role = {method: "explained", **({"random": "random"} if method != "random" else {})}
    known = [name for name, r in role.items() if f"{r}_score" in tokens]
    methods = list(methods) if methods is not None else known
    missing = [m for m in methods if m not in known]
    if missing:
        raise ValueError(f"no tokens of explanation(s) {missing} in these results (explanations: {known})")
    ids = sorted(set(tokens["example_id"].tolist())) if example_ids is None else [int(i) for i in example_ids]
    absent = sorted(set(ids) - set(tokens["example_id"].tolist()))
    if absent:
        raise ValueError(f"no example(s) {absent[:10]} in these results")
    labels = dict(zip(tables.examples["example_id"].tolist(), tables.examples["label"].tolist()))
    names = {
        int(label): name
        for label, name in zip(tables.examples["label"].tolist(), tables.examples["label_name"].tolist())
        if isinstance(name, str)
    }
    class_names = [names.get(i, str(i)) for i in range(max(names) + 1)] if names else None
    by_token = dict(tuple(tokens.groupby("example_id", sort=False)))
    by_step = {key: f.sort_values("step") for key, f in tables.steps.groupby(["saliency", "example_id", "schedule"])}
    by_score = {key: f for key, f in tables.scores.groupby(["saliency", "example_id"])}
    views = []
    for example_id in ids:
        rows = by_token[example_id]
        method_views = {}
        for name in methods:
            r = role[name]
            ranks = [int(v) if v >= 0 else None for v in rows[f"{r}_rank"].tolist()]
            scores = [float(v) if k is not None else math.nan for v, k in zip(rows[f"{r}_score"].tolist(), ranks)]
            trajectories = {}
            for schedule in dict.fromkeys(s for (m, e, s) in by_step if m == name and e == example_id):
                column = f"{r}_masked_step_{schedule}"
                first_step = [int(v) for v in rows[column].tolist()] if column in rows else None
                step_rows = by_step[(name, example_id, schedule)]
                if first_step is None and schedule != "one_shot":
                    trajectories[schedule] = _trajectory_from_tables(schedule, steps, step_rows, None, ranks)
                    trajectories[schedule].masked = None  # not recorded for this schedule
                else:
                    trajectories[schedule] = _trajectory_from_tables(schedule, steps, step_rows, first_step, ranks)
            method_views[name] = MethodView(name, scores, ranks, trajectories)
        first_steps = next(f for (m, e, _), f in by_step.items() if m == methods[0] and e == example_id)
        score_row = by_score[(methods[0], example_id)].iloc[0]
        label = labels.get(example_id)
        n = len(rows)
        views.append(
            ExampleView(
                example_id=int(example_id),
                tokens=[str(t) for t in rows["token"].tolist()],
                token_ids=[int(t) for t in rows["token_id"].tolist()],
                segments=[int(t) for t in rows["segment"].tolist()] if "segment" in rows else [0] * n,
                methods=method_views,
                target=int(first_steps["target"].iloc[0]),
                prediction=int(score_row["prediction"])
                if "prediction" in score_row
                else int(first_steps["target"].iloc[0]),
                label=None if label is None or int(label) < 0 else int(label),
                clean_probability=float(score_row["clean_prob"]) if "clean_prob" in score_row else math.nan,
                class_names=class_names,
                reason=(reasons or {}).get(example_id, ""),
                special=[v < 0 for v in rows[f"{role[methods[0]]}_rank"].tolist()],
            )
        )
    return ExampleViews(views, max_tokens)


def load(
    job_dir: str | Path,
    example_ids: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    reasons: Mapping[int, str] | None = None,
    max_tokens: int = MAX_TOKENS,
) -> ExampleViews:
    """Views of a finished job's examples from its stored files (``results.json`` and ``per_example/``), e.g.
    in a notebook: ``itermask.views.load("outputs/.../0")[:5]`` shows the first five.

    Args:
        job_dir: the job folder (the one holding ``results.json``).
        example_ids, methods, reasons, max_tokens: see :func:`views_from_tables`.

    Raises:
        FileNotFoundError: naming the missing per-example file.
        ValueError: see :func:`views_from_tables`.
    """
    import json

    from itermask.storage.per_example import load_per_example

    job_dir = Path(job_dir)
    steps, method = "fraction", None
    result_file = job_dir / "results.json"
    if result_file.is_file():
        result = json.loads(result_file.read_text(encoding="utf-8"))
        steps = ((result.get("config") or {}).get("evaluation") or {}).get("steps", "fraction")
        saliency = result.get("saliency")
        method = saliency.get("name") if isinstance(saliency, dict) else None
    tables = load_per_example(job_dir)
    return views_from_tables(tables, example_ids, methods, reasons, steps, max_tokens, method)
