"""Soft comprehensiveness and soft sufficiency inputs (Zhao & Aletras, "Incorporating Attribution Importance for
Improving Faithfulness Metrics", ACL 2023, arXiv 2305.10496, Sec. 3): instead of removing the top-k tokens, each
dimension of token ``i``'s word embedding is zeroed at random with a probability set by ``i``'s importance.

The paper's definition, followed here: the importances are min-max normalised per example to ``a_i`` in
``[0, 1]`` (:func:`soft_importance`; the authors' code, ``normal_importance(.., normalise=2)``); soft
comprehensiveness keeps each dimension of token ``i`` with probability ``1 - a_i`` (drops it with ``a_i``: the
important information goes), soft sufficiency keeps it with probability ``a_i`` (drops it with ``1 - a_i``: the
important information stays); a kept dimension is not rescaled. The authors' code
(github.com/casszhao/SoftFaith) holds two model wrappers with opposite Bernoulli masks: one matches the paper
(``soft_suff``: keep ~ Bernoulli(a), ``soft_comp``: keep ~ Bernoulli(1 - a)), the other swaps them (``soft_suff``
keeps with ``1 - a``, ``soft_comp`` with ``a``); we follow the paper.

Where we differ from the authors' code, on purpose: only the evaluated segments' maskable tokens are perturbed
(never special tokens, padding, or tokens outside ``evaluation.segments``; the code perturbs every position,
[CLS] and [SEP] included); the all-masked input that normalises both measures zeroes the same tokens' word
embeddings (the soft input at ``a = 1``), not every token id (the code's all-``[PAD]``-id input); and one uniform
draw ``U`` per dimension serves both directions (comprehensiveness drops where ``U < a_i``, sufficiency where
``U >= a_i``), so the two inputs of a draw are exact complements within the maskable tokens, as the hard
comprehensiveness and sufficiency inputs are. Each direction's marginal law is the paper's. Draws are seeded per
``(seed, example_id, draw)`` (:func:`draw_seed`), so a value does not depend on the batch an example is in.
Plain torch; the scores are computed in :mod:`itermask.core.measures`.
"""

from __future__ import annotations

import inspect
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from itermask.core.forwards import ForwardStats, length_chunks
from itermask.core.representations import capture_representations
from itermask.core.tokens import TokenBatch, row_lengths

if TYPE_CHECKING:
    from itermask.core.curves import MaskingCurves

__all__ = [
    "SoftOutputs",
    "soft_importance",
    "draw_seed",
    "draw_uniforms",
    "check_soft_model",
    "soft_outputs",
    "soft_draw_values",
    "soft_undefined",
    "MIN_FLOOR_DROP",
]

#: The smallest ``p - p0`` (probability units) that soft comprehensiveness and sufficiency divide by; below it an
#: example is undefined (NaN). The authors' code (casszhao/SoftFaith) keeps its denominator ``1 - S(0)`` off zero
#: with an epsilon of 1e-4; we take the same order as a floor instead: the probabilities come from float32 logits
#: (relative rounding ~6e-8), so a ``p - p0`` of 1e-7 is rounding noise (a model whose output barely moves, e.g.
#: untrained or one-class) and its ratio would be noise / noise, clipped to an arbitrary 0 or 1; at 1e-4 a
#: rounding error of 1e-7 moves a value by at most ~1e-3 of its [0, 1] range.
MIN_FLOOR_DROP = 1e-4


@dataclass
class SoftOutputs:
    """Logits of the soft inputs of ``B`` examples and ``R`` draws.

    Attributes:
        comprehensiveness: ``[B, R, C]`` float32: each dimension of token ``i`` dropped with probability ``a_i``.
        sufficiency: ``[B, R, C]`` float32: dropped with probability ``1 - a_i``.
        floor: ``[B, C]`` float32: the all-masked input (every maskable token's word embedding zeroed).
        comprehensiveness_features, sufficiency_features: ``[B, R, H]`` float32 input of the final linear layer
            of those rows (``soft_outputs(..., features=True)``), else ``None``.
    """

    comprehensiveness: Tensor
    sufficiency: Tensor
    floor: Tensor
    comprehensiveness_features: Tensor | None = None
    sufficiency_features: Tensor | None = None


