"""The report's masking-curve figures (:func:`curve_figure`): one panel per per-step series that has data,
one thin line per seed, the mean over seeds with its confidence band, and units on both axes (from the
metric registry); the figures' shared pieces (:func:`pyplot`, :func:`png`) and file names (:func:`slug`)."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence

import numpy as np

from itermask.core.evaluation_settings import QUANTITIES
from itermask.core.metrics import ScoreKey, metric_info
from itermask.reporting.bounds import score_bounds
from itermask.reporting.model import result_curves
from itermask.reporting.statistics import seed_interval
from itermask.reporting.sweep import Run

__all__ = ["curve_figure", "slug", "Line", "pyplot", "png"]

#: (legend, runs, (explanation, schedule), matplotlib style)
Line = tuple[str, list[Run], tuple[str, str], dict]
#: the per-step series in the order the curve figure draws them, on each quantity
ORDER = tuple(
    str(ScoreKey.of(metric, quantity))  # pyright: ignore[reportArgumentType]
    for metric in ("target", "comprehensiveness", "sufficiency")
    for quantity in QUANTITIES
) + ("flip_rate", "accuracy")
#: axis units where they read better than the metric's declared unit
UNITS = {"log-odds": "log-odds, nats", "fraction": "share", "count": "tokens"}


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (figures are only written to files)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png(fig) -> bytes:
    """``fig`` as PNG bytes (tight layout, 110 dpi); the figure is closed."""
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    pyplot().close(fig)
    return buffer.getvalue()


def _series(runs: list[Run], key: tuple[str, str], series: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The grid ``[S]`` and the per-seed values ``[n_seeds, S]`` of one series, or ``None`` without data."""
    rows = [result_curves(r.result).get(key, {}) for r in runs]
    rows = [r for r in rows if r.get(series) is not None and "fraction" in r]
    if not rows:
        return None
    grid = np.asarray(rows[0].get("x", rows[0]["fraction"]), dtype=float)
    matrix = np.array([[math.nan if x is None else x for x in r[series]] for r in rows], dtype=float)
    return (grid, matrix) if np.isfinite(matrix).any() else None


def _panels(lines: list[Line]) -> list[str]:
    """The per-step series with data in at least one line: the usual ones first, then any other registered
    metric's (series describing the grid, ``x``, ``fraction`` and ``mean_k``, are not plotted)."""
    names: list[str] = []
    for _, runs, key, _ in lines:
        for run in runs:
            for name, values in result_curves(run.result).get(key, {}).items():
                info = metric_info(name)
                if name not in names and values and info is not None and info.higher_is_more_faithful is not None:
                    names.append(name)
    names = [n for n in names if any(_series(runs, key, n) is not None for _, runs, key, _ in lines)]
    return [n for n in ORDER if n in names] + [n for n in names if n not in ORDER]


def _axis_label(series: str) -> str:
    info = metric_info(series)
    unit = UNITS.get(info.unit, info.unit) if info is not None else ""
    return f"{series} ({unit})" if unit else series


def _x_label(lines: list[Line]) -> str:
    summaries = (s for _, runs, _, _ in lines for r in runs for by in r.result["scores"].values() for s in by.values())
    steps = {s.get("steps", "fraction") for s in summaries}
    return "tokens masked (count)" if steps == {"count"} else "masking fraction (share of maskable tokens)"


def _draw(ax, lines: list[Line], series: str, settings: dict) -> None:
    for legend, runs, key, style in lines:
        data = _series(runs, key, series)
        if data is None:
            continue
        grid, matrix = data
        s, bounds = settings, score_bounds(series)  # the band stays inside the series' declared range
        aggs = [
            seed_interval(matrix[:, j], s["confidence"], s["interval"], s["n_resamples"], s["seed"], bounds)
            for j in range(matrix.shape[1])
        ]
        mean = np.array([a["mean"] for a in aggs])
        (line,) = ax.plot(grid, mean, marker="o", markersize=3, label=f"{legend} (n={len(matrix)})", **style)
        for seed_values in matrix:
            ax.plot(grid, seed_values, color=line.get_color(), alpha=0.35, linewidth=0.7)
        low, high = np.array([a["ci_low"] for a in aggs]), np.array([a["ci_high"] for a in aggs])
        if np.isfinite(low).any():
            ax.fill_between(grid, low, high, color=line.get_color(), alpha=0.15, linewidth=0)


def curve_figure(lines: list[Line], title: str, settings: dict, notes: Sequence[str] = ()) -> bytes:
    """A PNG of the masking curves of ``lines``: one panel per series with data (a series defined for none
    of the lines, e.g. sufficiency for the recursive schedule, gets no panel; ``notes`` are printed under
    the title to say so), thin lines per seed, the mean and its band over seeds."""
    plt = pyplot()
    panels = _panels(lines)
    ncols = max(1, min(3, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.3 * nrows + 0.8), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    x_label = _x_label(lines)
    for ax, series in zip(axes.flat, panels):
        _draw(ax, lines, series, settings)
        ax.set_xlabel(x_label)
        ax.set_ylabel(_axis_label(series))
        ax.set_title(series)
        ax.grid(alpha=0.3)
    if panels:
        axes[0][0].legend(fontsize=8)
    band = f"{int(round(settings['confidence'] * 100))} % {'t' if settings['interval'] == 't' else 'bootstrap'}"
    subtitle = f"(thin lines: seeds; thick: mean over seeds; band: {band} interval)"
    fig.suptitle("\n".join([title, subtitle, *notes]), fontsize=10)
    return png(fig)


#: longest file-name stem :func:`slug` returns (file systems allow 255 bytes, with room for the atomic
#: write's temporary prefix and suffix and the extension)
MAX_SLUG = 120


def slug(*parts: str) -> str:
    """A file-name stem of ``parts`` (characters other than letters, digits, ``._-`` replaced by ``-``); a
    stem longer than :data:`MAX_SLUG` (e.g. two models labelled with several swept settings) is cut and
    ends with a hash of the whole, so distinct stems stay distinct."""
    import hashlib

    text = re.sub(r"[^A-Za-z0-9._-]+", "-", "_".join(p for p in parts if p)).strip("-")
    if len(text) <= MAX_SLUG:
        return text
    return f"{text[: MAX_SLUG - 13]}-{hashlib.sha1(text.encode()).hexdigest()[:12]}"
