"""Fine-tune a classifier from the Hydra config ``conf/train.yaml`` (see README.md)."""

import hydra
from omegaconf import DictConfig

from itermask.pipeline import run_train


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float:
    """Returns the best validation accuracy (the value Hydra sweepers optimise)."""
    return run_train(cfg)


if __name__ == "__main__":
    main()
