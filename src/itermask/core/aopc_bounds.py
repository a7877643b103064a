"""The AOPC bounds of Normalized AOPC: the largest and smallest AOPC that any ordering of an example's features
reaches on a given model, and NAOPC, an AOPC score placed between them.

Edin, Motzfeldt, Christensen, Ruotsalo, Maaløe, Maistro, "Normalized AOPC: Fixing Misleading Faithfulness
Metrics for Feature Attribution Explainability", ACL 2025 (arXiv 2408.08137), Sec. 3 (Eq. 2-4); the authors'
code is ``JoakimEdin/naopc`` (MIT): exact limits in ``src/evaluation/naopc_exact/calculate_aopc_limits.py``, by
enumerating every ordering, and the beam search of their PyPI package ``aopc`` (``methods.py``).

Conventions. An example has ``n`` features (tokens or words), numbered ``0..n-1``; a masked set is a bitmask
(bit ``i`` set: feature ``i`` masked). The *drop* of a set ``S`` is ``f(x) - f(x with S masked)``, ``f`` the
target quantity (probability or logit of the explained class). An ordering ``pi`` masks its features one by
one; its AOPC is ``sum_k w[k] * drop(S_k)``, ``S_k`` its first ``k`` features. The authors' convention
(:func:`authors_weights`) is ``w[k] = 1/n`` for ``k = 1..n`` (no ``k = 0`` term), for comprehensiveness (most
important first) and sufficiency (least important first, the same functional along the ascending ranking, so
the same bounds; there the lower bound is the best value). Other weights give the bounds of an AOPC over a
grid of masking steps (``w[k]``: the share of the grid's steps that mask ``k`` features).

The bounds are computed from *outputs*: the target quantity of an example with a set of its features masked,
asked for through a :class:`SubsetOutputs` (a model behind the masked-row engine, or :class:`TableOutputs` of
precomputed values), many sets per call.

* :func:`exact_bounds` / :func:`exact_aopc_bounds`: dynamic programming over the ``2^n`` subsets instead of the
  ``n!`` orderings: the best value of an ordering that ends on ``S`` is ``w[|S|] * drop(S)`` plus the best over
  ``S`` without one of its features, ``O(n 2^n)`` operations on the ``2^n`` outputs.
* :func:`beam_bounds`: the authors' beam search (their package's ``approx_pertubation_solver_callable``): keep
  the ``beam_size`` best partial orderings, extend each by every remaining feature, score by the cumulative
  (weighted) drop; descending for the upper bound, ascending for the lower. Unlike the package, extensions that
  reach the same masked set are merged, keeping the best, so a beam never holds one set twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np

__all__ = [
    "AOPCBounds",
    "EXACT_LIMIT",
    "FLAT_SPAN",
    "authors_weights",
    "exact_aopc_bounds",
    "SubsetOutputs",
    "TableOutputs",
    "exact_bounds",
    "beam_bounds",
    "aopc_bounds",
    "bounded_subset",
    "SUBSET_RULE",
    "naopc",
]

#: the most features an exact search takes: its ``2^n`` outputs and tables (about 40 bytes a subset) must fit
#: in memory, 2^24 subsets is 640 MiB; the model forwards cost far more long before (``naopc.exact_max_features``)
EXACT_LIMIT = 24
#: which examples ``naopc.max_examples`` bounds (:func:`bounded_subset`)
SUBSET_RULE = "the examples with the smallest sha256('naopc:<example_id>')"
#: bounds closer than this (in the quantity's unit) are flat: the model's float32 outputs round at about 6e-8
#: near a probability of 1, so a smaller span is rounding noise, and NAOPC over it would be noise too
FLAT_SPAN = 1e-6


class AOPCBounds(NamedTuple):
    """The AOPC bounds of one example.

    Attributes:
        upper: the largest AOPC of any ordering (unit of the target quantity).
        lower: the smallest.
        upper_order: an ordering that reaches ``upper``: feature indices (``0..n-1``), masked first first.
        lower_order: an ordering that reaches ``lower``.
    """

    upper: float
    lower: float
    upper_order: tuple[int, ...]
    lower_order: tuple[int, ...]


def authors_weights(n: int) -> np.ndarray:
    """``[n + 1]`` float64: the authors' AOPC weights, ``0`` at ``k = 0`` and ``1/n`` for ``k = 1..n``.

    Raises:
        ValueError: if ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"an example needs at least one feature for AOPC bounds, got n={n}")
    weights = np.full(n + 1, 1.0 / n)
    weights[0] = 0.0
    return weights


