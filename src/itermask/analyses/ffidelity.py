"""The ``ffidelity`` analysis: F-Fidelity (Zheng et al., ICLR 2025, arXiv 2410.02970) of every evaluated
explanation's one-shot ranking, on a copy of the job's classifier fine-tuned with random, explanation-agnostic
removal of up to a share ``beta`` of each input.

Wiring only: the removal, the fine-tuning loop and the measure are :mod:`itermask.core.ffidelity`; the rows run
through :class:`itermask.core.subset_outputs.ModelOutputs` (the masked-row engine). The fine-tuned weights
depend on the checkpoint and these settings, not on the explanation: they are kept in the derived-value store
(:meth:`EvaluationContext.reuse`), so a sweep over saliency methods on one classifier fine-tunes once.
Configured by the ``ffidelity`` node (``conf/ffidelity/<name>.yaml``; ``none`` by default).
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Iterable
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
    example_subset,
    subset_lines,
)
from itermask.core.aopc_bounds import SUBSET_RULE
from itermask.formatting import number, program
from itermask.storage.per_example import FOLDER, write_per_example

if TYPE_CHECKING:
    import torch

    from itermask.core.curves import MaskingCurves

log = logging.getLogger(__name__)

__all__ = ["FFidelityAnalysis", "MODEL_KIND"]

#: the kind of the stored fine-tuned weights (storage.derived)
MODEL_KIND = "ffidelity_model"
#: the report's readable names of the per-example columns
LABELS = {
    "ffid_plus_prob": "FFid+ probability (higher is better)",
    "ffid_minus_prob": "FFid- probability (lower is better)",
    "ffid_plus_accuracy": "FFid+ accuracy (higher is better)",
    "ffid_minus_accuracy": "FFid- accuracy (lower is better)",
}
#: why the recursive schedule has no F-Fidelity
#: the derived-value kind of the removal-fine-tuned copy's training embeddings (its OOD detector's fit data)
OOD_FIT_KIND = "ffidelity_ood_fit"
#: the report rows of the OOD AUROC of F-Fidelity's inputs, on the copy that scores them
OOD_LABELS = {
    "ood_auroc_plus": "ood final/auroc_mahalanobis, FFid+ inputs (removal-fine-tuned copy)",
    "ood_auroc_minus": "ood final/auroc_mahalanobis, FFid- inputs (removal-fine-tuned copy)",
}
RECURSIVE = "the recursive schedule re-ranks after every step: F-Fidelity scores the fixed one-shot ranking"


class FFidelityAnalysis(Analysis):
    """F-Fidelity of every evaluated explanation (see the module docstring and :mod:`itermask.core.ffidelity`).

    Args:
        alpha, beta, n_samples, sizes: :class:`~itermask.core.ffidelity.FFidelitySettings` (the authors'
            defaults 0.5, 0.1, 50, sizes 5 %..95 %).
        steps: AdamW steps of the fine-tuning (batches of the training split, at least 1).
        learning_rate: its learning rate (> 0).
        seed: the job seed (draws of the fine-tuning's removal and of the evaluation's samples).
        ood_fit_examples: how out of distribution F-Fidelity's inputs are *for the model that scores them*: a
            Mahalanobis detector (final layer's input, as the ``ood`` analysis's) fitted on this many training
            examples embedded by the removal-fine-tuned copy, and the AUROC of telling the sampled FFid+ and
            FFid- inputs from the clean ones (``ood_auroc_plus``, ``ood_auroc_minus`` per explanation); ``0``:
            not measured. Embedded once per fine-tuned copy (derived-value store).
        max_examples: measure only this many of the evaluated examples (``None``: all), chosen by
            :func:`~itermask.analyses.base.example_subset` (the examples ``naopc.max_examples`` bounds).
        enabled: read by the settings stage.

    Raises:
        ValueError: (at construction, before any data or model work) a setting outside its range, named."""

    name = "ffidelity"

    def __init__(
        self,
        alpha: float = 0.5,
        beta: float = 0.1,
        n_samples: int = 50,
        sizes=None,
        steps: int = 60,
        learning_rate: float = 2e-5,
        seed: int = 0,
        ood_fit_examples: int = 1000,
        max_examples: int | None = None,
        enabled: bool = True,
    ) -> None:
        from itermask.core.ffidelity import DEFAULT_SIZES, FFidelitySettings

        self.max_examples = checked_max_examples(max_examples, "ffidelity.max_examples")

        if sizes is None:
            sizes = DEFAULT_SIZES
        elif isinstance(sizes, Iterable) and not isinstance(sizes, str):  # a list, or Hydra's ListConfig
            sizes = tuple(sizes)
        self.settings = FFidelitySettings(alpha, beta, n_samples, sizes, _whole(seed, "seed", 0))  # pyright: ignore[reportArgumentType] (checked there)
        self.steps = _whole(steps, "steps", 1)
        if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)) or not learning_rate > 0:
            raise ValueError(f"ffidelity.learning_rate={learning_rate!r}: choose a number > 0")
        self.learning_rate = float(learning_rate)
        self.ood_fit_examples = _whole(ood_fit_examples, "ood_fit_examples", 0)
        self._tuned: dict[int, tuple[Any, dict]] = {}
        self._detectors: dict[int, tuple[Any, str | None]] = {}
        self._model_fingerprints: dict[int, dict] = {}
        # per classifier, the row engine of its tuned copy: kept for the job, so a row that another explanation
        # (the random baseline, a degraded level of the sanity benchmark) asked for is computed once
        self._engines: dict[int, Any] = {}

    def describe(self) -> dict:
        s = self.settings
        return {
            "alpha": s.alpha,
            "beta": s.beta,
            "n_samples": s.n_samples,
            "sizes": list(s.sizes),
            "steps": self.steps,
            "learning_rate": self.learning_rate,
            "seed": s.seed,
            "ood_fit_examples": self.ood_fit_examples,
            "max_examples": self.max_examples,
        }

    def check(self, inputs: AnalysisInputs) -> None:
        """Raises ``ValueError`` when the job has no one-shot schedule: F-Fidelity scores the one-shot ranking,
        and its fine-tuning would run for nothing."""
        if "one_shot" not in inputs.evaluation.schedules:
            raise ValueError(
                "ffidelity needs the one_shot schedule's ranking: add one_shot to evaluation.schedules (the "
                "recursive schedule re-ranks after every step, so it has no ranking to score)"
            )

    def check_data(self, data) -> None:
        """F-Fidelity fine-tunes on the training split: refused, before any model work, for data without one
        (the texts given to :func:`itermask.evaluate` are evaluated whole, as the ``test`` split).

        Raises:
            ValueError: naming the missing split."""
        if "train" not in data.tokenized:
            raise ValueError(
                f"ffidelity: F-Fidelity fine-tunes a copy of the classifier on a training split, and these data have "
                f"only {list(data.tokenized)} (itermask.evaluate evaluates the given texts only): run "
                f"{program('evaluate')} on a dataset with a train split, or leave ffidelity out"
            )

    def tuned_model(self, inputs: AnalysisInputs, context: EvaluationContext):
        """``(model, info)``: the job's classifier fine-tuned with random removal (stored, or fine-tuned now;
        once per job). ``info``: ``seconds``, ``steps``, ``mean_share`` / ``max_share`` (removed shares drawn),
        ``reused``. A classifier without a checkpoint key (a module handed over) is fine-tuned, not stored."""
        if id(context.model) in self._tuned:
            return self._tuned[id(context.model)]
        import copy

        from itermask.storage.derived import token_digest

        computed, batches = [], list(itertools.islice(context.data.train_dataloader(), self.steps))

        def compute() -> dict:
            from itermask.core.ffidelity import fine_tune_with_removal

            start = time.time()
            tuned, shares = fine_tune_with_removal(
                context.model, batches, inputs.masking, inputs.tokenizer.all_special_ids,
                self.settings.beta, self.steps, self.learning_rate, self.settings.seed,
            )  # fmt: skip
            computed.append(True)
            state = {k: v.detach().cpu().clone() for k, v in tuned.state_dict().items()}
            return {"state": state, "seconds": time.time() - start, "steps": self.steps,
                    "mean_share": float(np.mean(shares)), "max_share": float(np.max(shares))}  # fmt: skip

        # the batches trained on (the checkpoint key of a classifier evaluated as it is holds no data)
        trained_on = token_digest([[i for b in batches for i in b["tokens"].input_ids.tolist()],
                                   [y for b in batches for y in b["labels"].tolist()]])  # fmt: skip
        # version 2: under bf16 autocast the steps no longer train on the first step's cast weights (5 December 2026)
        precision = str(getattr(context.trainer, "precision", "32-true"))  # autocast of the steps' forwards
        fingerprint = {"masking": repr(inputs.masking), **self.describe(), "batches": trained_on, "version": 2}
        fingerprint["precision"] = precision
        for key in ("alpha", "n_samples", "sizes", "ood_fit_examples"):  # the evaluation's, not the fine-tuning's
            fingerprint.pop(key)
        value = context.reuse(MODEL_KIND, fingerprint, compute)
        tuned = copy.deepcopy(context.model)
        tuned.load_state_dict(value["state"])
        info = {k: v for k, v in value.items() if k != "state"} | {"reused": not computed}
        self._model_fingerprints[id(context.model)] = fingerprint
        if info["reused"]:
            log.info("ffidelity: reusing the classifier fine-tuned with random removal by an earlier job")
        self._tuned[id(context.model)] = (tuned.eval(), info)
        return self._tuned[id(context.model)]

    def explanation_measures(
        self, inputs: AnalysisInputs, context: EvaluationContext, curves: MaskingCurves
    ) -> dict[str, torch.Tensor]:
        """``ffid_plus_prob``, ``ffid_minus_prob``, ``ffid_plus_accuracy``, ``ffid_minus_accuracy`` (``[B]``
        float64; :func:`itermask.core.ffidelity.ffidelity`) of the explanation whose one-shot ``curves`` are
        given, on the fine-tuned copy of ``context.model`` (:meth:`tuned_model`)."""
        values = self._measures(inputs, context, curves)
        from itermask.core.ffidelity import COLUMNS

        return {c: values[c] for c in COLUMNS}

    def _detector(self, inputs: AnalysisInputs, context: EvaluationContext):
        """``(scorer, None)``: a Mahalanobis scorer of the final layer's input (:class:`~itermask.ood.detectors.
        MahalanobisScorer`, ``covariance="auto"``) fitted on ``ood_fit_examples`` training examples (drawn with
        the evaluation's ``subset_seed``) embedded by the removal-fine-tuned copy, embedded once per copy
        (derived-value store); or ``(None, why)``."""
        if id(context.model) in self._detectors:
            return self._detectors[id(context.model)]
        from itermask.analyses.ood import collect
        from itermask.ood.detectors import MahalanobisScorer

        tuned, _ = self.tuned_model(inputs, context)
        data, e = context.data, inputs.evaluation
        fit = data.evaluation_subset(self.ood_fit_examples, e.subset_seed, "train", "ffidelity.ood_fit_examples")

        def embed() -> dict:
            with eval_mode(tuned):
                train, labels = collect(tuned, data.eval_loader(fit), e.token_budget, hidden_states=False)
            return {"features": train.features, "labels": labels}

        fingerprint = {
            "model": self._model_fingerprints[id(context.model)],
            "fit": data.input_digest(fit),
            "token_budget": e.token_budget,
        }
        embedded = context.reuse(OOD_FIT_KIND, fingerprint, embed)
        try:
            scorer = MahalanobisScorer("auto").fit(embedded["features"], embedded["labels"], "F-Fidelity's copy")
            found = (scorer, None)
        except ValueError as error:  # e.g. too few training examples: said, never a silent 0.5
            found = (None, f"the detector could not be fitted: {error}")
        self._detectors[id(context.model)] = found
        return found

    def _ood(self, inputs: AnalysisInputs, context: EvaluationContext, features: dict | None) -> dict:
        """``ood_auroc_plus`` / ``ood_auroc_minus``: the AUROC of telling the sampled FFid+ / FFid- inputs from the
        clean ones by the copy's Mahalanobis score; where one cannot be computed, ``ood_missing`` says why."""
        from itermask.ood.statistics import ood_auroc

        if not self.ood_fit_examples:
            return {"ood_missing": "not measured (ffidelity.ood_fit_examples=0)"}
        scorer, why = self._detector(inputs, context)
        if scorer is None or features is None:
            return {"ood_missing": why or "no features were recorded"}
        out: dict[str, Any] = {}
        clean = scorer.score(features["clean"])
        for side in ("plus", "minus"):
            try:
                out[f"ood_auroc_{side}"] = ood_auroc(clean, scorer.score(features[side]))
            except ValueError as error:  # no sampled row (every example too short), or degenerate scores
                out.setdefault("ood_missing", {})[side] = str(error)
        return out

    def _measures(
        self, inputs: AnalysisInputs, context: EvaluationContext, curves: MaskingCurves, record_ood: bool = False
    ) -> dict[str, Any]:
        import torch

        from itermask.analyses.clean_rows import clean_batch, pad_rank
        from itermask.core.ffidelity import ffidelity
        from itermask.core.naopc_scores import feature_ranks
        from itermask.core.subset_outputs import ModelOutputs, feature_counts, feature_index

        if curves.rank is None:
            raise ValueError("ffidelity: the curves record no ranking")
        e, record = inputs.evaluation, "final" if record_ood and self.ood_fit_examples else False
        tuned, _ = self.tuned_model(inputs, context)
        with eval_mode(tuned):
            batch, maskable = clean_batch(inputs, context, curves)
            features = feature_index(batch, maskable, e.features)
            if not torch.equal(feature_counts(features).cpu(), curves.n_maskable.cpu().long()):
                raise ValueError("ffidelity: the examples' maskable features differ from the masking curves'")
            engine = self._engine(tuned, context, e.token_budget)
            before = (engine.stats.rows, engine.stats.computed)
            outputs = ModelOutputs(
                tuned, batch, features, inputs.masking, curves.target, "probability", e.token_budget, forwards=engine
            )
            width, rank = features.shape[1], curves.rank.cpu()
            rank = rank[:, :width] if rank.shape[1] >= width else pad_rank(rank, width)
            orders = feature_ranks(rank, features.cpu())
            values = ffidelity(outputs, orders, curves.example_ids, curves.target, curves.labels, self.settings)
        if not record:  # the engine records the OOD features for every call; only the method's own are read
            values.pop("ffid_features", None)
        return {**values, "rows": (engine.stats.rows - before[0], engine.stats.computed - before[1])}

    def _engine(self, tuned, context: EvaluationContext, token_budget: int):
        """The row engine of the tuned copy of ``context.model``, kept for the job (one masking strategy and one
        set of features per job, so equal token ids are equal rows): recording the final layer's input whenever
        the OOD detector is fitted."""
        from itermask.core.forwards import RowForwards

        if id(context.model) not in self._engines:
            record = "final" if self.ood_fit_examples else False
            self._engines[id(context.model)] = RowForwards(tuned, token_budget, record)
        return self._engines[id(context.model)]

    def run(self, inputs: AnalysisInputs, context: EvaluationContext, curves: EvaluatedCurves) -> AnalysisOutput:
        start = time.time()
        curves, measured, evaluated = example_subset(curves, self.max_examples)
        _, info = self.tuned_model(inputs, context)
        frames, methods, rows, clean = [], {}, [0, 0], None
        for method, by_schedule in curves.items():
            one_shot = by_schedule.get("one_shot")
            if one_shot is None:
                methods[method] = {"missing": RECURSIVE}
                continue
            values = self._measures(inputs, context, one_shot, record_ood=True)
            rows = [rows[0] + values["rows"][0], rows[1] + values["rows"][1]]
            clean = (one_shot, values["ffid_clean_correct"])
            frame = pd.DataFrame(
                {"saliency": method, "schedule": "one_shot", "example_id": one_shot.example_ids.cpu().numpy()}
            )
            for column in LABELS:
                frame[column] = values[column].numpy()
            frames.append(frame)
            short = int((values["ffid_cap"] == 0).sum())  # NaN columns: fewer than 1 / beta features
            methods[method] = {"one_shot": {c: _nanmean(frame[c]) for c in LABELS} | {"n": len(frame)}}
            methods[method]["one_shot"] |= {"n_measured": len(frame) - short, "n_too_few_features": short}
            methods[method]["one_shot"] |= self._ood(inputs, context, values.get("ffid_features"))
        section = {
            "settings": self.describe(),
            "examples": {"measured": measured, "evaluated": evaluated, "rule": SUBSET_RULE},
            "fine_tune": {**info, **_accuracy(clean)},
            "methods": methods,
            "rows": {"asked": rows[0], "computed": rows[1]},
            "note": "FFid+ higher and FFid- lower is more faithful; accuracy of the gold label (NaN where unknown); "
            f"NaN for the n_too_few_features examples with fewer than 1 / beta = {1 / self.settings.beta:g} "
            "features, where the cap floor(beta * n) is 0 and nothing can be removed; means over the others",
        }
        n = sum(len(f) for f in frames)
        section["rows"]["computed_per_example"] = rows[1] / n if n else math.nan
        section["seconds"] = time.time() - start
        artifacts = _artifacts(section)
        if inputs.output_dir is not None and frames:
            artifacts.files = _write_scores(inputs.folder, pd.concat(frames, ignore_index=True))
        return AnalysisOutput({"ffidelity": section}, artifacts)

    def artifacts_from(self, result: dict, output_dir) -> Artifacts:
        return _artifacts(result["ffidelity"])

    @classmethod
    def report_measures(cls, result: dict) -> dict[tuple[str, str, str], float]:
        """The four FFid rows (:data:`LABELS`) of each explanation's one-shot ranking."""
        out = {}
        for method, by_schedule in ((result.get("ffidelity") or {}).get("methods") or {}).items():
            entry = by_schedule.get("one_shot") or {}
            for key, label in LABELS.items():
                value = entry.get(key)
                out[(method, "one_shot", label)] = math.nan if value is None else float(value)
            for key, label in OOD_LABELS.items():
                if entry.get(key) is not None:
                    out[(method, "one_shot", label)] = float(entry[key])
        return out

    @classmethod
    def report_bounds(cls, score: str) -> tuple[float, float] | None:
        """Differences of probabilities or of 0/1 accuracies: in ``[-1, 1]``."""
        return (-1.0, 1.0) if score in LABELS.values() else None

    @classmethod
    def summary_lines(cls, result: dict) -> list[str]:
        """The method under study's FFid+ / FFid- and the fine-tuning's accuracy before and after."""
        section = result.get("ffidelity")
        if not section:
            return []
        saliency = result.get("saliency")
        method = saliency.get("name") if isinstance(saliency, dict) else str(saliency)
        entry = ((section.get("methods") or {}).get(method) or {}).get("one_shot") or {}
        tune = section.get("fine_tune") or {}
        short = entry.get("n_too_few_features") or 0
        beta = (section.get("settings") or {}).get("beta")
        unmeasured = [
            f"  F-Fidelity: {short} of {entry.get('n')} examples not measured (NaN, left out of the means): fewer "
            f"than 1 / beta = {1 / beta:g} features, so the cap floor(beta * n) removes nothing"
        ] if short and beta else []  # fmt: skip
        return (
            [
                f"F-Fidelity ({method}, one-shot): FFid+ {number(entry.get('ffid_plus_prob'), 3)} / FFid- "
                f"{number(entry.get('ffid_minus_prob'), 3)} (probability), {number(entry.get('ffid_plus_accuracy'), 3)}"
                f" / {number(entry.get('ffid_minus_accuracy'), 3)} (accuracy); fine-tuned {tune.get('steps')} steps in "
                f"{number(tune.get('seconds'), 1)} s"
                + (" (reused)" if tune.get("reused") else "")
                + ", clean accuracy "
                f"{number(tune.get('accuracy_before'), 3)} -> {number(tune.get('accuracy_after'), 3)}"
            ]
            + unmeasured
            + subset_lines(section, "ffidelity.max_examples")
        )


def _whole(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"ffidelity.{name}={value!r}: choose a whole number >= {low}")
    return int(value)


def _nanmean(values) -> float | None:
    array = np.asarray(values, dtype=np.float64)
    return float(np.nanmean(array)) if np.isfinite(array).any() else None


def _accuracy(clean) -> dict:
    """The clean evaluated examples' accuracy (gold label known) of the job's classifier (``accuracy_before``,
    from the curves) and of the fine-tuned copy (``accuracy_after``), over ``n_labelled`` examples."""
    if clean is None:
        return {}
    curves, after = clean
    labelled = (curves.labels >= 0).cpu()
    before = (curves.clean_logits.argmax(dim=-1).cpu() == curves.labels.cpu())[labelled]
    n = int(labelled.sum())
    if not n:
        return {"n_labelled": 0, "accuracy_note": "no evaluated example has a gold label"}
    return {
        "n_labelled": n,
        "accuracy_before": float(before.double().mean()),
        "accuracy_after": float(after[labelled].mean()),
    }


def _write_scores(folder, per_example: pd.DataFrame) -> dict:
    """``scores.parquet`` gains the four FFid columns (joined on saliency, schedule and example; NaN for the
    recursive schedule's rows)."""
    from pathlib import Path

    path = Path(folder) / FOLDER / "scores.parquet"
    scores = pd.read_parquet(path)
    scores = scores.drop(columns=[c for c in per_example.columns[3:] if c in scores.columns])
    scores = scores.merge(per_example, on=["saliency", "schedule", "example_id"], how="left", validate="one_to_one")
    return write_per_example(folder, {"scores": scores})


def _artifacts(section: dict) -> Artifacts:
    """W&B summary keys ``ffidelity/<saliency>/one_shot/<column>`` and ``ffidelity/fine_tune/<key>``."""
    summary = {}
    for method, by_schedule in (section.get("methods") or {}).items():
        for key, value in (by_schedule.get("one_shot") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                summary[f"ffidelity/{method}/one_shot/{key}"] = float(value)
    for key, value in (section.get("fine_tune") or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            summary[f"ffidelity/fine_tune/{key}"] = float(value)
    return Artifacts(summary=summary)
