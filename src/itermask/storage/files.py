"""Result files: atomic JSON writing, checksums of cached files and the provenance recorded with every
result."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "write_json_atomic",
    "write_text_atomic",
    "write_bytes_atomic",
    "read_json",
    "environment",
    "to_jsonable",
    "sha256_file",
    "file_manifest",
    "manifest_problems",
    "move_aside",
]

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


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_manifest(folder: str | Path, root: str | Path) -> dict[str, dict]:
    """``{path relative to root: {"bytes": size, "sha256": digest}}`` of every file under ``folder``, sorted:
    what a cache entry records when it is written, to check it when it is reused (:func:`manifest_problems`)."""
    root = Path(root)
    return {
        path.relative_to(root).as_posix(): {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
        for path in sorted(Path(folder).rglob("*"))
        if path.is_file()
    }


def manifest_problems(root: str | Path, manifest: dict[str, dict]) -> list[str]:
    """What differs between the files under ``root`` and a :func:`file_manifest`: missing, unreadable, of
    another size, or with another checksum (sizes are compared first, so a cut file costs no hashing)."""
    problems = []
    for name, recorded in sorted(manifest.items()):
        path = Path(root) / name
        try:
            size = path.stat().st_size
            if size != recorded["bytes"]:
                problems.append(f"{name} has {size} bytes, {recorded['bytes']} were written")
            elif sha256_file(path) != recorded["sha256"]:
                problems.append(f"{name} does not match the checksum recorded when it was written")
        except FileNotFoundError:
            problems.append(f"{name} is missing")
        except OSError as error:
            problems.append(f"{name} cannot be read ({error})")
    return problems


def move_aside(path: str | Path, folder: str | Path, name: str | None = None) -> Path:
    """Move a damaged file or folder into ``folder`` as ``<name>-<UTC time>`` (``name``: the path's own name
    by default; never overwriting) and return its new path: out of the way, but kept for inspection."""
    path, folder = Path(path), Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = f"{name or path.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    target, n = folder / stamp, 1
    while target.exists():
        n += 1
        target = folder / f"{stamp}-{n}"
    shutil.move(str(path), str(target))
    return target


def environment() -> dict:
    """Package versions and the git commit of the working tree (``None`` outside a git checkout)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                cwd=Path(__file__).resolve().parent,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            or None
        )
        dirty = (
            bool(
                subprocess.run(
                    ["git", "status", "--porcelain", "--untracked-files=no"],
                    cwd=Path(__file__).resolve().parent,
                    capture_output=True,
                    text=True,
                    timeout=10,
                ).stdout.strip()
            )
            if commit
            else None
        )
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, None
    return {"packages": versions, "git_commit": commit, "git_dirty": dirty}
