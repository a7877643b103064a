"""Masking strategies and masking schedules.

A *strategy* decides what a masked token becomes (``[MASK]``, removed, ...); a *schedule* decides which
tokens are masked at each step (rank once on the clean input, or re-rank on the masked input). Both work
on token ids directly: text is never decoded and re-tokenized.

Conventions (Crothers et al. 2023, arXiv 2308.06795, Sec. 3; DeYoung et al. 2020, arXiv 1911.03429):

* the maskable positions are the non-special, non-padding tokens (:func:`itermask.tokens.maskable_positions`);
* steps are masking *fractions* or token *counts* (:data:`STEP_KINDS`): with ``n`` maskable tokens,
  fraction ``f`` masks ``k = floor(f * n + 0.5)`` tokens (:func:`masked_counts`), count ``c`` masks
  ``k = min(c, n)`` (:func:`capped_counts`); the ``k`` with the highest saliency, ties broken by position
  (earlier first);
* under the recursive schedule a token once masked stays masked.

Strategies (``conf/masking/<name>.yaml``): :class:`MaskToken`, :class:`UnkToken` and :class:`PadToken`
(one shared :class:`ReplaceWithToken`), :class:`AttentionOff`, :class:`RandomToken`, :class:`MlmInfill`
and :class:`Delete`. Every strategy carries token type ids and segment ids along.

Masks are boolean tensors over the positions of the *clean* batch, ``[B, L]`` (or ``[S, B, L]`` for
``S`` steps). A strategy turns a clean batch and such a mask into the model input, and returns where each
of its positions came from, so saliency computed on a masked input (whose length may differ, as with
:class:`Delete`) can be mapped back to clean positions.
"""

from __future__ import annotations

import hashlib
import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import Tensor

from itermask.tokens import TokenBatch

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
    "MaskingSchedule",
    "OneShot",
    "Recursive",
    "masked_counts",
    "capped_counts",
    "step_counts",
    "STEP_KINDS",
    "top_k_mask",
    "to_source_positions",
    "SCHEDULES",
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


