"""Token batches and the forward pass every part of the core shares.

A classifier here is any ``torch.nn.Module`` called as ``model(input_ids=..., attention_mask=...,
[token_type_ids=...])`` that returns a ``[B, C]`` logits tensor or an object with ``.logits`` (every Hugging
Face ``AutoModelForSequenceClassification``), and whose ``get_input_embeddings()`` returns the word embedding
layer (needed only by gradient-based saliency).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any

import torch
from torch import Tensor

from itermask.core.evaluation_settings import segment_list

__all__ = ["TokenBatch", "TokenizerBound", "row_lengths", "maskable_positions", "class_logits", "chunked_logits"]


class TokenizerBound:
    """The one way components (saliency methods, masking strategies, ...) get the tokenizer: built from its
    settings alone (as Hydra instantiates it), a component reads what it needs from the tokenizer in
    :meth:`bind`, which returns it: ``Method(**settings).bind(tokenizer)`` is ready to use. Subclasses put their
    reading in :meth:`_bind`, raising ``ValueError`` when the tokenizer lacks something they need."""

    _bound: bool = False

    def bind(self, tokenizer):
        """Read what the component needs from ``tokenizer``; returns ``self``.

        Raises:
            ValueError: if the tokenizer lacks a token the component needs.
        """
        self._bind(tokenizer)
        self._bound = True
        return self

    def _bind(self, tokenizer) -> None:
        """Take the ids the component needs from ``tokenizer`` (nothing by default)."""

    def require_bound(self) -> None:
        """Raises ``ValueError`` if :meth:`bind` has not been called."""
        if not self._bound:
            raise ValueError(f"{type(self).__name__} is not bound to a tokenizer: call bind(tokenizer)")


@dataclass
class TokenBatch:
    """A padded batch of token ids, as a tokenizer returns it.

    Attributes:
        input_ids: ``[B, L]`` long token ids, padded on the right.
        attention_mask: ``[B, L]`` long, 1 for real tokens (special tokens included), 0 for padding.
        token_type_ids: ``[B, L]`` long segment ids, or ``None`` for models that take none (RoBERTa, DistilBERT).
        segment_ids: ``[B, L]`` long segment membership for masking, never passed to the model: ``0`` for the
            first text, ``1`` for the second of a sentence pair, ``-1`` for special tokens and padding (the fast
            tokenizer's ``sequence_ids()``, see :class:`itermask.data.datamodule.TokenCollator`), or ``None``.
        word_ids: ``[B, L]`` long word of each token, never passed to the model: ``0, 1, ...`` within a row (a
            sentence pair's second text numbered after the first's, so an id is unique within a row), ``-1`` for
            special tokens and padding (the fast tokenizer's ``word_ids()``), or ``None`` (a slow tokenizer).
    """

    input_ids: Tensor
    attention_mask: Tensor
    token_type_ids: Tensor | None = None
    segment_ids: Tensor | None = None
    word_ids: Tensor | None = None

    def __post_init__(self) -> None:
        if self.input_ids.dim() != 2:
            raise ValueError(f"input_ids must be [B, L], got shape {tuple(self.input_ids.shape)}")
        for name in ("attention_mask", "token_type_ids", "segment_ids", "word_ids"):
            value = getattr(self, name)
            if value is not None and value.shape != self.input_ids.shape:
                raise ValueError(f"{name} has shape {tuple(value.shape)}, input_ids has {tuple(self.input_ids.shape)}")

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def device(self) -> torch.device:
        return self.input_ids.device

    def model_inputs(self) -> dict[str, Tensor]:
        """Keyword arguments for the model's forward (``token_type_ids`` only when present;
        ``segment_ids`` and ``word_ids`` never)."""
        inputs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        if self.token_type_ids is not None:
            inputs["token_type_ids"] = self.token_type_ids
        return inputs

    def map(self, fn) -> TokenBatch:
        """Apply ``fn`` to every tensor of the batch (ids, attention mask, token type, segment and word ids)."""

        def each(t: Tensor | None) -> Tensor | None:
            return None if t is None else fn(t)

        return TokenBatch(
            fn(self.input_ids),
            fn(self.attention_mask),
            each(self.token_type_ids),
            each(self.segment_ids),
            each(self.word_ids),
        )

    def index(self, rows: Tensor | slice) -> TokenBatch:
        """The rows ``rows`` (an index tensor, a boolean mask of shape ``[B]`` or a slice)."""
        return self.map(lambda t: t[rows])

    def tile(self, n: int) -> TokenBatch:
        """``n`` copies stacked step-major: row ``s * B + b`` is example ``b`` (shape ``[n * B, L]``)."""
        return self.map(lambda t: t.repeat(n, 1))

    def trim(self) -> TokenBatch:
        """Drop trailing columns that are padding in every row (shorter sequences, same result)."""
        if not len(self):
            return self
        length = int(row_lengths(self).max().item())
        return self.map(lambda t: t[:, : max(length, 1)])

    def to(self, device: torch.device | str) -> TokenBatch:
        return self.map(lambda t: t.to(device))

    def with_ids(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> TokenBatch:
        """A copy with new ids (and optionally a new attention mask), token type, segment and word ids kept."""
        return replace(
            self, input_ids=input_ids, attention_mask=self.attention_mask if attention_mask is None else attention_mask
        )

    @staticmethod
    def concat(batches: Iterable[TokenBatch]) -> TokenBatch:
        """Stack batches of the same length ``L`` along the batch dimension."""
        batches = list(batches)

        def joined(name: str) -> Any:  # a tensor, ``None`` only for an optional field
            values = [getattr(b, name) for b in batches]
            return None if any(v is None for v in values) else torch.cat(values)

        return TokenBatch(*(joined(f.name) for f in fields(TokenBatch)))


def row_lengths(batch: TokenBatch) -> Tensor:
    """``[N]`` long: each row's last attended position + 1 (its length once trailing padding is dropped;
    a strategy may zero attention in the middle of a row, which does not shorten it)."""
    positions = torch.arange(1, batch.input_ids.shape[1] + 1, device=batch.device)
    return (
        (batch.attention_mask.bool() * positions).amax(dim=1)
        if batch.input_ids.shape[1]
        else torch.zeros(len(batch), dtype=torch.long, device=batch.device)
    )


def maskable_positions(
    batch: TokenBatch, special_ids: Iterable[int], segments: int | Iterable[int] | None = None
) -> Tensor:
    """``[B, L]`` bool: the positions of the clean ``batch`` that masking may touch, real (attended) tokens whose
    id is not one of ``special_ids`` (``tokenizer.all_special_ids``, not the tokenizer's special-tokens mask, so
    the rule is the same for every input however it was built), within ``segments``: ``None`` (every segment)
    or the segment(s) whose tokens are maskable (0 = first text of a sentence pair, 1 = second), read from
    ``batch.segment_ids`` when present, else from ``batch.token_type_ids``.

    Raises:
        ValueError: if ``segments`` is given but the batch has neither segment ids nor token type ids.
    """
    special = torch.tensor(sorted(set(int(i) for i in special_ids)), device=batch.device, dtype=batch.input_ids.dtype)
    maskable = batch.attention_mask.bool() & ~torch.isin(batch.input_ids, special)
    if segments is not None:
        membership = batch.segment_ids if batch.segment_ids is not None else batch.token_type_ids
        if membership is None:
            raise ValueError(
                f"masking within segment(s) {segments} needs segment membership, but the batch has neither "
                "segment_ids (from a fast tokenizer, see TokenCollator) nor token_type_ids; "
                "set evaluation.segments=null to mask every segment"
            )
        wanted = torch.as_tensor(segment_list(segments), device=batch.device)
        maskable &= torch.isin(membership, wanted.to(membership.dtype))
    return maskable


def class_logits(model: torch.nn.Module, batch: TokenBatch) -> Tensor:
    """One forward pass; returns logits ``[B, C]`` (unnormalised log-probabilities)."""
    output = model(**batch.model_inputs())
    return output if isinstance(output, Tensor) else output.logits


def chunked_logits(model: torch.nn.Module, batch: TokenBatch, chunk_size: int) -> Tensor:
    """Logits ``[B, C]`` for a large batch, computed ``chunk_size`` rows at a time without gradients, each chunk
    trimmed to its longest sequence.

    Raises:
        ValueError: if ``chunk_size`` is not positive.
    """
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    outputs = []
    with torch.inference_mode():
        for start in range(0, len(batch), chunk_size):
            chunk = batch.index(slice(start, start + chunk_size)).trim()
            outputs.append(class_logits(model, chunk).float())
    return torch.cat(outputs) if outputs else torch.empty(0, 0)
