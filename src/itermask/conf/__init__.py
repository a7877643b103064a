"""itermask's Hydra configs: the presets of ``evaluate``, ``train`` and ``pretrain`` and their config groups,
shipped inside the package (Hydra's ``pkg://itermask.conf``) so that an installed wheel runs them; ``conf/`` of a
source checkout is a link to this folder."""

from pathlib import Path

#: this folder: the config groups are its sub-folders
CONF_DIR = Path(__file__).resolve().parent
