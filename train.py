"""Fine-tune a classifier from the Hydra config ``conf/train.yaml`` (see README.md)."""

import sys

import hydra
from omegaconf import DictConfig

from itermask.console import check_overrides
from itermask.jobs import run_job
from itermask.pipeline import run_train


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig):
    """Returns the best validation accuracy (the value Hydra sweepers optimise); a failed job of a multirun
    returns a :class:`~itermask.jobs.JobFailed`, which the Optuna sweeper records as a failed trial."""
    return run_job(run_train, cfg)


if __name__ == "__main__":
    check_overrides(sys.argv[1:])  # a non-ASCII path without quotes: say so, not Hydra's lexer error
    main()
