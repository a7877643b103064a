"""The per-example view's data: :class:`ExampleView` (one example: its tokens, each saliency method's
:class:`MethodView` with one :class:`Trajectory` per schedule), :class:`ExampleViews` (several, shown in a
notebook or written as a page) and :class:`Html` (an HTML cell a tracker shows as HTML).

Plain Python (no torch); the HTML comes from :mod:`itermask.views.render`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from itermask.views.render import MAX_TOKENS, render_example, render_page

__all__ = ["Html", "Trajectory", "MethodView", "ExampleView", "ExampleViews"]


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
