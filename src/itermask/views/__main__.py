"""python -m itermask.views <job dir> [--examples N] [--out FILE]: a finished job's per-example views as one
self-contained HTML page (itermask.views.load of its results.json and per_example/ tables), written to
<job dir>/example_views.html by default; the path is printed. Exit status 2, with one line naming the problem, for
a folder that is not a finished job (a multirun folder names its jobs), unreadable files, a bad option or a page
that cannot be written."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def positive_integer(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def _not_a_job(folder: Path) -> str | None:
    """Why ``folder`` is not a finished job's folder, or ``None``."""
    if not folder.is_dir():
        return f"{folder} is not a folder: give a job folder (holding results.json)"
    if (folder / "results.json").is_file():
        return None
    if (folder / "failed.json").is_file():
        return f"the job in {folder} failed: see {folder / 'failed.json'} and its log; it has no results to view"
    jobs = sorted((p.parent.name for p in folder.glob("*/results.json")), key=lambda n: (not n.isdigit(), n.zfill(9)))
    if jobs:
        named = ", ".join(jobs[:10]) + (", ..." if len(jobs) > 10 else "")
        return (
            f"{folder} is a multirun folder: give one of its jobs ({named}), e.g. python -m itermask.views "
            f"{folder / jobs[0]}; its report.html shows examples of every job"
        )
    return f"{folder} holds no results.json: give a finished job's folder (outputs/evaluate/<date>/<time>)"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the page (module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m itermask.views", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("job_dir", help="a finished job's folder (holding results.json and per_example/)")
    parser.add_argument("--examples", type=positive_integer, default=None, help="the first N examples only")
    parser.add_argument("--out", default=None, help="the page to write (default: <job dir>/example_views.html)")
    args = parser.parse_args(argv)
    folder = Path(args.job_dir)
    if (problem := _not_a_job(folder)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from itermask.views.tables import load

    try:
        views = load(folder)
    except json.JSONDecodeError as error:
        print(f"error: {folder / 'results.json'} is not valid JSON ({error})", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    views = views[: args.examples] if args.examples else views
    out = Path(args.out) if args.out else folder / "example_views.html"
    try:
        print(views.save(out, title=f"itermask examples: {folder}"))
    except OSError as error:
        print(f"error: cannot write the page to {out}: {error.strerror or error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
