"""The saved W&B workspace of a sweep (itermask.wandb_workspace): its spec, built offline with
wandb-workspaces, charts the fixed keys of the explained method and random, grouped by model and method."""

from __future__ import annotations

import json
import sys

import pytest

from itermask import tracking
from itermask.wandb_workspace import EXPLAINED, RANDOM, STEP, key, main, spec_json, workspace_spec

pytest.importorskip("wandb_workspaces", reason="the workspaces extra is not installed")


def _panels(spec: dict) -> dict[str, list[dict]]:
    sections = spec["spec"]["section"]["panelBankConfig"]["sections"]
    return {s["name"]: [p["config"] for p in s["panels"]] for s in sections}


def test_the_spec_charts_method_and_random_grouped_by_model_and_method():
    spec = spec_json(workspace_spec("ent", "proj", "evaluate-sweep-1"))
    assert (spec["entity"], spec["project"], spec["displayName"]) == ("ent", "proj", "itermask evaluate-sweep-1")
    runset = spec["spec"]["section"]["runSets"][0]
    assert runset["filters"]["filters"] == [
        {"key": {"section": "run", "name": "group"}, "op": "=", "value": "evaluate-sweep-1", "disabled": False}
    ]
    assert runset["grouping"] == [
        {"section": "config", "name": "model.value.name"},
        {"section": "config", "name": "saliency.value.name"},
    ]
    curves, headline, ood_panels = _panels(spec).values()
    means, ood = ood_panels[:2], ood_panels[2:]
    # one-shot: comprehensiveness, sufficiency, target, flip rate; recursive: no sufficiency
    assert [c["metrics"] for c in curves] == [
        [f"curves/{e}/{s}/{series}" for e in ("explained", "random")]
        for s, all_series in (
            ("one_shot", ["comprehensiveness_prob", "sufficiency_prob", "target_prob", "flip_rate"]),
            ("recursive", ["comprehensiveness_prob", "target_prob", "flip_rate"]),
        )
        for series in all_series
    ]
    for panel in curves + ood:  # against the masking step, seeds as mean and standard error
        assert panel["xAxis"] == "masked_fraction" and (panel["groupAgg"], panel["groupArea"]) == ("mean", "stderr")
    assert [c["metrics"] for c in headline] == [
        ["explained/one_shot/aopc_comprehensiveness_prob", "random/one_shot/aopc_comprehensiveness_prob"],
        ["relative_to_random/one_shot/aopc_comprehensiveness_prob"],
        ["explained/one_shot/aopc_sufficiency_prob", "random/one_shot/aopc_sufficiency_prob"],
        ["relative_to_random/one_shot/aopc_sufficiency_prob"],
        ["explained/recursive/aopc_comprehensiveness_prob", "random/recursive/aopc_comprehensiveness_prob"],
        ["relative_to_random/recursive/aopc_comprehensiveness_prob"],
    ]
    assert [c["metrics"] for c in ood] == [
        [f"ood/{e}/{s}/final/auroc_mahalanobis" for e in ("explained", "random")] for s in ("one_shot", "recursive")
    ]
    assert [c["metrics"] for c in means] == [  # run-summary bars: the mean over the masking steps
        [f"ood/{e}/{s}/final/auroc_mahalanobis/mean_over_steps" for e in ("explained", "random")]
        for s in ("one_shot", "recursive")
    ]


def test_the_keys_are_those_the_tracker_writes_for_the_fixed_explanation_names():
    """Each workspace key is what itermask.tracking writes for a run whose explanations are logged under the
    fixed names (explained, random): the same key builder (metric_key) and step metric."""
    summary = {"steps": "fraction", "x": [0.0, 0.5], "fraction": [0.0, 0.5], "comprehensiveness_prob": [0.0, 0.25]}
    history = tracking.curve_history({EXPLAINED: {"one_shot": summary}, RANDOM: {"one_shot": summary}})
    logged = {k for row in history for k in row}
    assert STEP == tracking.STEP_METRICS["fraction"] and STEP in logged
    for explanation in (EXPLAINED, RANDOM):
        assert key("curve", explanation=explanation, schedule="one_shot", series="comprehensiveness_prob") in logged
    ood = tracking.curve_history(
        {EXPLAINED: {"one_shot": {"steps": "fraction", "x": [0.5], "final/auroc_mahalanobis": [0.7]}}}, "ood"
    )
    assert key("ood_curve", explanation=EXPLAINED, schedule="one_shot") in ood[0]
    from itermask.analyses.ood import OODAnalysis

    stats = {"steps": "fraction", "x": [0.0, 0.5], "values": {"final/auroc_mahalanobis": [0.5, 0.9]}}
    ood_summary = OODAnalysis._artifacts({"statistics": {"lime": {"one_shot": stats}}}, images={}).summary
    logged_ood = {tracking.role_key(k, "lime"): v for k, v in ood_summary.items()}  # as log_artifacts keys them
    assert logged_ood == {key("ood_score", explanation=EXPLAINED, schedule="one_shot"): pytest.approx(0.7)}
    scalars = tracking._scalars(
        {
            "accuracy": {},
            "scores": {EXPLAINED: {"one_shot": {"aopc_comprehensiveness_prob": 0.25}}},
            "relative_to_random": {"one_shot": {"aopc_comprehensiveness_prob": 0.1}},
            "n_evaluated": 3,
            "n_skipped_no_maskable": 0,
        }
    )
    assert key("score", explanation=EXPLAINED, schedule="one_shot", score="aopc_comprehensiveness_prob") in scalars
    assert key("versus_random", schedule="one_shot", score="aopc_comprehensiveness_prob") in scalars


def test_logit_scores_and_one_schedule():
    spec = spec_json(workspace_spec("e", "p", "g", name="mine", schedules=["recursive"], quantity="logit"))
    curves, headline, ood = _panels(spec).values()
    assert spec["displayName"] == "mine" and len(ood) == 2  # the mean over the steps, and per step
    assert [c["metrics"][0] for c in curves] == [
        "curves/explained/recursive/comprehensiveness_logit",
        "curves/explained/recursive/target_logit",
        "curves/explained/recursive/flip_rate",
    ]
    with pytest.raises(ValueError, match="quantity"):
        workspace_spec("e", "p", "g", quantity="prob")


def test_the_command_prints_the_spec_offline(capsys):
    assert main(["--entity", "e", "--project", "p", "--group", "g", "--dry-run"]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert spec["spec"]["section"]["runSets"][0]["filters"]["filters"][0]["value"] == "g"


def test_without_wandb_workspaces_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb_workspaces", None)
    with pytest.raises(ImportError, match=r"pip install 'itermask\[workspaces\]'"):
        workspace_spec("e", "p", "g")
