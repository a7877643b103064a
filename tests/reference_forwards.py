"""A reference evaluator for tests: :class:`IterativeMaskingEvaluator` with plain step-major forwards.

Every masked row is computed (no de-duplication), in the order the schedules build them (schedule, then
direction, then step-major), in chunks of ``chunk_size`` rows each trimmed to its longest row, and the
saliency runs in one call per batch. Tests use it to read the masked rows in step order through a recording
model, and to compare the evaluator's length-bucketed forwards with a straightforward computation.
"""

from __future__ import annotations

import torch

from itermask.core.evaluation import IterativeMaskingEvaluator, _by_example, saliency_attribution
from itermask.core.forwards import ForwardStats, RowOutputs, row_lengths
from itermask.core.representations import Representations, capture_representations
from itermask.core.tokens import TokenBatch, chunked_logits


def step_major_outputs(
    model: torch.nn.Module, rows: TokenBatch, chunk_size: int, collect: bool | str, stats: ForwardStats
) -> RowOutputs:
    """``rows`` in their given order, in chunks of ``chunk_size`` rows each trimmed to its longest row,
    every row computed; representations captured if ``collect``; counted into ``stats``."""
    lengths = row_lengths(rows)
    chunk_lengths = [int(lengths[i : i + chunk_size].max()) for i in range(0, len(rows), chunk_size)]
    stats.rows += len(rows)
    stats.computed += len(rows)
    stats.forwards += len(chunk_lengths)
    stats.real_tokens += int(lengths.sum())
    stats.padded_tokens += sum(min(chunk_size, len(rows) - i * chunk_size) * n for i, n in enumerate(chunk_lengths))
    if not collect:
        return RowOutputs(chunked_logits(model, rows, chunk_size))
    with capture_representations(model, hidden_states=collect != "final") as records:
        logits = chunked_logits(model, rows, chunk_size)
    return RowOutputs(logits, Representations.concat(records))


class StepMajorEvaluator(IterativeMaskingEvaluator):
    """:class:`IterativeMaskingEvaluator` with step-major forwards of ``chunk_size`` rows (module docstring)."""

    def __init__(self, *args, chunk_size: int = 128, **kwargs):
        super().__init__(*args, **kwargs)
        self.chunk_size = chunk_size

    def _saliency_by_length(self, model, batch, target, example_ids, sanity=True):
        return saliency_attribution(self.saliency, model, batch, target, example_ids, sanity)

    def _runner(self, model, collect):
        self.forward_stats = ForwardStats()
        return lambda rows: step_major_outputs(model, rows, self.chunk_size, collect, self.forward_stats)

    def _masked_outputs(self, model, run, batch, groups):
        inputs = [self.strategy.apply(batch.tile(m.shape[0]), m.flatten(0, 1)).batch for m, _ in groups]
        flat = [
            step_major_outputs(model, rows, self.chunk_size, collect, self.forward_stats)
            for rows, (_, collect) in zip(inputs, groups)
        ]
        return [_by_example(out, masks.shape[0]) for out, (masks, _) in zip(flat, groups)]
