"""Start-up of the entry points: how long ``evaluate.py --help``, a bad value and a mistyped key take to
answer, and what they print (issue 24: within 3 s on 2 cores; no torch, transformers or Lightning before the
config is checked). No assertions: the table is the result.

    python bench/startup.py [--runs 3] [--root CHECKOUT]

Each command runs ``--runs`` times in a fresh process (after one warm-up run, so the files are in the page
cache); the table gives the median wall-clock and CPU seconds (user + system, of the child process), the exit
status and the number of lines printed. Quote it with the load average (``uptime``): on a loaded machine the
wall time grows, the CPU time does not.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: --help, a value out of range, a mistyped key, a value outside a setting's choices
CASES = [
    ["evaluate.py", "--help"],
    ["evaluate.py", "evaluation.n_examples=-3"],
    ["evaluate.py", "evaluation.n_exampels=3"],
    ["evaluate.py", "evaluation.quantity=logits"],
]


def _run(root: Path, args: list[str], env: dict, out: Path) -> tuple[float, float, int, int]:
    """(wall s, CPU s, exit status, lines printed) of one run of ``python <args>``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args, f"hydra.run.dir={out}"] if "--help" not in args else [sys.executable, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode, len((done.stdout + done.stderr).splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to time (default: this one)")
    args = parser.parse_args()
    root = args.root.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "PYTHONPATH": str(root / "src"),
            "ITERMASK_CACHE": f"{tmp}/cache",
            "WANDB_MODE": "offline",
            "HF_HUB_OFFLINE": "1",
        }
        print(f"load average: {os.getloadavg()}")
        print("| command | median wall s | median CPU s | exit | lines printed |\n| --- | --- | --- | --- | --- |")
        for case in CASES:
            _run(root, case, env, Path(tmp) / "warm-up")
            runs = [_run(root, case, env, Path(tmp) / f"run{i}") for i in range(args.runs)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(f"| `{' '.join(case)}` | {wall:.2f} | {cpu:.2f} | {runs[-1][2]} | {runs[-1][3]} |")


if __name__ == "__main__":
    main()
