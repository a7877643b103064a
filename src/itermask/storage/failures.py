"""The failure marker a failed job leaves in its folder (``failed.json``: error, traceback, overrides), written
by :func:`itermask.jobs.run_job` and read by the report, the sweepers and the failed-jobs callback."""

from __future__ import annotations

import datetime
import traceback
from pathlib import Path

from itermask.storage.files import read_json, write_json_atomic

__all__ = ["FAILURE_FILE", "write_failure", "read_failure", "failed_jobs"]

#: the failure marker a failed job leaves in its folder
FAILURE_FILE = "failed.json"


def write_failure(
    output_dir: str | Path, error: BaseException, overrides: list[str] | None = None, job: str | None = None
) -> Path:
    """Write :data:`FAILURE_FILE` into ``output_dir`` (atomically): the error (``type``, ``message`` and
    ``error`` = ``"<type>: <message>"``), the formatted traceback, the job's overrides and number, the time."""
    return write_json_atomic(
        Path(output_dir) / FAILURE_FILE,
        {
            "error": f"{type(error).__name__}: {error}",
            "type": type(error).__name__,
            "message": str(error),
            "traceback": "".join(traceback.format_exception(error)),
            "overrides": overrides,
            "job": job,
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        },
    )


def read_failure(job_dir: str | Path) -> dict | None:
    """The failure marker of ``job_dir`` (see :func:`write_failure`; ``error`` on one line), or ``None`` if
    the job did not fail. An unreadable marker still counts as a failure (its ``error`` says why)."""
    path = Path(job_dir) / FAILURE_FILE
    if not path.is_file():
        return None
    try:
        marker = read_json(path)
    except (OSError, ValueError) as error:
        return {"error": f"unreadable {FAILURE_FILE} ({error})"}
    if not isinstance(marker, dict):
        return {"error": f"unexpected {FAILURE_FILE} content"}
    return {**marker, "error": " ".join(str(marker.get("error") or "unknown error").split())}


def failed_jobs(root: str | Path) -> list[tuple[str, dict]]:
    """``(job folder relative to root, marker)`` of every failed job under a sweep folder ``root``, in
    natural folder order (job 2 before job 10; W&B run folders skipped)."""
    import re

    def natural(path: Path) -> list:
        return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path.relative_to(root)))]

    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.rglob(FAILURE_FILE) if "wandb" not in p.relative_to(root).parts[:-1]]
    markers = sorted(found, key=natural)
    return [
        (str(p.parent.relative_to(root)) or ".", read_failure(p.parent) or {"error": "unknown error"}) for p in markers
    ]
