"""The ``attack`` analysis: a salience-guided adversarial attack per saliency method, and its link to
iterative masking (the paper's third claim: masking along a saliency ranking is, in substance, an attack).

Wiring only (the search is :class:`itermask.core.attack.GreedyAttack`, the candidates
:mod:`itermask.core.candidates`; the link :func:`masking_link`). Configured by the ``attack`` node
(``conf/attack/<name>.yaml``; ``none`` by default).
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import TYPE_CHECKING, Any

import pandas as pd
from scipy import stats

from itermask.analyses.base import (
    RANDOM,
    Analysis,
    AnalysisInputs,
    AnalysisOutput,
    Artifacts,
    EvaluatedCurves,
    EvaluationContext,
    baseline_fingerprint,
    eval_mode,
)
from itermask.core.measures import first_flip_count, first_flip_fraction
from itermask.storage.per_example import write_per_example

if TYPE_CHECKING:
    import torch

    from itermask.core.attack import AttackResult, GreedyAttack
    from itermask.core.candidates import CandidateSource
    from itermask.core.curves import MaskingCurves

log = logging.getLogger(__name__)

__all__ = ["AttackAnalysis", "attack_summary", "masking_link", "EXAMPLE_COLUMNS", "REPORTED"]

#: the kind of the random baseline's stored attack records (storage.derived)
BASELINE_ATTACK = "random_baseline_attack"

#: per-example lists of the result section (one entry per example id), in the W&B table's column order
EXAMPLE_COLUMNS = (
    "example_id",
    "attacked",
    "success",
    "n_perturbed",
    "n_maskable",
    "k_max",
    "perturbed_fraction",
    "queries",
    "clean_prob",
    "final_prob",
    "masking_first_flip_count",
    "perturbed_positions",
    "substitutions",
    "original_text",
    "adversarial_text",
)
#: the report's rows, ``{(section, key) of each method's entry: its range}`` (rates and shares in [0, 1], a rank
#: correlation in [-1, 1])
REPORTED = {
    ("summary", "success_rate"): (0.0, 1.0),
    ("summary", "perturbed_fraction"): (0.0, 1.0),
    ("summary", "median_queries"): (0.0, math.inf),
    ("link", "masking_flip_rate_at_budget"): (0.0, 1.0),
    ("link", "masking_first_flip_fraction_at_budget"): (0.0, 1.0),
    ("link", "spearman_tokens_to_flip"): (-1.0, 1.0),
}


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else math.nan


def attack_summary(examples: dict[str, list]) -> dict[str, Any]:
    """One method's attack over the examples (``examples``: the per-example lists of :data:`EXAMPLE_COLUMNS`):
    ``n_attacked``, ``n_skipped_clean_prediction`` (clean prediction != target), ``n_skipped_no_budget``
    (``k_max = 0``: the budget allows no token of so short a text, e.g. ``attack.budget=0.01`` below 50
    maskable tokens; such an example is not attacked, so it is not a failure either), ``success_rate`` (share of
    the attacked examples whose decision flipped within the budget), ``perturbed_fraction`` and
    ``perturbed_count`` (means over the successful attacks, TextAttack's "average perturbed word %"),
    ``median_queries`` and ``mean_queries`` (over the attacked examples). NaN where no example qualifies."""
    import torch

    attacked = [i for i, a in enumerate(examples["attacked"]) if a and examples["k_max"][i] > 0]
    won = [i for i in attacked if examples["success"][i]]
    queries = torch.tensor([float(examples["queries"][i]) for i in attacked], dtype=torch.float64)
    n_target = sum(bool(a) for a in examples["attacked"])
    return {
        "n_attacked": len(attacked),
        "n_skipped_clean_prediction": len(examples["attacked"]) - n_target,
        "n_skipped_no_budget": n_target - len(attacked),
        "success_rate": len(won) / len(attacked) if attacked else math.nan,
        "perturbed_fraction": _mean([examples["perturbed_fraction"][i] for i in won]),
        "perturbed_count": _mean([examples["n_perturbed"][i] for i in won]),
        "median_queries": float(queries.median()) if attacked else math.nan,  # the lower median for even n
        "mean_queries": float(queries.mean()) if attacked else math.nan,
    }


def _spearman(x: list[float], y: list[float]) -> tuple[float, float, str | None]:
    """Spearman's rho and its two-sided p-value (scipy), or NaN with the reason."""
    if len(x) < 3:
        return math.nan, math.nan, f"needs at least 3 examples, got {len(x)}"
    if len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan, math.nan, "one side is constant (e.g. nothing or everything flipped within the budget)"
    result = stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue), None  # pyright: ignore[reportAttributeAccessIssue] (scipy's result bunch)


