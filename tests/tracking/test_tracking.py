"""The tracker: curves as W&B history metrics over the masking step, clean keys and config, tags, the
offline fallback of an online start. Offline W&B runs are read back with ``wandb leet inspect --json``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pytorch_lightning.loggers import WandbLogger
from results_helpers import make_result
from wandb_helpers import history, read_wandb_run, records

from itermask import tracking

ROOT = Path(__file__).resolve().parents[2]


def test_curve_history_is_one_row_per_masking_step():
    result = make_result(0)
    rows = tracking.curve_history(result["scores"], method="gradient")
    assert [row["masked_fraction"] for row in rows] == [0.0, 0.5, 1.0]
    gradient = result["scores"]["gradient"]
    for key in ("target_prob", "comprehensiveness_prob", "flip_rate", "mean_k", "accuracy"):
        assert [row[f"curves/explained/one_shot/{key}"] for row in rows] == gradient["one_shot"][key]
    assert [row["curves/random/recursive/comprehensiveness_prob"] for row in rows] == [0.0, 0.05, 0.1]
    assert [row["curves/explained/one_shot/sufficiency_prob"] for row in rows] == [0.1, 0.05, 0.0]
    assert not any("gradient" in key for row in rows for key in row)  # the method's name is in the config
    assert not any("recursive/sufficiency" in key for row in rows for key in row)  # one-shot only
    assert not any(key.endswith(("/x", "/fraction")) for row in rows for key in row)  # the step itself
    assert len(rows[0]) == 1 + 2 * 2 * 5 + 2  # step, 5 series x 2 explanations x 2 schedules, 2 sufficiencies


def test_curve_history_of_count_steps_and_missing_values():
    summary = {
        "steps": "count",
        "x": [0, 2, 4],
        "fraction": [0.0, 0.25, 0.5],
        "target_prob": [0.9, None, 0.4],
        "accuracy": [float("nan"), 0.5, 0.5],
        "aopc_full_comprehensiveness_prob": 0.2,
    }
    rows = tracking.curve_history({"ig": {"one_shot": summary}})
    assert [row["masked_tokens"] for row in rows] == [0, 2, 4]
    assert [row.get("curves/ig/one_shot/target_prob") for row in rows] == [0.9, None, 0.4]  # None: left out
    assert "curves/ig/one_shot/accuracy" not in rows[0]  # NaN: left out
    assert [row["curves/ig/one_shot/fraction"] for row in rows] == [0.0, 0.25, 0.5]  # mean k/n: a series here
    assert not any("aopc" in key for row in rows for key in row)  # scalars go to the summary


def test_every_method_logs_under_the_same_keys():
    """A sweep over methods: the same quantity under one key in every run (one W&B panel compares them)."""
    keys = []
    for saliency in ("gradient", "integrated_gradients"):
        result = make_result(0, saliency=saliency)
        assert tracking.explained_method(result) == saliency
        rows = tracking.curve_history(result["scores"], method=tracking.explained_method(result))
        keys.append({key for row in rows for key in row})
        assert tracking.role_key(f"ood/{saliency}/one_shot/auroc", saliency) == "ood/explained/one_shot/auroc"
        assert tracking.role_key(f"{saliency}/one_shot/x", saliency) == "explained/one_shot/x"
        assert tracking.role_key("ood/random/one_shot/auroc", saliency) == "ood/random/one_shot/auroc"
    assert keys[0] == keys[1] and "curves/explained/one_shot/target_prob" in keys[0]
    assert tracking.role("random", "gradient") == "random" and tracking.role("random", "random") == "explained"
    assert tracking.explained_method({"config": {"saliency": {"name": "lime"}}}) == "lime"


def test_metric_key_and_clean_config():
    assert (
        tracking.metric_key("gradient - random", "one_shot", "aopc_comprehensiveness_prob")
        == "gradient_minus_random/one_shot/aopc_comprehensiveness_prob"
    )
    assert (
        tracking.metric_key("minilm[train.masking_augmentation.enabled=True]", "d", "", "ood auroc @10%", "mean")
        == "minilm_train.masking_augmentation.enabled=True/d/ood_auroc_@10/mean"
    )
    config = {
        "output_dir": "/home/me/out",
        "cache_dir": "/home/me/.cache",
        "logger": {"_target_": "W"},
        "seed": 0,
        "trainer": {"_target_": "pytorch_lightning.Trainer", "max_epochs": 1},
        "saliency": {"_target_": "S", "_partial_": True, "name": "gradient", "nested": [{"_target_": "x", "a": 1}]},
    }
    assert tracking.clean_config(config) == {
        "seed": 0,
        "trainer": {"max_epochs": 1},
        "saliency": {"name": "gradient", "nested": [{"a": 1}]},
    }
    assert config["trainer"]["_target_"] == "pytorch_lightning.Trainer"  # not modified


def _logger(tmp_path, **kw):
    return WandbLogger(
        project="itermask",
        save_dir=str(tmp_path),
        name="evaluate-m-d-gradient-mask_token-seed0",
        group="evaluate-test",
        job_type="evaluate",
        tags=["model:m", "seed:0"],
        **kw,
    )


def test_offline_run_holds_the_curves_as_history_over_masking_steps(tmp_path):
    result = make_result(0)
    logger = tracking.start(lambda **kw: _logger(tmp_path, **{"mode": "offline", **kw}), "offline")
    assert isinstance(logger, WandbLogger)
    for step in (0, 50, 100):  # what fine-tuning logs, against trainer/global_step
        logger.log_metrics({"train_loss": 1.0 / (step + 1)}, step=step)
    tracking.log_config(logger, result["config"])
    tracking.log_evaluation(logger, result)
    run_dir = Path(logger.experiment.dir).parent
    tracking.finish(logger)
    run = read_wandb_run(run_dir)
    header = records(run, "run")[0]
    assert header["job_type"] == "evaluate" and header["tags"] == ["model:m", "seed:0"]
    config = {k: v for r in records(run, "config") for k, v in (r.get("update") or {}).items()}
    assert config["model"] == {"name": "m", "pretrained": "hub/m", "max_length": 64}
    assert "_target_" not in json.dumps(config) and "output_dir" not in config and "cache_dir" not in config
    metrics = {m.get("name") or m.get("glob_name"): m for m in records(run, "metric")}
    assert metrics["curves/explained/one_shot/target_prob"]["step_metric"] == "masked_fraction"
    assert metrics["curves/explained/one_shot/target_prob"]["summary"] == {"none": True}
    rows = [row for row in history(run) if "masked_fraction" in row]
    assert [row["masked_fraction"] for row in rows] == [0.0, 0.5, 1.0]
    assert [row["curves/explained/one_shot/target_prob"] for row in rows] == pytest.approx([0.9, 0.5, 0.5])
    assert [row["curves/random/one_shot/comprehensiveness_prob"] for row in rows] == pytest.approx([0.0, 0.05, 0.1])
    assert not any("trainer/global_step" in row for row in rows)  # the curves' x-axis is the masking step
    steps = [row["trainer/global_step"] for row in history(run) if "trainer/global_step" in row]
    assert steps == sorted(steps) and steps[:3] == [0, 50, 100]  # monotone
    summary = {k: v for r in records(run, "summary") for k, v in (r.get("update") or {}).items()}
    assert summary["explained/one_shot/aopc_comprehensiveness_prob"] == pytest.approx(0.1)
    assert summary["random/one_shot/aopc_comprehensiveness_prob"] == pytest.approx(0.05)
    assert not any(key.startswith("gradient/") for key in summary)
    assert summary["relative_to_random/one_shot/aopc_comprehensiveness_prob"] == pytest.approx(0.05)
    assert not any(" " in key for key in summary)
    assert not any(key.startswith(("plots/", "curves/")) for key in summary)  # no chart tables, no curve ends
    tables = {key.split(".")[0] for key in summary if key.endswith("._type")}
    assert tables == {"masking_curves"}


def test_a_quiet_offline_run_is_one_line_with_its_folder(tmp_path, monkeypatch, capfd, caplog):
    """W&B's offline banner (three lines per job: offline syncing, the folder, ``wandb leet``) printed with
    verbose=false; quiet, it is one itermask line naming the run's folder, and verbose=true keeps W&B's own."""
    import logging

    monkeypatch.delenv("WANDB_SILENT", raising=False)
    monkeypatch.setenv("WANDB_QUIET", "true")  # what itermask.console.configure sets unless verbose=true
    caplog.set_level(logging.INFO, logger="itermask.tracking")
    logger = tracking.start(lambda **kw: _logger(tmp_path, **{"mode": "offline", **kw}), "offline")
    assert isinstance(logger, WandbLogger)
    folder = logger.experiment.sync_dir
    tracking.finish(logger)
    printed = capfd.readouterr()
    assert "syncing is set to" not in printed.out + printed.err and "wandb leet" not in printed.out + printed.err
    assert f"W&B run saved offline in {folder} (upload it with `wandb sync <that folder>`)" in caplog.text
    assert Path(folder).is_dir() and Path(folder).name.startswith("offline-run-")
    monkeypatch.delenv("WANDB_QUIET")  # verbose=true: W&B's own lines
    caplog.clear()
    logger = tracking.start(lambda **kw: _logger(tmp_path / "v", **{"mode": "offline", **kw}), "offline")
    tracking.finish(logger)
    printed = capfd.readouterr()
    assert "syncing is set to" in printed.out + printed.err and "W&B run saved offline" not in caplog.text


def test_an_online_start_that_fails_logs_offline_and_later_runs_start_offline(tmp_path, caplog):
    modes = []

    class Unreachable(WandbLogger):
        @property
        def experiment(self):
            if self._experiment is None:  # a start, not a use of the started run
                modes.append(self._wandb_init["mode"])
            if self._wandb_init["mode"] == "online":
                raise TimeoutError("Run initialization has timed out after 2.0 sec.")
            return super().experiment

    make = lambda **kw: Unreachable(project="x", save_dir=str(tmp_path), **{"mode": "online", **kw})  # noqa: E731
    first = tracking.start(make, "online")
    assert isinstance(first, WandbLogger)
    assert modes == ["online", "offline"] and first.experiment.settings.mode == "offline"
    assert "could not start online (TimeoutError: Run initialization has timed out" in caplog.text
    tracking.finish(first)
    second = tracking.start(make, "online")
    assert modes == ["online", "offline", "offline"]  # the server is not asked again in this process
    tracking.finish(second)
    assert len(list((tmp_path / "wandb").glob("offline-run-*"))) == 2


@pytest.mark.slow
def test_unreachable_server_costs_seconds_not_minutes(tmp_path):
    """WANDB_MODE=online with a W&B server that refuses connections: the run waits ``init_timeout`` (2 s
    here, not W&B's default 90 s), then logs offline."""
    script = textwrap.dedent(f"""
        from hydra import compose, initialize_config_dir
        from itermask import tracking
        from itermask.settings import plain
        from itermask.tracking.runs import logger_options, start_logger
        with initialize_config_dir(config_dir={str(ROOT / "conf")!r}, version_base="1.3"):
            overrides = ["output_dir={tmp_path}", "logger.mode=online", "logger.init_timeout=2"]
            cfg = compose("evaluate", overrides=overrides)
        options = logger_options(plain(cfg), "probe")  # the job's logger as the engine's prepare stage builds it
        logger = start_logger(options.pop("_target_"), options)
        logger.log_metrics({{"a": 1.0}}, step=0)
        print("MODE", logger.experiment.settings.mode)
        tracking.finish(logger)
    """)
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        env = {
            **os.environ,
            "WANDB_MODE": "online",
            "WANDB_BASE_URL": f"http://127.0.0.1:{port}",
            "WANDB_API_KEY": "a" * 40,
            "PYTHONPATH": str(ROOT / "src"),
        }
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "MODE offline" in out.stdout and "logging offline instead" in out.stderr
    assert len(list((tmp_path / "wandb").glob("offline-run-*"))) == 1
    failed_start = next((tmp_path / "wandb").glob("run-*/logs/debug.log")).read_text()
    assert "communicating run to backend with 2.0 second timeout" in failed_start


def test_html_cells_reach_wandb_through_a_table_artifact(tmp_path):
    """An examples table with a per-example view (itermask.views.Html): logged as an ``examples`` artifact
    whose manifest holds the HTML file, so W&B shows the cell as HTML (not the word "Html")."""
    from itermask.analyses import Artifacts
    from itermask.views import Html

    logger = tracking.start(lambda **kw: _logger(tmp_path, **{"mode": "offline", **kw}), "offline")
    assert isinstance(logger, WandbLogger)
    table = (["example_id", "view"], [[1, Html('<section class="imx">a &amp; b</section>')]])
    tracking.log_artifacts(logger, Artifacts(tables={"examples": table}), method="gradient")
    run_dir = Path(logger.experiment.dir).parent
    tracking.finish(logger)
    run = read_wandb_run(run_dir)
    artifacts = [a for a in records(run, "artifact") if a["type"] == "examples"]
    assert len(artifacts) == 1
    manifest = json.dumps(artifacts[0])
    assert "examples.table.json" in manifest and "media/html/" in manifest
    # the views also live in the run folder itself (a copied offline run keeps them): one page of them
    (page,) = (run_dir / "files" / "media" / "html").glob("examples_views_*.html")
    text = page.read_text()
    assert "<h3>example 1</h3>" in text and '<section class="imx">a &amp; b</section>' in text


def test_a_job_run_summary_holds_scores_and_ood_means_never_per_step_values(monkeypatch):
    """What a job passes to ``run.summary``: the scores of each explanation under its role, each OOD AUROC's
    mean over the masking steps (no scalar per step), nothing that could not be computed (NaN, None)."""
    from itermask.analyses import Artifacts
    from itermask.analyses.ood import OODAnalysis

    result = make_result(0)
    result["relative_to_random"]["one_shot"]["racu_without_retraining_accuracy"] = float("nan")
    result["accuracy"]["n_scored"] = None
    summary: dict = {}

    class Run:
        def __init__(self):
            self.summary, self.logged = summary, []

        def define_metric(self, *args, **kwargs):
            pass

        def log(self, row):
            self.logged.append(row)

    class Logger(WandbLogger):
        run = Run()

        @property
        def experiment(self):
            return self.run

    logger = Logger(project="x", mode="offline")
    tracking.log_evaluation(logger, result)
    stats = {"steps": "fraction", "x": [0.0, 0.5, 1.0], "values": {"final/auroc_mahalanobis": [0.5, 0.8, float("nan")]}}
    ood = OODAnalysis._artifacts({"statistics": {"gradient": {"one_shot": stats}}}, images={})
    tracking.log_artifacts(logger, Artifacts(summary=ood.summary, curves=ood.curves), method="gradient")
    scores = {
        "one_shot": ("aopc_comprehensiveness_prob", "aopc_sufficiency_prob", "auc_prob", "n_examples"),
        "recursive": ("aopc_comprehensiveness_prob", "auc_prob", "n_examples"),
    }
    expected = {f"accuracy/{k}" for k in ("test", "validation", "majority_class_test")}
    expected |= {f"{e}/{s}/{k}" for e in ("explained", "random") for s, ks in scores.items() for k in ks}
    expected |= {f"{e}/{s}/never_flip_rate" for e in ("explained", "random") for s in scores}
    expected |= {f"relative_to_random/{s}/aopc_comprehensiveness_prob" for s in scores}
    expected |= {
        "n_evaluated",
        "n_skipped_no_maskable",
        "ood/explained/one_shot/final/auroc_mahalanobis/mean_over_steps",
    }
    assert set(summary) == expected
    assert summary["ood/explained/one_shot/final/auroc_mahalanobis/mean_over_steps"] == pytest.approx(0.65)  # NaN out
    ood_steps = [row for row in Logger.run.logged if "ood/explained/one_shot/final/auroc_mahalanobis" in row]
    assert [row["masked_fraction"] for row in ood_steps] == [0.0, 0.5]  # per step: history (NaN left out)
