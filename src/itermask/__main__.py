"""``itermask --version`` / ``python -m itermask --version``: the installed version (imports no torch); the help
names the other entry points."""

from __future__ import annotations

import argparse
import sys

from itermask.version import __version__

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the command line); ``--version`` prints ``itermask <version>``."""
    parser = argparse.ArgumentParser(
        prog="itermask",
        description="Faithfulness of token-saliency explanations under iterative masking. Experiments: "
        "itermask-evaluate --help (python evaluate.py in a checkout; also itermask-train, itermask-pretrain); "
        "reports: python -m itermask.reporting --help; per-example views: python -m itermask.views --help; "
        "W&B workspace: python -m itermask.wandb_workspace --help; notebooks: itermask.evaluate(...).",
    )
    parser.add_argument("--version", action="version", version=f"itermask {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
