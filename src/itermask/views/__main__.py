"""``python -m itermask.views <job dir> [--examples N] [--out FILE]``: a finished job's per-example views as one
self-contained HTML page (:func:`itermask.views.load` of its ``results.json`` and ``per_example/`` tables), written
to ``<job dir>/example_views.html`` by default; the path is printed. Exit status 2, with one line naming the
problem, for a folder without those files or a bad option."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Write the page (module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m itermask.views", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("job_dir", help="a job folder (holding results.json and per_example/)")
    parser.add_argument("--examples", type=_positive, default=None, help="the first N examples only (default: all)")
    parser.add_argument("--out", default=None, help="the page to write (default: <job dir>/example_views.html)")
    args = parser.parse_args(argv)
    from itermask.views.tables import load

    if not Path(args.job_dir).is_dir():
        print(
            f"error: {args.job_dir} is not a folder: give a job folder (the one holding results.json)", file=sys.stderr
        )
        return 2
    try:
        views = load(args.job_dir)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    views = views[: args.examples] if args.examples else views
    out = Path(args.out) if args.out else Path(args.job_dir) / "example_views.html"
    print(views.save(out, title=f"itermask examples: {args.job_dir}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
