"""The ``ood`` analysis: are masked inputs out of the distribution the classifier was fine-tuned on?

Wiring only (the statistics live in :mod:`itermask.ood.detectors` and :mod:`itermask.ood.statistics`, the
pictures in :mod:`itermask.ood.plots`). Configured by the ``ood`` config group (``conf/ood/<level>.yaml``,
``final`` by default).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any, cast

from itermask.analyses.base import (
    Analysis,
    AnalysisInputs,
    AnalysisOutput,
    Artifacts,
    EvaluatedCurves,
    EvaluationContext,
    eval_mode,
)
from itermask.formatting import md_table, mean_pm, number
from itermask.ood.bounds import statistic_bounds

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from itermask.core.curves import MaskingCurves
    from itermask.core.representations import Representations
    from itermask.ood.detectors import Covariance, OODDetectors
    from itermask.ood.statistics import OODCurves

log = logging.getLogger(__name__)

__all__ = ["OODAnalysis", "collect", "ood_rows", "OOD_COLUMNS", "REPORTED"]

OOD_COLUMNS = ("curve", "saliency", "schedule", "x", "statistic", "value")
#: the statistics the report shows, at the masking fractions of ``plots.umap_fractions``
REPORTED = (
    "final/auroc_mahalanobis",
    "final/auroc_knn_distance",
    "auroc_masf",
    "masf_flagged",
    "auroc_max_softmax",
    "ece",
)


def collect(
    model: torch.nn.Module, loader, token_budget: int | None = None, hidden_states: bool = True
) -> tuple[Representations, torch.Tensor]:
    """Representations ``[N, ...]`` (on the CPU; only the final layer's input without ``hidden_states``) and gold
    labels ``[N]`` of every example of ``loader``, in loader order, each batch run by
    :func:`itermask.core.forwards.row_outputs` (chunks of at most ``token_budget`` padded tokens, ``None``: its
    default). ``model`` must be in eval mode.

    Raises:
        ValueError: if the loader is empty.
    """
    import torch

    from itermask.core.evaluation_settings import DEFAULT_TOKEN_BUDGET
    from itermask.core.forwards import row_outputs
    from itermask.core.representations import Representations

    token_budget = DEFAULT_TOKEN_BUDGET if token_budget is None else token_budget
    device = next(model.parameters()).device
    kind = "all" if hidden_states else "final"
    labels, parts = [], []
    for batch in loader:
        out = row_outputs(model, batch["tokens"].to(device), token_budget, representations=kind)
        assert out.representations is not None  # requested from row_outputs
        parts.append(out.representations.map(lambda t: t.cpu()))
        labels.append(batch["labels"])
    if not labels:
        raise ValueError("no examples to embed")
    return Representations.concat(parts), torch.cat(labels)


def ood_rows(ood: dict) -> list[list[Any]]:
    """The per-step OOD statistics (``ood["statistics"][saliency][schedule]``, see
    :meth:`itermask.ood.statistics.OODCurves.to_dict`) in long format, :data:`OOD_COLUMNS` order."""
    rows = []
    for saliency, by_schedule in ood["statistics"].items():
        for schedule, stats in by_schedule.items():
            for key, series in stats["values"].items():
                for x, value in zip(stats["x"], series):
                    rows.append([f"{saliency}/{schedule}", saliency, schedule, x, key, value])
    return rows


#: the detector score stored per example and step (``per_example/ood.parquet``): the final layer's
#: Mahalanobis score, the one behind the reported ``final/auroc_mahalanobis``
EXAMPLE_SCORE = "final/mahalanobis"


def example_score_frame(method: str, curves: MaskingCurves, statistics: OODCurves) -> pd.DataFrame | None:
    """One row per (example, step) of one method's and schedule's curves with the final layer's Mahalanobis
    score of the masked input (``mahalanobis``) and of the clean input (``clean_mahalanobis``), float32, as
    :func:`~itermask.ood.statistics.masking_ood_statistics` computed them (``k = 0`` rows: the clean
    input's score); ``None`` where that score is missing (``statistics.missing`` says why). Columns: see
    :mod:`itermask.storage.per_example`."""
    import numpy as np
    import pandas as pd

    masked = statistics.example_scores.get(EXAMPLE_SCORE)
    clean = statistics.example_clean.get(EXAMPLE_SCORE)
    if masked is None or clean is None:
        return None
    size, steps = masked.shape
    return pd.DataFrame(
        {
            "saliency": method,
            "schedule": curves.schedule,
            "example_id": np.repeat(curves.example_ids.cpu().numpy(), steps),
            "step": np.tile(np.arange(steps), size),
            "x": np.tile(curves.grid.cpu().numpy(), size),
            "k": curves.k.reshape(-1).cpu().numpy(),
            "mahalanobis": masked.reshape(-1).astype(np.float32),
            "clean_mahalanobis": np.repeat(clean, steps).astype(np.float32),
        }
    )


def statistics_figures(statistics: dict, method: str, out: Path) -> dict[str, Path]:
    """Draw the figures that need only the statistics (``result["ood"]["statistics"]``) into ``out``:
    ``ood_statistics.png`` and ``ood_mahalanobis_auroc_by_layer.png`` (of ``method``); ``{name: path}``.
    (The UMAP needs the embeddings and is drawn by :meth:`OODAnalysis.run` only.)"""
    from itermask.ood import plots

    statistics_png = plots.save(plots.statistics_figure(statistics), out / "ood_statistics.png")
    layers = plots.layer_figure(statistics[method], "auroc_mahalanobis")
    return {
        "ood/statistics": statistics_png,
        "ood/mahalanobis_auroc_by_layer": plots.save(layers, out / "ood_mahalanobis_auroc_by_layer.png"),
    }


LEVELS = ("none", "final", "full")
#: the masking fractions of the UMAP panels and the report's rows, by default
UMAP_FRACTIONS = (0.1, 0.5, 0.9)
#: the default ``plots`` settings
PLOTS = {"enabled": True, "umap_fractions": UMAP_FRACTIONS, "umap_train_points": 500, "umap_neighbors": 15}


#: the readable names of the timed stages (results.json's ``ood.seconds``, in seconds)
STAGES = {"embed_fit_data": "embedding the fit data", "fit_and_score": "fitting and scoring", "plots": "plots"}


#: the soft inputs whose OOD AUROC the section holds (``soft_inputs``), and their readable names
SOFT_INPUTS = {"soft_comprehensiveness": "soft comprehensiveness", "soft_sufficiency": "soft sufficiency"}


def soft_input_aurocs(curves: EvaluatedCurves, detectors: OODDetectors) -> dict[str, dict]:
    """Per explanation with soft inputs (Zhao & Aletras's, :mod:`itermask.core.soft_masking`; the one-shot
    curves' ``soft_features`` / ``soft_keep_features``): the Mahalanobis AUROC (final layer's input, the detector
    of the masked inputs' AUROC) of telling its soft comprehensiveness and its soft sufficiency inputs, every draw
    of every example, from the same examples' clean inputs; ``n_examples``, ``n_draws``; where it cannot be
    computed, ``missing`` says why per input (no detector, degenerate scores), never a silent 0.5."""
    from itermask.ood.statistics import ood_auroc

    scorer, out = detectors.mahalanobis.get("final"), {}
    for name, by_schedule in curves.items():
        c = next((c for c in by_schedule.values() if c.soft_features is not None), None)
        if c is None or c.soft_features is None or c.clean_features is None or c.soft_keep_features is None:
            continue
        entry: dict[str, Any] = {"n_examples": len(c), "n_draws": int(c.soft_features.shape[1])}
        if scorer is None:
            why = detectors.missing.get("final/mahalanobis", "the detector was not fitted")
            out[name] = entry | {"missing": dict.fromkeys(SOFT_INPUTS, why)}
            continue
        clean = scorer.score(c.clean_features)
        inputs = {"soft_comprehensiveness": c.soft_features, "soft_sufficiency": c.soft_keep_features}
        for key, features in inputs.items():
            try:
                entry[key] = ood_auroc(clean, scorer.score(features.reshape(-1, features.shape[-1])))
            except ValueError as error:  # degenerate or non-finite scores: said, never 0.5
                entry.setdefault("missing", {})[key] = str(error)
        out[name] = entry
    return out


class OODAnalysis(Analysis):
    """Out-of-distribution statistics of the masked inputs' representations at every masking step
    (:func:`itermask.ood.statistics.masking_ood_statistics`) for every saliency method and schedule.

    Args:
        level: ``"final"`` (the default run's: only the final linear layer's input, recorded at no extra forward
            cost, scored by the Mahalanobis detector with its OOD AUROC per step, and the descriptive statistics
            of that view and of the softmax) or ``"full"`` (also every hidden layer, kNN, MaSF on
            ``calibration_split`` and the figures); ``"none"`` is handled by the settings stage: no analysis.
        n_fit_examples: training examples (a seeded subset) whose embeddings fit the Mahalanobis class means
            and covariance and the kNN index (``None``: all).
        calibration_split: held-out split for MaSF, cut in a fit half and a calibration half (``None``: no MaSF).
        n_calibration_examples: examples of it (``None``: all).
        knn_k, knn_normalize, covariance: see :class:`itermask.ood.detectors.KNNScorer` and
            :class:`itermask.ood.detectors.MahalanobisScorer`.
        masf_alpha, ece_bins: MaSF's significance level and the expected calibration error's bins.
        seed: seed of the analysis's random choices (training and calibration subsets, MaSF's split,
            the UMAP and its training points).
        plots: ``{"enabled", "umap_fractions", "umap_train_points", "umap_neighbors"}``.

    Raises:
        ValueError: naming the setting: sizes not positive, ``knn_k < 1``, an unknown covariance estimator,
            ``masf_alpha`` outside (0, 1), ``ece_bins < 1``; at ``level="full"`` with plots, umap-learn (the
            ``umap`` extra) not installed.
    """

    name = "ood"

    def __init__(
        self,
        level: str = "final",
        n_fit_examples: int | None = 1000,
        calibration_split: str | None = "validation",
        n_calibration_examples: int | None = None,
        knn_k: int = 10,
        knn_normalize: bool = True,
        covariance: str = "auto",
        masf_alpha: float = 0.05,
        ece_bins: int = 15,
        seed: int = 0,
        plots: dict | None = None,
    ) -> None:
        from itermask.ood.detectors import COVARIANCES

        if level not in LEVELS[1:]:
            raise ValueError(f"ood.level must be one of {LEVELS}, got {level!r}")
        for setting, value in (("n_fit_examples", n_fit_examples), ("n_calibration_examples", n_calibration_examples)):
            if value is not None and int(value) < 1:
                raise ValueError(f"ood.{setting} must be positive or null (all), got {value}")
        if int(knn_k) < 1:
            raise ValueError(f"ood.knn_k must be at least 1, got {knn_k}")
        if covariance not in COVARIANCES:
            raise ValueError(f"ood.covariance must be one of {COVARIANCES}, got {covariance!r}")
        if not 0 < float(masf_alpha) < 1:
            raise ValueError(f"ood.masf_alpha must lie in (0, 1), got {masf_alpha}")
        if int(ece_bins) < 1:
            raise ValueError(f"ood.ece_bins must be at least 1, got {ece_bins}")
        self.level = level
        self.n_fit_examples, self.n_calibration_examples = n_fit_examples, n_calibration_examples
        self.calibration_split = calibration_split if level == "full" else None
        self.knn_k, self.knn_normalize = int(knn_k), bool(knn_normalize)
        self.covariance: Covariance = cast("Covariance", covariance)  # checked against COVARIANCES above
        self.masf_alpha, self.ece_bins, self.seed = float(masf_alpha), int(ece_bins), int(seed)
        self.plots: dict[str, Any] = {**PLOTS, **(plots or {})}
        if level != "full":
            self.plots["enabled"] = False
        from itermask.validation import ood_package_problems

        if missing := ood_package_problems(level, self.plots["enabled"]):  # umap-learn, an extra
            raise ValueError(missing[0])

    @property
    def representations(self) -> str:
        return "all" if self.level == "full" else "final"

    def check(self, inputs: AnalysisInputs) -> None:
        from itermask.core.evaluation_settings import off_grid

        e = inputs.evaluation
        if self.plots["enabled"] and e.steps == "fraction":
            if off := off_grid(self.plots["umap_fractions"], e.fractions):
                raise ValueError(
                    f"ood.plots.umap_fractions {off} are not among evaluation.fractions "
                    f"{list(e.fractions)}: add them to the fractions, change ood.plots.umap_fractions, "
                    "or set ood.plots.enabled=false"
                )

    def check_data(self, data) -> None:
        splits = list(data.tokenized)
        if self.calibration_split is not None and self.calibration_split not in splits:
            raise ValueError(
                f"unknown ood.calibration_split {self.calibration_split!r}: choose from {splits} or null (no MaSF)"
            )

    def _fit(
        self, inputs: AnalysisInputs, context: EvaluationContext
    ) -> tuple[OODDetectors, Representations, torch.Tensor]:
        from itermask.core.representations import Representations
        from itermask.ood.detectors import OODDetectors

        model, data, chunk = context.model, context.data, inputs.evaluation.token_budget
        full = self.level == "full"
        fit_data = data.evaluation_subset(self.n_fit_examples, self.seed, "train", "ood.n_fit_examples")
        calibration_data = None
        if self.calibration_split is not None:
            calibration_data = data.evaluation_subset(self.n_calibration_examples, self.seed, self.calibration_split)

        def embed() -> dict:
            with eval_mode(model):
                train, labels = collect(model, data.eval_loader(fit_data), chunk, hidden_states=full)
                calibration = None
                if calibration_data is not None:
                    calibration, _ = collect(model, data.eval_loader(calibration_data), chunk)
            calibrated = None if calibration is None else vars(calibration)
            return {"train": vars(train), "labels": labels, "calibration": calibrated}

        # the same for every job on this checkpoint with these settings: embedded once (storage.derived)
        fingerprint = {
            "fit": data.input_digest(fit_data),
            "calibration": None if calibration_data is None else data.input_digest(calibration_data),
            "hidden_states": full,
            "token_budget": chunk,
            "eval_batch_size": data.eval_batch_size,
        }
        embedded = context.reuse("ood_fit_representations", fingerprint, embed)
        train, train_labels = Representations(**embedded["train"]), embedded["labels"]
        calibration = None if embedded["calibration"] is None else Representations(**embedded["calibration"])
        detectors = OODDetectors.fit(
            train,
            train_labels,
            calibration,
            k=self.knn_k,
            normalize_knn=self.knn_normalize,
            covariance=self.covariance,
            split_seed=self.seed,
            knn=full,
        )
        left_out = set() if full else {k for k in detectors.missing if k == "masf" or k.endswith("/knn_distance")}
        for key in left_out:  # not missing by accident: the level leaves them out
            detectors.missing[key] = "not computed at ood.level=final (ood.level=full computes it)"
        for key, reason in detectors.missing.items():
            if key not in left_out:
                log.warning("OOD detector %s is missing: %s", key, reason)
        return detectors, train, train_labels

    def run(self, inputs: AnalysisInputs, context: EvaluationContext, curves: EvaluatedCurves) -> AnalysisOutput:
        from itermask.ood.statistics import masking_ood_statistics

        seconds, start = {}, time.time()
        detectors, train, train_labels = self._fit(inputs, context)
        seconds["embed_fit_data"], start = time.time() - start, time.time()
        computed = {
            name: {
                schedule: masking_ood_statistics(c, detectors, alpha=self.masf_alpha, n_bins=self.ece_bins)
                for schedule, c in by_schedule.items()
            }
            for name, by_schedule in curves.items()
        }
        statistics = {name: {s: c.to_dict() for s, c in by_s.items()} for name, by_s in computed.items()}
        seconds["fit_and_score"], start = time.time() - start, time.time()
        written = self._write_example_scores(inputs.folder, curves, computed)
        section = {
            "level": self.level,
            "representation": "final = input of the classifier's final linear layer; layer_i = hidden state i "
            "mean-pooled over attended tokens (layer_0: embeddings); MaSF uses max-pooled hidden states",
            "fit": detectors.info,
            "missing_detectors": detectors.missing,
            "masf_alpha": self.masf_alpha,
            "knn_k": self.knn_k,
            "statistics": statistics,
            "soft_inputs": soft_input_aurocs(curves, detectors),
        }
        images = {}
        if self.plots["enabled"]:
            images = self._figures(inputs, context, curves, section, train, train_labels)
            seconds["plots"] = time.time() - start
        section["seconds"] = seconds
        parts = ", ".join(f"{STAGES[k]} {v:.1f} s" for k, v in seconds.items())
        log.info("OOD analysis took %.1f s (%s)", sum(seconds.values()), parts)
        artifacts = self._artifacts(section, images)
        artifacts.files.update(written)
        return AnalysisOutput({"ood": section}, artifacts)

    @staticmethod
    def _write_example_scores(
        output_dir: Path, curves: EvaluatedCurves, computed: dict[str, dict[str, OODCurves]]
    ) -> dict[str, Path]:
        """Write ``per_example/ood.parquet`` (:func:`example_score_frame` of every method and schedule)
        atomically; ``{relative path: path}``, empty (with a warning) when no curve has the score."""
        import pandas as pd

        from itermask.storage.per_example import write_per_example

        frames = [
            frame
            for name, by_schedule in computed.items()
            for schedule, stats in by_schedule.items()
            if (frame := example_score_frame(name, curves[name][schedule], stats)) is not None
        ]
        if not frames:
            log.warning("no per-example OOD scores to store: %s is missing for every curve", EXAMPLE_SCORE)
            return {}
        return write_per_example(output_dir, {"ood": pd.concat(frames, ignore_index=True)})

    def _figures(
        self,
        inputs: AnalysisInputs,
        context: EvaluationContext,
        evaluated: EvaluatedCurves,
        section: dict,
        train: Representations,
        train_labels,
    ) -> dict:
        import torch

        from itermask.ood import plots

        method, out = evaluated.method, inputs.folder
        images = statistics_figures(section["statistics"], method, out)
        curves = evaluated[method]
        if evaluated.steps != "fraction":
            reason = "the UMAP panels are masking fractions; these curves have count steps"
            section["missing_plots"] = {"ood/umap": reason}
            log.warning("no UMAP: %s", reason)
            return images
        keep = torch.randperm(len(train), generator=torch.Generator().manual_seed(self.seed))
        keep = keep[: self.plots["umap_train_points"]]
        figure = plots.umap_figure(
            train.features[keep],
            train_labels[keep],
            dict(curves),
            fractions=list(self.plots["umap_fractions"]),
            label_names=context.data.label_names,
            n_neighbors=self.plots["umap_neighbors"],
            seed=self.seed,
        )
        images["ood/umap"] = plots.save(figure, out / "ood_umap.png")
        return images

    @staticmethod
    def _artifacts(section: dict, images: dict[str, Path]) -> Artifacts:
        """The long table of every statistic (``ood_statistics``), the figures, the statistics of the final-layer
        input and of the model as curves over the masking step (``ood/<saliency>/<schedule>/<statistic>``, the
        per-step values; per-layer values are in the table only) and, as summary values, the AUROCs and MaSF share
        of the final-layer input and of the model averaged over the masking steps of the grid,
        ``ood/<saliency>/<schedule>/<statistic>/mean_over_steps`` (step 0 included; steps without a finite value
        left out, a statistic without any too)."""
        rows = ood_rows(section)
        steps: dict[str, list[float]] = {}
        for curve, _, _, _, key, value in rows:
            if ("auroc" in key or key == "masf_flagged") and not key.startswith("layer_") and value is not None:
                if math.isfinite(value):
                    steps.setdefault(f"ood/{curve}/{key}/mean_over_steps", []).append(float(value))
        summary = {key: fmean(values) for key, values in steps.items()}
        curves = {
            saliency: {
                schedule: {
                    "steps": stats.get("steps", "fraction"),
                    "x": stats["x"],
                    **{k: v for k, v in stats["values"].items() if not k.startswith("layer_")},
                }
                for schedule, stats in by_schedule.items()
            }
            for saliency, by_schedule in section["statistics"].items()
        }
        return Artifacts(
            images=dict(images),
            tables={"ood_statistics": (list(OOD_COLUMNS), rows)},
            summary=summary,
            curves={"ood": curves},
        )

    def artifacts_from(self, result: dict, output_dir: Path) -> Artifacts:
        """The figures the stored statistics allow (not the UMAP: no embeddings), the table and summary."""
        section = result["ood"]
        images = {}
        if self.plots["enabled"]:
            images = statistics_figures(section["statistics"], result["saliency"]["name"], Path(output_dir))
        return self._artifacts(section, images)

    @classmethod
    def report_measures(cls, result: dict) -> dict[tuple[str, str, str], float]:
        """``ood <statistic> @<p>%`` for the statistics in :data:`REPORTED` at the fractions of the run's
        ``ood.plots.umap_fractions`` (default 10/50/90 %) that are on its masking grid; missing values are NaN."""
        ood = result.get("ood") or {}
        config = (result.get("config") or {}).get("ood") or {}
        fractions: Sequence[float] = ((config.get("plots") or {}).get("umap_fractions")) or UMAP_FRACTIONS
        out = {}
        for method, by_schedule in (ood.get("statistics") or {}).items():
            for schedule, stats in by_schedule.items():
                grid = stats.get("fraction") or []
                for name in REPORTED:
                    values = stats.get("values", {}).get(name)
                    if values is None:
                        continue
                    for fraction in fractions:
                        step = next((i for i, f in enumerate(grid) if abs(f - fraction) < 1e-9), None)
                        if step is not None:
                            value = float("nan") if values[step] is None else float(values[step])
                            out[(method, schedule, f"ood {name} @{fraction * 100:g}%")] = value
        for method, entry in (ood.get("soft_inputs") or {}).items():
            for key, label in SOFT_INPUTS.items():
                if key in entry:
                    out[(method, "one_shot", f"ood final/auroc_mahalanobis, {label} inputs")] = float(entry[key])
        return out

    @classmethod
    def headline_lines(cls, summary: pd.DataFrame) -> list[str]:
        """A table of the Mahalanobis OOD AUROC of the final layer's input (mean ± std over seeds) per
        explanation and schedule at the reported masking fractions (none without those rows)."""
        ood = summary[summary.score.str.startswith("ood final/auroc_mahalanobis @")]
        if not len(ood):
            return []
        cols = list(dict.fromkeys(ood.score))
        table = []
        for e, sch in dict.fromkeys(zip(ood.explanation, ood.schedule)):
            cells = []
            for c in cols:
                row = cast("pd.DataFrame", ood[(ood.explanation == e) & (ood.schedule == sch) & (ood.score == c)])
                cells.append(mean_pm(row.iloc[0]) if len(row) else "n/a")
            table.append([e, sch, *cells])
        return [
            "Masked inputs out of distribution (the paper's second claim): OOD AUROC of masked vs clean "
            "evaluation inputs by the Mahalanobis score of the final layer's input (0.5: indistinguishable, "
            "1: every masked input scores above every clean one), mean ± std over seeds:",
            "",
            md_table(["explanation", "schedule", *[c.rsplit("@", 1)[1] + " masked" for c in cols]], table),
            "",
        ]

    @classmethod
    def summary_lines(cls, result: dict) -> list[str]:
        """The final layer's Mahalanobis OOD AUROC of masked vs clean inputs at 50 % masking (the nearest
        step of the grid) per schedule of the method under study, or why there is none."""
        saliency = result.get("saliency")
        method = saliency.get("name") if isinstance(saliency, dict) else str(saliency)
        statistic, at = "final/auroc_mahalanobis", 0.5
        by_schedule = ((result.get("ood") or {}).get("statistics") or {}).get(method)
        if not by_schedule:
            return ["OOD: not computed (ood=none or not among the analyses)"]
        parts, where = [], None
        for schedule, stats in by_schedule.items():
            values, fractions = (stats.get("values") or {}).get(statistic), stats.get("fraction") or []
            if not values or not fractions:
                continue
            step = min(range(len(fractions)), key=lambda i: abs(fractions[i] - at))
            where = fractions[step]
            parts.append(f"{schedule} {number(values[step], 3)}")
        if not parts or where is None:
            return [f"OOD: no {statistic}"]
        return [
            f"OOD AUROC of masked vs clean inputs at {where * 100:.0f} % masking (Mahalanobis, final layer; in [0, 1], "
            "0.5: indistinguishable): " + ", ".join(parts)
        ]

    @classmethod
    def report_bounds(cls, score: str) -> tuple[float, float] | None:
        """The range of an ``ood <statistic> @<p>%`` row: the statistic's (:func:`statistic_bounds`)."""
        if not score.startswith("ood ") or " @" not in score:
            return None
        return statistic_bounds(score[len("ood ") :].rsplit(" @", 1)[0])
