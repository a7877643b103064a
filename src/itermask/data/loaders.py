"""A data loader whose sampler position is part of a checkpoint, so an interrupted fine-tuning resumes at the
same batch (:class:`ResumableDataLoader`, used by :mod:`itermask.training.resume`)."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader

__all__ = ["ResumableDataLoader"]


class ResumableDataLoader(DataLoader):
    """A ``DataLoader`` (yielding exactly what ``DataLoader`` yields) whose position in the current pass can be
    read (:meth:`position`) and restored (:meth:`resume`): a restored pass draws its shuffling order again from
    the generator state recorded at the start of the interrupted pass and skips the batches already delivered;
    a position at the end of a pass continues with the generator state recorded there."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._start: torch.Tensor | None = None
        self._delivered = 0
        self._pending: dict | None = None

    def _generator_state(self) -> torch.Tensor | None:
        return self.generator.get_state() if self.generator is not None else None

    def position(self) -> dict:
        """``{"start": generator state at the start of the current pass, "now": generator state now,
        "delivered": batches delivered in the current pass, "length": batches per pass}``."""
        return {"start": self._start, "now": self._generator_state(), "delivered": self._delivered, "length": len(self)}

    def resume(self, position: dict) -> None:
        """Make the next pass continue from ``position`` (from :meth:`position` of an earlier run)."""
        self._pending = position

    def __iter__(self):  # pyright: ignore[reportIncompatibleMethodOverride]  (a generator of the batches)
        pending, self._pending = self._pending, None
        skip = 0
        if pending is not None and self.generator is not None:
            mid_pass = 0 < pending["delivered"] < pending["length"]
            self.generator.set_state(pending["start"] if mid_pass else pending["now"])
            skip = pending["delivered"] if mid_pass else 0
        self._start, self._delivered = self._generator_state(), 0
        for batch in super().__iter__():
            self._delivered += 1
            if self._delivered > skip:
                yield batch
