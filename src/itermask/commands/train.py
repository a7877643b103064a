"""``itermask-train`` / ``python train.py``: fine-tune a classifier (``conf/train.yaml``)."""

from __future__ import annotations

from typing import Any

import hydra
from omegaconf import DictConfig

import itermask.console  # noqa: F401  (registers the ${as_yaml:...} resolver of --help)
from itermask.commands import CONFIG_PATH, command
from itermask.jobs import run_job
from itermask.validation import check_composed  # registers the schemas the configs name

__all__ = ["main", "run"]


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="train")
def main(cfg: DictConfig) -> Any:
    """Returns the best validation accuracy (the value Hydra sweepers optimise); a failed job of a multirun
    returns a :class:`~itermask.jobs.JobFailed`, which the Optuna sweeper records as a failed trial."""
    return run_job("itermask.pipeline:run_train", cfg, check=check_composed)


def run() -> None:
    """The console script: :func:`itermask.commands.command` of :func:`main`."""
    command(main, "train")


if __name__ == "__main__":
    run()