def masking_link(examples: dict[str, list], curves: MaskingCurves) -> dict[str, Any]:
    """Masking beside the attack on the attacked examples, at the attack's budget ``k_max``.

    Masking *flips within the budget* when its first flip (``first_flip_count``, on the evaluation's grid,
    so an upper bound of the one-by-one count) masks at most ``k_max`` features. Both count the same unit
    (tokens, or words with ``evaluation.features=word``: the curves' ``k`` and the attack's ``k_max`` and
    ``n_perturbed`` are then words), so fractions and counts compare like with like. Returns
    ``masking_flip_rate_at_budget`` (share flipped within the budget), ``masking_first_flip_fraction_at_budget``
    (mean ``k / n`` at the first flip over those), the attack's ``attack_success_rate`` and
    ``attack_perturbed_fraction`` again, and ``spearman_tokens_to_flip``: Spearman's rho across the attacked
    examples between the features (tokens or words; the key keeps its name) masking needs to flip and those
    the attack needs, each censored at the budget (no flip within ``k_max``: ranked above every flip, ties
    averaged), with ``spearman_p``, ``n_examples`` and ``n_both_flipped``; ``missing`` gives the reason of a NaN.
    """
    count = dict(zip(curves.example_ids.tolist(), first_flip_count(curves).tolist()))
    fraction = dict(zip(curves.example_ids.tolist(), first_flip_fraction(curves).tolist()))
    rows = [i for i, a in enumerate(examples["attacked"]) if a]
    masked_tokens, attack_tokens, within_fractions = [], [], []
    for i in rows:
        example = examples["example_id"][i]
        flips = not math.isnan(count[example]) and count[example] <= examples["k_max"][i]
        masked_tokens.append(count[example] if flips else math.inf)
        attack_tokens.append(float(examples["n_perturbed"][i]) if examples["success"][i] else math.inf)
        if flips:
            within_fractions.append(fraction[example])
    rho, p, reason = _spearman(masked_tokens, attack_tokens)
    out = {
        "schedule": curves.schedule,
        "steps": curves.steps,
        "n_examples": len(rows),
        "masking_flip_rate_at_budget": _mean([float(t != math.inf) for t in masked_tokens]),
        "masking_first_flip_fraction_at_budget": _mean(within_fractions),
        "attack_success_rate": _mean([float(t != math.inf) for t in attack_tokens]),
        "attack_perturbed_fraction": _mean([examples["perturbed_fraction"][i] for i in rows if examples["success"][i]]),
        "spearman_tokens_to_flip": rho,
        "spearman_p": p,
        "n_both_flipped": sum(m != math.inf and a != math.inf for m, a in zip(masked_tokens, attack_tokens)),
    }
    if reason:
        out["missing"] = {"spearman_tokens_to_flip": reason}
    return out


