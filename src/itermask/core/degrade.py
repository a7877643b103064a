"""Explanations degraded by a known amount, for the degraded-explainer sanity benchmark
(:mod:`itermask.analyses.sanity`): :class:`DegradedSaliency` explains with another method, then permutes the
scores of a share ``level`` of each example's maskable features among themselves, so its ranking is worse than
the method's by a known, ordered amount (level 0: the method itself; level 1: a uniformly random ranking that
keeps the method's score distribution, which min-max normalised measures need).

The idea is the sanity benchmark of issue 33 ("a fraction p of the ranking replaced at random"); permuting the
chosen scores among themselves rather than drawing new ones is our choice, so that the set of scores (and any
normalisation of it) is unchanged and only the order degrades. Plain torch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor

from itermask.core.evaluation_settings import FEATURE_KINDS, segment_list
from itermask.core.features import group_features
from itermask.core.saliency.base import Attribution, SaliencyMethod
from itermask.core.tokens import TokenBatch, maskable_positions

__all__ = ["DegradedSaliency", "check_levels", "degrade_scores", "level_seed"]


def check_levels(levels: Sequence[float]) -> list[float]:
    """``levels`` as floats, ascending.

    Raises:
        ValueError: one line naming ``sanity.levels`` and every problem with the bad values: not a list of
            numbers, values outside ``[0, 1]`` (NaN among them), repeated values, fewer than two levels, no level 0
            (the undegraded explanation every other level is read against)."""
    try:
        if isinstance(levels, str | bytes):  # not read character by character
            raise TypeError
        values = [float(v) for v in levels]
    except (TypeError, ValueError):
        raise ValueError(f"sanity.levels={levels!r}: give a list of numbers in [0, 1]") from None
    outside = [v for v in values if not 0.0 <= v <= 1.0]
    repeated = sorted({v for v in values if values.count(v) > 1})
    problems = [f"values outside [0, 1]: {outside}"] if outside else []
    problems += [f"repeated values {repeated}"] if repeated else []
    problems += [f"give at least two levels, got {values}"] if len(set(values)) < 2 else []
    problems += [f"must contain 0 (the undegraded explanation), got {values}"] if 0.0 not in values else []
    if problems:
        raise ValueError("sanity.levels: " + "; ".join(problems))
    return sorted(values)


def level_seed(seed: int, example_id: int, level: float) -> int:
    """A 64-bit generator seed for one example at one level: the first 8 bytes of
    ``sha256("seed:example_id:level")`` (``level`` written with ``repr``), so a draw does not depend on how the
    examples are batched."""
    digest = hashlib.sha256(f"{int(seed)}:{int(example_id)}:{float(level)!r}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def degrade_scores(scores: Tensor, maskable: Tensor, level: float, seed: int, example_ids: Tensor) -> Tensor:
    """``[B, W]`` feature scores with, per example, ``m = round(level * n)`` of its ``n`` maskable features
    (``[B, W]`` bool ``maskable``) chosen uniformly at random and their scores permuted uniformly at random among
    themselves (a generator per example seeded by :func:`level_seed` of ``seed``, its ``[B]`` ``example_ids`` and
    ``level``). Other features keep their scores; ``level=0`` returns ``scores`` itself. Python's ``round``
    (half to even) gives ``m``."""
    if level == 0:
        return scores
    out = scores.clone()
    for b in range(len(scores)):
        where = maskable[b].nonzero().flatten().cpu()
        m = round(level * len(where))
        generator = torch.Generator().manual_seed(level_seed(seed, int(example_ids[b]), level))
        chosen = where[torch.randperm(len(where), generator=generator)[:m]]
        shuffled = chosen[torch.randperm(m, generator=generator)]
        out[b, chosen.to(scores.device)] = scores[b, shuffled.to(scores.device)]
    return out


class DegradedSaliency(SaliencyMethod):
    """``inner``'s explanation degraded by ``level`` (:func:`degrade_scores` on its feature scores).

    With word features (``features="word"``) the features are words (:func:`itermask.core.features.group_features`
    over the maskable positions of ``special_ids`` and ``segments``), a word's score is ``inner``'s rule
    (:attr:`SaliencyMethod.word_score`), and the degraded token scores put each word's score on its first piece
    and 0 on its other pieces, with :attr:`word_score` ``"sum"``, so grouping them reads back exactly the
    permuted word scores. Tokens in no feature keep ``inner``'s scores. At level 0 it returns ``inner``'s
    attribution itself (bit-identical, ``inner``'s word rule). Everything else (gradients, output, diagnostics)
    is ``inner``'s.

    Args:
        clean_cache: a dict shared by the levels of one explanation (the sanity benchmark passes one per method):
            ``inner``'s attribution of a batch is kept there under its example ids and reused by every level, so
            an expensive method (integrated gradients, LIME, KernelSHAP) explains each example once, not once per
            level, and every level degrades exactly the same explanation. The same example ids must mean the
            same inputs, model and targets (one job's evaluation subset). ``None``: no cache.

    Raises:
        ValueError: a level outside ``[0, 1]`` or an unknown ``features``.
    """

    name = "degraded"

    def __init__(
        self,
        inner: SaliencyMethod,
        level: float,
        seed: int,
        features: str = "token",
        special_ids: Iterable[int] = (),
        segments: int | Sequence[int] | None = None,
        clean_cache: dict | None = None,
    ) -> None:
        if not 0.0 <= float(level) <= 1.0:
            raise ValueError(f"degradation level {level!r} outside [0, 1]")
        if features not in FEATURE_KINDS:
            raise ValueError(f"unknown evaluation.features {features!r}: choose one of {FEATURE_KINDS}")
        super().__init__(inner.output, absolute=False)  # pyright: ignore[reportArgumentType] (inner checked it); inner applied absolute
        self.inner, self.level, self.seed, self.features = inner, float(level), int(seed), features
        self.special_ids, self.segments = sorted(set(int(i) for i in special_ids)), segment_list(segments)
        for flag in ("needs_gradients", "needs_embeddings", "needs_attentions", "zero_check", "batches_own_calls"):
            setattr(self, flag, getattr(inner, flag))
        self.word_score = inner.word_score if self.level == 0 else "sum"
        self.clean_cache = clean_cache
        self._bound = True

    def describe(self) -> dict:
        return {"name": self.name, "inner": self.inner.describe(), "level": self.level, "seed": self.seed}

    def check(self, model: torch.nn.Module) -> None:
        self.inner.check(model)

    def _attribution(self, model, batch: TokenBatch, target: Tensor, example_ids: Tensor):
        key = tuple(example_ids.tolist())
        clean = None if self.clean_cache is None else self.clean_cache.get(key)
        if clean is None:
            clean = self.inner.explain(model, batch, target, example_ids, sanity=False)
            if self.clean_cache is not None:
                self.clean_cache[key] = clean
        return self.degrade(batch, clean, example_ids).scores, clean.completeness_gap, clean.output_difference

    def _scores(self, model, batch: TokenBatch, target: Tensor, example_ids: Tensor) -> Tensor:
        return self._attribution(model, batch, target, example_ids)[0]

    def degrade(self, batch: TokenBatch, clean: Attribution, example_ids: Tensor) -> Attribution:
        """``clean`` (``inner``'s attribution of ``batch``) degraded: ``[B, L]`` token scores as the class
        docstring says; ``clean`` itself at level 0."""
        if self.level == 0:
            return clean
        groups = group_features(batch, maskable_positions(batch, self.special_ids, self.segments), self.features)
        grouped = groups.scores(clean.scores, self.inner.word_score)
        degraded = degrade_scores(grouped, groups.maskable, self.level, self.seed, example_ids)
        if groups.columns is None:
            scores = degraded
        else:
            first = groups.columns >= 0
            first[:, 1:] &= groups.columns[:, 1:] != groups.columns[:, :-1]
            spread = groups.broadcast(degraded, 0.0)
            scores = torch.where(groups.columns >= 0, torch.where(first, spread, 0.0), clean.scores)
        return Attribution(scores, clean.zero, clean.completeness_gap, clean.output_difference)
