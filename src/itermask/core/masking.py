"""Masking strategies: what a masked token becomes (``conf/masking/<name>.yaml``).

A *strategy* turns a clean batch and a mask (``[B, L]`` bool over the positions of the *clean* batch) into
the model input (``[MASK]``, removed, ...); which tokens are masked at each step is the schedule's business
(:mod:`itermask.core.schedules`). Strategies work on token ids directly (text is never decoded and
re-tokenized), carry token type, segment and word ids along, and return where each position of the input came
from, so saliency computed on a masked input (whose length may differ, as with :class:`Delete`) can be mapped
back to clean positions (:func:`to_source_positions`). Like every component that needs the tokenizer, a
strategy is built from its settings, then bound (:class:`itermask.core.tokens.TokenizerBound`).
"""

from __future__ import annotations

import hashlib
import inspect
from abc import abstractmethod
from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor

from itermask.core.tokens import TokenBatch, TokenizerBound, row_lengths

__all__ = [
    "MaskedBatch",
    "MaskingStrategy",
    "ReplaceWithToken",
    "MaskToken",
    "UnkToken",
    "PadToken",
    "AttentionOff",
    "RandomToken",
    "MlmInfill",
    "Delete",
    "to_source_positions",
]


@dataclass(frozen=True)
class MaskedBatch:
    """The model input for a masked batch.

    Attributes:
        batch: the input to feed the model, ``[B, L']`` (``L' = L`` for every built-in strategy).
        source_positions: ``[B, L']`` long; for each position of ``batch`` the clean position it holds,
            or ``-1`` for padding.
    """

    batch: TokenBatch
    source_positions: Tensor


