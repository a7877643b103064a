"""Result files: atomic JSON writing and the provenance recorded with every result."""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["write_json_atomic", "write_text_atomic", "write_bytes_atomic", "read_json", "environment", "to_jsonable"]

PACKAGES = ("itermask", "torch", "transformers", "datasets", "pytorch-lightning", "hydra-core", "captum", "wandb")


def to_jsonable(value: Any) -> Any:
    """Plain JSON types; NaN and infinities become ``None`` (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item") and callable(value.item):
        return to_jsonable(value.item())
    return value


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, flushed and fsynced,
    then renamed over ``path``. An interrupted write leaves no partial file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`write_bytes_atomic`)."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, data: Any) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (see :func:`write_bytes_atomic`). ``data`` is
    serialised before anything is written, so unserialisable data leaves the old file untouched."""
    text = json.dumps(to_jsonable(data), indent=2, sort_keys=False, allow_nan=False) + "\n"
    return write_text_atomic(path, text)


def read_json(path: str | Path) -> Any:
    with open(path) as handle:
        return json.load(handle)


def environment() -> dict:
    """Package versions and the git commit of the working tree (``None`` outside a git checkout)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip() or None
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=Path(__file__).resolve().parent,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
        ) if commit else None
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, None
    return {"packages": versions, "git_commit": commit, "git_dirty": dirty}
