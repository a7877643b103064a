"""``itermask-pretrain`` / ``python pretrain.py``: continued masked-language-model pretraining of ``model`` (a config
with a ``pretrain`` node, e.g. ``model=minilm_cda``) alone (``conf/pretrain.yaml``, docs/pretraining.md)."""

from __future__ import annotations

from typing import Any

import hydra
from omegaconf import DictConfig

import itermask.console  # noqa: F401  (registers the ${as_yaml:...} resolver of --help)
from itermask.commands import CONFIG_PATH, command
from itermask.jobs import run_job
from itermask.validation import check_composed  # registers the schemas the configs name

__all__ = ["main", "run"]


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="pretrain")
def main(cfg: DictConfig) -> Any:
    """Returns the held-out masked-token accuracy after continued pretraining."""
    return run_job("itermask.pipeline:run_pretrain", cfg, check=check_composed)


def run() -> None:
    """The console script: :func:`itermask.commands.command` of :func:`main`."""
    command(main, "pretrain")


if __name__ == "__main__":
    run()
