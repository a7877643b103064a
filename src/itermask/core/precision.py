"""The numeric precision of a job: one setting, Lightning's ``trainer.precision``, for fine-tuning (Lightning's
own precision plugin) and for everything the evaluation runs on the model (saliency, Captum's forwards and
backward, the masked, soft and subset forwards, the analyses), under :func:`torch.autocast` of the model's device
type, CPU included. Autocast runs matrix products in bfloat16 and keeps the weights in float32; the outputs that
feed the measures are cast to float32 (or float64) before the softmax where they are built (``.float()`` at
each forward of :mod:`itermask.core`)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["PRECISIONS", "autocast_dtype", "autocast", "canonical_precision"]

#: The accepted ``trainer.precision`` values and the name of each one's autocast dtype in ``torch`` (``None``:
#: float32, no autocast); names, not dtypes, so that checking a config imports no torch. Lightning's other values
#: are refused: ``16-mixed`` needs a gradient scaler that saliency's backward passes do not have, and the ``-true``
#: ones cast the weights themselves.
PRECISIONS: dict[str | int, str | None] = {
    "32-true": None,
    "32": None,
    32: None,
    "bf16-mixed": "bfloat16",
    "bf16": "bfloat16",
}


def canonical_precision(precision: object) -> str:
    """The name Lightning prefers for an accepted ``precision`` (``"32-true"`` for ``32`` and ``"32"``,
    ``"bf16-mixed"`` for ``"bf16"``, whose use Lightning warns against), given to the trainer; any other value as
    its text (refused by :func:`autocast_dtype`). The keys hash the value as written (an alias keeps keys of its
    own)."""
    if isinstance(precision, bool) or precision not in PRECISIONS:
        return str(precision)
    return "32-true" if PRECISIONS[precision] is None else "bf16-mixed"  # pyright: ignore[reportArgumentType]


def autocast_dtype(precision: object) -> torch.dtype | None:
    """The autocast dtype of ``precision`` (a :data:`PRECISIONS` key), ``None`` for float32.

    Raises:
        ValueError: for any other value, naming the accepted ones."""
    if isinstance(precision, bool) or precision not in PRECISIONS:
        raise ValueError(
            f"trainer.precision must be 32-true (float32; also 32) or bf16-mixed (bfloat16 autocast for "
            f"fine-tuning, saliency and masked forwards; also bf16), got {precision!r}: float16 (16-mixed, fp16) "
            "needs a gradient scaler that saliency's backward passes do not have, and the -true casts change the "
            "weights"
        )
    name = PRECISIONS[precision]  # pyright: ignore[reportArgumentType] (a key: checked above)
    if name is None:
        return None
    import torch  # here, not at the top: the config check calls this function and imports no torch

    return getattr(torch, name)


def autocast(precision: str | int, device: torch.device | str) -> contextlib.AbstractContextManager:
    """``torch.autocast(device.type, dtype=torch.bfloat16)`` under a bf16 ``precision``, a no-op context under
    float32.

    Raises:
        ValueError: an unknown ``precision`` (:func:`autocast_dtype`)."""
    import torch

    dtype = autocast_dtype(precision)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype)
