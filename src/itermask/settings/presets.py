"""The presets of ``conf/`` read without composing a config: a saliency method's or masking strategy's node
(``conf/saliency/<name>.yaml``, ``conf/masking/<name>.yaml``) and the ``evaluation`` defaults of
``conf/evaluate.yaml``, for :func:`itermask.evaluate`. Their interpolations (``${seed}``, ``${model.pretrained}``)
are resolved against the values given; Hydra's global state is not touched."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from itermask.settings.components import plain

__all__ = ["CONF_DIR", "preset", "evaluation_defaults"]

#: the Hydra config folder of a source checkout (``conf/``, beside ``src/``), where the presets live
CONF_DIR = Path(__file__).resolve().parents[3] / "conf"


def _conf(conf_dir: Path) -> Path:
    """``conf_dir``, checked to hold the presets.

    Raises:
        FileNotFoundError: a folder without ``evaluate.yaml``."""
    if not (conf_dir / "evaluate.yaml").is_file():
        raise FileNotFoundError(
            f"no Hydra config folder at {conf_dir} (conf/ of a source checkout, where the saliency and masking "
            "presets live): give conf_dir=, or SaliencyMethod and MaskingStrategy instances instead of names"
        )
    return conf_dir


def preset(group: str, name: str, conf_dir: Path, values: Mapping[str, Any]) -> dict:
    """The node of preset ``name`` of ``group`` (``saliency`` or ``masking``), its interpolations resolved
    against ``values`` (e.g. ``{"seed": 0, "model": {"pretrained": ...}}``), as plain values.

    Raises:
        FileNotFoundError: no such preset (naming the ones there are) or no config folder."""
    folder = _conf(conf_dir) / group
    path = folder / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.yaml"))
        raise FileNotFoundError(f"{group}={name!r}: no such preset in {folder}; choose from {known}")
    root = OmegaConf.create({**values, group: OmegaConf.load(path)})
    return plain(root[group])


def evaluation_defaults(conf_dir: Path) -> dict:
    """The ``evaluation`` node of ``conf/evaluate.yaml`` (the defaults of ``evaluate.py``), as plain values.

    Raises:
        FileNotFoundError: no config folder."""
    return plain(OmegaConf.load(_conf(conf_dir) / "evaluate.yaml")["evaluation"])
