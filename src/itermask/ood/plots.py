"""Pictures of the out-of-distribution analysis (reporting layer; matplotlib and umap-learn): the statistics
against the masking step (:func:`statistics_figure`), one statistic for every view (:func:`layer_figure`) and a
UMAP of the embeddings (:func:`umap_figure`). Figures are built with :class:`matplotlib.figure.Figure` (no
pyplot state) and written by :func:`save`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
import torch
from matplotlib.figure import Figure

from itermask.core.curves import MaskingCurves

__all__ = ["STATISTICS", "statistics_figure", "layer_figure", "umap_figure", "save"]

STATISTICS = (
    "final/l2_norm",
    "final/cosine_to_clean",
    "final/l2_to_clean",
    "final/mahalanobis",
    "final/auroc_mahalanobis",
    "final/knn_distance",
    "final/auroc_knn_distance",
    "masf_flagged",
    "auroc_masf",
    "max_softmax",
    "entropy",
    "ece",
)


def _grid(n: int, columns: int = 4, size: float = 3.2) -> tuple[Figure, list]:
    rows = max(1, -(-n // columns))
    fig = Figure(figsize=(size * columns, size * 0.85 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def statistics_figure(statistics: dict, keys: Sequence[str] = STATISTICS) -> Figure:
    """``statistics[saliency][schedule]`` (:meth:`itermask.ood.statistics.OODCurves.to_dict`) as one
    panel per key against the masking step, one line per saliency method and schedule, the clean inputs' value
    dashed; a missing statistic's panel says why."""
    fig, axes = _grid(len(keys))
    for ax, key in zip(axes, keys):
        clean, xlabel = None, "masking step"
        for saliency, by_schedule in statistics.items():
            for schedule, curves in by_schedule.items():
                if key in curves["values"]:
                    ax.plot(curves["x"], curves["values"][key], marker=".", label=f"{saliency}/{schedule}")
                    xlabel = f"masking {curves['steps']}"
                    clean = curves["clean"].get(key, clean)
                elif key in curves["missing"] and not ax.lines:
                    note = "missing:\n" + curves["missing"][key][:80]
                    ax.text(0.5, 0.5, note, ha="center", va="center", wrap=True, fontsize=7, transform=ax.transAxes)
        if clean is not None:
            ax.axhline(clean, color="black", linestyle="--", linewidth=0.8, label="clean")
        if key.rsplit("/", 1)[-1].startswith("auroc"):
            ax.axhline(0.5, color="grey", linestyle=":", linewidth=0.8)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(labelsize=7)
    if axes and axes[0].lines:
        axes[0].legend(fontsize=6)
    return fig


def layer_figure(by_schedule: dict, statistic: str) -> Figure:
    """``<view>/<statistic>`` of every view against the masking fraction, one panel per schedule
    (``by_schedule[schedule]``: :meth:`~itermask.ood.statistics.OODCurves.to_dict`)."""
    fig, axes = _grid(len(by_schedule), columns=len(by_schedule) or 1, size=4.0)
    for ax, (schedule, curves) in zip(axes, by_schedule.items()):
        for key, series in curves["values"].items():
            view, _, name = key.partition("/")
            if name == statistic:
                ax.plot(curves["x"], series, marker=".", label=view)
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=0.8)
        ax.set_title(f"{statistic} ({schedule})", fontsize=9)
        ax.set_xlabel(f"masking {curves['steps']}", fontsize=8)
        ax.legend(fontsize=6)
    return fig


def _steps(fractions: torch.Tensor, wanted: Sequence[float]) -> list[tuple[float, int]]:
    steps = []
    for f in wanted:
        hits = torch.nonzero(torch.isclose(fractions.double(), torch.tensor(float(f), dtype=torch.float64))).flatten()
        if not len(hits):
            raise ValueError(f"UMAP fraction {f} is not on the masking grid {fractions.tolist()}")
        steps.append((float(f), int(hits[0])))
    return steps


#: (set, label) -> colour of the UMAP's points: light/medium/dark per label hue
_UMAP_COLOURS = {
    "train": ["#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc"],
    "clean": ["#3182bd", "#e6550d", "#31a354", "#756bb1"],
    "masked": ["#08306b", "#7f2704", "#00441b", "#3f007d"],
}


