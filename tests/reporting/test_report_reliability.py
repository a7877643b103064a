"""Reports that are never silently wrong (constructed results): another schema refused, results from before
a fix of their numbers refused, a NaN seed left out of ``n`` and noted, configs compared by the results key's
normalized form, the claims settings checked before the sweep, and a multirun without a report ending with
exit status 1."""

from __future__ import annotations

import json
import math

import pytest
from omegaconf import DictConfig, OmegaConf
from results_helpers import make_result, write_sweep

from itermask.callbacks import ReportCallback
from itermask.reporting import ReportError, build_report
from itermask.reporting.model import of_measure
from itermask.storage.keys import SCHEMA_VERSION, Fingerprint, keyed_config, results_key
from itermask.storage.store import ResultStore
from itermask.studies.robust_infidelity import RobustInfidelity

CLAIMS = "itermask.studies.robust_infidelity.RobustInfidelity"


def test_results_of_another_schema_are_refused_naming_both(tmp_path):
    old = make_result(1) | {"schema_version": SCHEMA_VERSION - 1}
    root = write_sweep(tmp_path / "mixed", [make_result(0), old])
    with pytest.raises(ReportError) as info:
        build_report(root)
    assert str(info.value) == (
        f"results of schema {SCHEMA_VERSION} only can be reported (this itermask's), found schema "
        f"{SCHEMA_VERSION - 1} in job(s) 1; schema {SCHEMA_VERSION} in job(s) 0: re-run the older jobs (their "
        "results key holds the schema, so a re-run recomputes them)"
    )
    unversioned = make_result(0)
    del unversioned["schema_version"]
    with pytest.raises(ReportError, match=r"found schema none \(before 2\) in job\(s\) 0:"):
        build_report(write_sweep(tmp_path / "none", [unversioned]))


def test_results_computed_before_a_fix_of_their_numbers_are_refused(tmp_path):
    """A bf16 job with F-Fidelity written before its fix (no ``fixes`` entry) is refused, naming the fix and
    the job; the same results with the fix recorded are reported, and float32 ones need none."""
    ffid = {"_target_": "itermask.analyses.FFidelityAnalysis", "enabled": True}

    def job(seed: int, precision: str, fixed: list | None) -> dict:
        result = make_result(seed)
        result["config"] = {**result["config"], "ffidelity": ffid, "trainer": {"precision": precision}}
        return result | ({} if fixed is None else {"fixes": fixed})

    stale = [job(0, "bf16-mixed", ["ffidelity_bf16"]), job(1, "bf16-mixed", None)]
    with pytest.raises(ReportError) as info:
        build_report(write_sweep(tmp_path / "stale", stale))
    assert str(info.value) == (
        "results computed before a fix that changed their numbers: ffidelity_bf16 in job(s) 1 (see CHANGELOG.md): "
        "re-run those jobs (their results key holds the fix, so a re-run recomputes them)"
    )
    build_report(
        write_sweep(
            tmp_path / "fixed", [job(0, "bf16-mixed", ["ffidelity_bf16"]), job(1, "bf16-mixed", ["ffidelity_bf16"])]
        )
    )
    build_report(write_sweep(tmp_path / "float32", [job(0, "32-true", None), job(1, "32-true", None)]))


def test_a_nan_seed_is_left_out_of_n_and_noted(tmp_path):
    a, b = make_result(0, aopc=0.2), make_result(1, aopc=0.3)
    b["scores"]["gradient"]["one_shot"]["aopc_comprehensiveness_prob"] = math.nan
    b["relative_to_random"]["one_shot"]["aopc_comprehensiveness_prob"] = None
    report = build_report(write_sweep(tmp_path / "s", [a, b]))
    row = of_measure(report.summary, "gradient", "one_shot", "aopc_comprehensiveness_prob")
    assert row.n.tolist() == [1] and row["mean"].tolist() == [0.2] and math.isnan(row["std"].tolist()[0])
    head = report.headline.set_index(["schedule", "score"])
    assert head.loc[("one_shot", "aopc_comprehensiveness_prob"), "n_seeds"] == 1  # was 2: the other seed's value
    assert head.loc[("one_shot", "aopc_comprehensiveness_prob"), "difference"] == pytest.approx(0.15)
    assert head.loc[("recursive", "aopc_comprehensiveness_prob"), "n_seeds"] == 2
    note = (
        "m / d / gradient / mask_token: seed(s) 1 have no value (NaN) of gradient/one_shot/"
        "aopc_comprehensiveness_prob, gradient - random/one_shot/aopc_comprehensiveness_prob: their mean, "
        "interval and n are over the other seeds only"
    )
    assert note in report.notes


def _with_model_folder(result: dict, pretrained: str, digest: str = "abc") -> dict:
    result["config"]["model"]["pretrained"] = pretrained
    result["data_files"] = {"test": "d1", "model:config.json": digest}
    return result


def test_the_report_compares_local_paths_as_the_results_key_does(tmp_path):
    runs = [_with_model_folder(make_result(0), "models/tiny"), _with_model_folder(make_result(1), "/abs/models/tiny")]
    assert [len(m) for m in build_report(write_sweep(tmp_path / "same", runs)).groups.values()] == [2]
    other = [_with_model_folder(make_result(0), "models/tiny"), _with_model_folder(make_result(1), "/a", "xyz")]
    with pytest.raises(ReportError, match=r"differ in data_files.model:config.json"):
        build_report(write_sweep(tmp_path / "other", other))
    # the key and the report use one function: the fingerprint a result records gives its key back
    printed = Fingerprint.from_hashed(runs[0]["data_files"])
    assert printed.hashed() == runs[0]["data_files"] and printed.model_files == {"config.json": "abc"}
    config = runs[0]["config"]
    assert (
        keyed_config(config, printed)["model"]["pretrained"]
        == keyed_config(runs[1]["config"], printed)["model"]["pretrained"]
    )
    assert results_key(config, printed) != results_key(config)


