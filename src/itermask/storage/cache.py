"""The checkpoint cache: fine-tuned models outside Hydra's run folders, keyed by a hash of everything that
determines them and guarded by a file lock, so parallel jobs never train one twice. An entry ``<root>/<key>/``
holds ``model/`` (``save_pretrained`` classifier and tokenizer), ``checkpoints/`` (Lightning checkpoints while
training, for resuming) and ``meta.json`` (written last, atomically, with the size and SHA-256 of every file
under ``model/``: an entry without it is unfinished)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from itermask.storage.files import (
    blocking_file,
    file_manifest,
    folder_problem,
    manifest_problems,
    move_aside,
    read_json,
    write_json_atomic,
)

log = logging.getLogger(__name__)

__all__ = ["config_hash", "CheckpointCache"]


def config_hash(payload: Any, length: int = 16) -> str:
    """Hex SHA-256 prefix of the canonical JSON of ``payload`` (keys sorted), ``length`` characters."""
    text = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


_HINT = "set cache_dir=<a writable folder> (or the ITERMASK_CACHE environment variable)"


def cache_path_problem(root: str | Path) -> str | None:
    """Why the cache folder ``root`` cannot be made (it is empty, e.g. ``ITERMASK_CACHE=``, which would make the
    current folder the cache; it, or a folder above it, is a file; no folder can be made where it would be, or in
    it: :func:`~itermask.storage.files.folder_problem`), or ``None``. Torch-free: the entry points
    check it with the other settings, before any work."""
    if not str(root).strip():
        return (
            "cache_dir is empty (ITERMASK_CACHE set to nothing?): the checkpoint cache would be the current folder; "
            f"{_HINT}"
        )
    root = Path(root).expanduser()
    if (problem := folder_problem(root)) is None:
        return None
    return f"cache_dir={root} cannot be the checkpoint cache: {problem}; {_HINT}"


class CheckpointCache:
    """Fine-tuned checkpoints under ``root`` (created on demand), one folder per key; ``lock_timeout`` is the
    seconds to wait for another job's lock (``-1``: forever; the config's ``cache_lock_timeout``)."""

    def __init__(self, root: str | Path, lock_timeout: float = -1) -> None:
        self.root = Path(root).expanduser()
        self.lock_timeout = lock_timeout

    def entry(self, key: str) -> Path:
        return self.root / key

    def writable(self) -> None:
        """Check that the cache folder exists or can be made, and that files can be written in it.

        Raises:
            NotADirectoryError: if the cache path (or a folder above it) is a file.
            PermissionError: if the folder cannot be made (any OS error, named) or written (a read-only cache)."""
        if blocking_file(self.root) is not None:
            raise NotADirectoryError(cache_path_problem(self.root))
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except PermissionError:
            raise PermissionError(
                f"the checkpoint cache {self.root} cannot be created (permission denied); {_HINT}"
            ) from None
        except OSError as error:  # e.g. under /proc, or a read-only file system
            raise PermissionError(
                f"the checkpoint cache {self.root} cannot be created ({error.strerror or error}); {_HINT}"
            ) from None
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise PermissionError(
                f"the checkpoint cache {self.root} is read-only for this user, so nothing can be fine-tuned into it "
                f"or locked; {_HINT}, or make it writable (chmod u+w {self.root})"
            )

    @contextmanager
    def lock(self, key: str) -> Iterator[FileLock]:
        """An exclusive inter-process lock for ``key``, held for the ``with`` block.

        Raises:
            TimeoutError: if another process holds it for longer than ``lock_timeout`` seconds.
            NotADirectoryError, PermissionError: see :meth:`writable`."""
        self.writable()
        path = self.root / f"{key}.lock"
        lock = FileLock(str(path), timeout=self.lock_timeout)
        try:
            lock.acquire()
        except Timeout:
            raise TimeoutError(
                f"waited {self.lock_timeout:g} s for the lock {path}: another job is fine-tuning the same checkpoint "
                f"({self.entry(key)}) and has not finished. Let it finish and run again (the checkpoint is then "
                "reused), or raise cache_lock_timeout (seconds; null: wait forever). The lock is released when its "
                "holder exits, so a lock file left by a killed job never blocks"
            ) from None
        except PermissionError:
            raise PermissionError(
                f"cannot create the lock file {path}: the checkpoint cache {self.root} is not writable; set "
                "cache_dir=<a writable folder> (or ITERMASK_CACHE)"
            ) from None
        try:
            yield lock
        finally:
            lock.release()

    def meta(self, key: str) -> dict | None:
        """The entry's ``meta.json`` as written, or ``None`` if the entry is missing or unfinished (unchecked:
        see :meth:`reusable`)."""
        path = self.entry(key) / "meta.json"
        return read_json(path) if path.is_file() else None

    def reusable(self, key: str) -> dict | None:
        """The entry's ``meta.json`` when the entry is finished and intact (every file it records present with
        its size and checksum). ``None`` for a missing or unfinished entry, and for a damaged one, which is moved
        into ``<root>/damaged/`` with a warning naming it and what is wrong; it is never used."""
        entry = self.entry(key)
        if not (entry / "meta.json").is_file():
            return None
        meta = None
        try:
            meta = read_json(entry / "meta.json")
            files = meta.get("files") if isinstance(meta, dict) else None
            problems = (
                manifest_problems(entry, files) if files else ["meta.json records no checksums of the model files"]
            )
        except (OSError, ValueError) as error:  # ValueError: not JSON (cut, emptied, zeroed)
            problems = [f"meta.json cannot be read ({type(error).__name__}: {error})"]
        if not problems:
            return meta
        moved = move_aside(entry, self.root / "damaged")
        log.warning(
            "cached checkpoint %s is damaged (%s): moved it to %s; it will be fine-tuned again",
            entry,
            "; ".join(problems),
            moved,
        )
        return None

    def write_model(self, key: str, model, tokenizer, **options) -> None:
        """Save ``model`` (``save_pretrained(..., **options)``) and ``tokenizer`` as the entry's ``model/``, written
        beside it and then renamed into place."""
        entry = self.entry(key)
        tmp = entry / "model.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp, **options)
        tokenizer.save_pretrained(tmp)
        shutil.rmtree(entry / "model", ignore_errors=True)
        tmp.rename(entry / "model")

    def finish(self, key: str, meta: dict) -> None:
        """Mark the entry complete by writing ``meta.json`` atomically, with the size and SHA-256 of every file
        under the entry's ``model/`` (``files``, paths relative to the entry)."""
        entry = self.entry(key)
        write_json_atomic(entry / "meta.json", {**meta, "files": file_manifest(entry / "model", entry)})
