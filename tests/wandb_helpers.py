"""Reading offline W&B runs back, for the tracking and end-to-end tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def read_wandb_run(run_dir: Path) -> list[dict]:
    """The records of an offline W&B run (``wandb leet inspect --json``: one JSON object per line)."""
    log_file = next(Path(run_dir).glob("*.wandb"))
    out = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(log_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def records(run: list[dict], kind: str) -> list[dict]:
    return [r[kind] for r in run if r.get("type") == kind]


def history(run: list[dict]) -> list[dict]:
    return [r["item"] for r in records(run, "history")]
