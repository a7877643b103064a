"""Fine-tune (or reuse) a classifier and run the iterative-masking evaluation (``conf/evaluate.yaml``)."""

import sys

import hydra
from omegaconf import DictConfig

from itermask.console import check_overrides
from itermask.jobs import run_job
from itermask.pipeline import run_evaluate


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    """A failed job leaves its traceback in its log and a ``failed.json``; a multirun goes on (see
    :mod:`itermask.jobs`)."""
    run_job(run_evaluate, cfg)


if __name__ == "__main__":
    check_overrides(sys.argv[1:])  # a non-ASCII path without quotes: say so, not Hydra's lexer error
    main()
