"""The report's W&B summary run (itermask.reporting.render.wandb_summary): what it passes to ``run.log`` and
``run.summary`` for a constructed sweep: each measure keyed once (the method under its role, ``random`` per
group), its mean beside its interval bounds, and no empty table."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from results_helpers import make_result, write_sweep

from itermask.reporting import build_report
from itermask.reporting.intervals import bounded_t_interval
from itermask.reporting.render import wandb_summary
from itermask.wandb_workspace import key

AOPC = [0.10, 0.14, 0.18]  # the method's AOPC comprehensiveness per seed; random's is 0.05 in every seed


@pytest.fixture
def report(tmp_path):
    results = [make_result(s, aopc=a) for s, a in zip(range(3), AOPC)]
    results += [make_result(s, saliency="occlusion", aopc=0.3) for s in range(3)]
    return build_report(write_sweep(tmp_path / "sweep", results))


def test_each_measure_is_keyed_once_with_its_interval(report):
    values = wandb_summary.summary_values(report)
    # the report's t interval of 0.10, 0.14, 0.18 (sd 0.04) on comprehensiveness's range [-1, 1]
    low, high = bounded_t_interval(0.14, 0.04, 3, 0.95, (-1.0, 1.0))
    score = "one_shot/aopc_comprehensiveness_prob"
    assert {k: v for k, v in values.items() if k.startswith("m/d/gradient/") and k.endswith(f"/{score}/mean")} == {
        f"m/d/gradient/mask_token/explained/{score}/mean": pytest.approx(0.14),
        f"m/d/gradient/mask_token/random/{score}/mean": pytest.approx(0.05),
        f"m/d/gradient/mask_token/explained_minus_random/{score}/mean": pytest.approx(0.09),
    }
    base = f"m/d/gradient/mask_token/explained/{score}"
    assert (values[f"{base}/ci_low"], values[f"{base}/ci_high"]) == pytest.approx((low, high))
    # by hand: tanh((2 atanh(0.14) ± t(0.975, 2) · 0.04 / √3 · 2 / (1 - 0.14²)) / 2)
    assert (low, high) == pytest.approx((0.039553, 0.237646), abs=1e-6)
    # every group has its own random; the other method is "explained" in its group
    assert values[f"m/d/occlusion/mask_token/random/{score}/mean"] == pytest.approx(0.05)
    assert values[f"m/d/occlusion/mask_token/explained/{score}/ci_low"] == pytest.approx(0.3)  # no spread
    for name in values:  # the method's name once (its group), never again as the explanation
        assert sum(part in ("gradient", "occlusion") for part in name.split("/")) <= 1, name
    means = [k for k in values if k.endswith("/mean")]
    assert means and all(
        k.replace("/mean", "/ci_low") in values and k.replace("/mean", "/ci_high") in values for k in means
    )
    assert not any("first_flip_fraction" in k for k in values)  # never computed (None in every seed): left out
    assert (values["n_runs"], values["n_failed"], values["n_missing"]) == (6, 0, 0)
    parts = {"model": "m", "dataset": "d", "saliency": "gradient", "masking": "mask_token", "schedule": "one_shot"}
    for statistic in ("mean", "ci_low", "ci_high"):  # the pattern docs/wandb.md and the workspace module give
        assert key("report", **parts, explanation="explained", score="auc_prob", statistic=statistic) in values
    assert len(means) == 2 * (2 + 7 + 7 + 2)  # per group: 2 accuracies, 7 scores of method and random, 2 differences


def test_two_measures_under_one_key_are_an_error(report):
    doubled = dataclasses.replace(report, summary=pd.concat([report.summary, report.summary.iloc[:1]]))
    with pytest.raises(ValueError, match="share the W&B key 'm/d/gradient/mask_token/model/accuracy_test'"):
        wandb_summary.summary_values(doubled)


def test_the_summary_run_sends_no_empty_table(tmp_path, monkeypatch):
    import wandb

    report = build_report(write_sweep(tmp_path / "one", [make_result(s, aopc=a) for s, a in zip(range(3), AOPC)]))

    sent: dict[str, dict] = {"log": {}, "summary": {}}

    class Run:
        dir = "/nowhere/files"
        summary = sent["summary"]

        def log(self, payload):
            sent["log"].update(payload)

        def finish(self):
            pass

    monkeypatch.setattr(wandb, "init", lambda **kwargs: Run())
    assert report.rank_stability.empty and report.comparisons.empty and report.seed_sensitivity.empty
    wandb_summary.log_report_to_wandb(report, {}, mode="offline")
    assert sorted(sent["log"]) == ["report/headline", "report/per_seed", "report/summary"]
    assert all(len(table.data) for table in sent["log"].values())
    assert sent["summary"] == wandb_summary.summary_values(report)
