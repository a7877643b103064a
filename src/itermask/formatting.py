"""Numbers and tables as text: a number with fixed decimals (``n/a`` when missing), a Markdown table and
``mean ± std``. Shared by the report (:mod:`itermask.reporting`), the analyses' headline lines
(:meth:`itermask.analyses.Analysis.headline_lines`) and the job's console summary (:mod:`itermask.console`).
A leaf: it imports nothing of itermask."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

__all__ = ["number", "md_table", "mean_pm"]


def number(value: Any, digits: int = 4, signed: bool = False) -> str:
    """``value`` with ``digits`` decimals (``signed``: with its sign; integers as they are); ``"n/a"`` for
    ``None``, NaN or infinity."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, numbers.Integral):  # Python and numpy integers
        return str(int(value))
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def md_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table of ``rows`` under ``header`` (``|`` in cells escaped)."""
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def mean_pm(row) -> str:
    """``mean ± std`` of a summary row (3 decimals)."""
    return f"{number(row['mean'], 3)} ± {number(row['std'], 3)}"
