"""Fine-tune (or reuse) a classifier and run the iterative-masking evaluation (``conf/evaluate.yaml``).

Only Hydra and torch-free itermask modules are imported here: ``--help`` and a bad setting answer before
torch, transformers and Lightning are imported (the pipeline is imported by :func:`itermask.jobs.run_job`
after :func:`itermask.validation.check_composed` passed)."""

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from itermask.console import check_overrides  # (also registers the ${as_yaml:...} resolver of --help)
from itermask.jobs import run_entry, run_job
from itermask.validation import check_composed  # registers the evaluation schema that evaluate.yaml names


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    """A failed job leaves its traceback in its log and a ``failed.json``; a multirun goes on (see
    :mod:`itermask.jobs`)."""
    run_job("itermask.pipeline:run_evaluate", cfg, check=check_composed)


if __name__ == "__main__":
    check_overrides(sys.argv[1:], Path(__file__).parent / "conf")  # say what Hydra only raises
    run_entry(main)
