"""The ``removal_reference`` analysis: which masking strategy behaves most like "the token was never there"?

For the one-shot ranking of the method under study and of the random baseline, at every masking step with
``0 < k < n``, each strategy's masked input and the reference's (the same tokens REMOVED) go through the
classifier in one forward call; per example and step the cosine similarity of their class-probability vectors
(:mod:`itermask.core.removal_reference`; the R-OMS idea of Blücher, Vielhaben & Strodthoff, TMLR 2024, arXiv
2401.06654, Sec. 3), beside the OOD AUROC of the same inputs (clean test inputs vs each strategy's masked
inputs pooled over steps) by the Mahalanobis detector of the ``ood`` analysis (its training embeddings reused
through :meth:`EvaluationContext.reuse`). Configured by the ``removal_reference`` node
(``conf/removal_reference/<name>.yaml``; ``none`` by default).

The reference is ``delete`` by default: the masked tokens are cut out of the id sequence and the rest close up,
so the reference input is a real, shorter text, one the model could have seen in training (the text analogue of
the paper's reference, a ViT that never sees the occluded patches). ``attention_off`` (positions kept, the
tokens unattended) is the closer copy of the ViT's token dropping, but leaves gaps in the position ids no
training text has; it is reported as a strategy, so its distance to ``delete`` measures what the gaps change.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

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
    example_subset,
    subset_lines,
)
from itermask.conf import CONF_DIR
from itermask.core.aopc_bounds import SUBSET_RULE
from itermask.formatting import md_table, mean_pm, number
from itermask.storage.per_example import write_per_example

if TYPE_CHECKING:
    from itermask.core.masking import MaskingStrategy

log = logging.getLogger(__name__)

__all__ = ["RemovalReferenceAnalysis", "MASKING_PRESETS", "DEFAULT_STRATEGIES", "TABLE_COLUMNS"]

#: the masking presets (``conf/masking/<name>.yaml`` of the package's configs, :mod:`itermask.conf`)
MASKING_PRESETS = CONF_DIR / "masking"
#: every strategy that runs offline with the default model (mlm_infill needs a model with an MLM head)
DEFAULT_STRATEGIES = ("mask_token", "unk", "pad", "random_token", "attention_off")
REFERENCES = ("delete", "attention_off")
#: the W&B table's columns (one row per saliency method and strategy)
TABLE_COLUMNS = ("saliency", "strategy", "mean_cosine", "ci_low", "ci_high", "n_examples", "ood_auroc")
SCORE = "R-OMS cosine to reference"
AUROC = "R-OMS OOD AUROC"
#: what an OOD AUROC below 0.5 means, said where one is shown (the number itself is never flipped)
BELOW_CHANCE = (
    "the Mahalanobis detector scores these masked inputs as MORE in-distribution than the clean ones, i.e. it "
    "does not flag them as out of distribution (the number is shown as measured, not flipped)"
)


def _preset(name: str, values: dict) -> dict:
    """The node of masking preset ``name``, its interpolations (``${seed}``, ``${model.pretrained}``) resolved
    against ``values``, without its ``name`` (a label, no constructor argument)."""
    from omegaconf import OmegaConf

    root = OmegaConf.create({**values, "masking": OmegaConf.load(MASKING_PRESETS / f"{name}.yaml")})
    node = OmegaConf.to_container(root.masking, resolve=True)
    assert isinstance(node, dict)
    return {k: v for k, v in node.items() if k != "name"}


class RemovalReferenceAnalysis(Analysis):
    """The token-removal reference table of masking strategies (see the module docstring).

    Args:
        strategies: names of masking presets (``conf/masking/<name>.yaml``) compared to the reference; each
            is built from its preset's ``_target_``. Default :data:`DEFAULT_STRATEGIES`; add ``mlm_infill``
            where the model has an MLM head.
        reference: ``delete`` (default) or ``attention_off``: the strategy whose outputs stand for "removed".
        seed: the seed of presets that draw (``random_token``'s ``${seed}``).
        mlm_pretrained: the MLM of presets that need one (``mlm_infill``'s ``${model.pretrained}``).
        ood_fit: ``{n_fit_examples, seed, covariance}`` of the Mahalanobis detector, as the ``ood`` analysis
            fits it (the same settings reuse its stored training embeddings).
        confidence: level of the t interval of the mean cosine over examples, in (0, 1).
        max_examples: measure only this many of the evaluated examples (``None``: all), chosen by
            :func:`~itermask.analyses.base.example_subset` (the examples ``naopc.max_examples`` bounds).
        enabled: read by the settings stage.

    Raises:
        ValueError: (at construction, before any data or model work) an unknown strategy or reference name
            (naming the presets), a repeated strategy, the reference among the strategies, a preset that
            cannot be built, a ``confidence`` outside (0, 1).
    """

    name = "removal_reference"

    def __init__(
        self,
        strategies: Sequence[str] = DEFAULT_STRATEGIES,
        reference: str = "delete",
        seed: int = 0,
        mlm_pretrained: str | None = None,
        ood_fit: Mapping[str, Any] | None = None,
        confidence: float = 0.95,
        max_examples: int | None = None,
        enabled: bool = True,
    ) -> None:
        import hydra

        self.max_examples = checked_max_examples(max_examples, "removal_reference.max_examples")
        from itermask.core.masking import MaskingStrategy

        known = sorted(p.stem for p in MASKING_PRESETS.glob("*.yaml"))
        if reference not in REFERENCES:
            raise ValueError(f"removal_reference.reference={reference!r}: choose from {list(REFERENCES)}")
        if isinstance(strategies, str):  # one name, not read character by character
            strategies = [strategies]
        names = [str(s) for s in (strategies or ())]
        if unknown := [s for s in names if s not in known]:
            raise ValueError(f"removal_reference.strategies: unknown {unknown}; choose from {known}")
        if not names or len(set(names)) != len(names) or reference in names:
            raise ValueError(
                f"removal_reference.strategies={names}: give one or more distinct masking presets other than "
                f"the reference {reference!r}"
            )
        if not isinstance(confidence, int | float) or isinstance(confidence, bool) or not 0 < confidence < 1:
            raise ValueError(f"removal_reference.confidence={confidence!r}: choose a level in (0, 1), e.g. 0.95")
        values = {"seed": int(seed), "model": {"pretrained": mlm_pretrained}}
        self.strategies: dict[str, MaskingStrategy] = {}
        for name in [*names, reference]:
            node = _preset(name, values)
            if unset := [key for key, value in node.items() if value is None]:
                raise ValueError(f"removal_reference: masking preset {name!r} needs {unset} (set mlm_pretrained)")
            built = hydra.utils.instantiate(node, _convert_="all")
            if not isinstance(built, MaskingStrategy):
                raise ValueError(f"removal_reference: preset {name!r} builds no masking strategy")
            self.strategies[name] = built
        self.names, self.reference, self.confidence = tuple(names), reference, float(confidence)
        self.ood_fit = dict(ood_fit or {})

    def describe(self) -> dict:
        return {
            "strategies": list(self.names),
            "reference": self.reference,
            "confidence": self.confidence,
            "max_examples": self.max_examples,
        }

    def check(self, inputs: AnalysisInputs) -> None:
        if "one_shot" not in inputs.evaluation.schedules:
            raise ValueError(
                "removal_reference needs the one_shot schedule's ranking: add one_shot to evaluation.schedules "
                "(the recursive schedule re-ranks after every step, so it has no fixed order to mask in)"
            )
        for name, strategy in self.strategies.items():  # before any data or fine-tuning: mlm_infill loads its MLM
            try:
                strategy.bind(inputs.tokenizer)
            except ValueError as error:  # the masking group's advice, in this analysis's settings
                advice = str(error).replace("masking.mlm_pretrained", "removal_reference.mlm_pretrained")
                advice = re.sub(r"or choose another masking strategy \(masking=[^)]*\)", f"or leave {name} out", advice)
                raise ValueError(f"removal_reference.strategies: {name}: {advice}") from None

    def run(self, inputs: AnalysisInputs, context: EvaluationContext, curves: EvaluatedCurves) -> AnalysisOutput:
        from itermask.core.removal_reference import cosine_to_reference

        start, e = time.time(), inputs.evaluation
        curves, measured, evaluated = example_subset(curves, self.max_examples)
        with eval_mode(context.model):
            out, parts, names = self._outputs(inputs, context, curves)
            scorer, missing = self._detector(inputs, context)
        cosines = cosine_to_reference(out.probs, self.reference)
        mahalanobis = None if scorer is None else {n: scorer.score(f) for n, f in out.features.items()}
        clean = None if scorer is None else scorer.score(out.clean_features)
        frame = _frame(out.pairs.cpu().numpy(), parts, cosines, mahalanobis)
        tables = {s: self._table(cast("pd.DataFrame", frame[frame.saliency == s]), clean, missing) for s in names}
        section = {
            "settings": self.describe(),
            "quantity": "cosine similarity of softmax probability vectors (all classes)",
            "steps": e.steps,
            "tables": tables,
            "rows": {"asked": out.stats.rows, "computed": out.stats.computed, "forwards": out.stats.forwards},
            "n_examples": len(parts[0][1]),
            "examples": {"measured": measured, "evaluated": evaluated, "rule": SUBSET_RULE},
            "seconds": time.time() - start,
        }
        if missing:
            section["missing"] = {"ood_auroc": missing}
        artifacts = _artifacts(section)
        if inputs.output_dir is not None:
            artifacts.files = write_per_example(inputs.folder, {"removal_reference": frame})
        return AnalysisOutput({"removal_reference": section}, artifacts)

    def _outputs(self, inputs: AnalysisInputs, context: EvaluationContext, curves: EvaluatedCurves):
        """Every explanation's one-shot masks, every strategy and the reference, in ONE forward call; with
        ``parts``: ``(saliency, example_ids, x, k)`` of each explanation's rows, in call order."""
        import torch

        from itermask.analyses.clean_rows import clean_batch
        from itermask.core.removal_reference import strategy_outputs
        from itermask.core.tokens import TokenBatch

        names = list(curves)
        ones = [curves[name]["one_shot"] for name in names]
        batch, maskable = clean_batch(inputs, context, ones[0])
        width = batch.input_ids.shape[1]
        ranks = []
        for name, c in zip(names, ones):
            if c.rank is None:
                raise ValueError(f"removal_reference: the curves of {name!r} record no ranking")
            rank = torch.full((len(c), width), -1, dtype=torch.long)
            rank[:, : min(width, c.rank.shape[1])] = c.rank.long().cpu()[:, :width]
            if not torch.equal(rank >= 1, maskable.cpu()):
                raise ValueError(f"removal_reference: {name!r}'s ranked positions differ from the maskable ones")
            ranks.append(rank)
        strategies = {n: s.bind(inputs.tokenizer) for n, s in self.strategies.items()}
        out = strategy_outputs(
            context.model,
            TokenBatch.concat([batch] * len(names)),
            torch.cat(ranks).to(batch.device),
            torch.cat([c.k.cpu() for c in ones]).to(batch.device),
            torch.cat([c.n_maskable.cpu().long() for c in ones]).to(batch.device),
            strategies,
            inputs.evaluation.token_budget,
        )
        out.clean_features = out.clean_features[: len(ones[0])]
        parts = [(n, c.example_ids.cpu().numpy(), c.grid.cpu().numpy(), c.k.cpu().numpy()) for n, c in zip(names, ones)]
        return out, parts, names

    def _detector(self, inputs: AnalysisInputs, context: EvaluationContext):
        """The ``ood`` analysis's Mahalanobis detector of the final layer's input, fitted on its (stored)
        training embeddings, and ``None``; or ``None`` and why it is missing (no training split: the texts given
        to :func:`itermask.evaluate` are evaluated whole, so the cosines come without the OOD AUROC)."""
        from itermask.analyses.ood import OODAnalysis

        if "train" not in (splits := list(context.data.tokenized or {})):
            return None, f"no training split to fit the detector on (the data have only {splits})"
        ood = OODAnalysis(level="final", calibration_split=None, plots={"enabled": False}, **self.ood_fit)
        detectors, _, _ = ood._fit(inputs, context)
        scorer = detectors.mahalanobis.get("final")
        return scorer, None if scorer is not None else detectors.missing.get("final/mahalanobis", "not fitted")

    def _table(self, rows: pd.DataFrame, clean, missing: str | None) -> list[dict]:
        """One entry per strategy (the reference too), ranked by mean cosine: the mean over examples of each
        example's mean over its compared steps, its t interval (``confidence``) CLIPPED to [0, 1], where a
        cosine of probability vectors lies (the symmetric t interval of values near 1 reaches past 1), the mean
        per grid value, the OOD AUROC."""
        from scipy import stats

        from itermask.ood.statistics import ood_auroc

        table = []
        for strategy, own in rows.groupby("strategy", sort=False):
            per_example = own.groupby("example_id").cosine.mean().to_numpy()
            n, mean = len(per_example), float(per_example.mean()) if len(per_example) else math.nan
            low = high = None
            if n >= 2 and (sem := float(stats.sem(per_example))) > 0:
                low, high = np.clip(stats.t.interval(self.confidence, n - 1, loc=mean, scale=sem), 0.0, 1.0).tolist()
            elif n >= 2:
                low = high = mean  # every example the same value: no spread
            entry: dict[str, Any] = {"strategy": str(strategy), "reference": strategy == self.reference}
            entry |= {"mean_cosine": mean if n else None, "ci_low": low, "ci_high": high, "n_examples": n}
            entry["by_x"] = {f"{x:g}": float(v) for x, v in own.groupby("x").cosine.mean().items()}
            entry["ood_auroc"], entry["ood_auroc_missing"] = None, missing
            if clean is not None and len(own):
                try:
                    entry["ood_auroc"] = ood_auroc(clean, own.mahalanobis.to_numpy())
                except ValueError as error:  # degenerate scores: never a silent 0.5
                    entry["ood_auroc_missing"] = str(error)
            table.append(entry)
        return sorted(table, key=lambda t: -math.inf if t["mean_cosine"] is None else -t["mean_cosine"])

    def artifacts_from(self, result: dict, output_dir) -> Artifacts:
        return _artifacts(result["removal_reference"])

    @classmethod
    def report_measures(cls, result: dict) -> dict[tuple[str, str, str], float]:
        """``R-OMS cosine to reference (<ref>): <strategy>`` and ``R-OMS OOD AUROC: <strategy>`` rows per
        explanation (schedule ``one_shot``); missing values are NaN."""
        section = result.get("removal_reference") or {}
        reference = (section.get("settings") or {}).get("reference")
        out = {}
        for saliency, table in (section.get("tables") or {}).items():
            for t in table:
                cosine, auroc = t.get("mean_cosine"), t.get("ood_auroc")
                out[(saliency, "one_shot", f"{SCORE} ({reference}): {t['strategy']}")] = _nan(cosine)
                out[(saliency, "one_shot", f"{AUROC}: {t['strategy']}")] = _nan(auroc)
        return out

    @classmethod
    def report_bounds(cls, score: str) -> tuple[float, float] | None:
        """Cosine of probability vectors (non-negative) and AUROC both lie in [0, 1]."""
        return (0.0, 1.0) if score.startswith("R-OMS ") else None

    @classmethod
    def headline_lines(cls, summary: pd.DataFrame) -> list[str]:
        """A table per explanation: each strategy's distance to the reference, 1 - mean cosine (3 significant
        digits: cosines of two-class probability vectors crowd near 1), and OOD AUROC (mean ± std over seeds),
        ranked by the cosine; a note under it where an AUROC is below 0.5 (:data:`BELOW_CHANCE`)."""
        rows = summary[summary.score.str.startswith(SCORE)]
        if not len(rows):
            return []
        lines = [
            "Masking strategies against the token-removal reference (R-OMS idea, Blücher et al. 2024): distance to "
            "removal, 1 - cosine similarity of class probabilities to the input with the tokens removed (0: the "
            "model sees no difference), and the OOD AUROC of the masked inputs, mean ± std over seeds:",
            "",
        ]
        for explanation in dict.fromkeys(rows.explanation):
            own = cast("pd.DataFrame", rows[rows.explanation == explanation]).sort_values("mean", ascending=False)
            table, below = [], []
            for _, row in own.iterrows():
                strategy = str(row.score).rsplit(": ", 1)[1]
                auroc = summary[(summary.explanation == explanation) & (summary.score == f"{AUROC}: {strategy}")]
                if len(auroc) and auroc.iloc[0]["mean"] < 0.5:
                    below.append(strategy)
                distance = f"{_distance(row['mean'])} ± {_significant(row['std'])}"
                table.append([strategy, distance, mean_pm(auroc.iloc[0]) if len(auroc) else "n/a"])
            lines += [f"{explanation}:", "", md_table(["strategy", "1 - cosine", "OOD AUROC"], table), ""]
            lines += [f"OOD AUROC below 0.5 ({', '.join(below)}): {BELOW_CHANCE}", ""] if below else []
        return lines

    @classmethod
    def summary_lines(cls, result: dict) -> list[str]:
        """The method under study's strategies ranked by their distance to the reference, 1 - mean cosine (3
        significant digits), with their OOD AUROC, and what an AUROC below 0.5 means where there is one."""
        section = result.get("removal_reference")
        if not section:
            return []
        saliency = result.get("saliency")
        method = saliency.get("name") if isinstance(saliency, dict) else str(saliency)
        table = [t for t in (section.get("tables") or {}).get(method) or [] if not t.get("reference")]
        reference = (section.get("settings") or {}).get("reference")
        parts = [
            f"{t['strategy']} {_distance(t.get('mean_cosine'))} (AUROC {number(t.get('ood_auroc'), 2)})" for t in table
        ]
        line = f"Removal reference ({reference}; {method}, one-shot), 1 - cosine of probabilities (0: as if removed): "
        below = [t["strategy"] for t in table if t.get("ood_auroc") is not None and t["ood_auroc"] < 0.5]
        return (
            [line + ", ".join(parts)]
            + ([f"  AUROC below 0.5 ({', '.join(below)}): {BELOW_CHANCE}"] if below else [])
            + subset_lines(section, "removal_reference.max_examples")
        )


def _significant(value) -> str:
    """``value`` to 3 significant digits, ``"n/a"`` for none or NaN."""
    return "n/a" if value is None or not math.isfinite(value) else f"{float(value):.3g}"


def _distance(cosine) -> str:
    """``1 - cosine`` to 3 significant digits (float round-off above 1 reads 0)."""
    return _significant(None if cosine is None else np.clip(1.0 - float(cosine), 0.0, None))


def _nan(value) -> float:
    return math.nan if value is None else float(value)


def _frame(pairs: np.ndarray, parts: list, cosines: dict, mahalanobis: dict | None) -> pd.DataFrame:
    """One row per (saliency, strategy, example, compared step): the columns of
    :mod:`itermask.storage.per_example`'s ``removal_reference.parquet``."""
    frames, offset = [], 0
    for saliency, example_ids, grid, k in parts:
        rows = np.flatnonzero((pairs[:, 0] >= offset) & (pairs[:, 0] < offset + len(example_ids)))
        b, s = pairs[rows, 0] - offset, pairs[rows, 1]
        for strategy, cosine in cosines.items():
            frame = {
                "saliency": saliency,
                "strategy": strategy,
                "example_id": example_ids[b],
                "step": s,
                "x": grid[s],
                "k": k[b, s],
                "cosine": cosine.cpu().numpy()[rows],
                "mahalanobis": np.nan if mahalanobis is None else mahalanobis[strategy][rows].astype(np.float32),
            }
            frames.append(pd.DataFrame(frame))
        offset += len(example_ids)
    return pd.concat(frames, ignore_index=True)


def _artifacts(section: dict) -> Artifacts:
    """The table for W&B (``removal_reference``, :data:`TABLE_COLUMNS`) and summary keys
    ``removal_reference/<saliency>/<strategy>/{mean_cosine,ood_auroc}``."""
    rows, summary = [], {}
    for saliency, table in (section.get("tables") or {}).items():
        for t in table:
            rows.append([saliency, *(t.get(c) for c in TABLE_COLUMNS[1:])])
            for key in ("mean_cosine", "ood_auroc"):
                if t.get(key) is not None:
                    summary[f"removal_reference/{saliency}/{t['strategy']}/{key}"] = float(t[key])
    return Artifacts(tables={"removal_reference": (list(TABLE_COLUMNS), rows)}, summary=summary)
