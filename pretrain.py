"""Continued masked-language-model pretraining of ``model`` (a config with a ``pretrain`` node, e.g.
``model=minilm_cda``) alone, from ``conf/pretrain.yaml`` (see docs/pretraining.md).

Only Hydra and torch-free itermask modules are imported here (see ``evaluate.py``)."""

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from itermask.console import check_overrides  # (also registers the ${as_yaml:...} resolver of --help)
from itermask.jobs import run_entry, run_job
from itermask.validation import check_composed


@hydra.main(version_base="1.3", config_path="conf", config_name="pretrain")
def main(cfg: DictConfig):
    """Returns the held-out masked-token accuracy after continued pretraining."""
    return run_job("itermask.pipeline:run_pretrain", cfg, check=check_composed)


if __name__ == "__main__":
    check_overrides(sys.argv[1:], Path(__file__).parent / "conf")
    run_entry(main)