class MaskingStrategy(TokenizerBound):
    """What a masked token becomes. Subclasses implement :meth:`_apply` (and :meth:`_bind` for the ids they read
    from the tokenizer). ``tokenizer``: a Hugging Face tokenizer to bind at once (see :meth:`bind`), or ``None``."""

    name: str = "strategy"

    def __init__(self, tokenizer=None) -> None:
        if tokenizer is not None:
            self.bind(tokenizer)

    def _bind(self, tokenizer) -> None:
        self.pad_token_id = _required_id(tokenizer, "pad_token_id", self)

    def apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        """Mask the positions ``masked`` (``[B, L]`` bool, clean positions) of ``batch`` (``[B, L]``).

        Raises:
            ValueError: if the strategy is not bound to a tokenizer.
        """
        self.require_bound()
        return self._apply(batch, masked)

    @abstractmethod
    def _apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        """:meth:`apply` of a bound strategy."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _required_id(tokenizer, attribute: str, strategy) -> int:
    value = getattr(tokenizer, attribute, None)
    if value is None:
        raise ValueError(
            f"masking strategy {type(strategy).__name__!r} needs the tokenizer's {attribute}, "
            f"but {type(tokenizer).__name__} has none; choose another masking strategy"
        )
    return int(value)


def _identity_positions(batch: TokenBatch) -> Tensor:
    positions = torch.arange(batch.input_ids.shape[1], device=batch.device).expand_as(batch.input_ids)
    return torch.where(batch.attention_mask.bool(), positions, torch.full_like(positions, -1))


class ReplaceWithToken(MaskingStrategy):
    """Replace each masked token by one fixed token id read from the tokenizer (:attr:`token_attribute`);
    attention is kept. The shared implementation of :class:`MaskToken`, :class:`UnkToken` and :class:`PadToken`.

    Raises:
        ValueError: if the tokenizer has no such token.
    """

    name = "replace"
    #: the tokenizer attribute holding the replacement id
    token_attribute = "mask_token_id"

    def _bind(self, tokenizer) -> None:
        super()._bind(tokenizer)
        self.replacement_id = _required_id(tokenizer, self.token_attribute, self)

    def _apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        ids = torch.where(masked, torch.full_like(batch.input_ids, self.replacement_id), batch.input_ids)
        return MaskedBatch(batch.with_ids(ids), _identity_positions(batch))


class MaskToken(ReplaceWithToken):
    """Replace each masked token by the tokenizer's mask token (``[MASK]``, ``<mask>``).

    Raises:
        ValueError: if the tokenizer has no mask token.
    """

    name = "mask_token"
    token_attribute = "mask_token_id"


class UnkToken(ReplaceWithToken):
    """Replace each masked token by the tokenizer's unknown token (``[UNK]``, ``<unk>``).

    Raises:
        ValueError: if the tokenizer has no unknown token.
    """

    name = "unk"
    token_attribute = "unk_token_id"


class PadToken(ReplaceWithToken):
    """Replace each masked token by the pad id, *kept under attention* (the model attends to a pad token there).
    RoBERTa-style models derive position ids from ``input_ids != pad_token_id``: there a pad id in the middle
    of a sequence also takes the padding position and shifts the positions of the tokens after it by one, which
    is how such a model reads the input, and part of what this strategy measures.

    Raises:
        ValueError: if the tokenizer has no pad token.
    """

    name = "pad"
    token_attribute = "pad_token_id"


class AttentionOff(MaskingStrategy):
    """Keep each masked token's id but zero its attention mask entry, so no position attends to it.

    The model input keeps its length and ids; only ``attention_mask`` changes (0 at masked positions).
    """

    name = "attention_off"

    def _apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        attention = batch.attention_mask.masked_fill(masked, 0)
        return MaskedBatch(batch.with_ids(batch.input_ids, attention), _identity_positions(batch))


class RandomToken(MaskingStrategy):
    """Replace each masked token by a token drawn uniformly from the vocabulary, special ids excluded.

    Each clean row (its ids up to its last attended position) seeds its own generator (SHA-256 of ``seed`` and
    the ids), which draws one candidate per position: an example gets the same replacements however it is
    batched or padded, at every masking step and for every saliency method, and a token once replaced keeps
    its replacement as the recursive schedule proceeds.

    Raises:
        ValueError: if the vocabulary has no non-special token.
    """

    name = "random_token"

    def __init__(self, tokenizer=None, seed: int = 0) -> None:
        self.seed = int(seed)
        super().__init__(tokenizer)

    def _bind(self, tokenizer) -> None:
        super()._bind(tokenizer)
        special = set(int(i) for i in tokenizer.all_special_ids)
        self.candidates = torch.tensor([i for i in range(len(tokenizer)) if i not in special], dtype=torch.long)
        if not len(self.candidates):
            raise ValueError("masking strategy 'random_token' found no non-special token in the vocabulary")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed})"

    def replacements(self, batch: TokenBatch) -> Tensor:
        """``[B, L]`` long: the replacement id of every position of the clean ``batch``."""
        ids = batch.input_ids.cpu()
        out = torch.empty(ids.shape, dtype=torch.long)
        drawn: dict[bytes, Tensor] = {}  # a tiled batch repeats each row once per step
        for row, n in enumerate(row_lengths(batch).tolist()):
            key = ids[row, :n].numpy().tobytes()
            if key not in drawn:
                digest = hashlib.sha256(self.seed.to_bytes(8, "little", signed=True) + key).digest()
                generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
                picks = torch.randint(len(self.candidates), (n,), generator=generator)
                drawn[key] = self.candidates[picks]
            out[row, :n] = drawn[key]
            out[row, n:] = self.pad_token_id
        return out.to(batch.device)

    def _apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        ids = torch.where(masked, self.replacements(batch), batch.input_ids)
        return MaskedBatch(batch.with_ids(ids), _identity_positions(batch))


class MlmInfill(MaskingStrategy):
    """Replace each masked token by a masked-language model's top prediction (special ids excluded),
    given the input with *all* masked positions set to the mask token.

    ``mlm``: a masked-language model (``mlm(input_ids=..., attention_mask=...).logits`` is ``[B, L, V]``) with
    the tokenizer's vocabulary (:func:`itermask.models.mlm.load_mlm_infill` loads and checks it; ``source``
    names it), run once per call over the distinct masked inputs, ``chunk_size`` rows per forward, under
    ``torch.inference_mode``; predictions are greedy (argmax), so the strategy is deterministic.

    Raises:
        ValueError: if ``chunk_size`` is not positive; at :meth:`bind`, if the tokenizer has no mask token or
            no model was given.
    """

    name = "mlm_infill"

    def __init__(
        self, tokenizer=None, mlm: torch.nn.Module | None = None, chunk_size: int = 64, source: str | None = None
    ) -> None:
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        self.chunk_size = int(chunk_size)
        self.mlm = None if mlm is None else mlm.eval().requires_grad_(False)
        self.mlm_pretrained = source
        super().__init__(tokenizer)

    def _bind(self, tokenizer) -> None:
        super()._bind(tokenizer)
        self.mask_token_id = _required_id(tokenizer, "mask_token_id", self)
        if self.mlm is None:
            raise ValueError("mlm_infill needs a masked-language model (mlm=...) before it is bound")
        self.vocab_size = len(tokenizer)
        self.special_ids = sorted(set(int(i) for i in tokenizer.all_special_ids))
        self.takes_token_types = "token_type_ids" in inspect.signature(self.mlm.forward).parameters

    def __repr__(self) -> str:
        return f"{type(self).__name__}(mlm_pretrained={self.mlm_pretrained!r})"

    def predictions(self, batch: TokenBatch, masked: Tensor) -> Tensor:
        """``[B, L]`` long: the MLM's top non-special prediction at every position of ``batch`` with the
        positions ``masked`` set to the mask token."""
        assert self.mlm is not None  # checked when bound
        length = batch.input_ids.shape[1]
        ids = torch.where(masked, self.mask_token_id, batch.input_ids)
        parts = [ids, batch.attention_mask]
        if self.takes_token_types and batch.token_type_ids is not None:
            parts.append(batch.token_type_ids)
        # rows repeat across steps and schedules: run each distinct masked input once
        unique, inverse = torch.unique(torch.cat(parts, dim=1), dim=0, return_inverse=True)
        names = ["input_ids", "attention_mask", "token_type_ids"][: len(parts)]
        inputs = {name: unique[:, i * length : (i + 1) * length] for i, name in enumerate(names)}
        if next(self.mlm.parameters()).device != batch.device:
            self.mlm.to(batch.device)
        best = []
        with torch.inference_mode():
            for start in range(0, unique.shape[0], self.chunk_size):
                chunk = {name: value[start : start + self.chunk_size] for name, value in inputs.items()}
                logits = self.mlm(**chunk).logits[..., : self.vocab_size].float()
                logits[..., self.special_ids] = float("-inf")
                best.append(logits.argmax(dim=-1))
        best = torch.cat(best).clone()  # a normal tensor again (outside inference mode)
        return best[inverse]

    def _apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        if not masked.any():
            return MaskedBatch(batch, _identity_positions(batch))
        rows = masked.any(dim=1)  # only rows with a masked token need the MLM
        ids = batch.input_ids.clone()
        sub = batch.index(rows)
        ids[rows] = torch.where(masked[rows], self.predictions(sub, masked[rows]), sub.input_ids)
        return MaskedBatch(batch.with_ids(ids), _identity_positions(batch))


class Delete(MaskingStrategy):
    """Remove each masked token: the remaining ids (exactly the clean ones, in order, with their token type,
    segment and word ids) move left, the freed tail becomes padding; the sequence is ``k`` tokens shorter."""

    name = "delete"

    def _apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        keep = batch.attention_mask.bool() & ~masked
        # stable sort on "dropped" puts kept positions first, in their original order
        order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices
        kept_sorted = torch.gather(keep, 1, order)

        def moved(values: Tensor | None, fill: int) -> Tensor | None:
            return None if values is None else torch.where(kept_sorted, torch.gather(values, 1, order), fill)

        attention = kept_sorted.to(batch.attention_mask.dtype)
        source = torch.where(kept_sorted, order, torch.full_like(order, -1))
        return MaskedBatch(
            TokenBatch(
                cast(Tensor, moved(batch.input_ids, self.pad_token_id)),  # input ids in, input ids out
                attention,
                moved(batch.token_type_ids, 0),
                moved(batch.segment_ids, -1),
                moved(batch.word_ids, -1),
            ),
            source,
        )


def to_source_positions(scores: Tensor, masked: MaskedBatch, length: int) -> Tensor:
    """``[B, L]`` ``scores`` of a ``masked`` input (``[B, L']``, over the positions of ``masked.batch``) mapped back
    to the ``length`` ``L`` clean positions; clean positions absent from the masked input get ``-inf``."""
    out = torch.full((scores.shape[0], length + 1), float("-inf"), dtype=scores.dtype, device=scores.device)
    index = torch.where(masked.source_positions >= 0, masked.source_positions, length)
    out.scatter_(1, index, scores)
    return out[:, :length]