def _checked_weights(weights, n: int) -> np.ndarray:
    """``weights`` as a ``[n + 1]`` float64 array (``None``: :func:`authors_weights`).

    Raises:
        ValueError: for another length or a non-finite weight."""
    if weights is None:
        return authors_weights(n)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n + 1,) or not np.isfinite(w).all():
        raise ValueError(f"AOPC weights must be {n + 1} finite numbers (k = 0..{n}), got shape {w.shape}")
    return w


def _features(length: int) -> int:
    """``n`` for a table of ``length = 2^n`` outputs.

    Raises:
        ValueError: if ``length`` is not a power of two or ``n`` exceeds :data:`EXACT_LIMIT`."""
    n = length.bit_length() - 1
    if length < 2 or 1 << n != length:
        raise ValueError(f"exact AOPC bounds need 2^n outputs (one per masked subset, n >= 1), got {length}")
    if n > EXACT_LIMIT:
        raise ValueError(f"an exact search over {n} features needs 2^{n} outputs; at most {EXACT_LIMIT} fit")
    return n


def exact_aopc_bounds(outputs, weights=None) -> AOPCBounds:
    """The exact AOPC bounds of one example from the outputs of every masked subset of its ``n`` features.

    Args:
        outputs: 1-D, length ``2^n``: entry ``m`` is the target quantity with the features of bitmask ``m``
            masked (bit ``i`` set = feature ``i`` masked); entry ``0`` is the clean input.
        weights: ``[n + 1]`` weight of the drop at ``k`` masked features; ``None``: the authors' convention,
            the mean over ``k = 1..n`` (:func:`authors_weights`).

    Returns:
        ``(upper, lower, upper_order, lower_order)`` (:class:`AOPCBounds`); ties go to the lower feature index.

    Raises:
        ValueError: for outputs that are not a 1-D real array, a length that is not ``2^n`` (``1 <= n <=``
            :data:`EXACT_LIMIT`), a NaN or infinite output, or weights of another length or not finite.
    """
    array = np.asarray(outputs)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
        raise ValueError(f"exact AOPC bounds need a 1-D array of real outputs, got {array.ndim}-D {array.dtype}")
    values = array.astype(np.float64)
    n = _features(len(values))
    if not np.isfinite(values).all():
        raise ValueError("exact AOPC bounds: an output is NaN or infinite")
    w = _checked_weights(weights, n)
    masks = np.arange(1 << n, dtype=np.int64)
    size = np.bitwise_count(masks)
    gain = w[size] * (values[0] - values)  # what ending a prefix on each set adds
    upper, upper_last = _best_prefixes(gain, n, size, np.greater)
    lower, lower_last = _best_prefixes(gain, n, size, np.less)
    full = (1 << n) - 1
    return AOPCBounds(float(upper[full]), float(lower[full]), _order(upper_last, full), _order(lower_last, full))


def _best_prefixes(gain: np.ndarray, n: int, size: np.ndarray, better) -> tuple[np.ndarray, np.ndarray]:
    """``(best, last)`` over all ``2^n`` sets: ``best[S]``, the best (by ``better``: ``np.greater`` for the
    largest) sum of ``gain`` over the prefixes of an ordering of ``S``, and ``last[S]``, the feature such an
    ordering masks last. Sets are taken by size, so every ``S`` minus one feature is done before ``S``."""
    best = np.zeros_like(gain)
    last = np.full(len(gain), -1, dtype=np.int8)
    for k in range(1, n + 1):
        sets = np.flatnonzero(size == k)
        top = np.full(len(sets), np.nan)
        for i in range(n):
            has = (sets >> i) & 1 == 1
            candidate = np.where(has, best[sets & ~(1 << i)], np.nan)
            take = has & (np.isnan(top) | better(candidate, top))
            top = np.where(take, candidate, top)
            last[sets[take]] = i
        best[sets] = top + gain[sets]
    return best, last