def soft_importance(scores: Tensor, maskable: Tensor) -> tuple[Tensor, Tensor]:
    """Min-max normalised importances (the paper's Sec. 3; the authors' ``normalise=2``) of ``[B, W]`` feature
    ``scores`` over each example's ``[B, W]`` bool ``maskable`` features.

    Returns:
        ``(a, defined)``: ``a`` ``[B, W]`` float32 in ``[0, 1]`` (0 outside the maskable features and for
        undefined examples), ``defined`` ``[B]`` bool: False where the normalisation is undefined, when every
        maskable score is equal (a single feature, a constant explanation: min-max is 0/0; the authors' code
        then gets NaN importances) or one is not finite.
    """
    s = scores.double().where(maskable, 0.0)
    finite = (s.isfinite() | ~maskable).all(dim=1)
    s = s.where(s.isfinite(), 0.0)
    lo = s.masked_fill(~maskable, np.inf).amin(dim=1)
    hi = s.masked_fill(~maskable, -np.inf).amax(dim=1)
    defined = finite & (hi > lo)
    span = (hi - lo).where(defined, 1.0)
    a = ((s - lo[:, None].where(defined[:, None], 0.0)) / span[:, None]).clamp(0.0, 1.0)
    return a.where(maskable & defined[:, None], 0.0).float(), defined


def draw_seed(seed: int, example_id: int, draw: int) -> int:
    """The random seed of one draw of one example: numpy's ``SeedSequence`` of ``(seed, example_id, draw)``
    (each taken modulo ``2**64``), as a 63-bit int for ``torch.Generator.manual_seed``."""
    words = [int(seed) % 2**64, int(example_id) % 2**64, int(draw)]
    return int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] >> np.uint64(1))


def draw_uniforms(seed: int, example_id: int, draw: int, length: int, dim: int) -> Tensor:
    """``[length, dim]`` float32 uniforms in ``[0, 1)`` on the CPU (so they do not depend on the device) for the
    first ``length`` positions of one example's draw: position ``l`` gets the same values whatever the batch's
    padded length."""
    generator = torch.Generator().manual_seed(draw_seed(seed, example_id, draw))
    return torch.rand(length, dim, generator=generator)


def check_soft_model(model: torch.nn.Module) -> torch.nn.Module:
    """``model``'s word embedding layer (``get_input_embeddings()``), after checking that its forward takes
    ``inputs_embeds``.

    Raises:
        ValueError: naming ``evaluation.soft_draws=0``, for a model without either."""
    getter = getattr(model, "get_input_embeddings", None)
    embedding = getter() if callable(getter) else None
    parameters = inspect.signature(model.forward).parameters
    takes = "inputs_embeds" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    if not isinstance(embedding, torch.nn.Module) or not takes:
        raise ValueError(
            f"soft comprehensiveness/sufficiency perturb the word embeddings, but {type(model).__name__} has no "
            "get_input_embeddings() or its forward takes no inputs_embeds: set evaluation.soft_draws=0"
        )
    return embedding


