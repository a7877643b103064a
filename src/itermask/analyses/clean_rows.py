"""The clean rows of a job's evaluated examples, rebuilt in the order of its masking curves, for the analyses that
run their own forwards on them (NAOPC, F-Fidelity, the removal reference): :func:`clean_batch`, and
:func:`pad_rank` for a ranking narrower than those rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from itermask.analyses.base import AnalysisInputs, EvaluationContext
    from itermask.core.curves import MaskingCurves

__all__ = ["clean_batch", "pad_rank"]


def clean_batch(inputs: AnalysisInputs, context: EvaluationContext, first: MaskingCurves):
    """The clean rows of the evaluated examples (``first``'s, in its order) on the model's device, right-padded
    to one length, and their ``[B, L]`` maskable positions.

    Raises:
        ValueError: if the rows' maskable tokens disagree with the curves' (a bug, never silently used)."""
    import torch.nn.functional as F

    from itermask.core.tokens import TokenBatch, maskable_positions, row_lengths

    e, tokenizer = inputs.evaluation, inputs.tokenizer
    rows: dict[int, TokenBatch] = {}
    for batch in context.data.eval_loader(context.examples):
        for r, example in enumerate(batch["example_ids"].tolist()):
            rows[example] = batch["tokens"].index(slice(r, r + 1))
    chosen = [rows[i] for i in first.example_ids.tolist()]
    width = max(int(row_lengths(r).max()) for r in chosen)
    pad_id = int(getattr(tokenizer, "pad_token_id", None) or 0)

    def padded(row: TokenBatch) -> TokenBatch:
        def grow(t, value: int):
            return F.pad(t[:, :width], (0, width - min(t.shape[1], width)), value=value)

        types, segments, words = row.token_type_ids, row.segment_ids, row.word_ids
        return TokenBatch(
            grow(row.input_ids, pad_id),
            grow(row.attention_mask, 0),
            None if types is None else grow(types, 0),
            None if segments is None else grow(segments, -1),
            None if words is None else grow(words, -1),
        )

    batch = TokenBatch.concat(padded(r) for r in chosen).to(next(context.model.parameters()).device)
    return batch, maskable_positions(batch, tokenizer.all_special_ids, e.segments)


def pad_rank(rank, width: int):
    """``[B, L]`` one-shot ``rank`` right-padded with -1 (no position) to ``width`` columns."""
    import torch.nn.functional as F

    return F.pad(rank, (0, width - rank.shape[1]), value=-1)