def _order(last: np.ndarray, full: int) -> tuple[int, ...]:
    """The ordering of ``full`` that :func:`_best_prefixes` found, masked first first."""
    order, subset = [], full
    while subset:
        feature = int(last[subset])
        order.append(feature)
        subset &= ~(1 << feature)
    return tuple(reversed(order))


class SubsetOutputs(Protocol):
    """Where the bounds get their outputs: ``outputs(examples, masks) -> values``.

    Args:
        examples: ``[R]`` int64, the example of each request (an index into the examples the bounds are for).
        masks: ``[R, F]`` bool, the features masked (``F`` at least that example's ``n``; the rest ``False``).

    Returns:
        ``[R]`` float64, the target quantity of each example with those features masked.
    """

    def __call__(self, examples: np.ndarray, masks: np.ndarray) -> np.ndarray: ...


class TableOutputs:
    """:class:`SubsetOutputs` over precomputed outputs (e.g. the authors' published ``permutation_outputs``):
    ``tables[e]`` has ``2^n_e`` entries, laid out as for :func:`exact_aopc_bounds`.

    Raises:
        ValueError: (on a call) for a mask with a feature beyond that example's ``n``.
    """

    def __init__(self, tables: Sequence) -> None:
        self.tables = [np.asarray(t, dtype=np.float64).reshape(-1) for t in tables]
        self.calls = 0  # how many times it was asked (each call: one batch of forwards for a model)

    def __call__(self, examples: np.ndarray, masks: np.ndarray) -> np.ndarray:
        self.calls += 1
        masks = np.asarray(masks, dtype=bool)
        bits = (masks.astype(object) * np.array([1 << i for i in range(masks.shape[1])], dtype=object)).sum(axis=1)
        out = np.empty(len(examples))
        for r, (example, bitmask) in enumerate(zip(np.asarray(examples).tolist(), bits.tolist())):
            table = self.tables[example]
            if bitmask >= len(table):
                raise ValueError(f"example {example} has {len(table).bit_length() - 1} features; a mask goes beyond")
            out[r] = table[bitmask]
        return out


def _all_subsets(n: int, width: int) -> np.ndarray:
    """``[2^n, width]`` bool: row ``m`` holds the bits of ``m`` (feature ``i`` in column ``i``)."""
    masks = np.arange(1 << n, dtype=np.int64)[:, None]
    return np.concatenate([(masks >> np.arange(n)) & 1 == 1, np.zeros((1 << n, width - n), dtype=bool)], axis=1)


def exact_bounds(outputs: SubsetOutputs, n_features: Sequence[int], weights=None) -> list[AOPCBounds]:
    """:func:`exact_aopc_bounds` of every example: all ``2^n`` subsets of every example asked for in one call of
    ``outputs``.

    Args:
        outputs: see :class:`SubsetOutputs`.
        n_features: ``n`` of each example.
        weights: ``None`` (the authors' convention) or one ``[n_e + 1]`` array per example.

    Raises:
        ValueError: for an example with ``n < 1`` or ``n >`` :data:`EXACT_LIMIT` (before any output is asked for).
    """
    sizes = [int(n) for n in n_features]
    for n in sizes:
        _features(1 << n if 1 <= n <= EXACT_LIMIT + 1 else 0)
    if not sizes:
        return []
    width = max(sizes)
    examples = np.concatenate([np.full(1 << n, e, dtype=np.int64) for e, n in enumerate(sizes)])
    masks = np.concatenate([_all_subsets(n, width) for n in sizes])
    values = np.asarray(outputs(examples, masks), dtype=np.float64)
    starts = np.cumsum([0] + [1 << n for n in sizes])
    per = [None] * len(sizes) if weights is None else list(weights)
    return [exact_aopc_bounds(values[a:b], w) for a, b, w in zip(starts[:-1], starts[1:], per)]


class _Beam(NamedTuple):
    """One partial ordering of a beam: its masked set (bitmask), its score so far, its ordering."""

    subset: int
    score: float
    order: tuple[int, ...]


