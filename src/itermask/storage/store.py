"""The results store: finished evaluation results kept outside Hydra's run folders, keyed by a hash of the
settings that determine them, so a re-run multirun (a new timestamped sweep folder) skips the jobs that
already finished.

Layout: ``<cache_dir>/results/<key>.json``, each written atomically after the job's own
``results.json``: a file that exists is complete. What does not change a result (output and cache
folders, the logger, worker counts, chunk sizes, checkpointing frequency) is left out of the key
(:data:`NOT_IN_KEY`), so ``logger=csv`` or another sweep folder still finds the result.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

from itermask.storage.cache import config_hash
from itermask.storage.files import read_json, write_bytes_atomic, write_json_atomic

log = logging.getLogger(__name__)

__all__ = ["NOT_IN_KEY", "NOT_IN_KEY_AT_DEFAULT", "IMPLEMENTATION_KEYS", "component_settings", "results_config", "results_key", "ResultStore"]

#: Dotted config keys that do not change an evaluation's numbers (where to write, how to log, how fast).
NOT_IN_KEY = (
    "output_dir",
    "cache_dir",
    "logger",
    "reuse_results",
    "hparams_search",
    "optimized_metric",
    "data.num_workers",
    "data.eval_batch_size",
    "evaluation.chunk_size",
    "train.keep_lightning_checkpoints",
    "train.checkpoint_every_n_steps",
    "trainer.log_every_n_steps",
    "trainer.enable_model_summary",
    "trainer.enable_progress_bar",
    "trainer.enable_checkpointing",
    "saliency.internal_batch_size",
    "masking.chunk_size",
    "verbose",
)

#: Dotted config keys left out of the key while they hold the value given here: options added after results
#: were cached, left out at their default so that the results of runs that keep the default keep their keys.
NOT_IN_KEY_AT_DEFAULT = {"train.enabled": True}


#: Config keys that say how a component is built (its class path), not what it computes: left out of every
#: key, so that moving a class to another module keeps the caches valid. A component is identified by its
#: config ``name`` and its settings.
IMPLEMENTATION_KEYS = ("_target_", "_partial_", "_recursive_", "_convert_", "_args_")


def component_settings(node: Any) -> Any:
    """A copy of a resolved config node (plain dicts and lists) without :data:`IMPLEMENTATION_KEYS`, at any
    depth."""
    if isinstance(node, dict):
        return {k: component_settings(v) for k, v in node.items() if k not in IMPLEMENTATION_KEYS}
    if isinstance(node, list):
        return [component_settings(v) for v in node]
    return copy.deepcopy(node)


def results_config(config: dict) -> dict:
    """A copy of the resolved ``config`` (a plain dict) without the keys in :data:`NOT_IN_KEY`, those of
    :data:`NOT_IN_KEY_AT_DEFAULT` at their default, and without :data:`IMPLEMENTATION_KEYS`."""
    out = component_settings(config)
    always = object()
    leave_out = [*((dotted, always) for dotted in NOT_IN_KEY), *NOT_IN_KEY_AT_DEFAULT.items()]
    for dotted, default in leave_out:
        *parents, leaf = dotted.split(".")
        node: Any = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and (default is always or node.get(leaf, default) == default):
            node.pop(leaf, None)
    return out


def results_key(config: dict) -> str:
    """The results-store key of a resolved config: :func:`itermask.storage.cache.config_hash` of
    :func:`results_config`. Equal for two runs exactly when every setting that changes the result is equal."""
    return config_hash(results_config(config))


class ResultStore:
    """Finished results under ``<root>/results/<key>.json``, with the files that belong to a result (e.g.
    the per-example tables) under ``<root>/results/<key>.files/`` by their path in the job folder.

    Args:
        root: the cache directory (``cfg.cache_dir``); created on demand.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser() / "results"

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The stored result for ``key``, or ``None`` if no finished result exists."""
        path = self.path(key)
        return read_json(path) if path.is_file() else None

    def files_dir(self, key: str) -> Path:
        return self.root / f"{key}.files"

    def put(self, key: str, result: dict, files: dict[str, Path] | None = None) -> Path:
        """Store ``result`` under ``key``, with ``files`` (``{path relative to the job folder: path}``):
        every file is copied atomically first, the result file last, so an entry whose ``.json`` exists
        is complete. Returns the result file written."""
        for relative, path in (files or {}).items():
            write_bytes_atomic(self.files_dir(key) / relative, Path(path).read_bytes())
        return write_json_atomic(self.path(key), result)

    def reuse(self, key: str, output_dir: str | Path) -> dict | None:
        """If a result for ``key`` exists, write it (atomically) as ``<output_dir>/results.json`` with
        ``reused_from`` set to the store file, and its stored files back into ``output_dir``; log that the job
        is skipped, and return it; else ``None``."""
        result = self.get(key)
        if result is None:
            return None
        result["reused_from"] = str(self.path(key))
        if isinstance(result.get("config"), dict):
            result["config"]["output_dir"] = str(output_dir)
        stored = self.files_dir(key)
        for path in sorted(p for p in stored.rglob("*") if p.is_file()) if stored.is_dir() else []:
            write_bytes_atomic(Path(output_dir) / path.relative_to(stored), path.read_bytes())
        target = write_json_atomic(Path(output_dir) / "results.json", result)
        log.info("skipping: a result for config hash %s exists (%s); copied to %s", key, self.path(key), target)
        return result
