"""F-Fidelity (Zheng, Shirani, Chen, Lin, Cheng, Guo, Luo, ICLR 2025, arXiv 2410.02970): faithfulness read on a
classifier fine-tuned with random, explanation-agnostic removal of up to a share ``beta`` of its input, by a
stochastic removal that never takes away more than ``beta * n`` features, so the evaluated inputs stay like the
ones the model was fine-tuned on.

* :func:`training_removal`: the fine-tuning's removal (paper Sec. 4.1; the authors' ``code/train_model.py``,
  ``RandomPixelRemoval``): each example loses a uniformly drawn share ``f ~ U[0, beta]`` of its maskable tokens,
  ``k = floor(f * n + 0.5)`` of them chosen uniformly at random. The authors' code removes the fixed share
  ``beta``; the paper's "up to beta" is followed here.
* :func:`fine_tune_with_removal`: a short continued fine-tuning (AdamW, a fixed number of steps) on batches with
  that removal. Plain torch (the Lightning fine-tuning of :mod:`itermask.training` runs whole epochs with
  checkpoint selection, and the analyses that call this cannot import it).
* :func:`removal_masks`: the evaluation's stochastic removal (paper Sec. 4.2, Eq. 4-5; the authors'
  ``ours_random_MoRF`` / ``ours_random_LeRF``): of the ``k`` candidate features (the explanation's top ``k``
  for FFid+, the other ``n - k`` for FFid-) each is removed with probability ``alpha``, and at most
  ``floor(beta * n)`` of them (those with the smallest draws). The authors' code instead lowers the probability
  to ``beta * n / k`` when ``alpha * k > beta * n`` (a cap in expectation); the paper's hard cap is followed.
* :func:`ffidelity`: per example, FFid+ and FFid- in probability (of the target class) and in accuracy (of the
  gold label, as the paper's Eq. 4-5 and the authors' evaluation do), each averaged over the sizes and the
  ``N`` samples; every row through one :class:`~itermask.core.forwards.RowForwards` call.

Draws are seeded by ``(seed, example_id, sample)``: an example's values do not depend on its batch. One set of
uniform draws per sample serves every size and both directions (common random numbers).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from itermask.core.masking import MaskingStrategy
from itermask.core.schedules import masked_counts, top_k_mask
from itermask.core.tokens import TokenBatch, class_logits, maskable_positions

__all__ = [
    "FFidelitySettings",
    "DEFAULT_SIZES",
    "training_removal",
    "fine_tune_with_removal",
    "removal_masks",
    "sample_uniforms",
    "removal_cap",
    "ffidelity",
    "COLUMNS",
]

#: the explanation sizes, fractions of the ``n`` features: 5 % to 95 % in steps of 5 % (the authors' evaluation
#: grid, ``code/evaluation_model.py``'s ``sparsity``, without its 100 % point, where FFid- removes nothing)
DEFAULT_SIZES = tuple(round(0.05 * i, 2) for i in range(1, 20))
#: the per-example columns, FFid+ higher and FFid- lower is more faithful
COLUMNS = ("ffid_plus_prob", "ffid_minus_prob", "ffid_plus_accuracy", "ffid_minus_accuracy")


@dataclass(frozen=True)
class FFidelitySettings:
    """The evaluation's settings (defaults: the authors' ``code/evaluation_model.py``: ``robust_ratio = 0.5``,
    ``max_ratio = 0.1``, ``num_samples = 50``).

    Attributes:
        alpha: probability that each candidate feature is removed, in ``(0, 1]`` (0 would remove nothing: every
            FFid 0 by construction).
        beta: the fine-tuning's largest removed share, and the evaluation's cap ``floor(beta * n)``, in ``(0, 1]``
            (0 would cap every removal at 0 features). An example with ``n < 1 / beta`` features has cap 0: its
            FFid cannot be measured (NaN, :func:`ffidelity`).
        n_samples: ``N``, stochastic removals per size and direction (at least 1).
        sizes: explanation sizes ``s``, fractions of the ``n`` features in ``[0, 1]``; ``k = floor(s * n + 0.5)``.
        seed: the job seed.

    Raises:
        ValueError: a setting outside its range, named."""

    alpha: float = 0.5
    beta: float = 0.1
    n_samples: int = 50
    sizes: tuple[float, ...] = DEFAULT_SIZES
    seed: int = 0

    def __post_init__(self) -> None:
        for name, what, why in (
            ("alpha", "a removal probability", "nothing would be removed"),
            ("beta", "a share of the features", "the cap floor(beta * n) would be 0"),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
                low = isinstance(value, (int, float)) and value <= 0
                reason = f"at 0 {why}: FFid 0 by construction" if low else what
                raise ValueError(f"ffidelity.{name}={value!r}: choose a number in (0, 1] ({reason})")
        if isinstance(self.n_samples, bool) or not isinstance(self.n_samples, (int, np.integer)) or self.n_samples < 1:
            raise ValueError(f"ffidelity.n_samples={self.n_samples!r}: choose a whole number >= 1")
        sizes = list(self.sizes) if isinstance(self.sizes, Iterable) else None
        if not sizes or any(isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 <= s <= 1 for s in sizes):
            raise ValueError(f"ffidelity.sizes={self.sizes!r}: choose a non-empty list of fractions in [0, 1]")


def training_removal(batch: TokenBatch, special_ids: Iterable[int], beta: float, generator: torch.Generator):
    """``([B, L] bool mask, [B] float64 shares)``: the fine-tuning's random removal of ``batch`` (module
    docstring): per example a share ``f ~ U[0, beta]`` of its maskable tokens, chosen uniformly at random."""
    maskable = maskable_positions(batch, special_ids).cpu()
    shares = torch.rand(len(batch), generator=generator, dtype=torch.float64) * beta
    k = torch.diagonal(masked_counts(maskable.sum(dim=1), shares))
    scores = torch.rand(maskable.shape, generator=generator)
    return top_k_mask(scores, maskable, k).to(batch.device), shares


def fine_tune_with_removal(
    model: torch.nn.Module,
    batches: Iterable[dict],
    strategy: MaskingStrategy,
    special_ids: Iterable[int],
    beta: float,
    steps: int,
    learning_rate: float,
    seed: int,
) -> tuple[torch.nn.Module, list[float]]:
    """A copy of ``model`` fine-tuned for ``steps`` AdamW steps (``learning_rate``, no schedule) on ``batches``
    (dicts with ``tokens``, a :class:`TokenBatch`, and ``labels`` ``[B]``; cycled if shorter), every batch with
    :func:`training_removal` applied by the bound ``strategy``, removal and dropout drawn from generators seeded
    ``seed``. Returns the copy in eval mode and the removed shares drawn (for checks); ``model`` is left unchanged.

    Under the caller's :func:`torch.autocast` (``trainer.precision=bf16-mixed``) each step's forward and loss run
    in a fresh autocast region of the same dtype without autocast's weight-cast cache, and the backward and the
    optimizer step outside autocast (PyTorch's AMP recipe, as Lightning's ``bf16-mixed`` does). Inside one
    long autocast region the cache keeps the bfloat16 copies of the weights cast at the first step, so every
    later forward ran on those stale weights while AdamW updated the float32 ones: until 5 December 2026 the
    preset's copies lost up to 35 points of clean accuracy in bf16 (0.90 -> 0.55, 20 examples) and F-Fidelity
    measured a damaged model (CHANGELOG).

    Raises:
        ValueError: ``steps`` below 1 or no batch."""
    if steps < 1:
        raise ValueError(f"ffidelity.steps={steps}: fine-tune for at least one step")
    tuned = copy.deepcopy(model).train()
    device = next(tuned.parameters()).device
    optimizer = torch.optim.AdamW(tuned.parameters(), lr=learning_rate)
    generator, special, shares = torch.Generator().manual_seed(int(seed)), sorted(set(special_ids)), []
    cycle, done = list(batches), 0
    if not cycle:
        raise ValueError("ffidelity: no training batch to fine-tune on")
    kind = device.type
    autocast = {"enabled": torch.is_autocast_enabled(kind), "dtype": torch.get_autocast_dtype(kind)}
    with torch.random.fork_rng(devices=[device] if kind == "cuda" else []):  # dropout seeded too
        torch.manual_seed(int(seed))
        while done < steps:
            for batch in cycle[: steps - done]:
                tokens = batch["tokens"].to(device)
                mask, drawn = training_removal(tokens, special, beta, generator)
                with torch.autocast(kind, **autocast, cache_enabled=False):  # the weights of this step
                    logits = class_logits(tuned, strategy.apply(tokens, mask).batch)
                    loss = torch.nn.functional.cross_entropy(logits, batch["labels"].to(device))
                with torch.autocast(kind, enabled=False):
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                shares.extend(drawn.tolist())
                done += 1
    return tuned.eval(), shares


def sample_uniforms(seed: int, example_id: int, n_samples: int, n: int) -> np.ndarray:
    """``[N, n]`` float64 uniforms of one example, row ``j`` from a generator seeded ``(seed, example_id, j)``."""
    return np.stack([np.random.default_rng([int(seed), int(example_id), j]).random(n) for j in range(n_samples)])


def removal_masks(order: np.ndarray, k: int, alpha: float, cap: int, uniforms: np.ndarray, plus: bool) -> np.ndarray:
    """``[N, n]`` bool: the features removed by each of the ``N`` samples (module docstring).

    Args:
        order: ``[n]`` the example's features, most important first.
        k: the explanation size (features); the candidates are ``order[:k]`` (``plus``) or ``order[k:]``.
        alpha: the removal probability of each candidate.
        cap: the most features removed, ``floor(beta * n)``.
        uniforms: ``[N, n]`` the draws (:func:`sample_uniforms`), indexed by feature."""
    n = len(order)
    position = np.empty(n, dtype=np.int64)
    position[np.asarray(order, dtype=np.int64)] = np.arange(n)
    candidate = (position < k) if plus else (position >= k)
    drawn = candidate[None, :] & (uniforms < alpha)
    # the `cap` smallest draws among the drawn candidates stay removed (a uniformly random subset of them)
    keyed = np.where(drawn, uniforms, np.inf)
    rank = np.argsort(np.argsort(keyed, axis=1, kind="stable"), axis=1, kind="stable")
    return drawn & (rank < cap)


def removal_cap(beta: float, n: int) -> int:
    """``floor(beta * n)``: the most features one evaluation sample removes (``1e-9`` absorbs float round-off, so
    that ``beta = 0.1, n = 30`` gives 3)."""
    return math.floor(beta * n + 1e-9)


def _requests(orders: Sequence[np.ndarray], example_ids: Sequence[int], settings: FFidelitySettings):
    """Every masked request ``(example row, [n_max] feature mask)``, clean rows first, and its place."""
    width = max((len(o) for o in orders), default=0)
    examples, masks, places = [np.arange(len(orders))], [np.zeros((len(orders), width), dtype=bool)], []
    for e, (order, example) in enumerate(zip(orders, example_ids)):
        n = len(order)
        cap = removal_cap(settings.beta, n)
        uniforms = sample_uniforms(settings.seed, int(example), settings.n_samples, n)
        ks = masked_counts(torch.tensor([n]), list(settings.sizes))[:, 0].tolist()
        for plus in (True, False):
            for k in ks:
                removed = removal_masks(order, int(k), settings.alpha, cap, uniforms, plus)
                masks.append(np.pad(removed, ((0, 0), (0, width - n))))
                examples.append(np.full(len(removed), e, dtype=np.int64))
                places.append((e, plus))
    return np.concatenate(examples), np.concatenate(masks), places


def _features_by_side(final: Tensor, b: int, n: int, places: list, caps: Tensor) -> dict[str, Tensor]:
    """``{"clean", "plus", "minus"}``: the ``[R, H]`` final-layer ``final`` of the request rows split into the
    ``b`` clean rows and the sampled rows of each side (``n`` per place, in ``places`` order); rows of an example
    whose cap (``caps``: ``[R]``, per row) is 0 removed nothing and are left out (they are clean rows again)."""
    plus = torch.zeros(len(final), dtype=torch.bool)
    for i, (_, is_plus) in enumerate(places):
        plus[b + i * n : b + (i + 1) * n] = is_plus
    sampled = caps > 0
    sampled[:b] = False
    return {"clean": final[:b], "plus": final[sampled & plus], "minus": final[sampled & ~plus]}


def _distinct_outputs(outputs, examples: np.ndarray, masks: np.ndarray):
    """``(computed, every)``: the row engine's outputs of each distinct ``(example, feature mask)`` request, and
    ``[R]`` the index of every request's among them. The ``N`` samples x sizes x 2 sides repeat few distinct masks
    (about 1 in 9 on the shipped data), so each is masked and run once; the engine's ``rows`` still counts every
    request."""
    distinct, inverse = np.unique(np.column_stack([examples, masks]), axis=0, return_inverse=True)
    ex = torch.as_tensor(distinct[:, 0], device=outputs.batch.device)
    token_masks = outputs.token_masks(ex, torch.as_tensor(distinct[:, 1:].astype(bool), device=ex.device))
    rows = outputs.strategy.apply(outputs.batch.index(ex), token_masks).batch
    with torch.inference_mode():
        computed = outputs.forwards(rows)
    if (stats := getattr(outputs.forwards, "stats", None)) is not None:
        stats.rows += len(examples) - len(distinct)
    return computed, torch.as_tensor(inverse.reshape(-1))


def ffidelity(
    outputs, orders: Sequence[np.ndarray], example_ids: Tensor, target: Tensor, labels: Tensor, settings
) -> dict[str, Tensor]:
    """Per example FFid+ and FFid- (paper Eq. 4-5): ``{column: [B] float64}`` for :data:`COLUMNS`, plus
    ``ffid_clean_correct`` (``[B]`` 1.0 / 0.0 / NaN: the tuned model's clean prediction is the gold label) and
    ``ffid_removed`` (``[B]`` mean features removed per sample) and ``ffid_cap`` (``[B]`` ``floor(beta * n)``);
    when ``outputs`` records representations (``ModelOutputs(..., representations="final")``) also
    ``ffid_features``: the input of the final linear layer of the clean rows (``"clean"``, ``[B, H]``) and of
    every sampled row of the explanation (``"plus"``) and of its complement (``"minus"``), ``[M, H]`` each, the
    rows of examples with cap 0 (nothing removed) left out.
    An example with cap 0 (``n < 1 / beta`` features) loses no feature in any sample, so its FFid would be 0 by
    construction, not measured: its four :data:`COLUMNS` are NaN (its rows are still asked, as every example's).

    ``FFid+_prob = mean over sizes and samples of p(x)[t] - p(x~)[t]`` with ``x~`` the input without the
    sampled features of the explanation's top ``k`` (``t``: the ``target`` class); FFid- the same with the
    features outside the top ``k``; ``_accuracy`` the same with ``1[argmax = label]``, NaN where the gold
    ``labels`` is unknown (``-1``).

    Args:
        outputs: a :class:`~itermask.core.subset_outputs.ModelOutputs` on the fine-tuned model (its batch the
            clean examples in the order of ``orders``); only its rows, token masks and row engine are used.
        orders: per example its ``n`` features, most important first
            (:func:`~itermask.core.naopc_scores.feature_ranks`).
        example_ids, target, labels: ``[B]`` long.
        settings: :class:`FFidelitySettings`.

    Raises:
        ValueError: an example without features."""
    if any(len(o) < 1 for o in orders):
        raise ValueError("F-Fidelity needs at least one feature per example")
    examples, masks, places = _requests(orders, example_ids.tolist(), settings)
    computed, every = _distinct_outputs(outputs, examples, masks)
    logits, rows_of = computed.logits.double().cpu()[every], torch.as_tensor(examples)
    b, t, y = len(orders), target.long().cpu(), labels.long().cpu()
    p = logits.softmax(dim=-1)[torch.arange(len(rows_of)), t[rows_of]]
    correct = (logits.argmax(dim=-1) == y.clamp(min=0)[rows_of]).double()
    correct[(y < 0)[rows_of]] = math.nan
    out: dict[str, Any] = {c: torch.zeros(b, dtype=torch.float64) for c in COLUMNS}
    counts, removed = torch.zeros(b, 2), torch.zeros(b, dtype=torch.float64)
    start, n = b, settings.n_samples
    for e, plus in places:
        side = "plus" if plus else "minus"
        out[f"ffid_{side}_prob"][e] += (p[e] - p[start : start + n]).sum()
        out[f"ffid_{side}_accuracy"][e] += (correct[e] - correct[start : start + n]).sum()
        removed[e] += float(masks[start : start + n].sum())
        counts[e, 0 if plus else 1] += n
        start += n
    for c in COLUMNS:
        out[c] /= counts[:, 0 if "plus" in c else 1].double()
    caps = torch.tensor([removal_cap(settings.beta, len(o)) for o in orders], dtype=torch.float64)
    for c in COLUMNS:
        out[c][caps == 0] = math.nan  # nothing can be removed: not a measured 0
    if (recorded := computed.representations) is not None:  # the row engine records them: the OOD features
        out["ffid_features"] = _features_by_side(recorded.features.cpu()[every], b, n, places, caps[rows_of])
    return out | {"ffid_clean_correct": correct[:b].clone(), "ffid_cap": caps, "ffid_removed": removed / counts.sum(1)}
