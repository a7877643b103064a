"""A job's tracker run: its name, W&B tags and the factory that starts its Lightning logger from the
``logger`` config node (see :mod:`itermask.tracking` for what a run logs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hydra
from pytorch_lightning.loggers import Logger

from itermask.tracking import group_name, start

__all__ = ["run_name", "run_tags", "job_logger"]


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


def _sweep_dir() -> str | None:
    """The multirun's sweep folder (``None`` outside a Hydra multirun)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hydra_cfg = HydraConfig.get() if HydraConfig.initialized() else None
    multirun = hydra_cfg is not None and hydra_cfg.mode == RunMode.MULTIRUN
    return hydra_cfg.sweep.dir if multirun and hydra_cfg is not None else None


def job_logger(config: dict, name: str, key: str | None = None) -> Callable[[], Logger | None]:
    """A function starting the job's Lightning logger from ``config["logger"]`` (``None`` without one), with
    the run ``name``, the W&B group (one per multirun sweep), job type (the task) and tags
    (:func:`run_tags`) filled in where the config leaves them ``null``, and ``init_timeout`` passed as W&B's
    setting of that name. The run falls back to offline logging when an online start fails
    (:func:`itermask.tracking.start`).

    A W&B run of a job with a ``key`` gets the id ``<task>-<key>`` when ``logger.id`` is ``null``, with
    ``logger.resume: allow``: a re-run of a crashed or interrupted job (same key: same checkpoint or results)
    resumes its run instead of leaving a second, half-logged one beside it.

    Args:
        config: the resolved config (a plain dict).
        name: the run name (:func:`run_name`).
        key: the job's key (the results key of an evaluation, the checkpoint key of a fine-tuning), or ``None``.
    """
    if config.get("logger") is None:
        return lambda: None
    spec: dict[str, Any] = dict(config["logger"])
    if "group" in spec and spec["group"] is None:
        spec["group"] = group_name(config["task_name"], _sweep_dir())
    filled = {"name": name, "job_type": str(config["task_name"]), "tags": run_tags(config)}
    spec.update({key: value for key, value in filled.items() if key in spec and spec[key] is None})
    if key is not None and "id" in spec and spec["id"] is None:
        spec["id"] = f"{config['task_name']}-{key}"
    timeout = spec.pop("init_timeout", None)
    if timeout is not None:
        spec["settings"] = {**(spec.get("settings") or {}), "init_timeout": float(timeout)}
    # _convert_="all": W&B takes plain dicts and lists (settings, tags), not OmegaConf containers
    return lambda: start(
        lambda **overrides: hydra.utils.instantiate(spec, _convert_="all", **overrides), spec.get("mode")
    )
