"""Forward passes over many rows: each distinct row once, length-bucketed by a token budget.

Every part of the core that runs a classifier on many token rows without gradients (the masked inputs of
the evaluation, the representations the OOD statistics read, attacks scoring candidate inputs) goes through
:func:`row_outputs` or, to reuse rows across calls, a :class:`RowForwards`. Given ``N`` rows it

1. **de-duplicates**: rows with the same content (ids, attention mask and token type ids up to the row's
   last attended position) are computed once (in a masking evaluation many coincide: equal ``k`` on short
   examples, every ``k = 0`` row, comprehensiveness at ``k = n`` and sufficiency at ``k = 0``, ...);
2. **sorts the distinct rows by real length** and cuts them into chunks of at most ``token_budget`` padded
   tokens (rows x padded length) where padding costs least (:func:`length_chunks`), so memory stays bounded;
3. runs each chunk, trimmed to its longest row, under ``torch.inference_mode``, optionally capturing
   :class:`~itermask.core.representations.Representations`;
4. **scatters** the outputs back: row ``i`` of the result belongs to row ``i`` of the input.

A row's outputs do not depend on the other rows of its chunk (the model is in eval mode), so results agree
with a plain batched forward up to float rounding (different padded shapes reorder a few sums: about 1e-7).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor

from itermask.core.evaluation_settings import DEFAULT_TOKEN_BUDGET
from itermask.core.representations import Representations, capture_representations
from itermask.core.tokens import TokenBatch, class_logits, row_lengths

__all__ = [
    "DEFAULT_TOKEN_BUDGET",
    "RowOutputs",
    "ForwardStats",
    "RowForwards",
    "row_outputs",
    "row_lengths",
    "length_chunks",
    "FORWARD_OVERHEAD_TOKENS",
    "forward_overhead_tokens",
    "positive_token_budget",
]


#: what one more forward costs, in tokens, by device type, when :func:`length_chunks` chooses where to cut: on
#: a CPU a few milliseconds of dispatch (MiniLM, one thread: a 10-token forward costs about 30 tokens' time),
#: on a GPU the launch of every kernel. Rough figures: they only trade padding for forwards (CPU, the 64
#: shipped examples: 18 forwards padding 3.5 % with 64, 34 forwards padding 0.4 % with 16).
FORWARD_OVERHEAD_TOKENS = {"cpu": 64, "cuda": 2048}
#: a call with a backward (a saliency call, its attribution set-up) costs about this many plain forwards
BACKWARD_OVERHEAD = 4


@dataclass
class RowOutputs:
    """Outputs for ``N`` rows, row ``i`` for input row ``i``.

    Attributes:
        logits: ``[N, C]`` float32 logits (unnormalised log-probabilities).
        representations: ``[N, ...]`` :class:`Representations`, or ``None`` unless requested.
    """

    logits: Tensor
    representations: Representations | None = None

    def __len__(self) -> int:
        return self.logits.shape[0]

    def index(self, rows: Tensor | slice) -> RowOutputs:
        """The outputs of ``rows`` (index tensor, boolean mask or slice)."""
        reps = None if self.representations is None else self.representations.map(lambda t: t[rows])
        return RowOutputs(self.logits[rows], reps)


@dataclass
class ForwardStats:
    """What a :class:`RowForwards` ran, summed over its calls.

    Attributes:
        rows: rows asked for.
        computed: distinct rows run through the model (the rest were duplicates or remembered).
        forwards: model calls (chunks).
        real_tokens: attended positions of the computed rows (up to each row's last attended position).
        padded_tokens: positions the model processed (chunk rows x chunk length).
    """

    rows: int = 0
    computed: int = 0
    forwards: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0

    @property
    def padding_ratio(self) -> float:
        """``padded_tokens / real_tokens`` (1.0 = no padding); ``nan`` before any computation."""
        return self.padded_tokens / self.real_tokens if self.real_tokens else float("nan")


def positive_token_budget(token_budget: int) -> int:
    """``token_budget`` as an ``int``.

    Raises:
        ValueError: if it is not positive.
    """
    if token_budget <= 0:
        raise ValueError(f"the token budget must be positive, got {token_budget}")
    return int(token_budget)


def forward_overhead_tokens(device: torch.device) -> int:
    """:data:`FORWARD_OVERHEAD_TOKENS` of ``device``'s type (an accelerator not listed counts as a GPU)."""
    return FORWARD_OVERHEAD_TOKENS.get(torch.device(device).type, FORWARD_OVERHEAD_TOKENS["cuda"])


def length_chunks(lengths: Tensor, token_budget: int, forward_overhead: int | None = None) -> list[Tensor]:
    """Cut rows (``[N]`` ``lengths`` in tokens) into chunks of similar length that each fit ``rows x (its longest
    row) <= token_budget`` (a row longer than the budget goes alone), choosing the cuts that minimise the padded
    tokens plus ``forward_overhead`` tokens per chunk (``None``: :data:`FORWARD_OVERHEAD_TOKENS` of the device).

    Rows are sorted by length (longest first, ties by position) and grouped by equal length. A group with
    more rows than fit the budget first gives full chunks of its own; the rest of the groups are cut into
    runs of consecutive lengths by dynamic programming (``O(G^2)`` in the number ``G`` of distinct lengths):
    a run costs ``rows x (its longest row) + forward_overhead``. With a small overhead (CPU) nearly every
    length gets its own forward, so nothing is padded; with a large one (GPU) runs merge into fewer, fuller
    chunks.

    Returns:
        index tensors ``[n_c]`` (on the device of ``lengths``) that together hold every row once, longest
        chunks first.

    Raises:
        ValueError: if ``token_budget`` is not positive.
    """
    positive_token_budget(token_budget)
    if forward_overhead is None:
        forward_overhead = forward_overhead_tokens(lengths.device)
    order = torch.sort(lengths, descending=True, stable=True).indices
    values, counts = torch.unique_consecutive(lengths[order], return_counts=True)
    chunks, rest, start = [], [], 0  # rest: (length, first, end) of each group's rows not in a full chunk
    for length, count in zip(values.tolist(), counts.tolist()):
        fit = max(1, token_budget // max(length, 1))
        full = count - count % fit
        chunks.extend(order[i : i + fit] for i in range(start, start + full, fit))
        if full < count:
            rest.append((length, start + full, start + count))
        start += count
    # best[h]: least cost of the first h leftover groups; cut[h]: where the last run starts
    best, cut = [0] + [None] * len(rest), [0] * (len(rest) + 1)
    for h in range(1, len(rest) + 1):
        rows = 0
        for g in range(h - 1, -1, -1):
            rows += rest[g][2] - rest[g][1]
            if rows * max(rest[g][0], 1) > token_budget:
                break
            cost = best[g] + rows * rest[g][0] + forward_overhead
            if best[h] is None or cost < best[h]:
                best[h], cut[h] = cost, g
    runs, h = [], len(rest)
    while h > 0:
        runs.append(torch.cat([order[first:end] for _, first, end in rest[cut[h] : h]]))
        h = cut[h]
    return sorted(chunks + runs, key=lambda c: -int(lengths[c[0]]))


class RowForwards:
    """Runs token rows through ``model`` (a classifier in eval mode) without gradients, as the module docstring
    says: each distinct row once (here and in every earlier call), with the outputs scattered back. One object
    serves one model and one set of inputs (say one evaluation batch): it keeps every row it computed, so drop
    it when done. ``stats`` counts what ran.

    Args:
        token_budget: padded tokens (rows x padded length) per forward.
        representations: also capture :class:`Representations` (:func:`capture_representations`):
            ``True``/``"all"`` (every hidden layer too) or ``"final"`` (the final linear layer's input only).
        deduplicate: compute identical rows once (``False``: every row is computed, still length-bucketed).
        forward_overhead: see :func:`length_chunks`.

    Raises:
        ValueError: if ``token_budget`` is not positive; on the first call with ``representations``, if the
            classifier's final linear layer cannot be found.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        representations: bool | str = False,
        deduplicate: bool = True,
        forward_overhead: int | None = None,
    ) -> None:
        self.model = model
        self.token_budget = positive_token_budget(token_budget)
        self.collect = representations
        self.deduplicate = deduplicate
        self.forward_overhead = forward_overhead
        self.stats = ForwardStats()
        self._known: dict[bytes, int] = {}
        self._outputs: list[RowOutputs] = []  # computed rows, in order of computation
        self._n_known = 0

    def __call__(self, batch: TokenBatch) -> RowOutputs:
        """Outputs ``[N, ...]`` for the ``N`` rows of ``batch`` (any length ``L``, any device).

        Returns:
            :class:`RowOutputs` with ``representations`` when the object collects them.
        """
        lengths = row_lengths(batch)
        slots, new_rows = self._slots(batch, lengths)
        if len(new_rows):
            self._compute(batch.index(new_rows), lengths[new_rows])
        self.stats.rows += len(batch)
        known = self._joined()
        return known.index(torch.as_tensor(slots, dtype=torch.long, device=known.logits.device))

    def _slots(self, batch: TokenBatch, lengths: Tensor) -> tuple[list[int], Tensor]:
        """For each row its slot among the computed rows (new rows get the next slots), and the rows to
        compute (``[U]`` indices, in slot order)."""
        parts = [batch.input_ids, batch.attention_mask]
        if batch.token_type_ids is not None:
            parts.append(batch.token_type_ids)
        content = torch.stack(parts, dim=1).cpu().numpy()  # [N, 2 or 3, L]
        slots, new_rows = [], []
        for row, n in enumerate(lengths.tolist()):
            key = content[row, :, :n].tobytes() if self.deduplicate else None
            slot = self._known.get(key) if key is not None else None
            if slot is None:
                slot = self._n_known + len(new_rows)
                new_rows.append(row)
                if key is not None:
                    self._known[key] = slot
            slots.append(slot)
        return slots, torch.as_tensor(new_rows, dtype=torch.long, device=batch.device)

    def _compute(self, rows: TokenBatch, lengths: Tensor) -> None:
        """Run ``rows`` (all new) in length chunks and append their outputs, in row order."""
        chunks = length_chunks(lengths, self.token_budget, self.forward_overhead)
        logits, records = [], []
        with torch.inference_mode():
            hidden = self.collect != "final"
            capture = capture_representations(self.model, hidden_states=hidden) if self.collect else nullcontext()
            with capture as captured:
                for chunk in chunks:
                    part = rows.index(chunk).trim()
                    logits.append(class_logits(self.model, part).float())
                    self.stats.padded_tokens += part.input_ids.numel()
                records = list(captured) if captured is not None else []
        self.stats.forwards += len(chunks)
        self.stats.computed += len(rows)
        self.stats.real_tokens += int(lengths.sum())
        order = torch.cat(chunks)
        place = torch.empty_like(order)
        place[order] = torch.arange(len(order), device=order.device)  # row -> position in chunk order
        out = RowOutputs(torch.cat(logits)[place].clone())
        if self.collect:
            out.representations = Representations.concat(records).map(lambda t: t[place].clone())
        self._outputs.append(out)
        self._n_known += len(rows)

    def _joined(self) -> RowOutputs:
        if len(self._outputs) > 1:  # keep one tensor per field: later look-ups index it directly
            logits = torch.cat([o.logits for o in self._outputs])
            reps = None
            if self.collect:
                # every row output carries representations when they are collected
                parts = cast("list[Representations]", [o.representations for o in self._outputs])
                reps = Representations.concat(parts)
            self._outputs = [RowOutputs(logits, reps)]
        if not self._outputs:
            return RowOutputs(torch.empty(0, 0))
        return self._outputs[0]


def row_outputs(
    model: torch.nn.Module,
    batch: TokenBatch,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    representations: bool | str = False,
    deduplicate: bool = True,
    forward_overhead: int | None = None,
) -> RowOutputs:
    """Logits ``[N, C]`` (and :class:`Representations` ``[N, ...]`` if ``representations``) of every row of
    ``batch``: one call of a fresh :class:`RowForwards`; see it for the arguments and errors."""
    return RowForwards(model, token_budget, representations, deduplicate, forward_overhead)(batch)
