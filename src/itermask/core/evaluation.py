"""The iterative-masking evaluation of one batch: saliency, masks for every step, masked forwards.

:class:`IterativeMaskingEvaluator` is plain PyTorch (no Lightning, no logging). For a batch it

1. predicts on the clean input and picks the class to explain (:func:`resolve_target`);
2. computes saliency on the clean input, with its per-example diagnostics (identically zero scores,
   completeness gap; :meth:`itermask.core.saliency.SaliencyMethod.explain`);
3. for each schedule builds the masks of every step (:mod:`itermask.core.schedules`) and runs all masked
   inputs of the batch (``S x B`` rows) through the model in padded chunks under
   ``torch.inference_mode``; for the one-shot schedule also the complementary inputs where only the
   top-k tokens are kept (sufficiency);
4. optionally (``collect_representations``) records, during those same forward passes, the clean and
   masked inputs' representations (:mod:`itermask.core.representations`) for the out-of-distribution
   statistics of :mod:`itermask.ood.statistics`.

The result is a :class:`MaskingCurves` per schedule, from which :mod:`itermask.metrics` computes scores.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Iterable, Sequence

import torch
from torch import Tensor

from itermask.core.masking import MaskingStrategy, to_source_positions
from itermask.core.representations import Representations, capture_representations
from itermask.core.saliency import Attribution, SaliencyMethod
from itermask.core.schedules import SCHEDULES, STEP_KINDS, step_counts
from itermask.core.tokens import TokenBatch, chunked_logits, maskable_positions, segment_list

__all__ = ["MaskingCurves", "IterativeMaskingEvaluator", "resolve_target", "check_target_policy", "off_grid", "TARGET_POLICIES"]

TARGET_POLICIES = ("predicted", "gold")


@dataclass
class MaskingCurves:
    """Model outputs along a masking curve for ``B`` examples and ``S`` steps.

    Attributes:
        schedule: ``"one_shot"`` or ``"recursive"``.
        steps: what the x-axis ``grid`` holds: ``"fraction"`` (masking fractions, shares of the maskable
            tokens) or ``"count"`` (numbers of tokens, capped per example at its ``n_maskable``).
        grid: ``[S]`` float64, the masking fractions or token counts of the steps.
        example_ids: ``[B]`` long stable example ids.
        n_maskable: ``[B]`` long number of maskable tokens.
        k: ``[B, S]`` long number of tokens masked at each step.
        target: ``[B]`` long class whose probability the curve follows.
        labels: ``[B]`` long gold labels (``-1`` where unknown).
        clean_logits: ``[B, C]`` logits on the clean input.
        logits: ``[B, S, C]`` logits with the top-k tokens masked (comprehensiveness direction).
        keep_logits: ``[B, S, C]`` logits with only the top-k tokens kept, every other maskable token
            masked (sufficiency direction); ``None`` for schedules where it is undefined (``recursive``;
            see :attr:`itermask.core.schedules.MaskingSchedule.sufficiency`).
        clean_features, features: ``[B, D]`` / ``[B, S, D]`` input of the final linear layer for the clean
            and the masked (comprehensiveness direction) inputs; ``None`` unless representations were
            collected (see :mod:`itermask.core.representations`).
        clean_layer_mean, layer_mean: ``[B, L+1, H]`` / ``[B, S, L+1, H]`` hidden states mean-pooled over
            attended tokens; ``None`` unless collected.
        clean_layer_max, layer_max: the same max-pooled; ``None`` unless collected.
        saliency_zero: ``[B]`` bool, the saliency of the clean input is identically zero (the example is
            ranked by position only; see :meth:`itermask.core.saliency.SaliencyMethod.explain`).
        completeness_gap: ``[B]`` float64, for ``integrated_gradients`` and ``deeplift``: the sum of the
            clean input's attributions minus ``f(x) - f(baseline)`` of the explained output; else ``None``.
        output_difference: ``[B]`` float64 ``f(x) - f(baseline)`` beside it; else ``None``.
    """

    schedule: str
    steps: str
    grid: Tensor
    example_ids: Tensor
    n_maskable: Tensor
    k: Tensor
    target: Tensor
    labels: Tensor
    clean_logits: Tensor
    logits: Tensor
    keep_logits: Tensor | None = None
    clean_features: Tensor | None = None
    features: Tensor | None = None
    clean_layer_mean: Tensor | None = None
    layer_mean: Tensor | None = None
    clean_layer_max: Tensor | None = None
    layer_max: Tensor | None = None
    saliency_zero: Tensor | None = None
    completeness_gap: Tensor | None = None
    output_difference: Tensor | None = None

    def representations(self) -> tuple[Representations, Representations] | None:
        """``(clean, masked)`` representations, ``clean`` with ``[B, ...]`` and ``masked`` with
        ``[B, S, ...]`` leading dimensions; ``None`` if they were not collected."""
        if self.features is None:
            return None
        clean = Representations(self.clean_features, self.clean_layer_mean, self.clean_layer_max)
        return clean, Representations(self.features, self.layer_mean, self.layer_max)

    #: fields shared by every example (not indexed by example)
    SHARED = ("schedule", "steps", "grid")

    def __len__(self) -> int:
        return self.example_ids.shape[0]

    @property
    def fractions(self) -> Tensor:
        """``[S]`` the masking fractions of a fraction-step curve.

        Raises:
            ValueError: for a count-step curve (use ``grid``, or ``k / n_maskable`` per example).
        """
        if self.steps != "fraction":
            raise ValueError(f"these curves have {self.steps} steps, not masking fractions; read curves.grid")
        return self.grid

    @property
    def masked_fraction(self) -> Tensor:
        """``[B, S]`` float64: the share of each example's maskable tokens masked at each step, ``k / n``."""
        return self.k.double() / self.n_maskable.double()[:, None]

    def select(self, rows: Tensor) -> "MaskingCurves":
        """The examples ``rows`` (index tensor or boolean mask of shape ``[B]``)."""
        return MaskingCurves(
            **{
                f.name: (v if f.name in self.SHARED or v is None else v[rows])
                for f in fields(MaskingCurves)
                for v in [getattr(self, f.name)]
            }
        )

    @staticmethod
    def concat(parts: Iterable["MaskingCurves"]) -> "MaskingCurves":
        """Join curves of the same schedule and steps along the example dimension.

        Raises:
            ValueError: if there are no parts, or they differ in schedule or steps.
        """
        parts = list(parts)
        if not parts:
            raise ValueError("no masking curves to concatenate (no example was evaluated)")
        first = parts[0]
        for part in parts[1:]:
            if (part.schedule, part.steps) != (first.schedule, first.steps) or not torch.equal(part.grid, first.grid):
                raise ValueError("cannot concatenate masking curves of different schedules or steps")
        joined = {}
        for field in fields(MaskingCurves):
            values = [getattr(p, field.name) for p in parts]
            if field.name in MaskingCurves.SHARED:
                joined[field.name] = values[0]
            elif any(v is None for v in values):
                joined[field.name] = None
            else:
                joined[field.name] = torch.cat(values)
        return MaskingCurves(**joined)

    def to(self, device) -> "MaskingCurves":
        return MaskingCurves(
            **{
                f.name: (v.to(device) if isinstance(v := getattr(self, f.name), Tensor) else v)
                for f in fields(MaskingCurves)
            }
        )


