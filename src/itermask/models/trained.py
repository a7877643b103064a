"""The classifier an evaluation runs on: a fine-tuned checkpoint in the cache, or a given classifier evaluated
as it is (:class:`TrainedModel`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["TrainedModel"]


@dataclass
class TrainedModel:
    """The classifier the evaluation loads.

    Attributes:
        key: the checkpoint key, or the key of a given classifier's identity (``""``: none, no value is stored).
        model_dir: the folder (or hub id) to load the classifier from; ``None`` for a module handed over.
        meta: ``meta.json`` of the cache entry, or the given classifier's metadata (``fine_tuned: false``, the
            class mapping)."""

    key: str
    model_dir: Path | str | None
    meta: dict

    @property
    def fine_tuned(self) -> bool:
        return self.meta.get("fine_tuned", True)

    @property
    def class_order(self) -> list[int] | None:
        """A given classifier's class index of each of the data's classes (``None`` when fine-tuned here)."""
        return None if self.fine_tuned else self.meta["classes"]["order"]
