"""Model-backed outputs of masked feature subsets, for the AOPC bounds of :mod:`itermask.core.aopc_bounds`.

:class:`ModelOutputs` is a :class:`~itermask.core.aopc_bounds.SubsetOutputs` over a classifier: a request
``(example, set of features masked)`` becomes a token row (the example's clean row with the tokens of those
features masked by the masking strategy), and every row of a call runs through one
:class:`~itermask.core.forwards.RowForwards` call (each distinct row once, here and in every earlier call,
length-bucketed by the token budget). :class:`MemoOutputs` remembers the values of any
:class:`~itermask.core.aopc_bounds.SubsetOutputs`, so searches that ask for the same sets again (the bounds of
several weight vectors, the AOPC along a ranking) do not build or hash those rows again.

A *feature* is the unit that is ranked and masked: here a maskable token (:func:`token_features`); a word
grouping numbers the pieces of each word alike and passes its own ``[B, L]`` feature index.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from itermask.core.evaluation_settings import DEFAULT_TOKEN_BUDGET, Quantity
from itermask.core.forwards import RowForwards
from itermask.core.masking import MaskingStrategy
from itermask.core.measures import target_output
from itermask.core.tokens import TokenBatch

__all__ = ["token_features", "feature_counts", "ModelOutputs", "MemoOutputs"]


def token_features(maskable: Tensor) -> Tensor:
    """``[B, L]`` long feature index of each position for token features: the maskable positions (``[B, L]``
    bool, :func:`~itermask.core.tokens.maskable_positions`) numbered ``0..n-1`` in order, ``-1`` elsewhere
    (never masked)."""
    return torch.where(maskable, maskable.long().cumsum(dim=1) - 1, torch.full_like(maskable, -1, dtype=torch.long))


def feature_index(batch: TokenBatch, maskable: Tensor, kind: str = "token") -> Tensor:
    """``[B, L]`` long feature index of each position for ``kind`` (``"token"``: :func:`token_features`;
    ``"word"``: the maskable words of :func:`itermask.core.features.group_features`, numbered ``0..n-1`` in
    order, every piece of a word with its word's number), ``-1`` for positions in no maskable feature.

    Raises:
        ValueError: see :func:`~itermask.core.features.group_features`."""
    from itermask.core.features import group_features

    if kind == "token":
        return token_features(maskable)
    features = group_features(batch, maskable, kind)
    assert features.columns is not None  # word features always group
    number = token_features(features.maskable)  # [B, W]: each maskable word's number
    index = torch.gather(number, 1, features.columns.clamp(min=0))
    return index.masked_fill(features.columns < 0, -1)


def feature_counts(features: Tensor) -> Tensor:
    """``[B]`` long: ``n``, the number of features of each row of a ``[B, L]`` feature index (``max + 1``)."""
    if features.shape[1] == 0:
        return torch.zeros(features.shape[0], dtype=torch.long, device=features.device)
    return features.amax(dim=1).clamp(min=-1) + 1


class ModelOutputs:
    """The target quantity of examples with sets of their features masked, from a classifier (see the module
    docstring). One object serves one model and one set of examples: it keeps every row it computed.

    Args:
        model: a classifier in eval mode (:func:`~itermask.core.tokens.class_logits`).
        batch: the clean examples, ``[B, L]``.
        features: ``[B, L]`` long feature index of each token (``-1``: never masked), e.g.
            :func:`token_features`; features of a row are ``0..n-1``.
        strategy: the bound masking strategy that turns masked tokens into the model input.
        target: ``[B]`` long class whose quantity is returned.
        quantity: ``"probability"`` (softmax probability of ``target``) or ``"logit"``.
        token_budget: padded tokens per forward (:class:`~itermask.core.forwards.RowForwards`).
        representations: what the row engine records of each row besides its logits (``"final"``: the input
            of the final linear layer; see :class:`~itermask.core.forwards.RowForwards`); ``False``: nothing.
        forwards: the row engine to use (``None``: a new one). A :class:`RowForwards` of ``model`` kept across
            several objects computes a row that any of them asked for before only once (it remembers rows by
            their token ids); its own ``representations`` then apply, not this object's.

    Attributes:
        n_features: ``[B]`` long, ``n`` of each example.
        forwards: the :class:`RowForwards`; ``forwards.stats`` counts the rows asked for (``rows``) and the
            distinct rows run (``computed``).

    Raises:
        ValueError: shapes that do not match, an unknown quantity.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        batch: TokenBatch,
        features: Tensor,
        strategy: MaskingStrategy,
        target: Tensor,
        quantity: Quantity = "probability",
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        representations: bool | str = False,
        forwards: RowForwards | None = None,
    ) -> None:
        if features.shape != batch.input_ids.shape or target.shape != (len(batch),):
            raise ValueError(
                f"ModelOutputs: features {tuple(features.shape)} must match the batch {tuple(batch.input_ids.shape)}"
                f" and target {tuple(target.shape)} must be [{len(batch)}]"
            )
        if quantity not in ("probability", "logit"):
            raise ValueError(f"quantity must be 'probability' or 'logit', got {quantity!r}")
        self.batch, self.strategy = batch, strategy
        self.quantity: Quantity = quantity
        self.features = features.to(batch.device).long()
        self.target = target.to(batch.device).long()
        self.n_features = feature_counts(self.features)
        if forwards is not None and forwards.model is not model:
            raise ValueError("ModelOutputs: the row engine given runs another model")
        self.forwards = forwards if forwards is not None else RowForwards(model, token_budget, representations)

    def token_masks(self, examples: Tensor, masks: Tensor) -> Tensor:
        """``[R, L]`` bool: the tokens masked for each request (``examples`` ``[R]``, ``masks`` ``[R, F]``).

        Raises:
            ValueError: for a masked feature beyond its example's ``n``."""
        n = self.n_features[examples]
        width = max(int(self.n_features.max()) if len(self.n_features) else 0, 1)
        if masks.shape[1] > width:
            if masks[:, width:].any():
                raise ValueError("a mask names a feature beyond every example's features")
            masks = masks[:, :width]
        beyond = masks & (torch.arange(masks.shape[1], device=masks.device)[None, :] >= n[:, None])
        if beyond.any():
            row = int(beyond.any(dim=1).nonzero()[0])
            raise ValueError(f"example {int(examples[row])} has {int(n[row])} features; its mask goes beyond")
        masks = torch.nn.functional.pad(masks, (0, width - masks.shape[1]))
        features = self.features[examples]
        return (features >= 0) & masks.gather(1, features.clamp(min=0))

    def __call__(self, examples, masks) -> np.ndarray:
        """``[R]`` float64 target quantity of example ``examples[r]`` (``[R]`` int) with the features
        ``masks[r]`` (``[R, F]`` bool) masked; all rows run in one :class:`RowForwards` call."""
        device = self.batch.device
        examples = torch.as_tensor(np.asarray(examples), dtype=torch.long, device=device)
        masks = torch.as_tensor(np.asarray(masks, dtype=bool), device=device)
        if not len(examples):
            return np.empty(0)
        rows = self.strategy.apply(self.batch.index(examples), self.token_masks(examples, masks)).batch
        with torch.inference_mode():
            logits = self.forwards(rows).logits
        return target_output(logits, self.target[examples], self.quantity).double().cpu().numpy()


class MemoOutputs:
    """A :class:`~itermask.core.aopc_bounds.SubsetOutputs` that asks ``outputs`` only for the ``(example,
    masked set)`` pairs it has not seen, in one call, and remembers every value (masks compared up to their
    trailing ``False`` columns). ``asked``: requests received; ``passed``: requests passed on."""

    def __init__(self, outputs) -> None:
        self.outputs, self.asked, self.passed = outputs, 0, 0
        self._known: dict[tuple[int, bytes], float] = {}

    def __call__(self, examples, masks) -> np.ndarray:
        examples, masks = np.asarray(examples, dtype=np.int64), np.asarray(masks, dtype=bool)
        packed = np.packbits(masks, axis=1, bitorder="little")
        keys = [(int(e), row.tobytes().rstrip(b"\0")) for e, row in zip(examples.tolist(), packed)]
        new = list({key: r for r, key in enumerate(keys) if key not in self._known}.values())
        self.asked, self.passed = self.asked + len(keys), self.passed + len(new)
        if new:
            values = np.asarray(self.outputs(examples[new], masks[new]), dtype=np.float64)
            self._known.update({keys[r]: float(v) for r, v in zip(new, values.tolist())})
        return np.array([self._known[key] for key in keys], dtype=np.float64)
