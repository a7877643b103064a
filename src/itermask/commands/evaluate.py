"""``itermask-evaluate`` / ``python evaluate.py``: fine-tune (or reuse) a classifier and run the iterative-masking
evaluation (``conf/evaluate.yaml``). A failed job leaves its traceback in its log and a ``failed.json``; a multirun
goes on (see :mod:`itermask.jobs`)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

import itermask.console  # noqa: F401  (registers the ${as_yaml:...} resolver of --help)
from itermask.commands import CONFIG_PATH, command
from itermask.jobs import run_job
from itermask.validation import check_composed  # registers the schemas the configs name

__all__ = ["main", "run"]


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="evaluate")
def main(cfg: DictConfig) -> None:
    """One job: plan, prepare, run and record the evaluation (:func:`itermask.pipeline.run_evaluate`)."""
    return run_job("itermask.pipeline:run_evaluate", cfg, check=check_composed)


def run() -> None:
    """The console script: :func:`itermask.commands.command` of :func:`main`."""
    command(main, "evaluate")


if __name__ == "__main__":
    run()