def resolve_target(policy: str | int, clean_logits: Tensor, labels: Tensor | None) -> Tensor:
    """The class to explain for each example.

    Args:
        policy: ``"predicted"`` (argmax of the clean logits), ``"gold"`` (the label) or a fixed class id.
        clean_logits: ``[B, C]``.
        labels: ``[B]`` gold labels (needed for ``"gold"``).

    Returns:
        ``[B]`` long.

    Raises:
        ValueError: for an unknown policy, ``"gold"`` without labels, or a class id out of range.
    """
    check_target_policy(policy, clean_logits.shape[-1])
    if policy == "predicted":
        return clean_logits.argmax(dim=-1)
    if policy == "gold":
        if labels is None or (labels < 0).any():
            raise ValueError("target policy 'gold' needs a gold label for every example")
        return labels.long()
    return torch.full((clean_logits.shape[0],), policy, dtype=torch.long, device=clean_logits.device)


def off_grid(values: Sequence[float], grid: Sequence[float], tol: float = 1e-9) -> list[float]:
    """The ``values`` (masking fractions) that are not on ``grid`` (within ``tol``), in order."""
    return [v for v in values if not any(abs(v - g) < tol for g in grid)]


def check_target_policy(policy: str | int, num_classes: int | None = None) -> None:
    """Check a target policy (see :func:`resolve_target`) before any work is done.

    Args:
        policy: ``"predicted"``, ``"gold"`` or a class id.
        num_classes: number of classes of the classifier; ``None`` checks only the kind of policy.

    Raises:
        ValueError: for an unknown policy or a class id outside ``[0, num_classes)``.
    """
    if policy in TARGET_POLICIES:
        return
    if not isinstance(policy, int) or isinstance(policy, bool):
        raise ValueError(f"unknown target policy {policy!r}: choose one of {TARGET_POLICIES} or a class id")
    if policy < 0 or (num_classes is not None and policy >= num_classes):
        known = f" (this data has {num_classes} classes: 0..{num_classes - 1})" if num_classes is not None else ""
        raise ValueError(f"target class {policy} out of range{known}")


