"""Result files: atomic JSON writing, checksums of cached files and the provenance recorded with every
result."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "blocking_file",
    "folder_problem",
    "write_json_atomic",
    "write_text_atomic",
    "write_bytes_atomic",
    "temporary_path",
    "remove_stale_temporaries",
    "read_json",
    "environment",
    "to_jsonable",
    "file_digest",
    "file_manifest",
    "manifest_problems",
    "move_aside",
    "foreign_objects",
]

PACKAGES = ("itermask", "torch", "transformers", "datasets", "pytorch-lightning", "hydra-core", "captum", "wandb")


def blocking_file(folder: Path) -> Path | None:
    """``folder`` or the first folder above it that exists as a file (so ``folder`` cannot be made), or ``None``."""
    return next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)


def folder_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot be made or written into, or ``None``: a folder above it is a file
    (:func:`blocking_file`), or the deepest existing folder refuses a new folder (permissions, a read-only file
    system, ``/proc``). A probe folder is made and removed there, so nothing is left behind."""
    if (blocking := blocking_file(folder)) is not None:
        return f"{blocking} is a file, not a folder"
    existing = next((p for p in (folder, *folder.parents) if p.is_dir()), Path.cwd())
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".itermask-probe-", dir=existing))
    except OSError as error:
        return f"no folder can be made in {existing} ({error.strerror or error})"
    return None


def to_jsonable(value: Any) -> Any:
    """Plain JSON types; NaN and infinities become ``None`` (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    item = getattr(value, "item", None)
    if callable(item):
        return to_jsonable(item())
    return value


#: How long a temporary file written on another host may stand untouched before a writer of the same
#: target removes it (its process cannot be asked whether it is alive): longer than any single write.
STALE_AFTER_S = 24 * 3600


def _temporary_prefix(path: Path) -> str:
    return f".{path.name}."


def temporary_path(path: str | Path) -> Path:
    """A fresh temporary file next to ``path`` for writing it atomically, created empty (mode 0600):
    ``.<name>.<host>.<pid>.<random>.tmp``. The host and process id say whose it is
    (:func:`remove_stale_temporaries`); the random part keeps two writers of one process apart."""
    path = Path(path)
    host = socket.gethostname().replace(".", "_") or "host"
    fd, tmp = tempfile.mkstemp(prefix=f"{_temporary_prefix(path)}{host}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return Path(tmp)


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Remove the temporary files that writers of ``path`` left behind when they were killed mid-way, and
    return them: those of a process of this host that is no longer running, those of another host not
    modified for :data:`STALE_AFTER_S`, and those without a host and process id in their name
    (``.<name>.<random>.tmp``, written before temporaries carried them). A temporary of a running writer,
    and one of another target whose name starts with this one's, are left alone."""
    path = Path(path)
    prefix, host = _temporary_prefix(path), socket.gethostname().replace(".", "_") or "host"
    removed = []
    try:
        candidates = [p for p in path.parent.iterdir() if p.name.startswith(prefix) and p.name.endswith(".tmp")]
    except OSError:
        return removed
    for tmp in candidates:
        parts = tmp.name[len(prefix) : -len(".tmp")].split(".")
        ours = len(parts) == 3 and parts[1].isdigit()
        if not ours and len(parts) != 1:  # a temporary of another target whose name starts with this one's
            continue
        try:
            if ours and parts[0] == host:
                if _running(int(parts[1])):
                    continue
            elif ours and time.time() - tmp.stat().st_mtime < STALE_AFTER_S:
                continue
            tmp.unlink()
            removed.append(tmp)
        except OSError:  # removed by another writer meanwhile, or not ours to remove
            continue
    return removed


def _running(pid: int) -> bool:
    """Whether process ``pid`` of this host is running (a zombie counts as running)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder (:func:`temporary_path`),
    flushed and fsynced, then renamed over ``path``; a killed writer's temporary file is removed by the next
    write of ``path`` (:func:`remove_stale_temporaries`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = temporary_path(path)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
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


def file_digest(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks.

    Raises:
        OSError: if the file cannot be read."""
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
        path.relative_to(root).as_posix(): {"bytes": path.stat().st_size, "sha256": file_digest(path)}
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
            elif file_digest(path) != recorded["sha256"]:
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


def foreign_objects(path: str | Path) -> list[str]:
    """The Python objects (``module.name``) that the pickle of the ``torch.save`` file at ``path`` names and that
    ``torch.load(weights_only=True)`` refuses to build (none but tensors and plain values are allowed), read from
    its opcodes without running any (torch's ``get_unsafe_globals_in_checkpoint``); ``[]`` for a file that is no
    ``torch.save`` zip archive."""
    import torch

    try:
        return list(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except Exception:  # noqa: BLE001  not a zip archive, or no pickle in it: nothing to name
        return []


def _git(*args: str) -> str:
    """The output of ``git <args>`` run in this package's folder, stripped."""
    folder = Path(__file__).resolve().parent
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=10).stdout.strip()


def environment() -> dict:
    """Package versions, the git commit of the working tree (``None`` outside a git checkout) and torch's
    intra-op thread count (``None`` when torch is not imported)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    try:
        commit = _git("rev-parse", "HEAD") or None
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no")) if commit else None
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, None
    torch = sys.modules.get("torch")  # the job's thread count (itermask.training.distributed.apply_threads)
    threads = torch.get_num_threads() if torch is not None else None
    return {"packages": versions, "git_commit": commit, "git_dirty": dirty, "torch_threads": threads}