class AttackAnalysis(Analysis):
    """The salience-guided greedy substitution attack (:class:`itermask.core.attack.GreedyAttack`) for every
    evaluated saliency method, on the masking evaluation subset, and its link to masking.

    Args:
        candidates: the candidate source, built from the ``attack.candidates`` node's ``_target_``
            (:class:`~itermask.core.candidates.CandidateSource`; default :class:`MaskCandidates`); bound
            (``wordnet`` reads NLTK's corpus, ``mlm`` loads its checkpoint) by :meth:`check`.
        ranking: ``"one_shot"`` (rank once on the clean input) or ``"recursive"`` (re-rank after each
            substitution); the masking curves of the same schedule give the link.
        budget: the most features perturbed, a share of the maskable features (tokens, or words with
            ``evaluation.features=word``) in (0, 1].
        max_queries: the most candidate inputs scored per example, or ``None``.
        word_initial_only: attack only word-initial positions (skip sub-word continuations); moot with word
            features (a word is perturbed whole).
        enabled: read by the settings stage.

    Raises:
        ValueError: an unknown ranking, a budget outside (0, 1]; at :meth:`check` (before any fine-tuning),
            word features with a source other than ``mask``, a ranking whose schedule the evaluation does not
            run, a model without an input-embedding matrix for sources that need one, a missing WordNet
            corpus, an MLM checkpoint without an MLM head or with another vocabulary.
    """

    name = "attack"

    def __init__(
        self,
        candidates: CandidateSource | None = None,
        ranking: str = "one_shot",
        budget: float = 0.2,
        max_queries: int | None = None,
        word_initial_only: bool = True,
        enabled: bool = True,
    ) -> None:
        from itermask.core.attack import RANKINGS, check_budget
        from itermask.core.candidates import MaskCandidates

        if ranking not in RANKINGS:
            raise ValueError(f"unknown attack.ranking {ranking!r}: choose one of {RANKINGS}")
        check_budget(budget, max_queries)
        self.source = candidates if candidates is not None else MaskCandidates()
        self.ranking, self.budget, self.max_queries = ranking, float(budget), max_queries
        self.word_initial_only = bool(word_initial_only)
        self.word_start = None

    def describe(self) -> dict:
        return {
            "candidates": self.source.describe(),
            "ranking": self.ranking,
            "budget": self.budget,
            "max_queries": self.max_queries,
            "word_initial_only": self.word_initial_only,
        }

    def check(self, inputs: AnalysisInputs) -> None:
        from itermask.core.attack import check_features
        from itermask.core.candidates import word_start_vocabulary

        check_features(self.source, inputs.evaluation.features)  # word features: only attack=mask
        if self.ranking not in inputs.evaluation.schedules:
            raise ValueError(
                f"attack.ranking={self.ranking} is compared with the masking curves of that schedule, but "
                f"evaluation.schedules={list(inputs.evaluation.schedules)}: add it, or change attack.ranking"
            )
        self.source.bind(inputs.tokenizer)
        if self.word_initial_only and inputs.evaluation.features == "token":  # moot with words: all attackable
            self.word_start = word_start_vocabulary(inputs.tokenizer)
        if self.source.needs_embeddings:
            from itermask.models.loading import classifier_architecture

            self.source.check(classifier_architecture(inputs.pretrained))

    def _attacks(self, inputs: AnalysisInputs) -> dict[str, GreedyAttack]:
        from itermask.core.attack import GreedyAttack

        e = inputs.evaluation
        return {
            name: GreedyAttack(
                evaluator.saliency,
                inputs.masking,
                self.source,
                inputs.tokenizer.all_special_ids,
                word_start=self.word_start,
                ranking=self.ranking,
                budget=self.budget,
                max_queries=self.max_queries,
                target=e.target,
                segments=e.segments,
                token_budget=e.token_budget,
                features=e.features,
            )
            for name, evaluator in inputs.evaluators.items()
        }

    def run(self, inputs: AnalysisInputs, context: EvaluationContext, curves: EvaluatedCurves) -> AnalysisOutput:
        start = time.time()
        records, seconds = self._attack_subset(inputs, context)
        methods = {}
        for name, examples in records.items():
            methods[name] = self._method_entry(name, _sorted_by_id(examples), curves[name][self.ranking], seconds[name])
        section = {
            "settings": self.describe(),
            "masking": inputs.masking.name,
            "methods": methods,
            "seconds": time.time() - start,
        }
        artifacts = self._artifacts(section)
        artifacts.files = write_per_example(inputs.folder, {"attack": attack_frame(section)})
        return AnalysisOutput({"attack": section}, artifacts)

    def _baseline_fingerprint(self, inputs: AnalysisInputs, context: EvaluationContext) -> dict | None:
        """What the random baseline's attack depends on besides the classifier (:func:`baseline_fingerprint`, with
        the attack's settings and the stored columns), or ``None`` when it is not shared with other jobs."""
        shared = baseline_fingerprint(inputs, context)
        return None if shared is None else {**shared, "columns": list(EXAMPLE_COLUMNS), "attack": self.describe()}

    def _attack_subset(self, inputs: AnalysisInputs, context: EvaluationContext) -> tuple[dict, dict]:
        """Attack every explanation's ranking on the evaluation subset (the examples the masking evaluation
        evaluated: those with an attackable token); returns its per-example records and seconds by explanation.
        The random baseline's are read back when an earlier job on the same classifier and settings stored them
        (:meth:`_baseline_fingerprint`): the same records, and the seconds that job spent."""
        model, attacks = context.model, self._attacks(inputs)
        baseline = self._baseline_fingerprint(inputs, context)
        stored = None if baseline is None else context.stored(BASELINE_ATTACK, baseline)
        if stored is not None:
            attacks.pop(RANDOM)
            log.info("reusing the random baseline's attack on this classifier computed by an earlier job")
        device = next(model.parameters()).device
        records: dict[str, dict[str, list]] = {name: {c: [] for c in EXAMPLE_COLUMNS} for name in attacks}
        seconds = {name: 0.0 for name in attacks}
        with eval_mode(model):
            for batch in context.data.eval_loader(context.examples):
                tokens, labels, ids = batch["tokens"], batch["labels"], batch["example_ids"]
                keep = next(iter(attacks.values())).features_of(tokens)[0].maskable.any(dim=1)  # as masking
                tokens = tokens.index(keep).trim().to(device)
                labels, ids = labels[keep].to(device), ids[keep].to(device)
                for name, attack in attacks.items():
                    begin = time.time()
                    result = attack.attack(model, tokens, labels, ids)
                    seconds[name] += time.time() - begin
                    for column, values in _example_records(result, inputs.tokenizer, inputs.masking.name).items():
                        records[name][column] += values
        if stored is not None:
            records[RANDOM], seconds[RANDOM] = stored["records"], float(stored["seconds"])
        elif baseline is not None and RANDOM in records:
            context.keep(BASELINE_ATTACK, baseline, {"records": records[RANDOM], "seconds": seconds[RANDOM]})
        return records, seconds

    def _method_entry(self, name: str, examples: dict, ranking: MaskingCurves, seconds: float) -> dict:
        """One explanation's part of the section: its summary, its link to the masking curves of the ranking
        schedule and its per-example records (with the masking's first flip count beside the attack's)."""
        link = masking_link(examples, ranking)
        by_id = dict(zip(ranking.example_ids.tolist(), first_flip_count(ranking).tolist()))
        examples["masking_first_flip_count"] = [by_id.get(i, math.nan) for i in examples["example_id"]]
        summary = {**attack_summary(examples), "seconds": seconds}
        if summary["n_skipped_no_budget"]:
            undefined = "; no example was attacked, so the success rate is undefined (NaN)"
            log.warning(
                "attack %s: %d of %d examples not attacked: attack.budget=%s allows no token of texts "
                "this short (k_max = floor(budget * n + 0.5) = 0)%s",
                name,
                summary["n_skipped_no_budget"],
                len(examples["attacked"]),
                self.budget,
                "" if summary["n_attacked"] else undefined,
            )
        rounded = {k: round(v, 3) for k, v in summary.items() if isinstance(v, float)}
        log.info("attack %s (%s): %s", name, self.source.name, rounded)
        return {"summary": summary, "link": link, "examples": examples}

    @staticmethod
    def _artifacts(section: dict) -> Artifacts:
        """The per-example W&B table ``attack_examples`` (lists as JSON text) and the summary and link values
        as ``attack/<method>/<key>``."""
        rows, summary = [], {}
        for method, entry in section["methods"].items():
            examples = entry["examples"]
            for i in range(len(examples["example_id"])):
                rows.append([method, *(_cell(examples[c][i]) for c in EXAMPLE_COLUMNS)])
            for part in ("summary", "link"):
                for key, value in entry[part].items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool) and value is not None:
                        summary[f"attack/{method}/{key}"] = value
        return Artifacts(tables={"attack_examples": (["saliency", *EXAMPLE_COLUMNS], rows)}, summary=summary)

    def artifacts_from(self, result: dict, output_dir) -> Artifacts:
        return self._artifacts(result["attack"])

    @classmethod
    def report_measures(cls, result: dict) -> dict[tuple[str, str, str], float]:
        """``attack <key>`` rows (:data:`REPORTED`) per saliency method, under the attack's ranking as the
        schedule; missing values are NaN."""
        section = result.get("attack") or {}
        ranking = (section.get("settings") or {}).get("ranking", "")
        out = {}
        for method, entry in (section.get("methods") or {}).items():
            for part, key in REPORTED:
                value = (entry.get(part) or {}).get(key)
                out[(method, ranking, f"attack {key}")] = math.nan if value is None else float(value)
        return out

    @classmethod
    def report_bounds(cls, score: str) -> tuple[float, float] | None:
        """The range of an ``attack <key>`` row (:data:`REPORTED`)."""
        return next((bounds for (_, key), bounds in REPORTED.items() if score == f"attack {key}"), None)