def beam_bounds(
    outputs: SubsetOutputs, n_features: Sequence[int], beam_size: int = 5, weights=None, progress=None
) -> list[AOPCBounds]:
    """Beam-search AOPC bounds of every example (see the module docstring): at each masking step ``k`` every
    beam of every example (both directions) is extended by every remaining feature, and the new sets of all
    examples are asked for in one call of ``outputs``; extensions reaching the same set are merged (the best
    score kept; among equals the first proposed); the ``beam_size`` best are kept (stable order: proposals in beam
    order, features ascending). The bounds are the final scores: a lower bound on the true upper bound, and an
    upper bound on the true lower one.

    Args:
        outputs: see :class:`SubsetOutputs`.
        n_features: ``n`` of each example.
        beam_size: partial orderings kept per direction (the authors' main results use 5).
        weights: ``None`` (the authors' convention) or one ``[n_e + 1]`` array per example.
        progress: called as ``progress(k, steps)`` after each masking step ``k`` of ``steps`` (the largest ``n``),
            e.g. to advance a progress bar; ``None``: nothing.

    Raises:
        ValueError: for ``beam_size < 1`` or an example with ``n < 1``.
    """
    if int(beam_size) != beam_size or beam_size < 1:
        raise ValueError(f"naopc.beam_size must be a whole number of at least 1, got {beam_size}")
    sizes = [int(n) for n in n_features]
    ws = [_checked_weights(None if weights is None else weights[e], n) for e, n in enumerate(sizes)]
    if not sizes:
        return []
    width = max(sizes)
    clean = np.asarray(outputs(np.arange(len(sizes)), np.zeros((len(sizes), width), dtype=bool)), dtype=np.float64)
    beams = [{+1: [_Beam(0, 0.0, ())], -1: [_Beam(0, 0.0, ())]} for _ in sizes]
    for k in range(1, width + 1):
        active = [e for e, n in enumerate(sizes) if k <= n]
        proposals = {e: {d: _extensions(beams[e][d], sizes[e]) for d in (1, -1)} for e in active}
        requests = sorted({(e, s) for e in active for d in (1, -1) for s, _, _ in proposals[e][d]})
        masks = _bit_rows([s for _, s in requests], width)
        values = np.asarray(outputs(np.array([e for e, _ in requests], dtype=np.int64), masks), dtype=np.float64)
        drop = {request: clean[request[0]] - v for request, v in zip(requests, values.tolist())}
        for e in active:
            for d in (1, -1):
                scored = [_Beam(s, b.score + ws[e][k] * drop[e, s], b.order + (i,)) for s, b, i in proposals[e][d]]
                beams[e][d] = _keep(scored, d, int(beam_size))
        if progress is not None:
            progress(k, width)
    return [AOPCBounds(b[1][0].score, b[-1][0].score, b[1][0].order, b[-1][0].order) for b in beams]


def _bit_rows(subsets: list[int], width: int) -> np.ndarray:
    """``[len(subsets), width]`` bool: the bits of each bitmask (feature ``i`` in column ``i``)."""
    size = (width + 7) // 8
    packed = np.frombuffer(b"".join(s.to_bytes(size, "little") for s in subsets), dtype=np.uint8)
    return np.unpackbits(packed.reshape(len(subsets), size), axis=1, bitorder="little")[:, :width].astype(bool)


def _extensions(beam: list[_Beam], n: int) -> list[tuple[int, _Beam, int]]:
    """``(new set, beam it extends, feature added)`` for every beam and every feature it has not masked."""
    return [(b.subset | 1 << i, b, i) for b in beam for i in range(n) if not b.subset >> i & 1]


def _keep(scored: list[_Beam], direction: int, size: int) -> list[_Beam]:
    """The ``size`` best of ``scored`` (highest for ``direction`` 1, lowest for -1), one per masked set."""
    merged: dict[int, _Beam] = {}
    for beam in scored:
        held = merged.get(beam.subset)
        if held is None or direction * beam.score > direction * held.score:
            merged[beam.subset] = beam
    return sorted(merged.values(), key=lambda b: -direction * b.score)[:size]