def soft_outputs(
    model: torch.nn.Module,
    batch: TokenBatch,
    maskable: Tensor,
    importance: Tensor,
    example_ids: Tensor,
    draws: int,
    seed: int,
    token_budget: int,
    stats: ForwardStats | None = None,
    features: bool = False,
) -> SoftOutputs:
    """The logits of ``B x (2 draws + 1)`` soft inputs of ``batch`` ``[B, L]``: per example and draw the soft
    comprehensiveness and sufficiency inputs, and the all-masked input, run as embedding rows (``inputs_embeds``
    with the batch's ``attention_mask`` and ``token_type_ids``) in length chunks of at most ``token_budget``
    padded tokens (:func:`~itermask.core.forwards.length_chunks`) under ``torch.inference_mode``.

    Not :class:`~itermask.core.forwards.RowForwards`: no two soft rows share content (every draw is a fresh
    real-valued embedding mask), so there is nothing to de-duplicate and no ids to key them by.

    Args:
        maskable: ``[B, L]`` bool token positions that may be perturbed (nothing else ever is).
        importance: ``[B, L]`` float in ``[0, 1]``, each token's ``a`` (a word's for every piece of it).
        example_ids: ``[B]`` stable ids seeding the draws (:func:`draw_uniforms`).
        stats: counts the rows and forwards into it, if given.
        features: also record each row's input of the final linear layer (no extra forward), for the OOD AUROC
            of the soft inputs.

    Raises:
        ValueError: see :func:`check_soft_model`; with ``features``, a model whose final linear layer cannot be
            found.
    """
    embedding = check_soft_model(model)
    size, per = len(batch), 2 * draws + 1
    lengths = row_lengths(batch)
    example = torch.arange(size, device=batch.device).repeat_interleave(per)
    logits, order = [], []
    capture = capture_representations(model, hidden_states=False) if features else nullcontext()
    with capture as captured:
        for chunk in length_chunks(lengths[example], token_budget):
            part = batch.index(example[chunk]).trim()  # to the chunk's longest row
            with torch.inference_mode():
                embeds = embedding(part.input_ids)
                keep = _keep_masks(chunk.tolist(), per, draws, maskable, importance, example_ids, lengths, seed, embeds)
                logits.append(_embedded_logits(model, part, embeds * keep))
            order.append(chunk)
            if stats is not None:
                stats.forwards += 1
                stats.padded_tokens += part.input_ids.numel()
    if stats is not None:
        stats.rows += size * per
        stats.computed += size * per
        stats.real_tokens += int(lengths.sum()) * per
    joined = _in_row_order(torch.cat(logits), torch.cat(order)).reshape(size, per, -1)
    comp, suff, out = slice(0, 2 * draws, 2), slice(1, 2 * draws, 2), []
    if captured is not None:
        final = _in_row_order(torch.cat([r.features for r in captured]), torch.cat(order)).reshape(size, per, -1)
        out = [final[:, comp], final[:, suff]]
    return SoftOutputs(joined[:, comp], joined[:, suff], joined[:, 2 * draws], *out)


def _embedded_logits(model: torch.nn.Module, part: TokenBatch, embeds: Tensor) -> Tensor:
    """``[N, C]`` float32 logits of ``model`` on the embedding rows ``embeds`` with ``part``'s attention mask and
    token types."""
    inputs = {"inputs_embeds": embeds, "attention_mask": part.attention_mask}
    if part.token_type_ids is not None:
        inputs["token_type_ids"] = part.token_type_ids
    output = model(**inputs)
    return (output if isinstance(output, Tensor) else output.logits).float()


def _in_row_order(values: Tensor, order: Tensor) -> Tensor:
    """``[N, ...]`` ``values`` computed in chunk ``order`` (the row index of each) put back in row order."""
    joined = torch.empty_like(values)
    joined[order] = values
    return joined


