"""The out-of-distribution analysis of one evaluation run: from config to result dict and pictures.

Wiring only (the statistics live in :mod:`itermask.embedding_stats`, the pictures in
:mod:`itermask.ood_plots`): embed a seeded subset of the training split (Mahalanobis, kNN, UMAP
background) and the held-out calibration split (MaSF) with the fine-tuned model, fit the detectors, score
every masking curve that carries representations, and draw the figures into the run's output folder.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch
from omegaconf import DictConfig

from itermask import ood_plots
from itermask.embedding_stats import COVARIANCES, OODDetectors, masking_ood_statistics
from itermask.evaluation import MaskingCurves, off_grid
from itermask.representations import Representations, capture_representations
from itermask.tokens import chunked_logits

log = logging.getLogger(__name__)

__all__ = ["check_settings", "collect", "run"]


def check_settings(ood: DictConfig, evaluation: DictConfig, splits=None) -> None:
    """Check ``cfg.ood`` before any work (``splits``: the data's split names, when known).

    Raises:
        ValueError: naming the setting: sizes not positive, ``knn_k < 1``, an unknown covariance
            estimator, ``masf_alpha`` outside (0, 1), ``ece_bins < 1``, an unknown calibration split, or UMAP
            fractions that are not on the masking grid.
    """
    for name in ("n_fit_examples", "n_calibration_examples"):
        value = ood.get(name)
        if value is not None and int(value) < 1:
            raise ValueError(f"ood.{name} must be positive or null (all), got {value}")
    if int(ood.knn_k) < 1:
        raise ValueError(f"ood.knn_k must be at least 1, got {ood.knn_k}")
    if ood.covariance not in COVARIANCES:
        raise ValueError(f"ood.covariance must be one of {COVARIANCES}, got {ood.covariance!r}")
    if not 0 < float(ood.masf_alpha) < 1:
        raise ValueError(f"ood.masf_alpha must lie in (0, 1), got {ood.masf_alpha}")
    if int(ood.ece_bins) < 1:
        raise ValueError(f"ood.ece_bins must be at least 1, got {ood.ece_bins}")
    if splits is not None and ood.calibration_split is not None and ood.calibration_split not in splits:
        raise ValueError(
            f"unknown ood.calibration_split {ood.calibration_split!r}: choose from {list(splits)} or null (no MaSF)"
        )
    if ood.plots.enabled and evaluation.steps == "fraction":
        off = off_grid(ood.plots.umap_fractions, evaluation.fractions)
        if off:
            raise ValueError(
                f"ood.plots.umap_fractions {off} are not among evaluation.fractions "
                f"{list(evaluation.fractions)}: add them to the fractions, change ood.plots.umap_fractions, "
                "or set ood.plots.enabled=false"
            )


def collect(model: torch.nn.Module, loader, chunk_size: int = 256) -> tuple[Representations, torch.Tensor]:
    """Representations ``[N, ...]`` (on the CPU) and gold labels ``[N]`` of every example of ``loader``
    (batches of :class:`itermask.data.TokenCollator`), in loader order. ``model`` must be in eval mode.

    Raises:
        ValueError: if the loader is empty.
    """
    device = next(model.parameters()).device
    labels = []
    with capture_representations(model) as records:
        for batch in loader:
            chunked_logits(model, batch["tokens"].to(device).trim(), chunk_size)
            labels.append(batch["labels"])
    if not labels:
        raise ValueError("no examples to embed")
    return Representations.concat(records).map(lambda t: t.cpu()), torch.cat(labels)


def statistics_figures(statistics: dict, method: str, out: Path) -> dict[str, Path]:
    """Draw the figures that need only the statistics (``result["ood"]["statistics"]``) into ``out``:
    ``ood_statistics.png`` and ``ood_mahalanobis_auroc_by_layer.png`` (of ``method``); ``{name: path}``.
    (The UMAP needs the embeddings and is drawn by :func:`run` only.)"""
    return {
        "ood/statistics": ood_plots.save(ood_plots.statistics_figure(statistics), out / "ood_statistics.png"),
        "ood/mahalanobis_auroc_by_layer": ood_plots.save(
            ood_plots.layer_figure(statistics[method], "auroc_mahalanobis"), out / "ood_mahalanobis_auroc_by_layer.png"
        ),
    }


def run(
    cfg: DictConfig,
    model: torch.nn.Module,
    datamodule,
    curves: dict[str, dict[str, MaskingCurves]],
    method: str,
) -> tuple[dict, dict[str, Path]]:
    """OOD statistics for every ``curves[saliency][schedule]`` and the figures of ``method``.

    Uses ``cfg.ood`` (see ``conf/evaluate.yaml``), ``cfg.evaluation.subset_seed`` (which training and
    calibration examples), ``cfg.output_dir`` (figures).

    Returns:
        ``(result, images)``: the JSON-ready ``ood`` section of the result file and ``{name: PNG path}``.
    """
    o = cfg.ood
    seconds, start = {}, time.time()

    def lap(name: str) -> None:
        nonlocal start
        seconds[name] = time.time() - start
        start = time.time()

    was_training = model.training
    model.eval()
    try:
        train_loader = datamodule.evaluation_dataloader(o.n_fit_examples, cfg.evaluation.subset_seed, "train")
        train, train_labels = collect(model, train_loader, cfg.evaluation.chunk_size)
        calibration = None
        if o.calibration_split is not None:
            loader = datamodule.evaluation_dataloader(
                o.n_calibration_examples, cfg.evaluation.subset_seed, o.calibration_split
            )
            calibration, _ = collect(model, loader, cfg.evaluation.chunk_size)
    finally:
        model.train(was_training)
    lap("embed_fit_data")
    detectors = OODDetectors.fit(
        train,
        train_labels,
        calibration,
        k=o.knn_k,
        normalize_knn=o.knn_normalize,
        covariance=o.covariance,
        split_seed=cfg.evaluation.subset_seed,
    )
    for key, reason in detectors.missing.items():
        log.warning("OOD detector %s is missing: %s", key, reason)
    statistics = {
        name: {
            schedule: masking_ood_statistics(c, detectors, alpha=o.masf_alpha, n_bins=o.ece_bins).to_dict()
            for schedule, c in by_schedule.items()
        }
        for name, by_schedule in curves.items()
    }
    lap("fit_and_score")
    result = {
        "representation": "final = input of the classifier's final linear layer; layer_i = hidden state i "
        "mean-pooled over attended tokens (layer_0: embeddings); MaSF uses max-pooled hidden states",
        "fit": detectors.info,
        "missing_detectors": detectors.missing,
        "masf_alpha": o.masf_alpha,
        "knn_k": o.knn_k,
        "statistics": statistics,
    }
    images = {}
    if o.plots.enabled:
        out = Path(cfg.output_dir)
        label_names = datamodule.label_names
        images.update(statistics_figures(statistics, method, out))
        keep = torch.randperm(len(train), generator=torch.Generator().manual_seed(cfg.evaluation.subset_seed))
        keep = keep[: o.plots.umap_train_points]
        if next(iter(curves[method].values())).steps != "fraction":
            result["missing_plots"] = {"ood/umap": "the UMAP panels are masking fractions; these curves have count steps"}
            log.warning("no UMAP: %s", result["missing_plots"]["ood/umap"])
        else:
            images["ood/umap"] = ood_plots.save(
                ood_plots.umap_figure(
                    train.features[keep],
                    train_labels[keep],
                    curves[method],
                    fractions=list(o.plots.umap_fractions),
                    label_names=label_names,
                    n_neighbors=o.plots.umap_neighbors,
                    seed=cfg.evaluation.subset_seed,
                ),
                out / "ood_umap.png",
            )
        lap("plots")
    result["seconds"] = seconds
    log.info("OOD analysis took %s", {k: round(v, 1) for k, v in seconds.items()})
    return result, images
