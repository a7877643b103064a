"""The ``naopc`` analysis: Normalized AOPC (Edin, Motzfeldt, Christensen, Ruotsalo, Maaløe, Maistro, ACL 2025,
arXiv 2408.08137): each example's AOPC placed between the smallest and largest AOPC any ordering of its features
reaches on this model, ``NAOPC = (AOPC - L) / (U - L)`` (their Eq. 4).

Wiring only: the bounds are :func:`itermask.core.aopc_bounds.aopc_bounds` (exact up to ``exact_max_features``,
beam search beyond), their outputs :class:`itermask.core.subset_outputs.ModelOutputs` (every masked row through
the masked-row engine), the scores :mod:`itermask.core.naopc_scores`. The bounds depend on the checkpoint, the
examples, the masking strategy, the features, the quantity and the target, not on the explanation: they are
computed once per checkpoint in the derived-value store (:meth:`EvaluationContext.reuse`), so a sweep over
saliency methods pays once. Configured by the ``naopc`` node (``conf/naopc/<name>.yaml``; ``none`` by default).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from itermask.analyses.base import (
    Analysis,
    AnalysisInputs,
    AnalysisOutput,
    Artifacts,
    EvaluatedCurves,
    EvaluationContext,
    checked_max_examples,
    eval_mode,
    steps_bar,
)
from itermask.analyses.clean_rows import clean_batch, pad_rank
from itermask.core.aopc_bounds import FLAT_SPAN, SUBSET_RULE, bounded_subset
from itermask.formatting import number
from itermask.storage.per_example import FOLDER, write_per_example

if TYPE_CHECKING:
    import torch

    from itermask.core.curves import MaskingCurves

log = logging.getLogger(__name__)

__all__ = [
    "NAOPCAnalysis",
    "BOUNDS_KIND",
    "CONVENTION",
    "COVERAGE",
    "grid_weight_sets",
]

#: the kind of the stored bounds (storage.derived)
BOUNDS_KIND = "naopc_bounds"
#: the AOPC the bounds are for, by default: the authors' (Edin et al. 2025, Eq. 1-3)
CONVENTION = "edin2025: mean over k = 1..n of clean - masked (no k = 0 term)"
#: the report rows of the authors' convention and what a better explanation does to them
AUTHORS = {
    "naopc_comprehensiveness": "NAOPC comprehensiveness (higher is better)",
    "naopc_sufficiency": "NAOPC sufficiency (lower is better)",
    "aopc_comprehensiveness": "AOPC comprehensiveness, authors' (higher is better)",
    "aopc_sufficiency": "AOPC sufficiency, authors' (lower is better)",
}
#: the report row of the share of evaluated examples with AOPC bounds (1: all; below: ``naopc.max_examples``)
COVERAGE = "NAOPC: share of examples with bounds"
#: why the recursive schedule has no authors' NAOPC
RECURSIVE = "the recursive schedule re-ranks after every step: no fixed ranking to score in the authors' convention"


class NAOPCAnalysis(Analysis):
    """Normalized AOPC of every evaluated explanation (see the module docstring).

    Per example, for the evaluated examples and their target class: the bounds ``U``, ``L`` of the authors'
    AOPC (the mean over ``k = 1..n`` of the drop after masking ``k`` features; the same bounds serve
    sufficiency, read along the ascending order, where ``L`` is the best value); the authors' AOPC of each
    explanation's one-shot ranking, comprehensiveness (top ``k`` masked) and sufficiency (bottom ``k``
    masked); their NAOPC; and the normalisation of itermask's own ``aopc_*`` / ``aopc_full_*`` scores by bounds
    searched with the grid's weights (:func:`~itermask.core.naopc_scores.grid_weights`). Examples with ``U == L``
    get NaN, are counted (``n_flat``) and named (``flat_example_ids``); means are over the others.

    Args:
        exact_max_features: examples with at most this many features get exact bounds (``2^n`` masked rows
            each), longer ones beam-search bounds; ``0..``:data:`~itermask.core.aopc_bounds.EXACT_LIMIT`.
        beam_size: the beam search's width (at least 1; the authors' main results use 5).
        max_examples: bound only this many of the evaluated examples (:func:`bounded_subset`: a fixed
            pseudo-random choice by example id, the same in every seed, method and job), ``None``: every one.
            The beam bounds cost about ``5 n^2`` forwards an example (25-30 s for 20-25 tokens on 2 CPU cores),
            the rest of a job a few: a documented subset keeps a CPU preset in its time. The other examples get
            NaN bounds and NaN NAOPC (the authors' AOPC is still computed for every example), are counted
            (``n_unbounded``) and named in the console, the report (:meth:`headline_lines`) and
            ``bounds["subset"]``.
        enabled: read by the settings stage.

    Raises:
        ValueError: (at construction, in the settings stage, before any data or model work) an
            ``exact_max_features`` outside ``0..EXACT_LIMIT`` or not a whole number, a ``beam_size`` below 1 or
            not a whole number, a ``max_examples`` below 1 or not a whole number.
    """

    name = "naopc"

    def __init__(
        self, exact_max_features: int = 10, beam_size: int = 5, max_examples: int | None = None, enabled: bool = True
    ) -> None:
        from itermask.core.aopc_bounds import EXACT_LIMIT

        if not _whole(exact_max_features) or not 0 <= exact_max_features <= EXACT_LIMIT:
            raise ValueError(
                f"naopc.exact_max_features={exact_max_features!r}: choose a whole number in 0..{EXACT_LIMIT} (an "
                f"exact search masks all 2^n subsets of an example's n features; 2^{EXACT_LIMIT} is the most that fits)"
            )
        if not _whole(beam_size) or beam_size < 1:
            raise ValueError(f"naopc.beam_size={beam_size!r}: the beam search's width must be a whole number >= 1")
        self.exact_max_features, self.beam_size = int(exact_max_features), int(beam_size)
        self.max_examples = checked_max_examples(max_examples, "naopc.max_examples")
        self._setups: dict[tuple, _Setup] = {}

    def describe(self) -> dict:
        return {
            "exact_max_features": self.exact_max_features,
            "beam_size": self.beam_size,
            "max_examples": self.max_examples,
            "convention": CONVENTION,
        }

    def run(self, inputs: AnalysisInputs, context: EvaluationContext, curves: EvaluatedCurves) -> AnalysisOutput:
        start, e = time.time(), inputs.evaluation
        setup = self._setup(inputs, context, next(iter(curves[curves.method].values())))
        hooked = {  # the rank is the same in every schedule: the one-shot ranking of the clean input
            method: self.explanation_measures(inputs, context, next(iter(by_schedule.values())))
            for method, by_schedule in curves.items()
        }
        bins = e.aopc_bins if e.steps == "fraction" else None
        per_example = _per_example(curves, hooked, setup.bounds, e.quantity, bins)
        section = self._section(curves, setup.bounds, per_example, e.quantity)
        stats = setup.model_outputs.forwards.stats
        section["rows"] = {"asked": stats.rows, "computed": stats.computed}
        section["seconds"] = time.time() - start
        artifacts = _artifacts(section)
        if inputs.output_dir is not None:
            artifacts.files = _write_tables(inputs.folder, per_example, setup.bounds)
        return AnalysisOutput({"naopc": section}, artifacts)

    def explanation_measures(
        self, inputs: AnalysisInputs, context: EvaluationContext, curves: MaskingCurves
    ) -> dict[str, torch.Tensor]:
        """``aopc_authors_<direction>_<q>`` (the authors' AOPC of ``curves``' one-shot ranking, the quantity's
        unit) and ``naopc_<direction>_<q>`` (its NAOPC, NaN where the bounds are flat), ``[B]`` float64 per
        example of ``curves``, for both directions; the bounds come from the derived-value store when an earlier
        job (or call) computed them for the same examples (:meth:`_setup`). With ``max_examples`` both are
        measured on the bounded examples only (NaN for the others: their authors' AOPC would cost the forwards
        of every feature count, for no NAOPC).

        Raises:
            ValueError: for curves that record no ranking."""
        import torch

        from itermask.core.aopc_bounds import _Subset, naopc

        setup = self._setup(inputs, context, curves)
        if curves.rank is None:
            raise ValueError("naopc: these masking curves record no ranking")
        bounded = bounded_subset(curves.example_ids.cpu().numpy(), self.max_examples)
        rows = np.flatnonzero(bounded)
        with eval_mode(context.model):
            if bounded.all():
                scores = _ranking_aopc(setup.outputs, curves.rank, setup.features)
            else:
                index = torch.from_numpy(rows)
                part = _ranking_aopc(
                    _Subset(setup.outputs, rows.tolist()), curves.rank.cpu()[index], setup.features[index]
                )
                scores = {}
                for direction, values in part.items():
                    scores[direction] = np.full(len(bounded), np.nan)
                    scores[direction][rows] = values
        authors, q, out = setup.bounds["sets"]["authors"], _suffix(inputs.evaluation.quantity), {}
        for direction, aopc in scores.items():
            out[f"aopc_authors_{direction}_{q}"] = torch.from_numpy(aopc)
            value = naopc(aopc, authors["upper"].numpy(), authors["lower"].numpy())
            out[f"naopc_{direction}_{q}"] = torch.as_tensor(value, dtype=torch.float64)
        return out

    def _setup(self, inputs: AnalysisInputs, context: EvaluationContext, first: MaskingCurves) -> _Setup:
        """The clean rows of ``first``'s examples, their features, the memoised outputs of their masked subsets
        and the bounds (:meth:`_bounds`): built once per job and example order, so that the sanity benchmark's
        calls of :meth:`explanation_measures` share the outputs already computed.

        Raises:
            ValueError: if the examples' maskable features differ from the curves'."""
        import torch

        from itermask.core.subset_outputs import MemoOutputs, ModelOutputs, feature_counts, feature_index

        key = (id(context), tuple(first.example_ids.tolist()))
        if key in self._setups:
            return self._setups[key]
        if (part := self._part_of_a_setup(key)) is not None:
            self._setups[key] = part
            return part
        e = inputs.evaluation
        with eval_mode(context.model):
            batch, maskable = clean_batch(inputs, context, first)
            features = feature_index(batch, maskable, e.features)
            if not torch.equal(feature_counts(features).cpu(), first.n_maskable.cpu().long()):
                raise ValueError("naopc: the examples' maskable features differ from the masking curves'")
            model_outputs = ModelOutputs(
                context.model, batch, features, inputs.masking, first.target, e.quantity, e.token_budget
            )
            outputs = MemoOutputs(model_outputs)
            bounds = self._bounds(inputs, context, outputs, grid_weight_sets(first, e.aopc_bins), first)
        # only the latest job's setups are kept (a job's context is new)
        self._setups = {k: v for k, v in self._setups.items() if k[0] == key[0]}
        self._setups[key] = _Setup(outputs, model_outputs, features.cpu(), bounds)
        return self._setups[key]

    def _part_of_a_setup(self, key: tuple) -> _Setup | None:
        """The setup of some examples read from one this job already built for more of them (the sanity benchmark
        on its ``sanity.max_examples`` subset, after this analysis's own run over every evaluated example), so
        their bounds are not searched again; ``None`` when no setup of this context holds them all. Only what
        :meth:`explanation_measures` reads is kept: the outputs (renumbered), the features and the authors'
        bounds."""
        import torch

        from itermask.core.aopc_bounds import _Subset

        context, ids = key
        for (known_context, known), setup in self._setups.items():
            position = {example: row for row, example in enumerate(known)}
            if known_context != context or not all(i in position for i in ids):
                continue
            rows = [position[i] for i in ids]
            index = torch.as_tensor(rows, dtype=torch.long)
            authors = setup.bounds["sets"]["authors"]
            bounds = {"sets": {"authors": {"upper": authors["upper"][index], "lower": authors["lower"][index]}}}
            return _Setup(_Subset(setup.outputs, rows), setup.model_outputs, setup.features[index], bounds)
        return None

    def _fingerprint(self, inputs: AnalysisInputs, context: EvaluationContext, first, weights: dict) -> dict:
        """Everything the bounds depend on besides the classifier (:meth:`EvaluationContext.reuse`)."""
        from itermask.storage.cache import config_hash

        e = inputs.evaluation
        return {
            "examples": context.data.input_digest(context.examples),
            "example_ids": first.example_ids.tolist(),
            "masking": repr(inputs.masking),
            "features": e.features,
            "quantity": e.quantity,
            "target": str(e.target),
            "segments": e.segments,
            "exact_max_features": self.exact_max_features,
            "beam_size": self.beam_size,
            **(
                {}
                if bounded_subset(first.example_ids.cpu().numpy(), self.max_examples).all()
                else {"max_examples": self.max_examples}
            ),
            "convention": CONVENTION,
            "weights": {name: config_hash([w.tolist() for w in ws]) for name, ws in weights.items()},
        }

    def _bounds(self, inputs, context: EvaluationContext, outputs, weights: dict, first) -> dict:
        """The stored bounds, or computed now (``reused`` says which): ``sets["authors"]`` for every example
        (exact or beam); the grid weight sets for the exact examples only, from the same ``2^n`` outputs (NaN
        for the beam examples: a beam search per weight set multiplies the forwards, see docs/concepts.md)."""
        from itermask.core.aopc_bounds import AOPCBounds, aopc_bounds, exact_bounds

        computed = []

        def compute() -> dict:
            import torch

            begin, n = time.time(), first.n_maskable.long().cpu()
            bounded = bounded_subset(first.example_ids.cpu().numpy(), self.max_examples)
            kept = n[torch.from_numpy(bounded)]
            beam = int((kept > self.exact_max_features).sum())  # the long wait: say what it is before it starts
            log.info(
                "naopc: AOPC bounds of %d examples (%d exact, up to %d features; %d by beam search of width %d)%s...",
                len(kept),
                len(kept) - beam,
                self.exact_max_features,
                beam,
                self.beam_size,
                "" if bounded.all() else f"; the other {len(n) - len(kept)} not bounded (naopc.max_examples)",
            )
            rows = np.flatnonzero(bounded)

            def of_bounded(examples: np.ndarray, masks: np.ndarray) -> np.ndarray:
                return outputs(rows[examples], masks)

            found: list = [(None, "none")] * len(n)
            with steps_bar(context, beam, "naopc: beam bounds") as progress:
                bounds = aopc_bounds(of_bounded, kept.tolist(), self.exact_max_features, self.beam_size, None, progress)
            for i, got in zip(rows.tolist(), bounds):
                found[i] = got
            exact = torch.tensor([how == "exact" for _, how in found])
            sets = {"authors": {**_as_tensors([b for b, _ in found], exact), "bounded": torch.from_numpy(bounded)}}
            chosen = exact.nonzero().flatten().numpy()

            def of_chosen(examples: np.ndarray, masks: np.ndarray) -> np.ndarray:
                return outputs(chosen[examples], masks)

            for name, ws in weights.items():  # the exact examples' 2^n outputs are remembered: no new forwards
                part = exact_bounds(of_chosen, n[chosen].tolist(), [ws[i] for i in chosen])
                full: list[AOPCBounds | None] = [None] * len(n)
                for i, b in zip(chosen.tolist(), part):
                    full[i] = b
                sets[name] = _as_tensors(full, exact)
            computed.append(True)
            log.info("naopc: AOPC bounds took %.1f s", time.time() - begin)
            return {"example_ids": first.example_ids.cpu(), "n": n, "sets": sets, "seconds": time.time() - begin}

        value = context.reuse(BOUNDS_KIND, self._fingerprint(inputs, context, first, weights), compute)
        value["reused"] = not computed
        if value["reused"]:
            log.info("naopc: reusing the AOPC bounds of this classifier computed by an earlier job")
        return value

    def _section(self, curves: EvaluatedCurves, bounds: dict, per_example: pd.DataFrame, quantity: str) -> dict:
        """The result section (see :meth:`report_measures` for what the report reads of it)."""
        authors = bounds["sets"]["authors"]
        ids = bounds["example_ids"].numpy()
        flat = ((authors["upper"] - authors["lower"]) <= FLAT_SPAN).numpy()
        exact = authors["exact"].numpy()
        bounded = authors["bounded"].numpy() if "bounded" in authors else np.ones(len(ids), dtype=bool)
        methods: dict[str, dict] = {}
        for (method, schedule), rows in per_example.groupby(["saliency", "schedule"], sort=False):  # pyright: ignore[reportGeneralTypeIssues] (pandas: a tuple per group)
            entry: dict[str, Any] = {
                key: _nanmean(rows[key]) for key in rows.columns if key.startswith(("naopc", "aopc_authors"))
            }
            if schedule != "one_shot":
                entry["missing"] = {"authors": RECURSIVE}
            methods.setdefault(str(method), {})[str(schedule)] = entry
        return {
            "settings": self.describe(),
            "quantity": quantity,
            "bounds": {
                "n_examples": len(ids),
                "n_exact": int(exact.sum()),
                "n_beam": int((bounded & ~exact).sum()),
                "beam_example_ids": ids[bounded & ~exact].tolist(),
                "n_bounded": int(bounded.sum()),
                "n_unbounded": int((~bounded).sum()),
                "subset": None
                if bounded.all()
                else (
                    f"bounds for {int(bounded.sum())} of the {len(ids)} evaluated examples (naopc.max_examples="
                    f"{self.max_examples}; {SUBSET_RULE}): NAOPC is NaN for the other {int((~bounded).sum())} and "
                    "its means are over the bounded examples"
                ),
                "n_flat": int(flat.sum()),
                "flat_example_ids": ids[flat].tolist(),
                "mean_upper": _nanmean(authors["upper"].numpy()),
                "mean_lower": _nanmean(authors["lower"].numpy()),
                "mean_n_features": float(bounds["n"].double().mean()),
                "reused": bool(bounds["reused"]),
                "seconds": float(bounds.get("seconds", math.nan)),
                "grid_sets": [name for name in bounds["sets"] if name != "authors"],
                "n_flat_grid": {
                    name: int(((s["upper"] - s["lower"]) <= FLAT_SPAN).sum())
                    for name, s in bounds["sets"].items()
                    if name != "authors"
                },
                "grid_sets_cover": "the exact examples only (beam examples: NaN)",
            },
            "methods": methods,
            "note": f"means over the examples with U - L > {FLAT_SPAN:g}; NAOPC of sufficiency: lower is better",
        }

    def artifacts_from(self, result: dict, output_dir) -> Artifacts:
        return _artifacts(result["naopc"])

    @classmethod
    def report_measures(cls, result: dict) -> dict[tuple[str, str, str], float]:
        """``NAOPC ...`` / ``AOPC ..., authors'`` rows (:data:`AUTHORS`) of the one-shot ranking and ``NAOPC of
        <itermask score>`` rows per schedule; missing values are NaN; with a subset of the examples bounded
        (``naopc.max_examples``) also :data:`COVERAGE`, the share bounded."""
        out = {}
        for method, by_schedule in ((result.get("naopc") or {}).get("methods") or {}).items():
            for schedule, entry in by_schedule.items():
                for key, value in entry.items():
                    if isinstance(value, (int, float)) and (label := _label(key)) is not None:
                        out[(method, schedule, label)] = math.nan if value is None else float(value)
            bounds = result["naopc"].get("bounds") or {}
            if bounds.get("n_unbounded"):  # a subset (naopc.max_examples): the report says which share
                out[(method, "one_shot", COVERAGE)] = 1.0 - bounds.get("n_unbounded", 0) / bounds["n_examples"]
        return out

    @classmethod
    def headline_lines(cls, summary: pd.DataFrame) -> list[str]:
        """One line when NAOPC covers a subset of the evaluated examples (:data:`COVERAGE` below 1 in some
        run): which share, and that its means are over that subset."""
        shares = summary.loc[summary.score == COVERAGE, "mean"].to_numpy(dtype=float)
        if not len(shares) or shares.min() >= 1.0:
            return []
        share = float(shares.min())
        return [
            f"NAOPC is measured on a subset: AOPC bounds for {100 * share:.3g} % of the evaluated examples "
            "(`naopc.max_examples`, sized for the time on a CPU); its rows are means over those examples only.",
            "",
        ]

    @classmethod
    def report_bounds(cls, score: str) -> tuple[float, float] | None:
        """None: NAOPC lies in [0, 1] for exact bounds, but beam bounds are inner bounds, so a ranking may
        score beyond them (NAOPC below 0 or above 1)."""
        return None

    @classmethod
    def summary_lines(cls, result: dict) -> list[str]:
        """The method under study's mean NAOPC (one-shot ranking, the authors' convention) and the bounds'
        counts, or why there is none."""
        section = result.get("naopc")
        if not section:
            return []
        saliency = result.get("saliency")
        method = saliency.get("name") if isinstance(saliency, dict) else str(saliency)
        entry = ((section.get("methods") or {}).get(method) or {}).get("one_shot") or {}
        b, suffix = section.get("bounds") or {}, _suffix(section.get("quantity", "probability"))
        return [
            f"NAOPC ({method}, one-shot, authors' convention, {section.get('quantity')}; a fraction, 0: the lower "
            f"bound L, 1: the upper U): comprehensiveness "
            f"{number(entry.get(f'naopc_comprehensiveness_{suffix}'), 3)} (higher is better), sufficiency "
            f"{number(entry.get(f'naopc_sufficiency_{suffix}'), 3)} (lower is better); bounds: {b.get('n_exact')} "
            f"exact, {b.get('n_beam')} beam, {b.get('n_flat')} flat (U - L <= {FLAT_SPAN:g}, left out)"
            + (
                f", {b['n_unbounded']} not bounded (naopc.max_examples={section['settings'].get('max_examples')})"
                if b.get("n_unbounded")
                else ""
            )
            + (" (reused)" if b.get("reused") else "")
        ]


@dataclass(frozen=True)
class _Setup:
    """What :meth:`NAOPCAnalysis._setup` builds once per job: the memoised subset ``outputs`` (of
    ``model_outputs``, whose row counts the result reports), the ``[B, L]`` feature index, the bounds."""

    outputs: Any
    model_outputs: Any
    features: Any
    bounds: dict


def _as_tensors(bounds: list, exact) -> dict:
    """``upper``, ``lower`` (``[B]`` float64, NaN where ``bounds`` has ``None``) and ``exact`` (``[B]`` bool)."""
    import torch

    pick = lambda attr: [math.nan if b is None else getattr(b, attr) for b in bounds]  # noqa: E731
    return {
        "upper": torch.tensor(pick("upper"), dtype=torch.float64),
        "lower": torch.tensor(pick("lower"), dtype=torch.float64),
        "exact": exact,
    }


def _whole(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _suffix(quantity: str) -> str:
    from itermask.core.metrics import QUANTITY_SUFFIXES

    return QUANTITY_SUFFIXES[quantity]  # pyright: ignore[reportArgumentType]


def _label(key: str) -> str | None:
    """The report's readable name of a per-schedule entry's key, or ``None`` for keys not reported."""
    base, _, quantity = key.rpartition("_")
    if base.startswith("naopc_of_"):
        return f"NAOPC of {base[len('naopc_of_') :]}_{quantity}"
    named = {
        "naopc_comprehensiveness": AUTHORS["naopc_comprehensiveness"],
        "naopc_sufficiency": AUTHORS["naopc_sufficiency"],
        "aopc_authors_comprehensiveness": AUTHORS["aopc_comprehensiveness"],
        "aopc_authors_sufficiency": AUTHORS["aopc_sufficiency"],
    }
    return f"{named[base]} [{quantity}]" if base in named else None


def _nanmean(values) -> float | None:
    array = np.asarray(values, dtype=np.float64)
    return float(np.nanmean(array)) if np.isfinite(array).any() else None


def grid_weight_sets(curves: MaskingCurves, bins) -> dict[str, list[np.ndarray]]:
    """Per itermask AOPC score (``aopc_comprehensiveness``, ``aopc_sufficiency`` over the ERASER ``bins`` on a
    fraction grid; ``aopc_full_*`` over every step) one ``[n + 1]`` weight array per example
    (:func:`~itermask.core.naopc_scores.grid_weights`, from the curves' ``k``)."""
    from itermask.core.naopc_scores import DIRECTIONS, grid_weights

    k, n = curves.k.cpu().numpy(), curves.n_maskable.cpu().numpy()
    columns = {"aopc_full": list(range(k.shape[1]))}
    if bins and curves.steps == "fraction":
        grid = curves.grid.cpu().numpy()
        columns["aopc"] = [int(np.flatnonzero(np.isclose(grid, b))[0]) for b in bins]
    return {
        f"{aggregate}_{direction}": [grid_weights(k[b, cols].tolist(), int(n[b]), direction) for b in range(len(n))]
        for aggregate, cols in columns.items()
        for direction in DIRECTIONS
    }


def _ranking_aopc(outputs, rank: torch.Tensor, features: torch.Tensor) -> dict[str, np.ndarray]:
    """The authors' AOPC of the one-shot ranking ``rank`` (``[B, L]``, :attr:`MaskingCurves.rank`) over the
    ``[B, L']`` feature index ``features``: ``{direction: [B]}``."""
    from itermask.core.naopc_scores import feature_ranks, ranking_aopc

    width = features.shape[1]
    rank = rank.cpu()[:, :width] if rank.shape[1] >= width else pad_rank(rank.cpu(), width)
    return ranking_aopc(outputs, feature_ranks(rank, features))


def _per_example(curves: EvaluatedCurves, hooked: dict, bounds: dict, quantity: str, bins) -> pd.DataFrame:
    """One row per (explanation, schedule, example): the authors' AOPC and NAOPC (one-shot only; ``hooked``:
    :meth:`NAOPCAnalysis.explanation_measures` per explanation) and the NAOPC of itermask's own AOPC scores
    (where the schedule has them)."""
    from itermask.core import metrics
    from itermask.core.aopc_bounds import naopc

    q, sets = _suffix(quantity), bounds["sets"]
    frames = []
    for method, by_schedule in curves.items():
        for schedule, c in by_schedule.items():
            frame = pd.DataFrame({"saliency": method, "schedule": schedule, "example_id": c.example_ids.cpu().numpy()})
            for direction in ("comprehensiveness", "sufficiency"):
                for key in (f"aopc_authors_{direction}_{q}", f"naopc_{direction}_{q}"):
                    one_shot = schedule == "one_shot"
                    frame[key] = hooked[method][key].numpy() if one_shot else np.full(len(frame), np.nan)
            values = metrics.per_example(c, quantity, bins)  # pyright: ignore[reportArgumentType]
            for name, bound in sets.items():
                key = f"{name}_{q}"
                if name != "authors" and key in values:
                    own = values[key].double().cpu().numpy()
                    frame[f"naopc_of_{key}"] = naopc(own, bound["upper"].numpy(), bound["lower"].numpy())
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _write_tables(folder, per_example: pd.DataFrame, bounds: dict) -> dict:
    """The per-example values into the job's tables: ``scores.parquet`` gains the NAOPC columns (joined on
    saliency, schedule and example), ``examples.parquet`` each example's bounds once: ``naopc_n_features``,
    ``naopc_upper``, ``naopc_lower`` (authors' convention), ``naopc_bounds`` (``exact`` or ``beam``) and the
    bounds of each grid weight set, ``naopc_upper_<score>`` / ``naopc_lower_<score>``."""
    from pathlib import Path

    directory = Path(folder) / FOLDER
    scores = pd.read_parquet(directory / "scores.parquet")
    scores = scores.drop(columns=[c for c in per_example.columns[3:] if c in scores.columns])
    scores = scores.merge(per_example, on=["saliency", "schedule", "example_id"], how="left", validate="one_to_one")
    sets = bounds["sets"]
    frame = pd.DataFrame({"example_id": bounds["example_ids"].numpy(), "naopc_n_features": bounds["n"].numpy()})
    frame["naopc_upper"], frame["naopc_lower"] = sets["authors"]["upper"].numpy(), sets["authors"]["lower"].numpy()
    authors = sets["authors"]
    bounded = authors["bounded"].numpy() if "bounded" in authors else True
    frame["naopc_bounds"] = np.where(authors["exact"].numpy(), "exact", np.where(bounded, "beam", "none"))
    for name, s in sets.items():
        if name != "authors":
            frame[f"naopc_upper_{name}"], frame[f"naopc_lower_{name}"] = s["upper"].numpy(), s["lower"].numpy()
    examples = pd.read_parquet(directory / "examples.parquet")
    examples = examples.drop(columns=[c for c in frame.columns[1:] if c in examples.columns])
    examples = examples.merge(frame, on="example_id", how="left", validate="one_to_one")
    return write_per_example(folder, {"scores": scores, "examples": examples})


def _artifacts(section: dict) -> Artifacts:
    """The section's numbers as W&B summary keys ``naopc/<saliency>/<schedule>/<key>`` and
    ``naopc/bounds/<key>``."""
    summary = {}
    for method, by_schedule in (section.get("methods") or {}).items():
        for schedule, entry in by_schedule.items():
            for key, value in entry.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    summary[f"naopc/{method}/{schedule}/{key}"] = float(value)
    for key, value in (section.get("bounds") or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            summary[f"naopc/bounds/{key}"] = float(value)
    return Artifacts(summary=summary)
