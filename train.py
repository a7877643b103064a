"""Fine-tune a classifier from the Hydra config ``conf/train.yaml`` (see README.md).

Only Hydra and torch-free itermask modules are imported here (see ``evaluate.py``)."""

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from itermask.console import check_overrides  # (also registers the ${as_yaml:...} resolver of --help)
from itermask.jobs import run_entry, run_job
from itermask.validation import check_composed


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig):
    """Returns the best validation accuracy (the value Hydra sweepers optimise); a failed job of a multirun
    returns a :class:`~itermask.jobs.JobFailed`, which the Optuna sweeper records as a failed trial."""
    return run_job("itermask.pipeline:run_train", cfg, check=check_composed)


if __name__ == "__main__":
    check_overrides(sys.argv[1:], Path(__file__).parent / "conf")  # say what Hydra only raises
    run_entry(main)
