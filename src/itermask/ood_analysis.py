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
from itermask.embedding_stats import OODDetectors, masking_ood_statistics
from itermask.evaluation import MaskingCurves
from itermask.representations import Representations, capture_representations
from itermask.tokens import chunked_logits

log = logging.getLogger(__name__)

__all__ = ["collect", "run"]


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
        images["ood/statistics"] = ood_plots.save(ood_plots.statistics_figure(statistics), out / "ood_statistics.png")
        images["ood/mahalanobis_auroc_by_layer"] = ood_plots.save(
            ood_plots.layer_figure(statistics[method], "auroc_mahalanobis"), out / "ood_mahalanobis_auroc_by_layer.png"
        )
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
