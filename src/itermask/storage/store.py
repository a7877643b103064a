"""The results store: finished evaluation results kept outside Hydra's run folders under
``<cache_dir>/results/<key>.json``, keyed by a hash of the settings that determine them
(:func:`~itermask.storage.keys.results_key`, re-exported here with :data:`~itermask.storage.keys.SCHEMA_VERSION`),
so a re-run multirun (a new timestamped sweep folder) skips the jobs that already finished.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from itermask.storage.files import move_aside, read_json, to_jsonable, write_bytes_atomic, write_json_atomic
from itermask.storage.keys import SCHEMA_VERSION, results_config, results_key

log = logging.getLogger(__name__)

__all__ = ["SCHEMA_VERSION", "results_config", "results_key", "result_checksum", "ResultStore"]


def result_checksum(result: dict) -> str:
    """Hex SHA-256 of a result's canonical JSON (keys sorted, no spaces; NaN as ``null``): what the results
    store records with a result and checks when reading it back."""
    text = json.dumps(to_jsonable(result), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResultStore:
    """Finished results under ``<root>/results/<key>.json`` (``{"sha256": ..., "result": {...}, "files":
    {path: sha256}}``, written atomically; ``sha256``: :func:`result_checksum`), with the files that belong to a
    result (e.g. the per-example tables) under ``<root>/results/<key>.files/`` by their path in the job folder;
    ``root`` is the cache directory (``cfg.cache_dir``), created on demand."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser() / "results"

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def files_dir(self, key: str) -> Path:
        return self.root / f"{key}.files"

    def get(self, key: str) -> dict | None:
        """The stored result for ``key``, or ``None`` if there is none. An entry that cannot be read, is not a
        stored result, or whose result or files do not match their checksums is moved into ``results/damaged/``
        with a warning naming it, and ``None`` returned (the job is recomputed); it is never used."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            stored = read_json(path)
            problem = self._problem(key, stored)
            if problem is None:
                return stored["result"]
        except (OSError, ValueError) as error:  # ValueError: not JSON (cut, emptied, zeroed)
            problem = f"cannot be read ({type(error).__name__}: {error})"
        moved = move_aside(path, self.root / "damaged")
        if self.files_dir(key).is_dir():
            move_aside(self.files_dir(key), self.root / "damaged")
        log.warning(
            "stored result %s is damaged (%s): moved it to %s; the job will be recomputed", path, problem, moved
        )
        return None

    def _problem(self, key: str, stored) -> str | None:
        """What is wrong with the stored entry ``stored`` of ``key`` (``None``: intact)."""
        if not isinstance(stored, dict) or not isinstance(stored.get("result"), dict) or "sha256" not in stored:
            return "not a stored result with a checksum"
        if result_checksum(stored["result"]) != stored["sha256"]:
            return "its result does not match the checksum recorded when it was written"
        for relative, digest in (stored.get("files") or {}).items():
            file = self.files_dir(key) / relative
            if not file.is_file() or hashlib.sha256(file.read_bytes()).hexdigest() != digest:
                return f"its file {relative} is missing or does not match its checksum"
        return None

    def put(self, key: str, result: dict, files: dict[str, Path] | None = None) -> Path:
        """Store ``result`` under ``key`` with its checksum, and ``files`` (``{path relative to the job folder:
        path}``) with theirs: every file is copied atomically first, the result file last, so an entry whose
        ``.json`` exists is complete. Returns the result file written."""
        checksums = {}
        for relative, path in (files or {}).items():
            data = Path(path).read_bytes()
            write_bytes_atomic(self.files_dir(key) / relative, data)
            checksums[relative] = hashlib.sha256(data).hexdigest()
        result = to_jsonable(result)
        return write_json_atomic(
            self.path(key), {"sha256": result_checksum(result), "result": result, "files": checksums}
        )

    def reuse(self, key: str, output_dir: str | Path, data_files: dict[str, str] | None = None) -> dict | None:
        """If an intact result for ``key`` exists (:meth:`get`), write it (atomically) as
        ``<output_dir>/results.json`` with ``reused_from`` set to the store file (and ``data_files``, the
        fingerprint the key hashed, when given: results stored before it was recorded lack it), and its stored
        files back into ``output_dir``; log that the job is skipped, and return it; else ``None``."""
        result = self.get(key)
        if result is None:
            return None
        result["reused_from"] = str(self.path(key))
        if data_files is not None:
            result["data_files"] = dict(data_files)
        if isinstance(result.get("config"), dict):
            result["config"]["output_dir"] = str(output_dir)
        stored = self.files_dir(key)
        for path in sorted(p for p in stored.rglob("*") if p.is_file()) if stored.is_dir() else []:
            write_bytes_atomic(Path(output_dir) / path.relative_to(stored), path.read_bytes())
        target = write_json_atomic(Path(output_dir) / "results.json", result)
        log.info("skipping: a result for config hash %s exists (%s); copied to %s", key, self.path(key), target)
        return result
