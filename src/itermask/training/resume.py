"""Exact resumption of an interrupted fine-tuning: a run resumed from a Lightning checkpoint trains on the same
batches, with the same random numbers, as an uninterrupted run, and so ends with the same weights. Lightning
restores neither the shuffling sampler's position within an epoch nor the random number generators:
:class:`ExactResume` records both in every checkpoint and restores them before the first training batch.

Not ``torchdata``'s ``StatefulDataLoader``: for the same generator it shuffles in another order than
``torch.utils.data.DataLoader`` (torchdata 0.11), so switching would change every fine-tuned model under the
same checkpoint key.

Checkpoints are data, never code: whoever can write to a shared or copied cache must not run code as its next
user. Every Lightning checkpoint itermask reads (a ``last.ckpt`` to resume from, here and inside ``trainer.fit``;
the best checkpoint exported) is read with ``torch.load(weights_only=True)``, whose unpickler builds tensors and
plain Python values only and refuses any other object unread. ``fit`` and ``load_from_checkpoint`` are given
``weights_only=True``: Lightning passes ``None`` on, which torch < 2.6, or torch with
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``, reads as False. Nothing is added to torch's allow-list
(``add_safe_globals``): the ``last.ckpt`` of a fine-tuning (with masked and adversarial augmentation) and of a
continued pretraining name only ``torch._utils._rebuild_tensor_v2``, ``torch.FloatStorage``, ``torch.ByteStorage``
and ``collections.OrderedDict``, all on it (measured with torch 2.13 and Lightning 2.6.6;
``tests/training/test_resume.py`` and ``test_pretraining.py`` keep it so).
"""

from __future__ import annotations

import logging
import pickle
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from itermask.data.loaders import ResumableDataLoader
from itermask.storage.files import foreign_objects, move_aside

log = logging.getLogger(__name__)

__all__ = [
    "AUGMENTATIONS",
    "ExactResume",
    "rng_states",
    "step_seed",
    "set_rng_states",
    "last_checkpoint_every",
    "checkpoint_problem",
    "resume_checkpoint",
]

#: the training module's augmentations with their own generator, whose states are recorded too (adversarial
#: fine-tuning draws nothing else: its attack runs in eval mode on the restored weights)
AUGMENTATIONS = ("masking_augmentation", "adversarial_augmentation")


def step_seed(seed: int, step: int) -> int:
    """The seed of training step ``step`` (>= 0) of a run seeded ``seed`` (in [0, 2**32)): NumPy's ``SeedSequence``
    of the pair, a 32-bit integer (torch's CPU generator keeps 32 bits of a seed, so ``seed << 32 | step`` would
    give every run the same seeds). Seeding each step with it makes the step's draws a function of the pair
    alone."""
    return int(np.random.SeedSequence([seed, step]).generate_state(1)[0])


def rng_states(module: pl.LightningModule | None = None) -> dict:
    """The states of Python's, NumPy's and torch's global generators (CUDA's when available) and of the
    augmentation generators of ``module`` (:data:`AUGMENTATIONS`, where enabled), in types a checkpoint
    loads with ``weights_only``."""
    # the legacy (default) form of the state: a tuple, not the dict of get_state(legacy=False)
    kind, keys, position, has_gauss, gauss = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state())
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [kind, keys.tolist(), position, has_gauss, gauss],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    for name in AUGMENTATIONS:
        augmentation = getattr(module, name, None)
        if augmentation is not None:
            states[name] = augmentation.generator.get_state()
    return states


def set_rng_states(states: dict, module: pl.LightningModule | None = None) -> None:
    """Restore what :func:`rng_states` recorded."""
    random.setstate(_tuples(states["python"]))
    kind, keys, position, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), position, has_gauss, gauss))
    torch.set_rng_state(states["torch"])
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
    for name in AUGMENTATIONS:
        augmentation = getattr(module, name, None)
        if augmentation is not None and name in states:
            augmentation.generator.set_state(states[name])