class MaskingStrategy(ABC):
    """What a masked token becomes. Subclasses implement :meth:`apply`.

    Args:
        tokenizer: a Hugging Face tokenizer; strategies read the ids they need from it
            (``mask_token_id``, ``pad_token_id``) and raise ``ValueError`` if it has none.
    """

    name: str = "strategy"

    def __init__(self, tokenizer) -> None:
        self.pad_token_id = _required_id(tokenizer, "pad_token_id", self)

    @abstractmethod
    def apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        """Mask the positions ``masked`` (``[B, L]`` bool, clean positions) of ``batch`` (``[B, L]``)."""

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
    """Replace each masked token by one fixed token id read from the tokenizer; attention is kept.

    The shared implementation of :class:`MaskToken`, :class:`UnkToken` and :class:`PadToken`, which
    differ only in :attr:`token_attribute`, the tokenizer attribute holding the replacement id.

    Raises:
        ValueError: if the tokenizer has no such token.
    """

    name = "replace"
    #: the tokenizer attribute holding the replacement id
    token_attribute = "mask_token_id"

    def __init__(self, tokenizer) -> None:
        super().__init__(tokenizer)
        self.replacement_id = _required_id(tokenizer, self.token_attribute, self)

    def apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
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
    """Replace each masked token by the pad id, *kept under attention* (the attention mask is unchanged,
    so the model attends to a pad token at that position).

    Note that RoBERTa-style models derive position ids from ``input_ids != pad_token_id``: there a pad id
    in the middle of a sequence also takes the padding position and shifts the positions of the tokens
    after it by one. That is how such a model reads the input, and part of what this strategy measures.

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

    def apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        attention = batch.attention_mask.masked_fill(masked, 0)
        return MaskedBatch(batch.with_ids(batch.input_ids, attention), _identity_positions(batch))


class RandomToken(MaskingStrategy):
    """Replace each masked token by a token drawn uniformly from the vocabulary, special ids excluded.

    The replacement of a token depends only on ``seed``, the clean example's ids and the position: each
    clean row (its ids up to its last attended position, padding ignored) seeds its own generator
    (SHA-256 of ``seed`` and the ids), which draws one candidate per position. So an example gets the same
    replacements however it is batched or padded, at every masking step and for every saliency method,
    and a token once replaced keeps its replacement as the recursive schedule proceeds.

    Args:
        tokenizer: supplies the vocabulary size (``len(tokenizer)``) and ``all_special_ids``.
        seed: base seed of the draws.

    Raises:
        ValueError: if the vocabulary has no non-special token.
    """

    name = "random_token"

    def __init__(self, tokenizer, seed: int = 0) -> None:
        super().__init__(tokenizer)
        self.seed = int(seed)
        special = set(int(i) for i in tokenizer.all_special_ids)
        self.candidates = torch.tensor([i for i in range(len(tokenizer)) if i not in special], dtype=torch.long)
        if not len(self.candidates):
            raise ValueError("masking strategy 'random_token' found no non-special token in the vocabulary")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed})"

    def replacements(self, batch: TokenBatch) -> Tensor:
        """``[B, L]`` long: the replacement id of every position of the clean ``batch``."""
        size, length = batch.input_ids.shape
        positions = torch.arange(1, length + 1, device=batch.device)
        lengths = (batch.attention_mask.bool() * positions).amax(dim=1).tolist() if length else [0] * size
        ids = batch.input_ids.cpu()
        out = torch.empty((size, length), dtype=torch.long)
        drawn: dict[bytes, Tensor] = {}  # a tiled batch repeats each row once per step
        for row, n in enumerate(lengths):
            key = ids[row, :n].numpy().tobytes()
            if key not in drawn:
                digest = hashlib.sha256(self.seed.to_bytes(8, "little", signed=True) + key).digest()
                generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
                picks = torch.randint(len(self.candidates), (n,), generator=generator)
                drawn[key] = self.candidates[picks]
            out[row, :n] = drawn[key]
            out[row, n:] = self.pad_token_id
        return out.to(batch.device)

    def apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        ids = torch.where(masked, self.replacements(batch), batch.input_ids)
        return MaskedBatch(batch.with_ids(ids), _identity_positions(batch))


class MlmInfill(MaskingStrategy):
    """Replace each masked token by a masked-language model's top prediction (special ids excluded),
    given the input with *all* masked positions set to the mask token.

    One batched MLM forward per call under ``torch.inference_mode`` (over the distinct masked inputs, in
    chunks of ``chunk_size`` rows to bound the ``[rows, L, vocab]`` logits); predictions are greedy
    (argmax), so the strategy is deterministic.

    Args:
        tokenizer: the classifier's tokenizer; its mask token builds the MLM input.
        mlm_pretrained: hub id, local directory or ``package:<module>`` (see
            :func:`itermask.models.resolve_pretrained`) of a model with a masked-language-model head and
            the same vocabulary as ``tokenizer`` (its tokenizer must load from the same place).
        chunk_size: rows per MLM forward.

    Raises:
        ValueError: at construction, if the checkpoint cannot be loaded, has no MLM head (e.g. the
            packaged MiniLM, a plain ``BertModel``), or its vocabulary differs from ``tokenizer``'s;
            if the tokenizer has no mask token.
    """

    name = "mlm_infill"

    def __init__(self, tokenizer, mlm_pretrained: str, chunk_size: int = 64) -> None:
        super().__init__(tokenizer)
        from transformers import AutoModelForMaskedLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        from itermask.models import resolve_pretrained

        self.mask_token_id = _required_id(tokenizer, "mask_token_id", self)
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        self.chunk_size = int(chunk_size)
        self.mlm_pretrained = str(mlm_pretrained)
        alternatives = (
            "set masking.mlm_pretrained to a checkpoint with a masked-language-model head and the classifier's "
            "vocabulary, or choose another masking strategy (masking=mask_token, unk, pad, attention_off, "
            "random_token or delete)"
        )
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the missing-weights report is ours to give, below
        try:
            path = resolve_pretrained(self.mlm_pretrained, setting="masking.mlm_pretrained")
            model, info = AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True)
        except (OSError, ValueError, KeyError) as error:  # OSError includes a missing local directory
            raise ValueError(
                f"mlm_infill cannot load a masked-language model from {self.mlm_pretrained!r}: {error}; {alternatives}"
            ) from error
        finally:
            hf_logging.set_verbosity(verbosity)
        prefix = f"{model.base_model_prefix}."
        head = {name for name, _ in model.named_parameters() if not name.startswith(prefix)}
        missing_head = sorted(head & set(info["missing_keys"]))
        if missing_head:
            raise ValueError(
                f"mlm_infill needs a masked-language-model head, but {self.mlm_pretrained!r} has none "
                f"(it is an encoder without MLM weights: {missing_head[:3]} would be random); {alternatives}"
            )
        try:
            mlm_vocab = AutoTokenizer.from_pretrained(path).get_vocab()
        except (OSError, ValueError) as error:
            raise ValueError(
                f"mlm_infill cannot load the tokenizer of {self.mlm_pretrained!r} to check its vocabulary: {error}"
            ) from error
        if mlm_vocab != tokenizer.get_vocab():
            raise ValueError(
                f"mlm_infill: the vocabulary of {self.mlm_pretrained!r} ({len(mlm_vocab)} tokens) differs from the "
                f"classifier tokenizer's ({len(tokenizer.get_vocab())}), so its predicted ids would mean other "
                f"tokens; {alternatives}"
            )
        self.mlm = model.eval().requires_grad_(False)
        self.vocab_size = len(tokenizer)
        self.special_ids = sorted(set(int(i) for i in tokenizer.all_special_ids))
        forward = inspect.signature(self.mlm.forward).parameters
        self.takes_token_types = "token_type_ids" in forward

    def __repr__(self) -> str:
        return f"{type(self).__name__}(mlm_pretrained={self.mlm_pretrained!r})"

    def predictions(self, batch: TokenBatch, masked: Tensor) -> Tensor:
        """``[B, L]`` long: the MLM's top non-special prediction at every position of ``batch`` with the
        positions ``masked`` set to the mask token."""
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

    def apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
        if not masked.any():
            return MaskedBatch(batch, _identity_positions(batch))
        rows = masked.any(dim=1)  # only rows with a masked token need the MLM
        ids = batch.input_ids.clone()
        sub = batch.index(rows)
        ids[rows] = torch.where(masked[rows], self.predictions(sub, masked[rows]), sub.input_ids)
        return MaskedBatch(batch.with_ids(ids), _identity_positions(batch))


class Delete(MaskingStrategy):
    """Remove each masked token: the remaining ids move left, the freed tail becomes padding.

    The ids are edited directly (no decode and re-tokenize), so the remaining tokens are exactly the
    clean ones, in order, and the sequence is ``k`` tokens shorter. Token type ids and segment ids move
    with their tokens.
    """

    name = "delete"

    def apply(self, batch: TokenBatch, masked: Tensor) -> MaskedBatch:
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
                moved(batch.input_ids, self.pad_token_id),
                attention,
                moved(batch.token_type_ids, 0),
                moved(batch.segment_ids, -1),
            ),
            source,
        )


def to_source_positions(scores: Tensor, masked: MaskedBatch, length: int) -> Tensor:
    """Map per-position scores of a masked input back to clean positions.

    Args:
        scores: ``[B, L']`` scores over the positions of ``masked.batch``.
        masked: the masked batch the scores were computed on.
        length: ``L``, the clean length.

    Returns:
        ``[B, L]`` scores; clean positions absent from the masked input get ``-inf``.
    """
    out = torch.full((scores.shape[0], length + 1), float("-inf"), dtype=scores.dtype, device=scores.device)
    index = torch.where(masked.source_positions >= 0, masked.source_positions, length)
    out.scatter_(1, index, scores)
    return out[:, :length]


def masked_counts(n_maskable: Tensor, fractions: Sequence[float] | Tensor) -> Tensor:
    """How many tokens each masking fraction masks: ``k = floor(f * n + 0.5)``.

    Args:
        n_maskable: ``[B]`` count of maskable tokens per example.
        fractions: ``S`` masking fractions in ``[0, 1]``.

    Returns:
        ``[S, B]`` long counts (0 <= k <= n).

    Raises:
        ValueError: if a fraction lies outside ``[0, 1]``.
    """
    f = torch.as_tensor(fractions, dtype=torch.float64, device=n_maskable.device)
    if ((f < 0) | (f > 1)).any():
        raise ValueError(f"masking fractions must lie in [0, 1], got {f.tolist()}")
    return torch.floor(f[:, None] * n_maskable[None, :].double() + 0.5).long()


def capped_counts(n_maskable: Tensor, counts: Sequence[int] | Tensor) -> Tensor:
    """Count steps: step ``s`` masks ``k = min(counts[s], n)`` tokens (a token count, not a fraction).

    Args:
        n_maskable: ``[B]`` count of maskable tokens per example.
        counts: ``S`` non-negative integers (e.g. 0, 1, 2, ... tokens).

    Returns:
        ``[S, B]`` long counts (0 <= k <= n).

    Raises:
        ValueError: if a count is negative or not an integer.
    """
    c = torch.as_tensor(counts, dtype=torch.float64, device=n_maskable.device)
    if ((c < 0) | (c != torch.round(c))).any():
        raise ValueError(f"masking counts must be non-negative integers, got {c.tolist()}")
    return torch.minimum(c.long()[:, None], n_maskable[None, :].long())


#: the kinds of masking steps: a share of the maskable tokens, or a number of tokens
STEP_KINDS = ("fraction", "count")


def step_counts(n_maskable: Tensor, grid: Sequence[float] | Tensor, steps: str = "fraction") -> Tensor:
    """Tokens to mask at each step of ``grid``: :func:`masked_counts` for ``steps="fraction"``,
    :func:`capped_counts` for ``steps="count"``. Returns ``[S, B]`` long.

    Raises:
        ValueError: for an unknown kind of step, or grid values invalid for it.
    """
    if steps == "fraction":
        return masked_counts(n_maskable, grid)
    if steps == "count":
        return capped_counts(n_maskable, grid)
    raise ValueError(f"unknown kind of masking steps {steps!r}: choose one of {STEP_KINDS}")


def top_k_mask(scores: Tensor, candidates: Tensor, k: Tensor) -> Tensor:
    """The ``k`` candidate positions with the highest score, ties broken by position (earlier first).

    Args:
        scores: ``[B, L]`` saliency (higher = more salient). NaN counts as lowest.
        candidates: ``[B, L]`` bool, positions that may be chosen.
        k: ``[B]`` long, how many to choose per row (clipped to the number of candidates).

    Returns:
        ``[B, L]`` bool mask with ``min(k, candidates.sum(1))`` True entries per row.
    """
    ranked = torch.nan_to_num(scores.double(), nan=-torch.inf).masked_fill(~candidates, -torch.inf)
    order = torch.sort(ranked, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    return candidates & (rank < k[:, None])


SaliencyFn = Callable[[Tensor, Tensor], Tensor]
"""``saliency_fn(masked, rows) -> scores``: saliency on the input with ``masked`` (``[R, L]`` bool, clean
positions) applied, for the examples ``rows`` (``[R]`` long indices); returns ``[R, L]`` scores over clean
positions."""


class MaskingSchedule(ABC):
    """Which tokens are masked at each step. Subclasses implement :meth:`masks`."""

    name: str = "schedule"

    @abstractmethod
    def masks(self, clean_saliency: Tensor, maskable: Tensor, k: Tensor, saliency_fn: SaliencyFn) -> Tensor:
        """Masks for every step.

        Args:
            clean_saliency: ``[B, L]`` saliency on the clean input.
            maskable: ``[B, L]`` bool maskable positions.
            k: ``[S, B]`` tokens to mask at each step (from :func:`masked_counts`).
            saliency_fn: recomputes saliency on a masked input (see :data:`SaliencyFn`).

        Returns:
            ``[S, B, L]`` bool, the masked positions at each step.
        """


class OneShot(MaskingSchedule):
    """Rank once on the clean input; step ``s`` masks the top ``k[s]`` tokens of that ranking."""

    name = "one_shot"

    def masks(self, clean_saliency, maskable, k, saliency_fn=None):
        return torch.stack([top_k_mask(clean_saliency, maskable, k_s) for k_s in k])


class Recursive(MaskingSchedule):
    """Re-rank on the already-masked input at every step; masked tokens stay masked.

    Step ``s`` adds the ``k[s] - k[s-1]`` most salient still-unmasked tokens, with saliency recomputed on
    the input masked at step ``s-1`` (the clean input for the first step, so the first step agrees with
    :class:`OneShot`). Saliency is recomputed only for the examples that gain tokens at that step.

    Raises:
        ValueError: if ``k`` decreases between steps (fractions must be sorted ascending).
    """

    name = "recursive"

    def masks(self, clean_saliency, maskable, k, saliency_fn):
        if (k[1:] < k[:-1]).any():
            raise ValueError("the recursive schedule needs ascending masking fractions/counts")
        state = torch.zeros_like(maskable)
        steps = []
        scores = clean_saliency
        for k_s in k:
            need = (k_s - state.sum(dim=1)).clamp(min=0)
            # rows with nothing masked yet still rank by the clean saliency
            rows = torch.nonzero((need > 0) & state.any(dim=1)).flatten()
            if len(rows):
                scores = scores.clone()
                scores[rows] = saliency_fn(state[rows], rows).to(scores.dtype)
            state = state | top_k_mask(scores, maskable & ~state, need)
            steps.append(state)
        return torch.stack(steps)


SCHEDULES: dict[str, type[MaskingSchedule]] = {"one_shot": OneShot, "recursive": Recursive}