def aopc_bounds(
    outputs: SubsetOutputs,
    n_features: Sequence[int],
    exact_max_features: int = 10,
    beam_size: int = 5,
    weights=None,
    progress=None,
) -> list[tuple[AOPCBounds, str]]:
    """The bounds of every example with the method its size allows: ``(bounds, "exact")`` for ``n <=
    exact_max_features`` (:func:`exact_bounds`), ``(bounds, "beam")`` beyond (:func:`beam_bounds`, which calls
    ``progress`` after each step).

    Raises:
        ValueError: for ``exact_max_features`` above :data:`EXACT_LIMIT` or below 0, or see the two searches.
    """
    if not 0 <= exact_max_features <= EXACT_LIMIT:
        raise ValueError(
            f"naopc.exact_max_features={exact_max_features}: an exact search takes 2^n outputs, at most "
            f"{EXACT_LIMIT} features fit in memory (and each feature doubles the forwards)"
        )
    sizes = [int(n) for n in n_features]
    exact = [e for e, n in enumerate(sizes) if n <= exact_max_features]
    beam = [e for e, n in enumerate(sizes) if n > exact_max_features]
    found: dict[int, tuple[AOPCBounds, str]] = {}
    for chosen, search, label in ((exact, exact_bounds, "exact"), (beam, _beam_search(beam_size, progress), "beam")):
        if not chosen:
            continue
        part = search(_Subset(outputs, chosen), [sizes[e] for e in chosen], _pick(weights, chosen))
        found.update({e: (b, label) for e, b in zip(chosen, part)})
    return [found[e] for e in range(len(sizes))]


def _beam_search(beam_size: int, progress=None):
    if int(beam_size) != beam_size or beam_size < 1:
        raise ValueError(f"naopc.beam_size must be a whole number of at least 1, got {beam_size}")
    return lambda outputs, sizes, weights: beam_bounds(outputs, sizes, beam_size, weights, progress)


def _pick(weights, chosen: list[int]):
    return None if weights is None else [weights[e] for e in chosen]


class _Subset:
    """The outputs of some examples of a :class:`SubsetOutputs`, renumbered ``0..len(chosen)-1``."""

    def __init__(self, outputs: SubsetOutputs, chosen: list[int]) -> None:
        self.outputs, self.chosen = outputs, np.asarray(chosen, dtype=np.int64)

    def __call__(self, examples: np.ndarray, masks: np.ndarray) -> np.ndarray:
        return self.outputs(self.chosen[np.asarray(examples, dtype=np.int64)], masks)


def bounded_subset(example_ids: np.ndarray, max_examples: int | None) -> np.ndarray:
    """``[B]`` bool: which of the ``[B]`` ``example_ids`` get AOPC bounds under ``naopc.max_examples``: all
    (``None``, or at least ``B``), else the ``max_examples`` whose ``sha256("naopc:<id>")`` is smallest
    (:data:`SUBSET_RULE`). The choice depends on the ids alone: not on their order (the evaluation subset is
    sorted by length, so "the first k" would be the shortest), the seed or the method; and a larger
    ``max_examples`` keeps every example of a smaller one."""
    import hashlib

    ids = [int(i) for i in np.asarray(example_ids).reshape(-1)]
    if max_examples is None or max_examples >= len(ids):
        return np.ones(len(ids), dtype=bool)
    keys = [hashlib.sha256(f"naopc:{i}".encode()).digest() for i in ids]
    chosen = sorted(range(len(ids)), key=keys.__getitem__)[:max_examples]
    out = np.zeros(len(ids), dtype=bool)
    out[chosen] = True
    return out


def naopc(aopc, upper, lower) -> np.ndarray:
    """Normalized AOPC, ``(aopc - lower) / (upper - lower)`` elementwise (Edin et al. 2025, Eq. 4): 1 at the
    upper bound, 0 at the lower (for comprehensiveness 1 is best; for sufficiency 0 is). ``NaN`` where ``upper ==
    lower`` (every ordering scores alike: nothing to normalise by), or where ``upper - lower`` is below
    :data:`FLAT_SPAN`, float32 rounding of the model's outputs (one ulp of a probability of 1 is 6e-8), not a
    span; callers count and flag those examples."""
    aopc, upper, lower = (np.asarray(v, dtype=np.float64) for v in (aopc, upper, lower))
    span = upper - lower
    usable = span > FLAT_SPAN
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(usable, (aopc - lower) / np.where(usable, span, 1.0), np.nan)