@contextmanager
def _gradients_enabled():
    with torch.inference_mode(False), torch.enable_grad():
        yield


class IterativeMaskingEvaluator:
    """Masks the most salient tokens step by step and records the model's outputs.

    Args:
        saliency: the explanation to evaluate.
        strategy: what a masked token becomes.
        fractions: ``S`` masking fractions in ``[0, 1]``, ascending (used when ``steps="fraction"``).
        special_ids: token ids never masked (``tokenizer.all_special_ids``).
        schedules: names from :data:`itermask.core.schedules.SCHEDULES`.
        target: target policy, see :func:`resolve_target`.
        chunk_size: rows per masked forward pass.
        sufficiency: also run the keep-only-top-k inputs for the schedules where sufficiency is defined.
        steps: ``"fraction"`` (the grid is ``fractions``) or ``"count"`` (the grid is ``counts``: mask
            ``min(c, n)`` tokens at count ``c``).
        counts: ``S`` token counts, non-negative integers, ascending (needed when ``steps="count"``).
        segments: segment(s) whose tokens may be masked and ranked (``0``/``1`` for the first/second
            text of a sentence pair), or ``None`` for all; see :func:`itermask.tokens.maskable_positions`.
        collect_representations: also record the clean and masked inputs' representations in the
            curves (``features``, ``layer_mean``, ``layer_max``); needs a Hugging Face classifier (see
            :func:`itermask.core.representations.capture_representations`). Off by default: it costs memory.

    Raises:
        ValueError: for unknown schedules or kinds of steps, an empty or unsorted grid, count steps without
            counts.
    """

    def __init__(
        self,
        saliency: SaliencyMethod,
        strategy: MaskingStrategy,
        fractions: Sequence[float] | None,
        special_ids: Iterable[int],
        schedules: Sequence[str] = ("one_shot", "recursive"),
        target: str | int = "predicted",
        chunk_size: int = 128,
        sufficiency: bool = True,
        steps: str = "fraction",
        counts: Sequence[int] | None = None,
        segments: int | Sequence[int] | None = None,
        collect_representations: bool = False,
    ) -> None:
        if not schedules:
            raise ValueError("evaluation.schedules is empty: choose one or more of " + str(sorted(SCHEDULES)))
        unknown = [s for s in schedules if s not in SCHEDULES]
        if unknown:
            raise ValueError(f"unknown masking schedule(s) {unknown}: choose from {sorted(SCHEDULES)}")
        if steps not in STEP_KINDS:
            raise ValueError(f"unknown kind of masking steps {steps!r}: choose one of {STEP_KINDS}")
        if (fractions if steps == "fraction" else counts) is None:
            raise ValueError(f"{steps} steps need the masking {steps}s (evaluation.{steps}s)")
        grid = [float(v) for v in (fractions if steps == "fraction" else counts)]
        if not grid:
            raise ValueError(f"at least one masking {steps} is needed")
        if grid != sorted(grid):
            raise ValueError(f"masking {steps}s must be ascending, got {grid}")
        step_counts(torch.zeros(1, dtype=torch.long), grid, steps)  # validates the grid
        check_target_policy(target)
        self.saliency = saliency
        self.strategy = strategy
        self.steps = steps
        self.grid = torch.tensor(grid, dtype=torch.float64)
        self.segments = segment_list(segments)
        self.special_ids = sorted(set(int(i) for i in special_ids))
        self.schedules = list(schedules)
        self.target = target
        self.chunk_size = int(chunk_size)
        self.sufficiency = sufficiency
        self.collect_representations = collect_representations

    def maskable(self, batch: TokenBatch) -> Tensor:
        """``[B, L]`` bool maskable positions of ``batch`` (within the chosen segments)."""
        return maskable_positions(batch, self.special_ids, self.segments)

    def _saliency(self, model, batch: TokenBatch, target: Tensor, example_ids: Tensor) -> Attribution:
        if not self.saliency.needs_gradients:
            return self.saliency.explain(model, batch, target, example_ids)
        with _gradients_enabled():
            batch = batch.map(torch.clone)  # never hand inference tensors to autograd
            return self.saliency.explain(model, batch, target.clone(), example_ids.clone())

    def _logits(self, model, batch: TokenBatch, collect: bool = False) -> tuple[Tensor, Representations | None]:
        """Logits ``[N, C]`` of ``batch`` in chunks, and its representations if ``collect``."""
        if not collect:
            return chunked_logits(model, batch, self.chunk_size), None
        with capture_representations(model) as records:
            logits = chunked_logits(model, batch, self.chunk_size)
        return logits, Representations.concat(records)

    def _masked_logits(
        self, model, batch: TokenBatch, masks: Tensor, collect: bool = False
    ) -> tuple[Tensor, Representations | None]:
        """Logits ``[B, S, C]`` for ``masks`` ``[S, B, L]`` applied to ``batch``, in one chunked pass, and
        the representations (``[B, S, ...]``) if ``collect``."""
        steps, size, length = masks.shape
        masked = self.strategy.apply(batch.tile(steps), masks.reshape(steps * size, length)).batch
        logits, reps = self._logits(model, masked, collect)
        if reps is not None:
            reps = reps.map(lambda t: t.reshape(steps, size, *t.shape[1:]).transpose(0, 1))
        return logits.reshape(steps, size, -1).transpose(0, 1), reps

    def evaluate(
        self,
        model: torch.nn.Module,
        batch: TokenBatch,
        labels: Tensor | None = None,
        example_ids: Tensor | None = None,
    ) -> dict[str, MaskingCurves]:
        """Run every schedule on ``batch``.

        Args:
            model: a classifier in eval mode (see :mod:`itermask.tokens`).
            batch: ``[B, L]`` clean batch. Every example needs at least one maskable token
                (filter with :meth:`maskable` first).
            labels: ``[B]`` gold labels, or ``None``.
            example_ids: ``[B]`` stable ids (default: row index).

        Returns:
            ``{schedule: MaskingCurves}``.

        Raises:
            ValueError: if an example has no maskable token.
        """
        size, length = batch.input_ids.shape
        device = batch.device
        example_ids = torch.arange(size, device=device) if example_ids is None else example_ids
        labels = torch.full((size,), -1, dtype=torch.long, device=device) if labels is None else labels.long()
        maskable = self.maskable(batch)
        n_maskable = maskable.sum(dim=1)
        if (n_maskable == 0).any():
            raise ValueError("every example needs at least one maskable token; filter them out first")
        collect = self.collect_representations
        clean_logits, clean_reps = self._logits(model, batch, collect)
        target = resolve_target(self.target, clean_logits, labels)
        clean = self._saliency(model, batch, target, example_ids)
        k = step_counts(n_maskable, self.grid.to(device), self.steps)

        def saliency_fn(state: Tensor, rows: Tensor) -> Tensor:
            masked = self.strategy.apply(batch.index(rows), state)
            scores = self._saliency(model, masked.batch, target[rows], example_ids[rows]).scores
            return to_source_positions(scores, masked, length)

        results = {}
        for name in self.schedules:
            schedule = SCHEDULES[name]()
            masks = schedule.masks(clean.scores, maskable, k, saliency_fn)
            keep_logits = None
            if schedule.sufficiency and self.sufficiency:
                keep_logits = self._masked_logits(model, batch, maskable & ~masks)[0]
            logits, reps = self._masked_logits(model, batch, masks, collect)
            results[name] = MaskingCurves(
                schedule=name,
                steps=self.steps,
                grid=self.grid,
                example_ids=example_ids,
                n_maskable=n_maskable,
                k=k.T.contiguous(),
                target=target,
                labels=labels,
                clean_logits=clean_logits,
                logits=logits,
                keep_logits=keep_logits,
                saliency_zero=clean.zero,
                completeness_gap=clean.completeness_gap,
                output_difference=clean.output_difference,
                **({} if reps is None else _representation_fields(clean_reps, reps)),
            )
        return results


def _representation_fields(clean: Representations, masked: Representations) -> dict[str, Tensor]:
    return {
        "clean_features": clean.features,
        "features": masked.features,
        "clean_layer_mean": clean.layer_mean,
        "layer_mean": masked.layer_mean,
        "clean_layer_max": clean.layer_max,
        "layer_max": masked.layer_max,
    }
