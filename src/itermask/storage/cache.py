"""The checkpoint cache: fine-tuned models live outside Hydra's run folders, keyed by a hash of
everything that determines them, and guarded by a file lock so parallel jobs never train one twice.

Layout of an entry ``<root>/<key>/``: ``model/`` (``save_pretrained`` classifier and tokenizer),
``checkpoints/`` (Lightning checkpoints while training, for resuming), ``meta.json`` (written last,
atomically: an entry without it is unfinished).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from filelock import FileLock

from itermask.storage.files import read_json, write_json_atomic

__all__ = ["config_hash", "CheckpointCache"]


def config_hash(payload: Any, length: int = 16) -> str:
    """Hex SHA-256 prefix of the canonical JSON of ``payload`` (keys sorted), ``length`` characters."""
    text = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


class CheckpointCache:
    """Fine-tuned checkpoints under ``root``, one folder per key.

    Args:
        root: cache directory (created on demand).
        lock_timeout: seconds to wait for another job's lock (``-1``: forever).
    """

    def __init__(self, root: str | Path, lock_timeout: float = -1) -> None:
        self.root = Path(root).expanduser()
        self.lock_timeout = lock_timeout

    def entry(self, key: str) -> Path:
        return self.root / key

    def lock(self, key: str) -> FileLock:
        """An exclusive inter-process lock for ``key`` (use as a context manager)."""
        self.root.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.root / f"{key}.lock"), timeout=self.lock_timeout)

    def meta(self, key: str) -> dict | None:
        """The entry's ``meta.json``, or ``None`` if the entry is missing or unfinished."""
        path = self.entry(key) / "meta.json"
        return read_json(path) if path.is_file() else None

    def finish(self, key: str, meta: dict) -> None:
        """Mark the entry complete by writing ``meta.json`` atomically."""
        write_json_atomic(self.entry(key) / "meta.json", meta)
