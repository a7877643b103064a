"""Features: the units that are ranked, counted and masked, tokens (the default) or words.

A word is the set of word pieces the fast tokenizer gives one word id (:attr:`TokenBatch.word_ids`). With word
features every piece of a word is masked with it, the masking fractions and counts are in words, and a word's
saliency is the SUM of its pieces' scores (as the NAOPC authors' word-level evaluation aggregates, Edin et al.,
ACL 2025, arXiv 2408.08137, Sec. 5; ERASER and ferret also rank whole words). Token features are the identity
case (a feature per position), so the evaluator has one code path. Plain torch; scatter/gather do the grouping.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from itermask.core.evaluation_settings import FEATURE_KINDS
from itermask.core.tokens import TokenBatch

__all__ = ["FEATURE_KINDS", "Features", "group_features"]


@dataclass(frozen=True)
class Features:
    """The features of a ``[B, L]`` batch.

    Attributes:
        columns: ``[B, L]`` long, the feature (``0..W-1``) each token belongs to, ``-1`` for tokens in none
            (special tokens, padding); ``None`` for token features (feature ``l`` is position ``l``, ``W = L``).
        maskable: ``[B, W]`` bool, the features masking may touch: a word is maskable only if every one of its
            pieces is a maskable token (so never a special token, and only within ``evaluation.segments``).
    """

    columns: Tensor | None
    maskable: Tensor

    def select(self, rows: Tensor) -> Features:
        """The features of the examples ``rows`` (``[R]`` long indices)."""
        return Features(None if self.columns is None else self.columns[rows], self.maskable[rows])

    def scores(self, token_scores: Tensor, how: str = "sum") -> Tensor:
        """``[B, W]`` feature scores from ``[B, L]`` token scores: ``how="sum"`` (the default) the sum of each
        word's pieces' scores, ``"first"`` its first piece's (the random explanation's: a uniform random order
        of words); the scores themselves for token features. A word with a ``-inf`` piece (one a
        :class:`~itermask.core.masking.Delete` removed) scores ``-inf``.

        Raises:
            ValueError: for an unknown ``how``."""
        if how not in ("sum", "first"):
            raise ValueError(f"unknown word score {how!r}: choose 'sum' or 'first'")
        if self.columns is None:
            return token_scores
        out = token_scores.new_zeros(self.maskable.shape)
        take = self.columns >= 0
        if how == "first":  # a word's pieces are adjacent: its first piece is where the word id changes
            take = take.clone()
            take[:, 1:] &= self.columns[:, 1:] != self.columns[:, :-1]
        where = (take.nonzero(as_tuple=True)[0], self.columns[take])
        return out.index_put_(where, token_scores[take], accumulate=True)

    def to_tokens(self, mask: Tensor) -> Tensor:
        """``[..., B, L]`` bool token mask from a ``[..., B, W]`` bool feature mask: every piece of a masked word
        masked (the mask itself for token features)."""
        if self.columns is None:
            return mask
        index = self.columns.clamp(min=0).expand(*mask.shape[:-1], -1)
        return torch.gather(mask, -1, index) & (self.columns >= 0)

    def broadcast(self, values: Tensor, fill) -> Tensor:
        """``[B, L]``: each token gets its feature's value of ``[B, W]`` ``values``, ``fill`` outside any."""
        if self.columns is None:
            return values
        return torch.gather(values, 1, self.columns.clamp(min=0)).masked_fill(self.columns < 0, fill)


def group_features(batch: TokenBatch, maskable: Tensor, kind: str = "token") -> Features:
    """The :class:`Features` of ``kind`` (:data:`FEATURE_KINDS`) of ``batch`` ``[B, L]`` with ``[B, L]`` bool
    ``maskable`` token positions (:func:`itermask.core.tokens.maskable_positions`).

    Raises:
        ValueError: for an unknown kind, or ``"word"`` for a batch without ``word_ids`` (a slow tokenizer).
    """
    if kind not in FEATURE_KINDS:
        raise ValueError(f"unknown evaluation.features {kind!r}: choose one of {FEATURE_KINDS}")
    if kind == "token":
        return Features(None, maskable)
    if batch.word_ids is None:
        raise ValueError(
            "evaluation.features=word needs word ids from a fast tokenizer (TokenBatch.word_ids); this batch has "
            "none: use a fast tokenizer or evaluation.features=token"
        )
    columns = batch.word_ids.long().masked_fill(~batch.attention_mask.bool(), -1)
    width = int(columns.max().item()) + 1 if columns.numel() else 0
    inside = columns >= 0
    where = (inside.nonzero(as_tuple=True)[0], columns[inside])
    pieces = torch.zeros(len(batch), width, dtype=torch.long, device=batch.device)
    pieces.index_put_(where, torch.ones_like(where[0]), accumulate=True)
    unmaskable = torch.zeros_like(pieces).index_put_(where, (~maskable[inside]).long(), accumulate=True)
    return Features(columns, (pieces > 0) & (unmaskable == 0))
