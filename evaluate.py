"""Fine-tune (or reuse) a classifier and run the iterative-masking evaluation (``conf/evaluate.yaml``)."""

import hydra
from omegaconf import DictConfig

from itermask.pipeline import run_evaluate


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    run_evaluate(cfg)


if __name__ == "__main__":
    main()