@pytest.mark.parametrize(
    "setting, message",
    [
        (
            {"score": "aopc_bogus"},
            "hydra.callbacks.report.claims.score='aopc_bogus' is not allowed: a faithfulness "
            "score: aopc_comprehensiveness_prob, aopc_comprehensiveness_logit,",
        ),
        ({"schedule": "stepwise"}, "claims.schedule='stepwise' is not allowed: one of one_shot, recursive"),
        ({"accuracy_margin": -1}, "claims.accuracy_margin=-1 is not allowed: a fraction in (0, 1)"),
        ({"n_resamples": 0}, "claims.n_resamples=0 is not allowed: an integer >= 1"),
        ({"encoder_texts": -1}, "claims.encoder_texts=-1 is not allowed: an integer >= 0"),
        ({"models": []}, "claims.models=[] is not allowed: model names, or null"),
    ],
)
def test_bad_claims_settings_stop_the_multirun_before_the_sweep(setting, message):
    with pytest.raises(ValueError) as info:
        RobustInfidelity(**setting)
    assert message in str(info.value) and "\n" not in str(info.value)
    claims = {"_target_": CLAIMS, **setting}
    callback = ReportCallback(claims=claims)  # Hydra builds the callbacks before the sweep
    with pytest.raises(SystemExit) as stopped:
        callback.on_multirun_start(_multirun_config("minilm", claims))
    assert str(stopped.value) == f"error: {info.value}"


def _multirun_config(models: str, claims: dict) -> DictConfig:
    return OmegaConf.create(
        {
            "model": {"name": "minilm"},
            "hydra": {
                "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "params": {}},
                "overrides": {"task": [f"model={models}", "seed=0,1"]},
                "callbacks": {"report": {"claims": claims}},
            },
        }
    )


def test_claims_naming_a_model_no_job_runs_end_the_multirun_before_it_starts():
    claims = {"_target_": CLAIMS, "models": ["minilm", "minilm_cda"]}
    callback = ReportCallback(claims=claims)
    callback.on_multirun_start(_multirun_config("minilm,minilm_cda", claims))  # every claims model runs
    with pytest.raises(SystemExit) as info:
        callback.on_multirun_start(_multirun_config("minilm,minilm_mlm", claims))
    assert str(info.value) == (
        "error: hydra.callbacks.report.claims.models names minilm_cda, which no job of this multirun runs: "
        "choose from minilm, minilm_mlm"
    )
    with pytest.raises(ValueError, match="claims.base_model names bert, which no job"):
        RobustInfidelity(base_model="bert").check_sweep(["minilm"])


def test_a_multirun_whose_report_cannot_be_written_exits_1(tmp_path):
    root = write_sweep(tmp_path / "s", [make_result(0), make_result(1, n_examples=12)])
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(root)}}})
    with pytest.raises(SystemExit, match="no report for .*: ReportError: cannot aggregate over seeds"):
        ReportCallback().on_multirun_end(config)
    assert not (root / "report.md").exists()


def test_a_reused_result_records_the_fingerprint_its_key_hashed(tmp_path):
    store = ResultStore(tmp_path / "cache")
    store.put("k", make_result(0))  # stored before results recorded their data_files
    reused = store.reuse("k", tmp_path / "job", {"test": "d1", "model:config.json": "abc"})
    assert reused is not None and reused["data_files"] == {"test": "d1", "model:config.json": "abc"}
    assert json.loads((tmp_path / "job/results.json").read_text())["data_files"] == reused["data_files"]


def test_the_command_line_report_refuses_bad_claims_settings(tmp_path, capsys):
    from itermask.reporting.cli import main

    root = write_sweep(tmp_path / "s", [make_result(0), make_result(1)])
    claims = {"_target_": CLAIMS, "accuracy_margin": -1}
    (root / "multirun.yaml").write_text(OmegaConf.to_yaml({"hydra": {"callbacks": {"report": {"claims": claims}}}}))
    assert main([str(root)]) == 2
    assert capsys.readouterr().err == (
        "error: hydra.callbacks.report.claims.accuracy_margin=-1 is not allowed: a fraction in (0, 1)\n"
    )
    assert not (root / "report.md").exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--confidence", "abc"], "argument --confidence: must be a number in (0, 1), e.g. 0.95, got abc"),
        (["--confidence", "1.5"], "argument --confidence: must be a number in (0, 1), e.g. 0.95, got 1.5"),
        (["--n-resamples", "many"], "argument --n-resamples: must be an integer >= 1, got many"),
        (["--wandb", "--wandb-mode", "bogus"], "argument --wandb-mode: invalid choice: 'bogus' (choose from 'online'"),
    ],
)
def test_a_bad_report_option_names_itself_not_a_function(tmp_path, capsys, arguments, message):
    from itermask.reporting.cli import main

    with pytest.raises(SystemExit) as stopped:
        main([str(tmp_path), *arguments])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "_confidence" not in err and "_positive" not in err
