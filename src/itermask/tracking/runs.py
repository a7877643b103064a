"""A job's tracker run: its name, W&B tags and the factory that starts its Lightning logger from the
``logger`` config node (see :mod:`itermask.tracking` for what a run logs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hydra
from pytorch_lightning.loggers import Logger

from itermask.tracking import group_name, start

__all__ = ["run_name", "run_tags", "logger_options", "start_logger"]


def _names(config: dict) -> list[str]:
    """The names of the job's model and dataset, and (evaluations) of its saliency method and masking strategy."""
    names = [config["model"]["name"], config["dataset"]["name"]]
    if "saliency" in config:
        names += [config["saliency"]["name"], config["masking"]["name"]]
    return names


def run_name(config: dict) -> str:
    """``<task>-<model>-<dataset>[-<saliency>-<masking>]-seed<n>`` of a resolved config (a plain dict)."""
    return "-".join(str(p) for p in [config["task_name"], *_names(config)]) + f"-seed{config['seed']}"


def run_tags(config: dict) -> list[str]:
    """W&B tags of a job: ``model:<name>``, ``dataset:<name>``, (evaluations) ``saliency:<name>`` and
    ``masking:<name>``, and ``seed:<n>``."""
    kinds = ["model", "dataset", "saliency", "masking"]
    return [f"{kind}:{name}" for kind, name in zip(kinds, _names(config))] + [f"seed:{config['seed']}"]


def logger_options(config: dict, name: str, sweep_dir: str | None = None) -> dict | None:
    """The job's Lightning logger node ``config["logger"]`` of a resolved config (``None`` without one) with the
    run ``name`` (:func:`run_name`), the W&B group (one per multirun sweep, from ``sweep_dir``; ``None`` in a
    single run), job type (the task) and tags (:func:`run_tags`) filled in where the config leaves them
    ``null``, and ``init_timeout`` passed as W&B's setting of that name."""
    if config.get("logger") is None:
        return None
    spec: dict[str, Any] = dict(config["logger"])
    if "group" in spec and spec["group"] is None:
        spec["group"] = group_name(config["task_name"], sweep_dir)
    filled = {"name": name, "job_type": str(config["task_name"]), "tags": run_tags(config)}
    spec.update({key: value for key, value in filled.items() if key in spec and spec[key] is None})
    timeout = spec.pop("init_timeout", None)
    if timeout is not None:
        spec["settings"] = {**(spec.get("settings") or {}), "init_timeout": float(timeout)}
    return spec


def start_logger(target: str, options: Mapping[str, Any], run_id: str | None = None) -> Logger | None:
    """Start the Lightning logger class ``target`` with ``options`` (:func:`logger_options`), falling back to
    offline logging (:func:`itermask.tracking.start`). A W&B run with a ``run_id`` (``<task>-<key>``) gets that
    id when ``id`` is ``null`` (with ``resume: allow``), so a re-run of an interrupted job resumes its run."""
    spec = {"_target_": target, **options}
    if run_id is not None and "id" in spec and spec["id"] is None:
        spec["id"] = run_id
    # _convert_="all": W&B takes plain dicts and lists (settings, tags), not OmegaConf containers
    return start(lambda **overrides: hydra.utils.instantiate(spec, _convert_="all", **overrides), spec.get("mode"))
