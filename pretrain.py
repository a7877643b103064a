"""Continued masked-language-model pretraining of ``model`` (a config with a ``pretrain`` node, e.g.
``model=minilm_cda``) alone, from ``conf/pretrain.yaml`` (see docs/pretraining.md)."""

import hydra
from omegaconf import DictConfig

from itermask.jobs import run_job
from itermask.pipeline import run_pretrain


@hydra.main(version_base="1.3", config_path="conf", config_name="pretrain")
def main(cfg: DictConfig):
    """Returns the held-out masked-token accuracy after continued pretraining."""
    return run_job(run_pretrain, cfg)


if __name__ == "__main__":
    main()