def _keep_masks(
    rows: list[int],
    per: int,
    draws: int,
    maskable: Tensor,
    importance: Tensor,
    example_ids: Tensor,
    lengths: Tensor,
    seed: int,
    embeds: Tensor,
) -> Tensor:
    """``[n, width, D]`` bool: the kept embedding dimensions of the soft ``rows`` (row ``b * per + j``: draw
    ``j // 2``, comprehensiveness for even ``j``, sufficiency for odd; ``j = 2 draws``: the all-masked input).

    One :func:`draw_uniforms` per (example, draw) of the chunk, compared with the importances once (both
    directions share it: sufficiency drops the complement), then every row's mask at once; built row by row in
    Python before, the same bits."""
    width, dim, device = embeds.shape[1], embeds.shape[2], embeds.device
    index = torch.tensor(rows, dtype=torch.long)
    b, j = (index // per).tolist(), (index % per).tolist()
    keys = sorted({(bi, ji // 2) for bi, ji in zip(b, j) if ji < 2 * draws})
    below = torch.ones(len(keys) + 1, width, dim, dtype=torch.bool)  # the last: all dropped, the all-masked rows
    for i, (bi, r) in enumerate(keys):
        n = int(lengths[bi])
        below[i, :n] = draw_uniforms(seed, int(example_ids[bi]), r, n, dim) < importance[bi, :n, None].cpu()
    slot = {key: i for i, key in enumerate(keys)}
    which = torch.tensor([slot.get((bi, ji // 2), len(keys)) for bi, ji in zip(b, j)], device=device)
    rows_b, odd = torch.tensor(b, device=device), torch.tensor(j, device=device) % 2 == 1
    within = torch.arange(width, device=device) < lengths.to(device)[rows_b, None]
    where = (maskable[rows_b, :width] & within)[..., None]  # [n, width, 1]: the perturbed positions
    dropped = below.to(device)[which]
    dropped ^= odd[:, None, None]  # sufficiency (odd j) drops the complement; in place: [n, width, D] is large
    return dropped.logical_and_(where).logical_not_()


def soft_undefined(curves: MaskingCurves) -> Tensor:
    """``[B]`` bool: the examples whose soft measures are undefined (NaN): the all-masked input lowers the target
    probability by less than :data:`MIN_FLOOR_DROP` (``p(x) - p0 < 1e-4``, or raises it: nothing to normalise by
    but rounding noise; the authors' code subtracts 1e-4 from the denominator instead, which turns such an
    example's value into an arbitrary 0 or 1), or the importances cannot be min-max normalised
    (:func:`soft_importance`: all equal, e.g. one feature).

    Raises:
        ValueError: for curves without soft inputs (``soft_draws=0`` or a recursive schedule)."""
    if curves.soft_floor_logits is None or curves.scores is None or curves.rank is None:
        raise ValueError("these curves have no soft inputs (evaluation.soft_draws=0, or a recursive schedule)")
    p = _probability(curves.clean_logits, curves.target)
    p0 = _probability(curves.soft_floor_logits, curves.target)
    _, defined = soft_importance(curves.scores, curves.rank >= 0)
    return (p - p0 < MIN_FLOOR_DROP) | ~defined


def soft_draw_values(curves: MaskingCurves, direction: str) -> Tensor:
    """``[B, R]`` float64 per-draw soft comprehensiveness (``direction="comprehensiveness"``) or soft sufficiency
    (``"sufficiency"``) of Zhao & Aletras (ACL 2023, Sec. 3, Soft-NC and Soft-NS; Carton et al. 2020's
    normalisation by the all-masked input): with ``p`` the target probability on the clean input, ``p_r`` on the
    draw's soft input and ``p0`` on the all-masked one, comprehensiveness ``clip((p - p_r) / (p - p0), 0, 1)``
    and sufficiency ``clip(1 - (p - p_r) / (p - p0), 0, 1)`` (the paper's ``(S(x') - S(0)) / (1 - S(0))`` with
    ``S = 1 - max(0, p - p')``, the same value); both fractions, higher is more faithful. NaN for the examples
    of :func:`soft_undefined`.

    Raises:
        ValueError: for an unknown direction or curves without soft inputs."""
    if direction not in ("comprehensiveness", "sufficiency"):
        raise ValueError(f"unknown soft direction {direction!r}: 'comprehensiveness' or 'sufficiency'")
    undefined = soft_undefined(curves)  # checks the soft fields are there
    draws = curves.soft_logits if direction == "comprehensiveness" else curves.soft_keep_logits
    assert draws is not None and curves.soft_floor_logits is not None  # set together
    p = _probability(curves.clean_logits, curves.target)
    p0 = _probability(curves.soft_floor_logits, curves.target)
    p_r = _probability(draws, curves.target)
    drop = (p[:, None] - p_r) / (p - p0).where(~undefined, 1.0)[:, None]
    value = (drop if direction == "comprehensiveness" else 1.0 - drop).clamp(0.0, 1.0)
    return value.masked_fill(undefined[:, None], float("nan"))


def _probability(logits: Tensor, target: Tensor) -> Tensor:
    """``[B]`` or ``[B, R]`` float64 softmax probability of class ``target`` ``[B]`` from ``[B, (R,) C]`` logits."""
    index = target.long().view(-1, *([1] * (logits.dim() - 1))).expand(*logits.shape[:-1], 1)
    return logits.double().softmax(dim=-1).gather(-1, index).squeeze(-1)
