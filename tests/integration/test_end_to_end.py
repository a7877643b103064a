"""End to end: train.py + evaluate.py on the shipped data with the packaged MiniLM encoder, offline,
reading the curves back from the offline W&B run's Table files. Small settings keep it to ~2 minutes."""

import glob
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
import pytest
from wandb_helpers import history, read_wandb_run, records

from itermask.storage.store import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["train.max_train_examples=400", "evaluation.n_examples=12", "data.eval_batch_size=128"]


def _run(script, args, env, cwd=ROOT):
    out = subprocess.run([sys.executable, script, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    return out


@pytest.fixture
def env(tmp_path):
    return {
        **os.environ,
        "ITERMASK_CACHE": str(tmp_path / "cache"),
        "WANDB_MODE": "offline",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_SILENT": "true",
    }


@pytest.mark.slow
def test_train_then_evaluate_multirun(tmp_path, env):
    _run("train.py", ["seed=0", f"hydra.run.dir={tmp_path}/train", SMALL[0]], env)
    entries = [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]
    assert len(entries) == 1 and (entries[0] / "meta.json").is_file() and (entries[0] / "model").is_dir()

    _run(
        "evaluate.py",
        ["-m", "seed=0,1", f"hydra.sweep.dir={tmp_path}/multi", "attack=embedding_neighbors", *SMALL],
        env,
    )
    checkpoints = [p for p in (tmp_path / "cache").iterdir() if p.is_dir() and p.name not in ("results", "derived")]
    # seed 0 reused, seed 1 trained (results/: the finished-results store; derived/: storage.derived)
    assert len(checkpoints) == 2
    log0 = (tmp_path / "multi/0/evaluate.log").read_text()
    assert "reusing fine-tuned checkpoint" in log0

    results = [json.loads((tmp_path / f"multi/{i}/results.json").read_text()) for i in (0, 1)]
    assert [r["seed"] for r in results] == [0, 1]
    assert results[0]["example_ids"] == results[1]["example_ids"]  # same examples for every seed
    assert results[0]["checkpoint_key"] != results[1]["checkpoint_key"]
    for result in results:
        assert result["n_evaluated"] + result["n_skipped_no_maskable"] == 12
        assert result["n_test"] == 1342
        assert 0.5 < result["accuracy"]["test"] <= 1.0
        assert result["accuracy"]["majority_class_test"] == pytest.approx(766 / 1342)
        assert set(result["scores"]) == {"gradient", "random"}
        for method in ("gradient", "random"):
            assert set(result["scores"][method]) == {"one_shot", "recursive"}
            one_shot = result["scores"][method]["one_shot"]
            assert one_shot["comprehensiveness_prob"][0] == 0.0  # fraction 0 masks nothing
            assert len(one_shot["target_prob"]) == 13
            assert "aopc_sufficiency_prob" in one_shot
            assert "aopc_sufficiency_prob" not in result["scores"][method]["recursive"]
        assert result["environment"]["packages"]["itermask"]
        assert result["schema_version"] == SCHEMA_VERSION
        for method in ("gradient", "random"):
            diagnostics = result["saliency_diagnostics"][method]
            assert diagnostics["n_examples"] == result["n_evaluated"] and "completeness_gap" not in diagnostics
            assert diagnostics["n_zero_saliency"] == len(diagnostics["zero_saliency_example_ids"])

        # the curves logged to the offline W&B run equal the result file's
        run_dir = Path(tmp_path / f"multi/{result['seed']}")
        tables = glob.glob(str(run_dir / "wandb/offline-run-*/files/media/table/masking_curves_*.table.json"))
        assert len(tables) == 1
        table = json.loads(Path(tables[0]).read_text())
        frame = pd.DataFrame(table["data"], columns=table["columns"])
        assert len(frame) == 2 * 2 * 13
        curve = frame[frame.curve == "gradient/recursive"].sort_values("fraction")
        expected = result["scores"]["gradient"]["recursive"]
        assert curve["target_prob"].tolist() == pytest.approx(expected["target_prob"])
        assert curve["flip_rate"].tolist() == pytest.approx(expected["flip_rate"])
        assert curve["sufficiency_prob"].isna().all()

        # ... and as history metrics over the masking step (read with `wandb leet inspect --json`)
        run = read_wandb_run(Path(tables[0]).parents[3])
        rows = [row for row in history(run) if "curves/explained/recursive/target_prob" in row]
        assert [row["masked_fraction"] for row in rows] == pytest.approx(expected["x"])
        assert [row["curves/explained/recursive/target_prob"] for row in rows] == pytest.approx(expected["target_prob"])
        one_shot = result["scores"]["random"]["one_shot"]
        assert [row["curves/random/one_shot/sufficiency_prob"] for row in rows] == pytest.approx(
            one_shot["sufficiency_prob"]
        )
        # the OOD analysis (final-layer Mahalanobis by default) logs its own series over the same step metric
        ood_rows = [row for row in history(run) if any(key.startswith("ood/") for key in row)]
        assert [row["masked_fraction"] for row in ood_rows] == pytest.approx(expected["x"])
        # the summary: no value per masking step; each OOD AUROC's mean over the steps
        summary = {k: v for r in records(run, "summary") for k, v in (r.get("update") or {}).items()}
        assert not any("@" in key for key in summary)
        assert 0.0 <= summary["ood/explained/one_shot/final/auroc_mahalanobis/mean_over_steps"] <= 1.0
        steps = [row["trainer/global_step"] for row in history(run) if "trainer/global_step" in row]
        assert steps == sorted(steps)  # the training x-axis never runs backwards
        assert records(run, "run")[0]["tags"] == [
            "model:minilm",
            "dataset:rt_snippets",
            "saliency:gradient",
            "masking:mask_token",
            f"seed:{result['seed']}",
        ]
        # the attack: every evaluated method, the same examples, in results.json and as a W&B table
        attack = result["attack"]
        assert set(attack["methods"]) == {"gradient", "random"} and attack["settings"]["ranking"] == "one_shot"
        for entry in attack["methods"].values():
            assert entry["examples"]["example_id"] == result["example_ids"]
            assert entry["summary"]["n_attacked"] == result["n_evaluated"]  # target = predicted: none skipped
            assert 0 <= entry["summary"]["success_rate"] <= 1 and entry["link"]["schedule"] == "one_shot"
            assert all(n <= k for n, k in zip(entry["examples"]["n_perturbed"], entry["examples"]["k_max"]))
        attack_tables = glob.glob(str(run_dir / "wandb/offline-run-*/files/media/table/attack_examples_*.table.json"))
        assert len(attack_tables) == 1
        assert len(json.loads(Path(attack_tables[0]).read_text())["data"]) == 2 * result["n_evaluated"]
    assert "attack success_rate" in (tmp_path / "multi/report.md").read_text()


@pytest.mark.slow
def test_evaluate_on_a_users_csv(tmp_path, env):
    rows = pd.read_csv(ROOT / "src/itermask/resources/rt_snippets/validation.csv", keep_default_na=False)
    rows = rows.head(300).rename(columns={"text": "snippet"})
    rows["verdict"] = rows.pop("label").map({0: "rotten", 1: "fresh"})
    rows.to_csv(tmp_path / "mine.csv", index=False)
    _run(
        "evaluate.py",
        [
            "dataset=csv",
            f"dataset.source.path={tmp_path}/mine.csv",
            "dataset.source.text_column=snippet",
            "dataset.source.label_column=verdict",
            "logger=csv",
            "saliency=integrated_gradients",
            "saliency.n_steps=4",
            "masking=delete",
            "evaluation.n_examples=6",
            "train.max_train_examples=100",
            f"hydra.run.dir={tmp_path}/run",
        ],
        env,
    )
    result = json.loads((tmp_path / "run/results.json").read_text())
    assert result["config"]["dataset"]["source"]["text_column"] == "snippet"
    assert result["saliency"]["name"] == "integrated_gradients" and result["masking"] == "delete"
    assert result["n_test"] == 30  # test_ratio 0.1 of 300
    # integrated gradients record their completeness gap (4 steps: a visible but bounded gap)
    gap = result["saliency_diagnostics"]["integrated_gradients"]["completeness_gap"]
    assert 0 <= gap["median_abs"] <= gap["max_abs"] < 1 and gap["median_relative"] is not None
    assert (tmp_path / "run/csv").is_dir()
    meta = json.loads(next((tmp_path / "cache").glob("*/meta.json")).read_text())
    assert meta["label_names"] == ["fresh", "rotten"]


@pytest.mark.slow
def test_smoke_run_with_word_features_and_naopc(tmp_path, env):
    args = ["debug=smoke", "evaluation.features=word", "naopc=on", "naopc.exact_max_features=8", "attack=mask"]
    _run("evaluate.py", [*args, f"hydra.run.dir={tmp_path}/run"], env)
    result = json.loads((tmp_path / "run/results.json").read_text())
    # Normalized AOPC over words: finite, every example's bounds exact or beam, the columns in scores.parquet
    section = result["naopc"]
    one_shot = section["methods"]["gradient"]["one_shot"]
    assert 0 <= one_shot["naopc_comprehensiveness_prob"] <= 1 and math.isfinite(one_shot["naopc_sufficiency_prob"])
    assert section["bounds"]["n_exact"] + section["bounds"]["n_beam"] == section["bounds"]["n_examples"] == 8
    scores = pd.read_parquet(tmp_path / "run/per_example/scores.parquet")
    assert {"naopc_comprehensiveness_prob", "naopc_sufficiency_prob", "aopc_authors_comprehensiveness_prob"} <= set(
        scores.columns
    )
    assert result["features"] == "word" and result["n_evaluated"] == 8 and "ood" in result
    # debug=smoke scores its test accuracy on 4 batches of 64: the 256 shortest test texts (the test loader sorts
    # by length), and the majority-class reference is theirs: 163 of them carry the training majority's label
    # (0.571 over the whole split, 766 / 1342)
    assert result["accuracy"]["n_scored"] == 256 and result["n_test"] == 1342
    assert result["accuracy"]["majority_class_test"] == pytest.approx(163 / 256)
    tokens = pd.read_parquet(tmp_path / "run/per_example/tokens.parquet")
    steps = pd.read_parquet(tmp_path / "run/per_example/steps.parquet")
    words = cast(pd.DataFrame, tokens[tokens["word_id"] >= 0])
    # one row per word: an example's ranked words are its n_maskable (words, not pieces); no "##" piece is shown
    ranked = cast(pd.DataFrame, words[words["explained_rank"] >= 1]).groupby("example_id").size().to_dict()
    assert ranked == steps.groupby("example_id")["n_maskable"].first().to_dict()
    assert not words["token"].str.startswith("##").any() and len(words) < len(tokens)
    # the attack over words counts the masking curves' words: the same n per example, k_max = floor(0.2 n + 0.5)
    attack = result["attack"]["methods"]["gradient"]["examples"]
    n_words = steps.groupby("example_id")["n_maskable"].first().to_dict()
    assert dict(zip(attack["example_id"], attack["n_maskable"])) == n_words
    assert attack["k_max"] == [math.floor(0.2 * n + 0.5) for n in attack["n_maskable"]]


@pytest.mark.slow
def test_smoke_run_with_ffidelity(tmp_path, env):
    # a short F-Fidelity (2 fine-tuning steps, 2 sizes, 4 samples) on the smoke run: the section and the columns
    args = ["debug=smoke", "ood=none", "ffidelity=on", "ffidelity.steps=2", "ffidelity.n_samples=4"]
    _run("evaluate.py", [*args, "ffidelity.sizes=[0.2,0.5]", f"hydra.run.dir={tmp_path}/run"], env)
    result = json.loads((tmp_path / "run/results.json").read_text())
    section = result["ffidelity"]
    tune = section["fine_tune"]
    assert tune["steps"] == 2 and not tune["reused"] and tune["n_labelled"] == 8 and 0 <= tune["max_share"] <= 0.1
    assert 0 <= tune["accuracy_before"] <= 1 and 0 <= tune["accuracy_after"] <= 1
    columns = ["ffid_plus_prob", "ffid_minus_prob", "ffid_plus_accuracy", "ffid_minus_accuracy"]
    for method in ("gradient", "random"):
        entry = section["methods"][method]["one_shot"]
        assert entry["n"] == 8 and all(-1 <= entry[c] <= 1 for c in columns)
    assert section["rows"]["asked"] == 2 * 8 * (1 + 2 * 2 * 4) >= section["rows"]["computed"] > 0
    scores = pd.read_parquet(tmp_path / "run/per_example/scores.parquet")
    assert np.isfinite(scores[columns].to_numpy()[(scores.schedule == "one_shot").to_numpy()]).all()
