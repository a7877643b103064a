"""A planted pickle: a ``torch.save`` file that looks like a checkpoint and holds an object whose unpickling
creates a marker folder (a stand-in for any command a planted file could run)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

#: what the planted pickle names: ``os.mkdir`` as pickle records it (``posix.mkdir`` on Linux)
MKDIR = f"{os.mkdir.__module__}.mkdir"


class Planted:
    """Unpickled, creates the folder ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def plant(path: Path, marker: Path) -> Path:
    """Write the planted file at ``path`` (folders made); unpickled, it creates ``marker``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {"w": torch.zeros(2)}, "callbacks": {"ExactResume": Planted(marker)}}, path)
    return path
