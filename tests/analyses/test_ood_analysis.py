"""The OOD analysis end to end on a small run, and its report rows."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from itermask.storage.store import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]


# --- end to end -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_evaluate_with_ood_statistics_and_masked_fine_tuning(tmp_path):
    env = {
        **os.environ,
        "ITERMASK_CACHE": str(tmp_path / "cache"),
        "WANDB_MODE": "offline",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_SILENT": "true",
    }
    import pandas as pd

    # a small CSV (320 / 40 / 40 train / validation / test) keeps the accuracy pass and fitting short
    pd.read_csv(ROOT / "src/itermask/resources/rt_snippets/train.csv", keep_default_na=False).head(400).to_csv(
        tmp_path / "small.csv", index=False
    )
    args = [
        "dataset=csv",
        f"dataset.source.path={tmp_path}/small.csv",
        "train.max_train_examples=96",
        "train.masking_augmentation.enabled=true",
        "evaluation.n_examples=8",
        "evaluation.compare_random=false",
        "evaluation.fractions=[0.0,0.1,0.5,0.9,1.0]",
        "evaluation.aopc_bins=[0.1,0.5]",
        "ood.level=full",
        "ood.n_fit_examples=60",
        "ood.plots.umap_train_points=40",
        "ood.plots.umap_neighbors=5",
        f"hydra.run.dir={tmp_path}/run",
    ]
    out = subprocess.run(
        [sys.executable, "evaluate.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    result = json.loads((tmp_path / "run/results.json").read_text())
    assert result["config"]["train"]["masking_augmentation"]["enabled"] is True
    assert result["schema_version"] == SCHEMA_VERSION
    ood = result["ood"]
    fit = ood["fit"]
    assert fit["n_train"] == 60 and fit["masf_fit"] == fit["n_calibration"] // 2 > 10
    assert fit["masf_fit"] + fit["masf_calibration"] == fit["n_calibration"]
    assert ood["fit"]["final/covariance"] == "ledoit_wolf"  # 60 examples < hidden size 384
    log = (tmp_path / "run/evaluate.log").read_text()
    assert "Ledoit-Wolf" in log
    took = sum(ood["seconds"].values())  # the stages' durations in seconds, read as a sentence
    assert f"OOD analysis took {took:.1f} s (embedding the fit data {ood['seconds']['embed_fit_data']:.1f} s, " in log
    assert list(ood["statistics"]) == ["gradient"]
    for method in ("gradient",):
        for schedule in ("one_shot", "recursive"):
            stats = ood["statistics"][method][schedule]
            assert stats["n_examples"] == result["n_evaluated"]
            # fraction 0 masks nothing: the masked inputs are the clean ones, exactly indistinguishable
            for key in ("final/auroc_mahalanobis", "final/auroc_knn_distance", "auroc_masf", "auroc_max_softmax"):
                assert stats["values"][key][0] == 0.5, key
            assert len(stats["values"]["layer_6/mahalanobis"]) == 5
            assert 0 <= min(stats["values"]["masf_flagged"]) <= max(stats["values"]["masf_flagged"]) <= 1
    # the final layer's Mahalanobis score of every masked input, per example and step
    scores = pd.read_parquet(tmp_path / "run/per_example/ood.parquet")
    assert len(scores) == 2 * result["n_evaluated"] * 5 and set(scores.schedule) == {"one_shot", "recursive"}
    assert (
        scores.mahalanobis.dtype == "float32"
        and (scores[scores.k == 0].mahalanobis == scores.clean_mahalanobis[scores.k == 0]).all()
    )
    for name in ("ood_statistics.png", "ood_umap.png", "ood_mahalanobis_auroc_by_layer.png"):
        assert (tmp_path / "run" / name).stat().st_size > 10000
    run_dir = next((tmp_path / "run/wandb").glob("offline-run-*"))
    images = list((run_dir / "files/media/images").rglob("*.png"))
    assert len(images) == 3
    assert list((run_dir / "files/media/table").glob("ood_statistics_*.table.json"))


# --- reporting ----------------------------------------------------------------------------------------


def _ood_section():
    stats = {
        "steps": "fraction",
        "x": [0.0, 0.5, 1.0],
        "fraction": [0.0, 0.5, 1.0],
        "n_examples": 2,
        "values": {
            "final/auroc_mahalanobis": [0.5, 0.75, 1.0],
            "layer_1/auroc_mahalanobis": [0.5, 0.6, 0.7],
            "masf_flagged": [0.0, 0.5, 1.0],
            "final/l2_norm": [3.0, 2.0, 1.0],
        },
        "clean": {"final/l2_norm": 3.0},
        "missing": {"ece": "ECE needs gold labels"},
    }
    return {"statistics": {"gradient": {"one_shot": stats, "recursive": stats}}}


def test_ood_rows_and_csv_logging(tmp_path):
    from pytorch_lightning.loggers import CSVLogger

    from itermask.analyses.ood import OOD_COLUMNS, OODAnalysis, ood_rows
    from itermask.tracking import log_artifacts

    rows = ood_rows(_ood_section())
    assert len(rows) == 2 * 4 * 3 and len(rows[0]) == len(OOD_COLUMNS)
    assert ["gradient/one_shot", "gradient", "one_shot", 0.5, "final/auroc_mahalanobis", 0.75] in rows
    logger = CSVLogger(str(tmp_path))
    log_artifacts(logger, OODAnalysis._artifacts(_ood_section(), images={}))
    import pandas as pd

    metrics = pd.read_csv(next(tmp_path.rglob("metrics.csv")))
    # the summary: each statistic's mean over the masking steps (0, 0.5, 1), not one value per step
    assert metrics["ood/gradient/recursive/final/auroc_mahalanobis/mean_over_steps"].dropna().tolist() == [0.75]
    assert metrics["ood/gradient/one_shot/masf_flagged/mean_over_steps"].dropna().tolist() == [0.5]
    assert not any("@" in c for c in metrics.columns)  # per step: the history and the ood_statistics table
    assert not any(c.startswith("ood/gradient/one_shot/layer_1") for c in metrics.columns)  # per-layer: table only


def test_ood_statistics_reach_wandb_as_curves_over_the_masking_step(tmp_path):
    from pytorch_lightning.loggers import WandbLogger
    from wandb_helpers import history, read_wandb_run, records

    from itermask import tracking
    from itermask.analyses.ood import OODAnalysis

    logger = WandbLogger(project="itermask", save_dir=str(tmp_path), mode="offline")
    tracking.log_artifacts(logger, OODAnalysis._artifacts(_ood_section(), images={}), method="gradient")
    run_dir = Path(logger.experiment.dir).parent
    tracking.finish(logger)
    run = read_wandb_run(run_dir)
    rows = [row for row in history(run) if "masked_fraction" in row]
    assert [row["masked_fraction"] for row in rows] == [0.0, 0.5, 1.0]
    summary = {k: v for r in records(run, "summary") for k, v in (r.get("update") or {}).items()}
    scalars = {k: v for k, v in summary.items() if k.startswith("ood/")}  # per step: history only
    assert scalars == {
        f"ood/explained/{schedule}/{key}/mean_over_steps": value
        for schedule in ("one_shot", "recursive")
        for key, value in (("final/auroc_mahalanobis", 0.75), ("masf_flagged", 0.5))
    }
    # the method under study under its role (tracking.role): one key for every method of a sweep
    assert [row["ood/explained/recursive/final/auroc_mahalanobis"] for row in rows] == [0.5, 0.75, 1.0]
    assert [row["ood/explained/one_shot/masf_flagged"] for row in rows] == [0.0, 0.5, 1.0]
    assert not any(key.startswith("ood/explained/one_shot/layer_1") for row in rows for key in row)  # table only


def test_ood_figures(tmp_path):
    from itermask.ood import plots as ood_plots

    fig = ood_plots.statistics_figure(_ood_section()["statistics"], keys=["final/l2_norm", "ece"])
    first, second = fig.axes[:2]
    assert len(first.lines) == 2 + 1  # two curves and the clean value
    assert "ECE needs gold labels" in second.texts[0].get_text()
    layers = ood_plots.layer_figure(_ood_section()["statistics"]["gradient"], "auroc_mahalanobis")
    assert [line.get_label() for line in layers.axes[0].lines[:2]] == ["final", "layer_1"]
    path = ood_plots.save(fig, tmp_path / "f.png")
    assert path.read_bytes()[:4] == b"\x89PNG" and not list(tmp_path.glob(".f.*"))
