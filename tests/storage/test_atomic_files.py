"""Atomic writers: a writer killed mid-way leaves a temporary file that the next write of the same target
removes; temporaries carry the host and process id, so two writers never share one and a running writer's
temporary is left alone."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from itermask.storage import files
from itermask.storage.files import remove_stale_temporaries, temporary_path, write_bytes_atomic
from itermask.storage.per_example import write_per_example

HOST = socket.gethostname().replace(".", "_")


def _dead_pid() -> int:
    """The id of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temporaries_name_host_and_process_and_are_unique(tmp_path):
    target = tmp_path / "results.json"
    first, second = temporary_path(target), temporary_path(target)
    assert first != second and first.is_file() and second.is_file()
    for tmp in (first, second):
        assert tmp.parent == tmp_path and tmp.name.startswith(f".results.json.{HOST}.{os.getpid()}.")
        assert tmp.name.endswith(".tmp") and tmp.stat().st_size == 0


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path):
    """A real writer killed (SIGKILL) while its temporary exists: the re-run's write removes it."""
    target = tmp_path / "per_example" / "steps.parquet"
    target.parent.mkdir()
    script = (
        "import sys, time\n"
        "from itermask.storage.files import temporary_path\n"
        "print(temporary_path(sys.argv[1]), flush=True)\n"
        "time.sleep(60)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script, str(target)], stdout=subprocess.PIPE, text=True)
    left = Path(writer.stdout.readline().strip())
    assert left.is_file() and left.stat().st_size == 0
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    write_bytes_atomic(target, b"table")
    assert target.read_bytes() == b"table"
    assert sorted(p.name for p in target.parent.iterdir()) == ["steps.parquet"]


def test_only_stale_temporaries_of_the_same_target_are_removed(tmp_path):
    target = tmp_path / "results.json"
    dead = tmp_path / f".results.json.{HOST}.{_dead_pid()}.abc123.tmp"
    legacy = tmp_path / ".results.json.k2j4l5.tmp"  # written before temporaries carried host and pid
    running = tmp_path / f".results.json.{HOST}.{os.getppid()}.def456.tmp"
    elsewhere_old = tmp_path / ".results.json.otherhost.123.ghi789.tmp"
    elsewhere_new = tmp_path / ".results.json.otherhost.124.jkl012.tmp"
    other_target = tmp_path / f".results.json.bak.{HOST}.{_dead_pid()}.mno345.tmp"
    other_legacy = tmp_path / ".results.json.bak.pqr678.tmp"
    for path in (dead, legacy, running, elsewhere_old, elsewhere_new, other_target, other_legacy):
        path.write_bytes(b"")
    old = time.time() - files.STALE_AFTER_S - 60
    os.utime(elsewhere_old, (old, old))
    removed = remove_stale_temporaries(target)
    assert sorted(p.name for p in removed) == sorted(p.name for p in (dead, legacy, elsewhere_old))
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {p.name for p in (running, elsewhere_new, other_target, other_legacy)}


def test_a_failed_write_removes_its_own_temporary_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    target.write_bytes(b"old")

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_bytes_atomic(target, b"new")
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"] and target.read_bytes() == b"old"


def test_writing_per_example_tables_removes_stale_temporaries_of_every_table(tmp_path):
    """Also of a table this write does not write (an attack table of a killed run with an attack)."""
    folder = tmp_path / "per_example"
    folder.mkdir()
    stale = [folder / f".{name}.parquet.{HOST}.{_dead_pid()}.x1y2z3.tmp" for name in ("steps", "attack")]
    for path in stale:
        path.write_bytes(b"")
    frame = pd.DataFrame({"example_id": [0, 1]})
    write_per_example(tmp_path, {"steps": frame, "scores": frame, "examples": frame})
    assert sorted(p.name for p in folder.iterdir()) == ["examples.parquet", "scores.parquet", "steps.parquet"]
