"""The masking evaluation as a Lightning module, so it runs on one or several devices like training.

Run it with ``Trainer(inference_mode=False).test(module, dataloaders=...)``: Lightning then disables
gradients with ``torch.no_grad`` only, and the evaluator re-enables them for saliency. Lightning's
progress bar shows the evaluation's progress.
"""

from __future__ import annotations

from collections import defaultdict

import pytorch_lightning as pl
import torch

from itermask.core.evaluation import IterativeMaskingEvaluator, MaskingCurves

__all__ = ["MaskingEvaluationModule"]


class MaskingEvaluationModule(pl.LightningModule):
    """Runs each evaluator on every test batch and collects :class:`MaskingCurves`.

    Args:
        model: the fine-tuned classifier (see :mod:`itermask.tokens`).
        evaluators: ``{saliency name: evaluator}``, e.g. the method under study and ``random``.

    After ``trainer.test``: ``curves[saliency][schedule]`` holds the curves of every evaluated example
    (gathered over all processes), and ``n_skipped`` counts examples with no maskable token, which are
    skipped.
    """

    def __init__(self, model: torch.nn.Module, evaluators: dict[str, IterativeMaskingEvaluator]) -> None:
        super().__init__()
        if not evaluators:
            raise ValueError("at least one evaluator is needed")
        self.model = model
        self.evaluators = evaluators
        self.curves: dict[str, dict[str, MaskingCurves]] = {}
        self.n_skipped = 0
        self._parts: dict[tuple[str, str], list[MaskingCurves]] = defaultdict(list)
        self._skipped = 0

    def on_test_epoch_start(self) -> None:
        self._parts.clear()
        self._skipped = 0

    def test_step(self, batch: dict, batch_idx: int) -> None:
        tokens, labels, ids = batch["tokens"], batch["labels"], batch["example_ids"]
        has_maskable = next(iter(self.evaluators.values())).maskable(tokens).any(dim=1)
        self._skipped += int((~has_maskable).sum())
        if not has_maskable.any():
            return
        tokens = tokens.index(has_maskable).trim()
        labels, ids = labels[has_maskable], ids[has_maskable]
        for name, evaluator in self.evaluators.items():
            for schedule, curves in evaluator.evaluate(self.model, tokens, labels, ids).items():
                self._parts[(name, schedule)].append(curves.to("cpu"))

    def on_test_epoch_end(self) -> None:
        parts, skipped = dict(self._parts), self._skipped
        if self.trainer.world_size > 1:  # gather every process's curves (small CPU tensors)
            gathered = [None] * self.trainer.world_size
            torch.distributed.all_gather_object(gathered, (parts, skipped))
            parts = defaultdict(list)
            for rank_parts, _ in gathered:
                for key, values in rank_parts.items():
                    parts[key].extend(values)
            skipped = sum(s for _, s in gathered)
        self.n_skipped = skipped
        self.curves = defaultdict(dict)
        for (name, schedule), values in parts.items():
            curves = MaskingCurves.concat(values)
            # a distributed sampler may repeat examples to even out the ranks: keep each id once
            order = torch.argsort(curves.example_ids, stable=True)
            ids = curves.example_ids[order]
            first = torch.ones_like(ids, dtype=torch.bool)
            first[1:] = ids[1:] != ids[:-1]
            self.curves[name][schedule] = curves.select(order[first])
        self.curves = dict(self.curves)