def _tuples(value):
    """Python's generator state with its nested tuples back (a checkpoint may store them as lists)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


class ExactResume(pl.Callback):
    """Records, in every checkpoint, the training loader's position (:class:`ResumableDataLoader`) and the
    random generators' states, and restores them when training resumes from such a checkpoint. ``resumed`` is
    ``None``, or after a resume ``{"epoch", "global_step", "batches_into_epoch"}`` of the checkpoint
    (``batches_into_epoch`` 0: an epoch boundary)."""

    #: key of this callback's state in a Lightning checkpoint's ``callbacks``
    STATE_KEY = "ExactResume"

    def __init__(self) -> None:
        self._trainer: pl.Trainer | None = None
        self._restored: dict | None = None
        self.resumed: dict | None = None

    @property
    def state_key(self) -> str:
        return self.STATE_KEY

    def state_dict(self) -> dict:
        trainer = self._trainer
        loader = trainer.train_dataloader if trainer is not None else None
        return {
            "rng": rng_states(trainer.lightning_module if trainer is not None else None),
            "loader": loader.position() if isinstance(loader, ResumableDataLoader) else None,
            "epoch": trainer.current_epoch if trainer is not None else None,
            "global_step": trainer.global_step if trainer is not None else None,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        self._restored = state_dict
        position = state_dict["loader"]  # (set here: a run resumed at its last step never starts training)
        into = position["delivered"] if position and position["delivered"] < position["length"] else 0
        self.resumed = {
            "epoch": state_dict["epoch"],
            "global_step": state_dict["global_step"],
            "batches_into_epoch": into,
        }

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._trainer = trainer

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        state, self._restored = self._restored, None
        if state is None:
            return
        loader = trainer.train_dataloader
        position = state["loader"]
        if isinstance(loader, ResumableDataLoader) and position is not None:
            loader.resume(position)
        set_rng_states(state["rng"], pl_module)


def last_checkpoint_every(entry: Path, steps: int) -> ModelCheckpoint:
    """A callback that writes only ``<entry>/checkpoints/last.ckpt``, every ``steps`` training steps."""
    return ModelCheckpoint(
        dirpath=entry / "checkpoints",
        every_n_train_steps=steps,
        save_top_k=0,
        save_last=True,
        enable_version_counter=False,
    )


def checkpoint_problem(path: str | Path, augmentations: Sequence[str] = ()) -> str | None:
    """Why the Lightning checkpoint at ``path`` cannot resume a fine-tuning exactly, or ``None`` if it can: it
    holds objects other than tensors and plain values (never unpickled: :func:`foreign_objects`), it cannot be
    read, it holds no :class:`ExactResume` state, or it lacks the generator state of one of the enabled
    ``augmentations`` (names in :data:`AUGMENTATIONS`)."""
    try:  # memory-mapped: the weights are not read, only the checkpoint's structure
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError:  # torch's weights-only unpickler refused an object: none was built
        named = ", ".join(foreign_objects(path)) or "objects it does not allow"
        return f"holds Python objects that a checkpoint never holds ({named}), which itermask does not unpickle"
    except Exception as error:  # noqa: BLE001  torch raises RuntimeError, EOFError or zip errors
        return f"cannot be read ({type(error).__name__}: {error})"
    state = (checkpoint.get("callbacks") or {}).get(ExactResume.STATE_KEY) if isinstance(checkpoint, dict) else None
    if state is None:
        return (
            "holds no record of the sampler position and random generators (written by an older itermask), "
            "so a run resumed from it would differ from an uninterrupted one"
        )
    if missing := [name for name in augmentations if name not in (state.get("rng") or {})]:
        return (
            f"holds no state of the generator of {', '.join(missing)} (written by an older itermask), so a "
            "run resumed from it would differ from an uninterrupted one"
        )
    return None


def resume_checkpoint(cache, key: str, augmentations: Sequence[str] = (), what: str = "fine-tuning") -> Path | None:
    """The ``last.ckpt`` of the entry ``key`` of ``cache`` to resume from, or ``None``: none exists, or it cannot
    resume exactly (:func:`checkpoint_problem`), in which case the entry's checkpoints are moved into
    ``<cache>/damaged/`` with a warning and the training (``what``) starts over."""
    last = cache.entry(key) / "checkpoints" / "last.ckpt"
    if not last.is_file():
        return None
    problem = checkpoint_problem(last, augmentations)
    if problem is None:
        log.info("resuming interrupted %s from %s", what, last)
        return last
    moved = move_aside(last.parent, cache.root / "damaged", name=f"{key}-checkpoints")
    log.warning(
        "cannot resume from %s: it %s; moved the checkpoints to %s and %s from the start", last, problem, moved, what
    )
    return None