def umap_figure(
    train_features: torch.Tensor,
    train_labels: torch.Tensor,
    curves: dict[str, MaskingCurves],
    fractions: Sequence[float] = (0.1, 0.5, 0.9),
    label_names: Sequence[str] | None = None,
    n_neighbors: int = 15,
    seed: int = 0,
) -> Figure:
    """One UMAP (McInnes et al. 2018, arXiv 1802.03426) of the training ``[N, D]``, clean test and masked test
    embeddings (input of the final linear layer; ``curves[schedule]`` with representations), fitted jointly;
    panels: schedules x ``fractions``, coloured by set and gold label.

    Raises:
        ValueError: if a fraction is not on the curves' grid or the curves carry no representations.
    """
    steps, part = _umap_points(train_features, curves, fractions, n_neighbors, seed)
    schedules = list(curves)
    names = list(label_names) if label_names is not None else [str(i) for i in range(int(train_labels.max()) + 1)]
    fig = Figure(figsize=(4.0 * len(steps), 3.6 * len(schedules)), layout="constrained")
    axes = fig.subplots(len(schedules), len(steps), squeeze=False)
    test_labels = curves[schedules[0]].labels.numpy()
    for r, schedule in enumerate(schedules):
        for c, (fraction, _) in enumerate(steps):
            ax = axes[r][c]
            _scatter(ax, part[0], train_labels.numpy(), names, "train", "o", 6)
            _scatter(ax, part[1], test_labels, names, "clean", "o", 12)
            _scatter(ax, part[2 + r * len(steps) + c], test_labels, names, "masked", "X", 16)
            ax.set_title(f"{schedule}, {fraction:.0%} masked", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0][0].legend(fontsize=6, markerscale=1.5)
    return fig


def _umap_points(
    train_features: torch.Tensor,
    curves: dict[str, MaskingCurves],
    fractions: Sequence[float],
    n_neighbors: int,
    seed: int,
) -> tuple[list[tuple[float, int]], list[np.ndarray]]:
    """Fit one UMAP (``n_neighbors``, ``random_state=seed``) jointly to the training ``[N, D]`` embeddings, the
    clean test ``[B, D]`` ones and, for each schedule of ``curves`` and each of ``fractions``, the masked test
    ones at that step; ``(steps, points)``: the ``(fraction, step index)`` of each fraction (:func:`_steps`) and
    the ``[n, 2]`` UMAP coordinates of each block (training, clean, then schedule by schedule, fraction by
    fraction). Raises as :func:`umap_figure` (also for count steps)."""
    import umap  # imported here: numba compilation is only paid when a UMAP is drawn

    schedules = list(curves)
    first = curves[schedules[0]]
    if first.features is None:
        raise ValueError("UMAP needs masking curves with representations (collect_representations=True)")
    steps = _steps(first.fractions, fractions)  # raises for count steps
    assert first.clean_features is not None  # captured beside the masked features
    blocks = [train_features.float().numpy(), first.clean_features.float().numpy()]
    for schedule in schedules:
        features = curves[schedule].features
        if features is None:
            raise ValueError("UMAP needs masking curves with representations (collect_representations=True)")
        blocks += [features[:, s].float().numpy() for _, s in steps]
    # a dense array for a dense input (umap's stubs also allow a sparse matrix)
    points = cast(
        np.ndarray, umap.UMAP(n_neighbors=n_neighbors, random_state=seed).fit_transform(np.concatenate(blocks))
    )
    return steps, np.split(points, np.cumsum([len(b) for b in blocks])[:-1])


def _scatter(ax, xy: np.ndarray, labels: np.ndarray, names: list[str], kind: str, marker: str, size: float) -> None:
    """Scatter the ``[n, 2]`` UMAP points ``xy`` of set ``kind`` (``"train"``, ``"clean"`` or ``"masked"``) on
    ``ax``, one series per gold label of ``labels`` ``[n]``, named ``"<kind> <label name>"`` (``names``, else the
    label id) and coloured by :data:`_UMAP_COLOURS`; ``size``: the marker area in points squared."""
    for c in np.unique(labels):
        rows, colour = labels == c, _UMAP_COLOURS[kind][int(c) % 4]
        label = f"{kind} {names[int(c)] if int(c) < len(names) else c}"
        ax.scatter(xy[rows, 0], xy[rows, 1], s=size, marker=marker, c=colour, label=label, alpha=0.6, linewidths=0)


def save(fig: Figure, path: str | Path, dpi: int = 110) -> Path:
    """Write ``fig`` as a PNG atomically (temporary file, then rename); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