def attack_frame(section: dict) -> pd.DataFrame:
    """The per-example outcomes of every method's attack as one table, one row per (saliency, example),
    lists as Parquet list columns (the ``attack.parquet`` of :mod:`itermask.storage.per_example`)."""
    frames = [pd.DataFrame({"saliency": method, **entry["examples"]}) for method, entry in section["methods"].items()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _cell(value):
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def _sorted_by_id(examples: dict[str, list]) -> dict[str, list]:
    order = sorted(range(len(examples["example_id"])), key=lambda i: examples["example_id"][i])
    return {column: [values[i] for i in order] if values else [] for column, values in examples.items()}


def _display(tokenizer, ids: torch.Tensor, attention: torch.Tensor) -> str:
    """The text of attended ``ids`` for display only (structural special tokens dropped; mask and unknown
    tokens kept), never re-tokenized."""
    structural = {getattr(tokenizer, f"{t}_token_id", None) for t in ("cls", "sep", "pad", "bos", "eos")} - {None}
    kept = [i for i, a in zip(ids.tolist(), attention.tolist()) if a and i not in structural]
    return tokenizer.decode(kept)


def _example_records(result: AttackResult, tokenizer, strategy: str) -> dict[str, list]:
    """The per-example lists of :data:`EXAMPLE_COLUMNS` of one batch (``masking_first_flip_count`` is added
    later, from the curves)."""
    import torch

    clean, adversarial = result.clean.to("cpu"), result.adversarial.to("cpu")
    perturbed, substituted = result.perturbed.cpu(), result.substituted_ids.cpu()
    out: dict[str, list] = {c: [] for c in EXAMPLE_COLUMNS if c != "masking_first_flip_count"}
    for row in range(len(result)):
        positions = torch.nonzero(perturbed[row]).flatten().tolist()
        before = tokenizer.convert_ids_to_tokens(clean.input_ids[row, positions].tolist())
        after = tokenizer.convert_ids_to_tokens(substituted[row, positions].tolist())
        out["substitutions"].append([f"{b} -> {a if a != b else f'<{strategy}>'}" for b, a in zip(before, after)])
        out["perturbed_positions"].append(positions)
        out["original_text"].append(_display(tokenizer, clean.input_ids[row], clean.attention_mask[row]))
        out["adversarial_text"].append(_display(tokenizer, adversarial.input_ids[row], adversarial.attention_mask[row]))
    for column in EXAMPLE_COLUMNS[:10]:  # those of the result's per-example tensors
        value = getattr(result, "example_ids" if column == "example_id" else column)
        out[column] = value.cpu().tolist()
    return out
