"""``python -m itermask.reporting <multirun dir>``: write the report of a multirun folder on demand."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from itermask.reporting.aggregate import build_report
from itermask.reporting.render.markdown_report import few_seeds_warning
from itermask.reporting.render.wandb_summary import log_report_to_wandb
from itermask.reporting.render.write import write_report
from itermask.reporting.sections import report_sections

log = logging.getLogger(__name__)

__all__ = ["main"]


def _confidence(text: str) -> float:
    """An argparse type: a confidence level strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:  # argparse would name this function ("invalid _confidence value")
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), e.g. 0.95, got {text}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), e.g. 0.95, got {text}")
    return value


def _positive(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:  # argparse would name this function ("invalid _positive value")
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m itermask.reporting <multirun dir>``: write the report; exit code 2 on a :class:`ReportError`
    or a bad setting of a report section."""
    parser = argparse.ArgumentParser(prog="python -m itermask.reporting", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("multirun_dir", help="a Hydra multirun folder (holding <job>/results.json)")
    parser.add_argument(
        "--confidence", type=_confidence, default=0.95, help="confidence level of the intervals, in (0, 1)"
    )
    parser.add_argument("--bootstrap", action="store_true", help="percentile-bootstrap intervals instead of t")
    parser.add_argument("--permutation", action="store_true", help="permutation test instead of Welch's t-test")
    parser.add_argument("--n-resamples", type=_positive, default=9999, help="bootstrap/permutation resamples (>= 1)")
    parser.add_argument("--wandb", action="store_true", help="also log a W&B summary run in the sweep's group")
    parser.add_argument(
        "--wandb-mode",
        default=None,
        choices=["online", "offline", "disabled", "shared", "dryrun", "run"],  # wandb.Settings.mode
        help="W&B mode (default: WANDB_MODE or offline)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        interval, test = ("bootstrap" if args.bootstrap else "t"), ("permutation" if args.permutation else "welch")
        report = build_report(args.multirun_dir, args.confidence, interval, test, args.n_resamples)
        report_sections(report)  # a bad setting of a section (multirun.yaml's claims) before anything is written
    except ValueError as error:  # a ReportError, or a section's bad setting
        print(f"error: {error}", file=sys.stderr)
        return 2
    if warning := few_seeds_warning(report):
        log.warning(warning.lstrip(". ").replace("**Warning**: ", ""))
    try:
        written = write_report(report)
    except OSError as error:  # e.g. report.md is a folder, or the sweep folder is read-only
        print(
            f"error: the report cannot be written in {args.multirun_dir}: {error.strerror or error} "
            f"({error.filename2 or error.filename})",
            file=sys.stderr,
        )
        return 2
    for line in report.sweep.missing_lines():
        log.warning("missing: %s", line)
    n = len(report.sweep.runs)
    print(f"wrote {written['report.md']} and {written['report.html']} ({n} run{'' if n == 1 else 's'})")
    if args.wandb:
        from itermask.tracking import default_wandb_mode, group_name

        meta = report.sweep.meta
        logger = meta.get("logger") or {}
        group = logger.get("group") or group_name(meta.get("task_name") or "evaluate", report.sweep.root)
        project, mode = logger.get("project") or "itermask", args.wandb_mode or default_wandb_mode()
        folder = log_report_to_wandb(report, written, project=project, group=group, mode=mode)
        if folder:
            print(f"W&B summary run: {folder}")
    return 0
