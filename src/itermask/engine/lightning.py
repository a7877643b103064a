"""The masking evaluation as a Lightning module, so it runs on one or several devices like training.

Run it with ``Trainer(inference_mode=False).test(module, dataloaders=...)``: Lightning then disables gradients with
``torch.no_grad`` only, and the evaluator re-enables them for saliency. With ``progress_bar=True`` it shows its own
tqdm bar (on global rank 0), advancing per explanation, schedule and batch, with an ETA, in place of Lightning's
per-batch bar, which would sit still through a batch's masking steps."""

from __future__ import annotations

import math
from collections import defaultdict

import pytorch_lightning as pl
import torch
from tqdm.auto import tqdm

from itermask.core.curves import MaskingCurves
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.training.distributed import first_of_each, gather_to_all

__all__ = ["MaskingEvaluationModule"]


class MaskingEvaluationModule(pl.LightningModule):
    """Runs each evaluator on every test batch and collects :class:`MaskingCurves`.

    Args:
        model: the fine-tuned classifier (see :mod:`itermask.core.tokens`).
        evaluators: ``{saliency name: evaluator}``, e.g. the method under study and ``random``.
        progress_bar: show the masking progress bar (see the module docstring).

    After ``trainer.test``: ``curves[saliency][schedule]`` holds the curves of every evaluated example
    (gathered over all processes), and ``n_skipped`` counts examples with no maskable token, which are
    skipped.
    """

    def __init__(
        self, model: torch.nn.Module, evaluators: dict[str, IterativeMaskingEvaluator], progress_bar: bool = False
    ) -> None:
        super().__init__()
        if not evaluators:
            raise ValueError("at least one evaluator is needed")
        self.model = model
        self.evaluators = evaluators
        self.progress_bar = progress_bar
        self.curves: dict[str, dict[str, MaskingCurves]] = {}
        self.n_skipped = 0
        self._parts: dict[tuple[str, str], list[MaskingCurves]] = defaultdict(list)
        self._skipped: list[int] = []
        self._bar = None
        self._n_batches: int | str = "?"

    @property
    def units_per_batch(self) -> int:
        """Steps of the progress bar per batch: per explanation, one per schedule (its masks chosen) and one
        for the masked forwards (see :meth:`IterativeMaskingEvaluator.evaluate`'s ``progress``)."""
        return sum(len(evaluator.schedules) + 1 for evaluator in self.evaluators.values())

    def on_test_epoch_start(self) -> None:
        self._parts.clear()
        self._skipped = []
        if self.progress_bar and self.trainer.is_global_zero:
            batches = sum(self.trainer.num_test_batches)
            total = batches * self.units_per_batch if math.isfinite(batches) else None
            self._n_batches = int(batches) if math.isfinite(batches) else "?"
            self._bar = tqdm(total=total, desc="masking", unit="step", dynamic_ncols=True)

    def _advance(self, name: str, batch_idx: int):
        """The evaluator's ``progress`` callback for explanation ``name`` on batch ``batch_idx`` (``None``
        without a bar)."""
        bar = self._bar
        if bar is None:
            return None
        bar.set_description(f"masking: {name}", refresh=False)

        def advance(stage: str) -> None:
            bar.set_postfix_str(f"{stage} done, batch {batch_idx + 1}/{self._n_batches}", refresh=False)
            bar.update(1)

        return advance

    def test_step(self, batch: dict, batch_idx: int) -> None:
        tokens, labels, ids = batch["tokens"], batch["labels"], batch["example_ids"]
        has_maskable = next(iter(self.evaluators.values())).feature_groups(tokens).maskable.any(dim=1)
        self._skipped.extend(ids[~has_maskable].tolist())
        if not has_maskable.any():
            if self._bar is not None:
                self._bar.update(self.units_per_batch)
            return
        tokens = tokens.index(has_maskable).trim()
        labels, ids = labels[has_maskable], ids[has_maskable]
        for name, evaluator in self.evaluators.items():
            progress = self._advance(name, batch_idx)
            for schedule, curves in evaluator.evaluate(self.model, tokens, labels, ids, progress=progress).items():
                self._parts[(name, schedule)].append(curves.to("cpu"))

    def on_test_end(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def on_test_epoch_end(self) -> None:
        """Gather every process's curves (small CPU tensors) and keep each example once: a distributed sampler
        repeats examples to give every process as many (:func:`~itermask.training.distributed.first_of_each`),
        so the curves, and ``n_skipped``, are those of one process evaluating every example once."""
        gathered = gather_to_all(self.trainer, (dict(self._parts), list(self._skipped)))
        parts: dict[tuple[str, str], list[MaskingCurves]] = defaultdict(list)
        for rank_parts, _ in gathered:
            for key, values in rank_parts.items():
                parts[key].extend(values)
        self.n_skipped = len({example_id for _, skipped in gathered for example_id in skipped})
        self.curves = defaultdict(dict)
        for (name, schedule), values in parts.items():
            curves = MaskingCurves.concat(values)
            self.curves[name][schedule] = curves.select(first_of_each(curves.example_ids))
        self.curves = dict(self.curves)
