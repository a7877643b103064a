"""The results store: finished evaluation results kept outside Hydra's run folders, keyed by a hash of the
settings that determine them, so a re-run multirun (a new timestamped sweep folder) skips the jobs that
already finished.

Layout: ``<cache_dir>/results/<key>.json``, each written atomically after the job's own
``results.json``: a file that exists is complete. What does not change a result (output and cache
folders, the logger, worker counts, chunk sizes, checkpointing frequency) is left out of the key
(:data:`NOT_IN_KEY`), so ``logger=csv`` or another sweep folder still finds the result. The key also holds
:data:`SCHEMA_VERSION`, so results stored by code whose numbers have since been fixed are recomputed.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

from itermask.storage.cache import config_hash
from itermask.storage.files import read_json, write_json_atomic

log = logging.getLogger(__name__)

__all__ = ["SCHEMA_VERSION", "NOT_IN_KEY", "IMPLEMENTATION_KEYS", "component_settings", "results_config", "results_key", "ResultStore"]

#: Version of the results: of their layout and of the statistics that compute them. It is part of every
#: results key and written into ``results.json`` (``schema_version``). Bump it with every change that alters
#: stored numbers or their layout, so that a re-run recomputes instead of returning the old code's numbers.
#: 1 (implicit, no field): up to issue 9. 2: exact ECE binning, OOD AUROC on raw scores, degenerate
#: detectors under ``missing``, saliency diagnostics (issue 10).
SCHEMA_VERSION = 2

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
)


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
    """A copy of the resolved ``config`` (a plain dict) without the keys in :data:`NOT_IN_KEY` and without
    :data:`IMPLEMENTATION_KEYS`."""
    out = component_settings(config)
    for dotted in NOT_IN_KEY:
        *parents, leaf = dotted.split(".")
        node: Any = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return out


def results_key(config: dict) -> str:
    """The results-store key of a resolved config: :func:`itermask.storage.cache.config_hash` of
    :data:`SCHEMA_VERSION` and :func:`results_config`. Equal for two runs exactly when the code's result
    schema and every setting that changes the result are equal."""
    return config_hash({"schema_version": SCHEMA_VERSION, "config": results_config(config)})


class ResultStore:
    """Finished results under ``<root>/results/<key>.json``.

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

    def put(self, key: str, result: dict) -> Path:
        """Store ``result`` atomically under ``key``; returns the file written."""
        return write_json_atomic(self.path(key), result)

    def reuse(self, key: str, output_dir: str | Path) -> dict | None:
        """If a result for ``key`` exists, write it (atomically) as ``<output_dir>/results.json`` with
        ``reused_from`` set to the store file, log that the job is skipped, and return it; else ``None``."""
        result = self.get(key)
        if result is None:
            return None
        result["reused_from"] = str(self.path(key))
        if isinstance(result.get("config"), dict):
            result["config"]["output_dir"] = str(output_dir)
        target = write_json_atomic(Path(output_dir) / "results.json", result)
        log.info("skipping: a result for config hash %s exists (%s); copied to %s", key, self.path(key), target)
        return result
