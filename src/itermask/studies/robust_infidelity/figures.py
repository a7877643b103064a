"""The claims' figures (PNG, one per claim: :func:`figure_claim1`, :func:`figure_claim2`, :func:`figure_claim3`)
and tables (CSV) under the report's ``report_files/`` (:func:`write_claim_files`)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from itermask.reporting.model import records
from itermask.reporting.render.plots import png, pyplot, slug
from itermask.reporting.statistics import seed_interval
from itermask.storage.files import write_bytes_atomic, write_text_atomic
from itermask.studies.robust_infidelity.claims import Claims
from itermask.studies.robust_infidelity.runs import select
from itermask.studies.robust_infidelity.settings import ADVERSARIAL, STANDARD

__all__ = ["figure_claim1", "figure_claim2", "figure_claim3", "write_claim_files", "TABLES"]

#: the :class:`Claims` tables written as ``claims_<name>.csv`` (those that are not empty)
TABLES = ("model_differences", "components", "accuracy", "ood_steps", "attack_link", "adversarial")


def _mean_with_interval(ax, i: int, values: np.ndarray, confidence: float) -> None:
    """The mean of ``values`` at ``x = i + 0.15`` with its interval over seeds as error bars."""
    agg = seed_interval(values, confidence)
    if math.isnan(agg["mean"]):
        return
    low = agg["mean"] - agg["ci_low"] if not math.isnan(agg["ci_low"]) else 0
    high = agg["ci_high"] - agg["mean"] if not math.isnan(agg["ci_high"]) else 0
    ax.errorbar([i + 0.15], [agg["mean"]], yerr=[[low], [high]], fmt="s", color=f"C{i}", capsize=3)


def figure_claim1(claims: Claims) -> bytes:
    """Per method, each model's score per seed (dots) and mean with its interval over seeds."""
    plt = pyplot()
    models, methods = claims.conditions.get("models", []), claims.concordance.get("methods", [])
    table = select(claims.table, claims.table.variant == STANDARD)
    fig, axes = plt.subplots(1, max(1, len(methods)), figsize=(3.2 * max(1, len(methods)), 3.4), squeeze=False)
    for ax, method in zip(axes[0], methods):
        for i, model in enumerate(models):
            values = select(table, (table.model == model) & (table.method == method)).score.dropna().to_numpy()
            ax.plot(np.full(len(values), i), values, "o", alpha=0.4, color=f"C{i}")
            _mean_with_interval(ax, i, values, claims.confidence)
        ax.set_xticks(range(len(models)), models, rotation=30, fontsize=8)
        ax.set_title(method, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"{claims.settings.score} ({claims.settings.schedule})")
    fig.suptitle(f"Claim 1: score by model (dots: seeds; squares: mean, {int(claims.confidence * 100)} % CI)")
    return png(fig)


def figure_claim2(claims: Claims) -> bytes:
    """OOD AUROC per masking step, standard vs masked fine-tuning, mean and band over seeds."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for i, (v, frame) in enumerate(claims.ood_steps.groupby("variant", sort=False)):
        ax.plot(frame.fraction, frame["mean"], "o-", color=f"C{i}", label=f"{v} fine-tuning")
        ax.fill_between(frame.fraction, frame.ci_low, frame.ci_high, color=f"C{i}", alpha=0.2, linewidth=0)
    ax.axhline(0.5, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("masking fraction (share of maskable tokens)")
    ax.set_ylabel("OOD AUROC (Mahalanobis, final layer)")
    ax.set_title(f"Claim 2: {claims.conditions.get('base_model')}, masked vs clean inputs", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return png(fig)


def _attack_link_panel(ax, claims: Claims) -> None:
    """Each model's method means, score vs attack success rate, the methods named."""
    for i, row in enumerate(records(claims.attack_link)):
        ax.plot(row.success_means, row.score_means, "o", color=f"C{i}", label=row.model)
        for method, x, y in zip(row.methods, row.success_means, row.score_means):
            ax.annotate(method, (x, y), fontsize=7)
    ax.set_title("faithfulness vs attack efficiency (method means)", fontsize=9)
    if len(claims.attack_link):
        ax.legend(fontsize=8)


def _adversarial_panel(ax, claims: Claims) -> None:
    """Per seed, standard vs adversarial fine-tuning of the base model: score vs attack success rate."""
    table, base = claims.table, claims.conditions.get("base_model")
    method = None if claims.adversarial.empty else claims.adversarial.iloc[0].get("method")
    for i, v in enumerate((STANDARD, ADVERSARIAL)):
        sub = table[(table.model == base) & (table.variant == v) & (table.method == method)]
        ax.plot(sub.success_rate, sub.score, "o", color=f"C{i}", label=f"{v} ({method})")
    ax.set_title(f"{base}: adversarial vs standard fine-tuning (seeds)", fontsize=9)
    ax.legend(fontsize=8)


def figure_claim3(claims: Claims) -> bytes:
    """Left: each model's method means, score vs attack success rate. Right: per seed, standard vs
    adversarial fine-tuning of the base model (score and success rate)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    _attack_link_panel(axes[0], claims)
    _adversarial_panel(axes[1], claims)
    for ax in axes:
        ax.set_xlabel("attack success rate (share of attacked examples)")
        ax.set_ylabel(claims.settings.score)
        ax.grid(alpha=0.3)
    return png(fig)


def write_claim_files(claims: Claims, files: Path, written: dict, images: dict) -> None:
    """Write the claims' figures (``claim<n>.png``, claim 2's only with OOD steps; ``images["claim::<n>"]``)
    and their non-empty tables (:data:`TABLES`) under ``files``, adding each to ``written``."""
    for number_, draw in ((1, figure_claim1), (2, figure_claim2), (3, figure_claim3)):
        if number_ == 2 and claims.ood_steps.empty:
            continue
        name = f"claim{number_}.png"
        written[name] = write_bytes_atomic(files / name, draw(claims))
        images[f"claim::{number_}"] = f"{files.name}/{name}"
    for name in TABLES:
        frame = getattr(claims, name)
        if not frame.empty:
            file = f"claims_{slug(name)}.csv"
            written[file] = write_text_atomic(files / file, frame.to_csv(index=False))
