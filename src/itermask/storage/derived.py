"""The derived-values store: what every evaluation job on one classifier recomputes identically (its test
accuracy, the representations the OOD detectors are fitted on, the random baseline's masking curves), computed
once: the first job stores them and the others read back the same numbers, bit for bit.

Layout: ``<cache_dir>/derived/<model key>/<kind>-<fingerprint hash>.pt``, written atomically with ``torch.save``
and read back with ``torch.load(weights_only=True)``. Each file holds :data:`DERIVED_VERSION`, its kind, its full
fingerprint and its value's serialized bytes with their SHA-256, all checked on reading. The fingerprint also
holds the digest of the classifier's weight files, its attention implementation and device
(:meth:`itermask.analyses.base.EvaluationContext.reuse`), so a checkpoint replaced under the same key, or run
otherwise, is not mistaken for the old one.

Parallel jobs on one classifier (``hydra/launcher=joblib``, several GPUs' jobs) compute a missing value once:
the first takes the value's file lock, ``<cache_dir>/derived/locks/<model key>-<kind>-<hash>.lock``
(:class:`filelock.FileLock`, released when its holder exits, so a killed job's lock never blocks), and the
others wait for it and read the value back (:meth:`DerivedStore.get_or_compute`).
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout

from itermask.storage.cache import config_hash
from itermask.storage.files import move_aside, write_bytes_atomic

log = logging.getLogger(__name__)

__all__ = ["DERIVED_VERSION", "DerivedStore", "token_digest"]

#: Raised when the code that computes a stored value changes what it computes: it is part of every file's
#: name, so older files are then never read.
DERIVED_VERSION = 2


def token_digest(columns: Iterable[Iterable[Any]]) -> str:
    """Hex SHA-256 of ``columns`` of rows (e.g. a split's ``input_ids``, ``labels``; a row is a sequence of
    integers or one integer): every row's values as 64-bit integers, each row prefixed with its length, each
    column with its number of rows, so two inputs have the same digest only if every id of every row is the same."""
    digest = hashlib.sha256()
    for column in columns:
        rows = list(column)
        digest.update(np.int64(len(rows)).tobytes())
        for row in rows:
            values = np.atleast_1d(np.asarray(row, dtype=np.int64))
            digest.update(np.int64(len(values)).tobytes())
            digest.update(values.tobytes())
    return digest.hexdigest()


class DerivedStore:
    """Values derived from one classifier, under ``<root>/derived/`` (``root``: the cache directory, created
    on demand); ``lock_timeout`` is the seconds a job waits for another job computing the same value (``-1``:
    forever; the config's ``cache_lock_timeout``) before it computes the value itself."""

    def __init__(self, root: str | Path, lock_timeout: float = -1) -> None:
        self.root = Path(root).expanduser() / "derived"
        self.lock_timeout = lock_timeout

    def path(self, model_key: str, kind: str, fingerprint: dict) -> Path:
        """The file of ``kind`` (e.g. ``"test_accuracy"``) for ``model_key`` and ``fingerprint``."""
        name = config_hash({"kind": kind, "version": DERIVED_VERSION, "fingerprint": fingerprint})
        return self.root / model_key / f"{kind}-{name}.pt"

    def get(self, model_key: str, kind: str, fingerprint: dict) -> Any | None:
        """The stored value, or ``None`` when there is none. A file that cannot be read, holds another value
        (kind, fingerprint, version) or whose value does not match its SHA-256 is moved into ``derived/damaged/``
        with a warning naming it, and ``None`` returned; it is never used."""
        import torch

        path = self.path(model_key, kind, fingerprint)
        if not path.is_file():
            return None
        try:
            stored = torch.load(io.BytesIO(path.read_bytes()), weights_only=True)
            expected = {"version": DERIVED_VERSION, "kind": kind, "fingerprint": fingerprint}
            if not (isinstance(stored, dict) and all(stored.get(k) == v for k, v in expected.items())):
                problem = "it is not this value (another kind, fingerprint or version)"
            else:
                data = stored["value"].numpy().tobytes()
                if hashlib.sha256(data).hexdigest() != stored["sha256"]:
                    problem = "its value does not match the checksum recorded when it was written"
                else:
                    return torch.load(io.BytesIO(data), weights_only=True)
        except Exception as error:  # noqa: BLE001 - any unreadable file (cut, zeroed, not a torch file) is damaged
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            problem = f"cannot be read ({type(error).__name__}: {first_line})"
        try:
            moved = move_aside(path, self.root / "damaged")
        except OSError as error:  # e.g. derived/damaged is a file: the entry stays, and is never used
            log.warning(
                "stored %s %s is damaged (%s) and could not be moved aside (%s); recomputing it",
                kind,
                path,
                problem,
                error,
            )
            return None
        log.warning("stored %s %s is damaged (%s): moved it to %s; recomputing it", kind, path, problem, moved)
        return None

    def put(self, model_key: str, kind: str, fingerprint: dict, value: Any) -> Path | None:
        """Store ``value`` (tensors, numbers, strings and lists or dicts of them) atomically with the SHA-256
        of its serialized bytes; returns the file. Storing only saves later jobs work: when the file cannot be
        written (``derived/`` is a file, a read-only cache) a warning says so and ``None`` is returned."""
        import torch

        inner = io.BytesIO()
        torch.save(value, inner)
        data = inner.getvalue()
        header = {"version": DERIVED_VERSION, "kind": kind, "fingerprint": fingerprint}
        payload = {**header, "sha256": hashlib.sha256(data).hexdigest()}
        payload["value"] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        outer = io.BytesIO()
        torch.save(payload, outer)
        path = self.path(model_key, kind, fingerprint)
        try:
            return write_bytes_atomic(path, outer.getvalue())
        except OSError as error:
            log.warning(
                "could not store the %s of this classifier at %s (%s: %s); the other jobs on it will compute it "
                "again. Check that cache_dir is a writable folder",
                kind.replace("_", " "),
                path,
                type(error).__name__,
                error,
            )
            return None

    def lock_path(self, model_key: str, kind: str, fingerprint: dict) -> Path:
        """The lock file of the value :meth:`path` names (under ``derived/locks/``, beside no value file)."""
        return self.root / "locks" / f"{model_key}-{self.path(model_key, kind, fingerprint).stem}.lock"

    def get_or_compute(
        self, model_key: str, kind: str, fingerprint: dict, compute: Callable[[], Any], *, exclusive: bool = True
    ) -> Any:
        """The stored value of ``kind`` for ``model_key`` and ``fingerprint``, or ``compute()``'s, stored then.

        With ``exclusive`` (the default) a job that misses computes under the value's file lock
        (:meth:`lock_path`), so parallel jobs compute it once: the others wait, then read back the stored value.
        One that has waited ``lock_timeout`` s computes the value itself, with a warning; one whose lock cannot be
        made (a read-only cache) computes without it. Either way two values stored at once are the same value,
        written atomically. ``exclusive=False`` (a distributed run, whose ranks must all run the computation's
        collectives) never waits."""
        value = self._reused(model_key, kind, fingerprint, "an earlier job")
        if value is not None:
            return value
        with self._exclusive(model_key, kind, fingerprint) if exclusive else _unlocked() as waited:
            if waited is not None:  # another job may have stored it while this one waited
                value = self._reused(model_key, kind, fingerprint, f"another job while this one waited {waited:.0f} s")
                if value is not None:
                    return value
            value = compute()
            self.put(model_key, kind, fingerprint, value)
        return value

    def _reused(self, model_key: str, kind: str, fingerprint: dict, by: str) -> Any | None:
        value = self.get(model_key, kind, fingerprint)
        if value is not None:
            what, path = kind.replace("_", " "), self.path(model_key, kind, fingerprint)
            log.info("reusing the %s of this classifier computed by %s (%s)", what, by, path)
        return value

    @contextmanager
    def _exclusive(self, model_key: str, kind: str, fingerprint: dict) -> Iterator[float | None]:
        """Hold the value's lock for the block; yields the seconds waited for it, or ``None`` when the block runs
        unlocked (the lock could not be made, or another job held it past ``lock_timeout``)."""
        path, what = self.lock_path(model_key, kind, fingerprint), kind.replace("_", " ")
        lock, start = None, time.monotonic()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(path), timeout=0)
            try:
                lock.acquire()
            except Timeout:
                log.info("another job is computing the %s of this classifier; waiting for it (lock %s)", what, path)
                lock.acquire(timeout=self.lock_timeout)
        except Timeout:
            log.warning(
                "waited %g s for another job computing the %s of this classifier (lock %s); computing it here too "
                "(raise cache_lock_timeout to wait longer)",
                self.lock_timeout,
                what,
                path,
            )
            lock = None
        except OSError as error:  # derived/ is a file, a read-only cache: put() says it cannot store either
            log.debug("cannot lock %s (%s): computing the %s without the lock", path, error, what)
            lock = None
        if lock is None:
            yield None
            return
        try:
            yield time.monotonic() - start
        finally:
            lock.release()


@contextmanager
def _unlocked() -> Iterator[None]:
    yield None
