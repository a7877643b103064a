"""Numbers and tables as text: a number with fixed decimals (``n/a`` when missing), a string escaped for
Markdown (:func:`md_escape`), a Markdown table and ``mean ± std``. Shared by the report
(:mod:`itermask.reporting`), the analyses' headline lines (:meth:`itermask.analyses.Analysis.headline_lines`)
and the job's console summary (:mod:`itermask.console`); the spelling hints of the messages (:func:`closest`,
:func:`did_you_mean`, :func:`hub_hint`) and the name of a command as its user types it (:func:`program`).
A leaf: it imports nothing of itermask."""

from __future__ import annotations

import difflib
import math
import numbers
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "number",
    "md_escape",
    "md_table",
    "mean_pm",
    "closest",
    "did_you_mean",
    "hub_hint",
    "program",
    "typed_command",
]


def number(value: Any, digits: int = 4, signed: bool = False) -> str:
    """``value`` with ``digits`` decimals (``signed``: with its sign; integers as they are); ``"n/a"`` for
    ``None``, NaN or infinity."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, numbers.Integral):  # Python and numpy integers
        return str(int(value))
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


#: what :func:`md_escape` replaces: HTML's three (as entities), Markdown's backslash, code-span backtick and
#: table-cell ``|`` (backslash-escaped), a ``](`` that would close a link or image, and line breaks
_MD = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "`": "\\`", "|": "\\|", "](": "\\](", "\r\n": " "}
_MD_RE = re.compile(r"\r\n|\]\(|[&<>\\`|\r\n\u2028\u2029]")


def md_escape(text: object) -> str:
    """``str(text)`` as literal Markdown text, for any string from data or config (a class, model or job name,
    a path, a message) put into ``report.md`` (whose HTML, ``report.html``, keeps raw HTML): ``&``, ``<``,
    ``>`` become entities; ``\\``, backticks, ``|`` and the ``](`` of a link are backslash-escaped; line breaks
    become spaces (one line: a table cell, a list item or a heading stays whole). CommonMark renders the result
    as the original text, with no tag, link, code span or table cell of its own. Python's and markupsafe's
    escapers do not escape Markdown, markdown-it-py has no escaper: hence this one."""
    return _MD_RE.sub(lambda m: _MD.get(m.group(), " "), str(text))


def md_table(header: Sequence[object], rows: Sequence[Sequence[object]], align: Sequence[str] | None = None) -> str:
    """A Markdown table of ``rows`` under ``header`` (``pandas.DataFrame.to_markdown``: a pipe table, with no
    column alignment, or ``align``'s, ``"left"`` or ``"right"`` per column), every cell escaped
    (:func:`md_escape`: neither pandas nor tabulate escapes ``|`` or markup) and kept as the text given
    (``disable_numparse``: tabulate would reformat numeric strings)."""
    import pandas as pd

    frame = pd.DataFrame([[md_escape(c) for c in row] for row in rows], columns=[md_escape(h) for h in header])
    if align is None:
        return frame.to_markdown(index=False, tablefmt="github", disable_numparse=True)
    return frame.to_markdown(index=False, tablefmt="pipe", disable_numparse=True, colalign=tuple(align))


def mean_pm(row) -> str:
    """``mean ± std`` of a summary row (3 decimals)."""
    return f"{number(row['mean'], 3)} ± {number(row['std'], 3)}"


def closest(word: str, choices: Sequence[str]) -> str | None:
    """The choice closest to a mistyped ``word`` (``difflib.get_close_matches``, its default similarity cutoff
    0.6), ``None`` when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return close[0] if close else None


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """``" (did you mean 'x'?)"`` for the :func:`closest` choice ``x`` to ``word``, ``""`` when none is close."""
    near = closest(word, choices)
    return f" (did you mean {near!r}?)" if near is not None else ""


#: what transformers, huggingface_hub and datasets say when the hub cannot be reached (offline or no network)
HUB_UNREACHABLE = ("couldn't connect to 'https://huggingface.co'", "couldn't reach", "offlinemodeisenabled")


def hub_hint(error: BaseException, offline_default: str) -> str:
    """A sentence to add to the model hub's error ``error`` when it says the hub cannot be reached (``""``
    otherwise): not in the local cache, why the hub was not asked (``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE``
    set) or could not answer, and what works offline (``offline_default``, e.g. "model=minilm")."""
    import os

    if not any(sign in str(error).lower() for sign in HUB_UNREACHABLE):
        return ""
    flags = [flag for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if os.environ.get(flag, "0") not in ("", "0")]
    why = f"{' and '.join(flags)} set" if flags else "no connection to huggingface.co"
    return (
        f" It is not in the local Hugging Face cache and the hub was not reached ({why}): download it once "
        f"with internet access, or give a local copy; {offline_default} needs no hub."
    )


def program(config_name: str) -> str:
    """How a user types the command of ``config_name`` (``evaluate``, ``train``, ``pretrain``) in the form they
    typed the running one: ``itermask-evaluate`` when this process is one of the installed console scripts (from a
    wheel there is no ``evaluate.py``), else ``python evaluate.py`` (a checkout's scripts, tests, notebooks).
    Every message and ``--help`` text that names a command says it through this function."""
    return f"itermask-{config_name}" if Path(sys.argv[0]).name.startswith("itermask-") else f"python {config_name}.py"


def typed_command(argv: Sequence[str] | None = None) -> str:
    """This process's command line (``sys.argv`` unless given) as its user would type it again, for the resume
    hint: ``itermask-evaluate -m seed=0,1`` from a console script (not the script's path under ``python``),
    ``python evaluate.py -m seed=0,1`` from a checkout's script; arguments quoted for a POSIX shell where needed
    (``'evaluation.fractions=[0.1, 0.5]'``)."""
    argv = list(sys.argv if argv is None else argv)
    name = Path(argv[0]).name
    head = name if name.startswith("itermask-") else shlex.join(["python", argv[0]])
    return " ".join([head, *map(shlex.quote, argv[1:])])
