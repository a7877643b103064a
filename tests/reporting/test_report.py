"""Aggregation over seeds and models (hand-made result files with known statistics), the results store,
sweep/launcher configs, and (slow) resumable multiruns, an Optuna search and a submitit launch."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from hydra import compose, initialize_config_dir
from results_helpers import _mean_std, make_result, unpadded, write_sweep
from scipy import stats

from itermask import reporting as rep
from itermask.reporting import ReportError, build_report, compare_samples, seed_interval, write_report
from itermask.reporting.aggregate import model_pairs
from itermask.reporting.intervals import bounded_t_interval
from itermask.reporting.render.markdown_report import main_table
from itermask.storage.files import write_json_atomic, write_text_atomic
from itermask.storage.store import ResultStore, results_config, results_key

ROOT = Path(__file__).resolve().parents[2]
T_975 = {1: 12.706204736174707, 2: 4.302652729912332, 3: 3.182446305284263, 4: 2.7764451051977987}  # t tables


ACC = [0.80, 0.82, 0.84]
AOPC = [0.10, 0.14, 0.18]


@pytest.fixture
def sweep(tmp_path):
    return write_sweep(tmp_path / "sweep", [make_result(s, accuracy=a, aopc=o) for s, a, o in zip(range(3), ACC, AOPC)])


# -- statistics ----------------------------------------------------------------------------------------


def test_t_interval_matches_the_formula():
    values = [0.1, 0.2, 0.4]
    mean, std = _mean_std(values)
    out = seed_interval(values)
    half = T_975[2] * std / math.sqrt(3)
    assert out["n"] == 3
    assert out["mean"] == pytest.approx(0.7 / 3)
    assert out["std"] == pytest.approx(std) and std == pytest.approx(0.152752523, rel=1e-8)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((mean - half, mean + half))
    assert seed_interval(values, confidence=0.9)["ci_high"] < out["ci_high"]


def test_interval_edge_cases():
    one = seed_interval([0.5, None, float("nan")])
    assert one["n"] == 1 and one["mean"] == 0.5 and math.isnan(one["std"]) and math.isnan(one["ci_low"])
    assert seed_interval([])["n"] == 0 and math.isnan(seed_interval([])["mean"])
    flat = seed_interval([0.3, 0.3, 0.3])
    assert flat["std"] == 0 and flat["ci_low"] == flat["ci_high"] == pytest.approx(0.3)
    with pytest.raises(ValueError, match="interval method"):
        seed_interval([1, 2], method="jackknife")
    with pytest.raises(ValueError, match="confidence"):
        seed_interval([1, 2], confidence=95)


def test_bootstrap_interval_is_seeded_and_inside_the_data():
    values = [0.1, 0.2, 0.4, 0.35, 0.15]
    a = seed_interval(values, method="bootstrap", n_resamples=2000, seed=3)
    assert a == seed_interval(values, method="bootstrap", n_resamples=2000, seed=3)
    assert min(values) <= a["ci_low"] < a["mean"] < a["ci_high"] <= max(values)
    direct = stats.bootstrap(
        (np.array(values),), np.mean, n_resamples=2000, method="percentile", rng=np.random.default_rng(3)
    ).confidence_interval
    assert (a["ci_low"], a["ci_high"]) == pytest.approx((direct.low, direct.high))


def test_welch_difference_matches_the_formula_and_scipy():
    a, b = [0.10, 0.14, 0.18, 0.13], [0.05, 0.07, 0.02]
    ma, sa = _mean_std(a)
    mb, sb = _mean_std(b)
    va, vb = sa**2 / len(a), sb**2 / len(b)
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    out = compare_samples(a, b)
    assert out["difference"] == pytest.approx(ma - mb)
    assert out["statistic"] == pytest.approx(t)
    assert out["p_value"] == pytest.approx(2 * stats.t.sf(abs(t), df))
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((ma - mb - half, ma - mb + half))
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert (out["statistic"], out["p_value"]) == pytest.approx((ref.statistic, ref.pvalue))
    assert out["n_a"] == 4 and out["n_b"] == 3


def test_permutation_test_exact_p_value():
    # {1,2,3} vs {4,5,6}: of the C(6,3) = 20 splits, only the observed one and its mirror reach |diff| = 3.
    out = compare_samples([1, 2, 3], [4, 5, 6], test="permutation")
    assert out["difference"] == -3 and out["statistic"] == -3
    assert out["p_value"] == pytest.approx(2 / 20)
    assert out["ci_low"] <= -3 <= out["ci_high"]
    with pytest.raises(ValueError, match="welch"):
        compare_samples([1, 2], [3, 4], test="mannwhitney")
    assert math.isnan(compare_samples([1], [2, 3])["p_value"])


# -- aggregation of a multirun folder --------------------------------------------------------------------


def test_aggregation_over_seeds(sweep):
    report = build_report(sweep)
    s = report.summary
    assert list(report.groups) == [("m", "d", "gradient", "mask_token")]

    def row(explanation, schedule, score):
        hit = s[(s.explanation == explanation) & (s.schedule == schedule) & (s.score == score)]
        assert len(hit) == 1, (explanation, schedule, score)
        return hit.iloc[0]

    acc = row("model", "", "accuracy_test")
    mean, std = _mean_std(ACC)
    assert (acc["n"], acc["mean"], acc["std"]) == (3, pytest.approx(0.82), pytest.approx(std))
    # an accuracy is in [0, 1]: the t-interval on the logit scale (itermask.reporting.intervals)
    assert (acc["ci_low"], acc["ci_high"]) == pytest.approx(bounded_t_interval(mean, std, 3, 0.95, (0.0, 1.0)))
    assert acc["ci_high"] < mean + T_975[2] * std / math.sqrt(3)  # pulled in on the side of the bound 1
    aopc = row("gradient", "one_shot", "aopc_comprehensiveness_prob")
    assert aopc["mean"] == pytest.approx(0.14) and aopc["std"] == pytest.approx(0.04)
    assert row("gradient", "one_shot", "aopc_sufficiency_prob")["mean"] == pytest.approx(0.07)
    rel = row("gradient - random", "recursive", "aopc_comprehensiveness_prob")
    assert rel["mean"] == pytest.approx(0.09)
    flat = row("random", "one_shot", "aopc_comprehensiveness_prob")
    assert flat["std"] == 0
    # these hand-made results have no per-example tables: the seed share is not computed, and the report says so
    assert report.seed_sensitivity.empty and any("no per-example results" in note for note in report.notes)
    assert any("only 3 seed(s)" in note for note in report.notes)
    assert row("gradient", "one_shot", "first_flip_fraction")["n"] == 0  # None in every run
    assert "aopc_sufficiency_prob" not in set(s[s.schedule == "recursive"].score)
    # per-seed table: one value per seed and measure
    per = report.per_seed
    chosen = per[
        (per.explanation == "gradient") & (per.schedule == "one_shot") & (per.score == "aopc_comprehensiveness_prob")
    ]
    assert chosen.sort_values("seed").value.tolist() == pytest.approx(AOPC)
    assert len(per) == 3 * len(s)
    assert report.comparisons.empty and report.sweep.missing_lines() == []


def test_bootstrap_option_changes_only_the_intervals(sweep):
    t = build_report(sweep)
    b = build_report(sweep, interval="bootstrap", n_resamples=500)
    assert b.summary["mean"].tolist() == pytest.approx(t.summary["mean"].tolist(), nan_ok=True)
    assert b.summary["ci_low"].tolist() != pytest.approx(t.summary["ci_low"].tolist(), nan_ok=True)


def test_two_models_are_compared(tmp_path):
    results = [make_result(s, model="roberta", accuracy=a, aopc=o) for s, a, o in zip(range(3), ACC, AOPC)]
    results += [make_result(s, model="fairberta", accuracy=0.8, aopc=o) for s, o in zip(range(3), [0.05, 0.07, 0.03])]
    root = write_sweep(
        tmp_path / "pair", results, overrides=[[f"model={r['model']}", f"seed={r['seed']}"] for r in results]
    )
    report = build_report(root)
    assert len(report.groups) == 2
    c = report.comparisons
    assert set(zip(c.model_a, c.model_b)) == {("fairberta", "roberta")}  # sorted by name
    row = c[
        (c.explanation == "gradient") & (c.schedule == "one_shot") & (c.score == "aopc_comprehensiveness_prob")
    ].iloc[0]
    ref = stats.ttest_ind([0.05, 0.07, 0.03], AOPC, equal_var=False)
    assert row["difference"] == pytest.approx(0.05 - 0.14)
    assert (row["statistic"], row["p_value"]) == pytest.approx((ref.statistic, ref.pvalue))
    assert row["ci_low"] < row["difference"] < row["ci_high"] < 0
    acc = c[c.score == "accuracy_test"].iloc[0]
    assert acc["mean_a"] == pytest.approx(0.8) and acc["mean_b"] == pytest.approx(0.82)
    # the difference in units of the pooled within-group seed sd: sqrt((0.02^2 + 0.04^2) / 2)
    assert row["difference_in_seed_sd"] == pytest.approx((0.05 - 0.14) / math.sqrt((0.02**2 + 0.04**2) / 2))
    permuted = build_report(root, test="permutation", n_resamples=999).comparisons
    assert permuted.loc[row.name, "p_value"] == pytest.approx(2 / 20)  # 3 vs 3 fully separated: exact test


def test_report_files(sweep):
    report = build_report(sweep)
    written = write_report(report)
    md = unpadded((sweep / "report.md").read_text())
    # one_shot and recursive have the same per-seed values here: the row is shown once
    assert "| gradient | one_shot = recursive | aopc_comprehensiveness_prob | probability | 3 | 0.1400 | 0.0400 |" in md
    low, high = bounded_t_interval(0.14, 0.04, 3, 0.95, (-1.0, 1.0))  # comprehensiveness is in [-1, 1]
    assert f"[{low:.4f}, {high:.4f}] |" in md
    html = (sweep / "report.html").read_text()
    assert "<table>" in html and "report_files/curves_m_d_gradient_mask_token_one_shot.png" in md
    # report.html is self-contained: every image a data URI, nothing fetched from report_files/ or the web
    import base64
    import re

    sources = re.findall(r'<img[^>]* src="([^"]+)"', html)
    assert len(sources) == 3 and all(src.startswith("data:image/png;base64,") for src in sources)  # forest + curves
    assert base64.b64decode(sources[0].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "report_files/" not in html and not re.search(r'(src|href)="(https?:)?//', html)
    assert (sweep / "report_files" / "forest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the first screen: one sentence per headline score, the forest plot, readable names with the key as tooltip
    first = html[html.index('id="first-screen"') : html.index("</section>")]
    assert "gradient (m, d, mask_token), one_shot: AOPC comprehensiveness (probability) 0.1400" in first
    assert '<abbr title="metric key: aopc_comprehensiveness_prob">AOPC comprehensiveness (probability)</abbr>' in first
    assert html.index('id="first-screen"') < html.index("<h2>Headline</h2>")
    assert "## What this run found" in md and "![method minus random" in md
    for name in ("curves_m_d_gradient_mask_token_one_shot.png", "curves_m_d_gradient_mask_token_recursive.png"):
        assert (sweep / "report_files" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (sweep / "report_files" / "summary.csv").read_text().splitlines()
    assert len(summary) == 1 + len(report.summary)
    assert set(written) >= {
        "report.md",
        "report.html",
        "summary.csv",
        "per_seed.csv",
        "comparisons.csv",
        "headline.csv",
        "seed_sensitivity.csv",
    }
    assert not list(sweep.rglob("*.tmp"))
    # a second report over the folder ignores its own output
    assert len(build_report(sweep).sweep.runs) == 3


def test_missing_runs_are_listed(tmp_path):
    root = write_sweep(
        tmp_path / "partial", [make_result(0), make_result(1), None], overrides=[["seed=0"], ["seed=1"], ["seed=2"]]
    )
    (root / "multirun.yaml").write_text(
        yaml.safe_dump(
            {
                "task_name": "evaluate",
                "hydra": {
                    "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "params": None},
                    "overrides": {"task": ["seed=0,1,2,3", "evaluation.n_examples=8"]},
                },
            }
        )
    )
    for i in range(3):
        (root / str(i) / ".hydra" / "overrides.yaml").write_text(
            yaml.safe_dump([f"seed={i}", "evaluation.n_examples=8"])
        )
    report = build_report(root)
    assert report.sweep.n_expected == 4 and len(report.sweep.runs) == 2
    assert report.sweep.missing_lines() == [
        "job folder 2 has no results.json (overrides: seed=2 evaluation.n_examples=8)",
        "job never started (overrides: seed=3 evaluation.n_examples=8)",
    ]
    write_report(report)
    md = (root / "report.md").read_text()
    assert "2 finished run(s) of 4 expected" in md and "## Missing" in md and "seed=3" in md


def test_no_finished_runs_says_what_was_found(tmp_path):
    with pytest.raises(ReportError, match="nope does not exist"):
        build_report(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ReportError, match="file is not a folder"):
        build_report(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match=r"no finished runs .* 0 job folder.*no multirun.yaml"):
        build_report(tmp_path / "empty")
    # a single run's folder that failed (it said "found 0 job folder(s)": stop 53's new-user review)
    (single := tmp_path / "single" / ".hydra").mkdir(parents=True)
    (single.parent / "failed.json").write_text(json.dumps({"error": "ValueError: bad\nthing"}))
    with pytest.raises(ReportError) as info:
        build_report(single.parent)
    assert str(info.value) == (
        f"{single.parent} is a single job's folder, not a multirun's (the job failed: ValueError: bad thing); the "
        f"report reads a multirun folder (python evaluate.py -m ...); one job's examples: python -m itermask.views "
        f"{single.parent}"
    )
    root = write_sweep(tmp_path / "unfinished", [None, None], overrides=[["seed=0"], ["seed=1"]])
    with pytest.raises(ReportError) as info:
        build_report(root)
    assert "no finished runs" in str(info.value) and "2 job folder(s), none with a results.json" in str(info.value)
    assert "0 (seed=0)" in str(info.value) and "1 (seed=1)" in str(info.value)
    write_json_atomic(root / "0" / "results.json", {"seed": 0})
    with pytest.raises(ReportError, match="not an itermask result file: missing model"):
        build_report(root)


def test_a_damaged_sweep_folder_is_one_line_not_a_traceback(tmp_path, capsys):
    """A new-user review: an unparsable multirun.yaml was yaml's ParserError, and a report.md that is a folder
    an IsADirectoryError from the atomic rename."""
    root = write_sweep(tmp_path / "sweep", [make_result(0), make_result(1)])
    (root / "multirun.yaml").write_text("a: [\n")
    assert rep.main([str(root)]) == 2
    assert capsys.readouterr().err == (
        f"error: {root / 'multirun.yaml'} cannot be read (while parsing a flow node): it is written by Hydra when the "
        "multirun starts; restore it, or move it aside to report the finished jobs without the list of expected ones\n"
    )
    (root / "multirun.yaml").unlink()
    (root / "report.md").mkdir()
    assert rep.main([str(root)]) == 2
    assert capsys.readouterr().err == (
        f"error: the report cannot be written in {root}: Is a directory ({root / 'report.md'})\n"
    )


def test_mixed_configs_are_refused_with_the_difference(tmp_path):
    results = [make_result(0), make_result(1), make_result(2, n_examples=12)]
    root = write_sweep(tmp_path / "mixed", results)
    with pytest.raises(ReportError) as info:
        build_report(root)
    message = str(info.value)
    assert "m/d/gradient/mask_token: runs from 2 different configs are mixed" in message
    assert "evaluation.n_examples" in message
    assert "[evaluation.n_examples=8] in 0 (seed 0), 1 (seed 1)" in message
    assert "[evaluation.n_examples=12] in 2 (seed 2)" in message
    dupes = write_sweep(tmp_path / "dupes", [make_result(0), make_result(0)])
    with pytest.raises(ReportError, match="seed 0 appears in 2 runs"):
        build_report(dupes)


def test_swept_settings_form_their_own_groups_and_are_compared(tmp_path):
    """experiment=masked_vs_standard sweeps train.masking_augmentation.enabled beside the seed."""
    results, overrides = [], []
    for masked, aopcs in ((False, AOPC), (True, [0.02, 0.04, 0.06])):
        for seed, aopc in zip(range(3), aopcs):
            result = make_result(seed, aopc=aopc)
            result["config"]["train"]["masking_augmentation"] = {"enabled": masked, "batch_share": 0.5}
            ood = {
                "fraction": [0.0, 0.1, 0.5, 0.9],
                "values": {
                    "final/auroc_mahalanobis": [0.5, 0.6 + 0.1 * masked, 0.9 - 0.2 * masked + 0.01 * seed, 1.0],
                    "ece": [0.1, None, 0.2, 0.3],
                },
            }
            result["ood"] = {"statistics": {"gradient": {"one_shot": ood}}}
            results.append(result)
            overrides.append([f"train.masking_augmentation.enabled={masked}", f"seed={seed}"])
    report = build_report(write_sweep(tmp_path / "masked", results, overrides=overrides))
    standard = ("m[train.masking_augmentation.enabled=False]", "d", "gradient", "mask_token")
    masked = ("m[train.masking_augmentation.enabled=True]", "d", "gradient", "mask_token")
    assert set(report.groups) == {standard, masked}
    assert [r.seed for r in report.groups[masked]] == [0, 1, 2]
    c = report.comparisons
    row = c[
        (c.explanation == "gradient") & (c.schedule == "one_shot") & (c.score == "aopc_comprehensiveness_prob")
    ].iloc[0]
    assert (row.model_a, row.model_b) == (standard[0], masked[0])
    assert row["difference"] == pytest.approx(0.14 - 0.04)
    h = report.headline[
        (report.headline.score == "aopc_comprehensiveness_prob") & (report.headline.schedule == "one_shot")
    ]
    by_model = {r.model: r for r in h.itertuples()}  # each group's headline reads its own runs only
    assert set(by_model) == {standard[0], masked[0]} and len(h) == 2
    assert by_model[masked[0]].mean == pytest.approx(0.04) and by_model[standard[0]].mean == pytest.approx(0.14)
    assert by_model[masked[0]].n_seeds == 3 and by_model[masked[0]].n_better <= 3
    s = report.summary
    ood = s[(s.score == "ood final/auroc_mahalanobis @50%") & (s.model == masked[0])].iloc[0]
    assert (ood["n"], ood["mean"], ood["std"]) == pytest.approx((3, 0.71, 0.01))
    assert s[s.score == "ood final/auroc_mahalanobis @90%"]["mean"].tolist() == [1.0, 1.0]
    assert s[s.score == "ood ece @10%"]["mean"].isna().all()  # missing is NaN, never 0
    table = unpadded(main_table(report, masked))  # every OOD row with its unit
    assert "| ood ece @50% | probability (expected calibration error of the top label, ood.ece_bins bins) |" in table
    assert "| ood final/auroc_mahalanobis @50% | AUROC |" in table
    # a key set in only some jobs' overrides was not swept: refused, not grouped
    partial = [o if i % 2 else o[1:] for i, o in enumerate(overrides)]
    with pytest.raises(ReportError, match="different configs are mixed"):
        build_report(write_sweep(tmp_path / "partial", results, overrides=partial))
    # an unswept difference is still refused
    results[3]["config"]["evaluation"]["n_examples"] = 99
    with pytest.raises(ReportError, match="different configs are mixed"):
        build_report(write_sweep(tmp_path / "accident", results, overrides=[[o[1]] for o in overrides]))


def test_analysis_switches_swept_with_a_training_setting_stay_out_of_the_labels(tmp_path):
    """experiment=paper switches the costly analyses off in its masked jobs: naopc.enabled=False beside
    train.masking_augmentation.enabled=True; the label names the fine-tuning only, unless the switch alone
    tells two groups apart."""
    results, overrides = [], []
    for masked, naopc in ((False, True), (True, False)):
        for seed in range(2):
            result = make_result(seed)
            result["config"]["train"]["masking_augmentation"] = {"enabled": masked, "batch_share": 0.5}
            result["config"]["analyses"] = ["naopc"]
            result["config"]["naopc"] = {"enabled": naopc, "max_examples": 20}
            results.append(result)
            overrides.append([f"train.masking_augmentation.enabled={masked}", f"naopc.enabled={naopc}", f"seed={seed}"])
    report = build_report(write_sweep(tmp_path / "paper", results, overrides=overrides))
    assert {label[0] for label in report.groups} == {
        "m[train.masking_augmentation.enabled=False]",
        "m[train.masking_augmentation.enabled=True]",
    }
    # a second model at the standard setting (the preset's claim-1 grid) is compared with m's standard group
    # only: against m's masked group both the model and the fine-tuning differ
    for seed in range(2):
        result = make_result(seed, model="n", aopc=0.3)
        result["config"]["train"]["masking_augmentation"] = {"enabled": False, "batch_share": 0.5}
        result["config"]["analyses"] = ["naopc"]
        result["config"]["naopc"] = {"enabled": True, "max_examples": 20}
        results.append(result)
        overrides.append(["model=n", "train.masking_augmentation.enabled=False", "naopc.enabled=True", f"seed={seed}"])
    report = build_report(write_sweep(tmp_path / "claims", results, overrides=overrides))
    assert sorted((a[0], b[0]) for a, b in model_pairs(report.groups)) == [
        ("m[train.masking_augmentation.enabled=False]", "m[train.masking_augmentation.enabled=True]"),
        ("m[train.masking_augmentation.enabled=False]", "n"),
    ]
    row = report.comparisons[report.comparisons.score == "aopc_comprehensiveness_prob"]
    assert set(zip(row.model_a, row.model_b)) == {
        ("m[train.masking_augmentation.enabled=False]", "m[train.masking_augmentation.enabled=True]"),
        ("m[train.masking_augmentation.enabled=False]", "n"),
    }
    del results[4:], overrides[4:]
    # the switch alone sets two groups apart: it stays
    results[2]["config"]["train"]["masking_augmentation"]["enabled"] = False
    results[3]["config"]["train"]["masking_augmentation"]["enabled"] = False
    alone = [[o.replace("enabled=True", "enabled=False") if "masking" in o else o for o in x] for x in overrides]
    report = build_report(write_sweep(tmp_path / "alone", results, overrides=alone))
    assert {label[0] for label in report.groups} == {"m[naopc.enabled=True]", "m[naopc.enabled=False]"}


def test_a_swept_switch_covers_its_sections_settings(tmp_path):
    """experiment=adversarial_vs_standard: a disabled train.adversarial_augmentation is left out of the
    results config, so its other settings differ between the groups only through the swept switch."""
    results, overrides = [], []
    for adversarial, aopcs in ((False, AOPC), (True, [0.05, 0.07, 0.12])):
        for seed, aopc in zip(range(3), aopcs):
            result = make_result(seed, aopc=aopc)
            result["config"]["train"]["adversarial_augmentation"] = {
                "enabled": adversarial,
                "batch_share": 0.5,
                "budget": 0.2,
                "candidates": {"name": "embedding_neighbors"},
            }
            result["attack"] = {
                "settings": {"ranking": "one_shot"},
                "methods": {
                    "gradient": {"summary": {"success_rate": 0.7 - 0.3 * adversarial + 0.01 * seed}, "link": {}}
                },
            }
            results.append(result)
            overrides.append([f"train.adversarial_augmentation.enabled={adversarial}", f"seed={seed}"])
    report = build_report(write_sweep(tmp_path / "adversarial", results, overrides=overrides))
    standard, adversarial = (f"m[train.adversarial_augmentation.enabled={v}]" for v in (False, True))
    assert {label[0] for label in report.groups} == {standard, adversarial}
    c = report.comparisons
    row = c[(c.explanation == "gradient") & (c.score == "attack success_rate")].iloc[0]
    assert (row.model_a, row.model_b, row["difference"]) == (standard, adversarial, pytest.approx(0.3))
    row = c[
        (c.explanation == "gradient") & (c.schedule == "one_shot") & (c.score == "aopc_comprehensiveness_prob")
    ].iloc[0]
    assert row["difference"] == pytest.approx(0.14 - 0.08) and 0 < row["p_value"] < 1
    # another setting of the section differing among the enabled runs alone is not explained by the switch
    results[4]["config"]["train"]["adversarial_augmentation"]["budget"] = 0.5
    with pytest.raises(ReportError, match="different configs are mixed"):
        build_report(write_sweep(tmp_path / "accident", results, overrides=overrides))


def test_settings_that_do_not_change_results_do_not_mix(tmp_path):
    a, b = make_result(0), make_result(1)
    b["config"]["output_dir"] = "/elsewhere"
    b["config"]["logger"] = {"_target_": "pytorch_lightning.loggers.WandbLogger"}
    b["config"]["evaluation"]["token_budget"] = 64
    for r in (a, b):
        r["config"]["saliency"]["seed"] = r["seed"]  # like saliency.seed: ${seed}
    assert len(build_report(write_sweep(tmp_path / "ok", [a, b])).sweep.runs) == 2


def test_cli(sweep, tmp_path, capsys, caplog):
    assert rep.main([str(sweep), "--bootstrap", "--n-resamples", "200"]) == 0
    assert "wrote" in capsys.readouterr().out and (sweep / "report.md").is_file()
    # the fixture's groups have 3 seeds: the percentile bootstrap over so few is said to be about their range
    warning = "a group has only 3 seed(s): a percentile bootstrap over so few is about the range of the values"
    assert warning in caplog.text and f"**Warning**: {warning}" in (sweep / "report.md").read_text()
    caplog.clear()
    assert rep.main([str(sweep)]) == 0  # the t-interval: no such warning
    assert "seed(s)" not in caplog.text and "**Warning**: a group" not in (sweep / "report.md").read_text()
    (tmp_path / "empty").mkdir()
    assert rep.main([str(tmp_path / "empty")]) == 2
    assert "error: no finished runs" in capsys.readouterr().err
    # bad options are argparse errors (exit 2, the option named), before any run is read
    for option, value in (("--confidence", "2"), ("--confidence", "0"), ("--n-resamples", "-5")):
        with pytest.raises(SystemExit) as exit_info:
            rep.main([str(sweep), option, value])
        assert exit_info.value.code == 2
        assert f"argument {option}: must be" in capsys.readouterr().err


def test_wandb_summary_run_offline(sweep):
    report = build_report(sweep)
    written = write_report(report)
    folder = rep.log_report_to_wandb(report, written, project="itermask", group="evaluate-test", mode="offline")
    assert folder is not None and Path(folder).name.startswith("offline-run-")
    tables = sorted(p.name.split("_0_")[0] for p in Path(folder).rglob("*.table.json"))
    assert tables == ["headline", "per_seed", "summary"]  # empty ones (one method: no rank stability) not sent
    summary = json.loads(next(Path(folder).rglob("summary_*.table.json")).read_text())
    assert len(summary["data"]) == len(report.summary)
    assert len(list(Path(folder).rglob("media/images/**/*.png"))) == 3  # two curve figures and the forest plot


def test_wandb_failure_keeps_the_local_report(sweep, caplog, monkeypatch):
    import wandb

    report = build_report(sweep)
    written = write_report(report)

    def broken(**kwargs):
        raise ConnectionError("no server")

    monkeypatch.setattr(wandb, "init", broken)
    assert rep.log_report_to_wandb(report, written, mode="offline") is None
    assert "W&B summary run failed" in caplog.text and (sweep / "report.md").is_file()


def test_tracking_survives_wandb_failures(caplog):
    from pytorch_lightning.loggers import WandbLogger

    from itermask import tracking

    class Broken(WandbLogger):
        @property
        def experiment(self):
            raise ConnectionError("no server")

    assert tracking.start(lambda **kw: Broken(project="x", mode="offline"), "offline") is None
    assert "W&B run could not start" in caplog.text
    tracking.log_evaluation(Broken(project="x", mode="offline"), make_result(0))  # warns, does not raise
    assert "logging the evaluation failed" in caplog.text
    tracking.log_config(Broken(project="x", mode="offline"), make_result(0)["config"])
    assert "logging the run config failed" in caplog.text


# -- results store -------------------------------------------------------------------------------------


def test_results_key_ignores_what_does_not_change_results():
    config = make_result(0)["config"]
    other = json.loads(json.dumps(config))
    other.update(output_dir="/x", cache_dir="/y", logger={"_target_": "W"}, reuse_results=False)
    other["evaluation"]["token_budget"] = 1
    other["masking"]["chunk_size"] = 8  # mlm_infill rows per MLM forward
    assert results_key(other) == results_key(config)
    assert "output_dir" not in results_config(config) and "token_budget" not in results_config(config)["evaluation"]
    assert config["evaluation"]["token_budget"] == 8192  # the input is not modified
    for change in ({"seed": 1}, {"evaluation": {"n_examples": 9, "fractions": [0, 1]}}):
        assert results_key({**config, **change}) != results_key(config)


def test_results_key_holds_the_schema_version(monkeypatch):
    from itermask.storage import keys

    config = make_result(0)["config"]
    key = results_key(config)
    monkeypatch.setattr(keys, "SCHEMA_VERSION", keys.SCHEMA_VERSION - 1)
    assert results_key(config) != key  # results stored by the code before a fix are not reused


def test_a_fix_to_bf16_ffidelity_changes_those_jobs_keys_only():
    """F-Fidelity under bf16 autocast trained its copy on stale weights: those jobs' stored results are not
    reused, while every other job (float32, or bf16 without F-Fidelity) keeps its key."""
    from itermask.storage.cache import config_hash
    from itermask.storage.keys import SCHEMA_VERSION, fixes, keyed_config

    config = make_result(0)["config"]
    ffid = {"_target_": "itermask.analyses.FFidelityAnalysis", "enabled": True, "steps": 60}
    jobs = {
        "fp32 with ffidelity": {**config, "ffidelity": ffid},
        "bf16 with ffidelity": {**config, "ffidelity": ffid, "trainer": {"precision": "bf16-mixed"}},
        "bf16, ffidelity off": {**config, "ffidelity": {**ffid, "enabled": False}, "trainer": {"precision": "bf16"}},
        "bf16, no ffidelity": {**config, "trainer": {"precision": "bf16-mixed"}},
    }
    assert {name: fixes(job) for name, job in jobs.items()} == {
        "fp32 with ffidelity": [],
        "bf16 with ffidelity": ["ffidelity_bf16"],
        "bf16, ffidelity off": [],
        "bf16, no ffidelity": [],
    }
    for name, job in jobs.items():  # the key of a job without a fix is the one it had before fixes existed
        before = config_hash({"schema_version": SCHEMA_VERSION, "config": keyed_config(job)})
        assert (results_key(job) == before) == (name != "bf16 with ffidelity"), name


def test_result_store_reuse(tmp_path, caplog):
    store = ResultStore(tmp_path / "cache")
    assert store.get("k") is None and store.reuse("k", tmp_path / "job") is None
    assert not (tmp_path / "job").exists()
    store.put("k", {"seed": 0, "scores": {}})
    import logging

    with caplog.at_level(logging.INFO):
        reused = store.reuse("k", tmp_path / "job")
    assert reused["seed"] == 0 and reused["reused_from"] == str(tmp_path / "cache/results/k.json")
    assert json.loads((tmp_path / "job/results.json").read_text()) == reused
    assert "skipping" in caplog.text


def test_write_text_atomic(tmp_path):
    path = write_text_atomic(tmp_path / "a" / "report.md", "héllo\n")
    assert path.read_text(encoding="utf-8") == "héllo\n"
    assert [p.name for p in path.parent.iterdir()] == ["report.md"]


# -- configs: model pairs, launchers, sweepers, W&B sweeps -----------------------------------------------


def _compose(*overrides, name="evaluate", hydra=False):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name=name, overrides=list(overrides), return_hydra_config=hydra)


@pytest.mark.parametrize(
    "model,pretrained",
    [
        ("fairberta", "facebook/FairBERTa"),
        ("bert_cda", "fairnlp/bert-cda"),
        ("bert_large", "bert-large-uncased"),
        ("roberta", "roberta-base"),
    ],
)
def test_paper_model_pairs(model, pretrained):
    cfg = _compose(f"model={model}", "output_dir=/tmp/unused")
    assert cfg.model.name == model and cfg.model.pretrained == pretrained
    text = (ROOT / "conf/model/bert_cda.yaml").read_text()
    assert "BERT-large uncased" in text and "bert_large" in text


@pytest.mark.parametrize(
    "launcher,target",
    [
        ("joblib", "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"),
        ("submitit_local", "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"),
        ("submitit_slurm", "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"),
    ],
)
def test_launchers_compose(launcher, target, sweeps_extra):
    cfg = _compose(f"hydra/launcher={launcher}", hydra=True)
    assert cfg.hydra.launcher._target_ == target
    assert cfg.hydra.callbacks.report._target_ == "itermask.callbacks.ReportCallback"


def test_ddp_trainer_and_step_checkpoints_compose():
    cfg = _compose("trainer=ddp", "output_dir=/tmp/unused")
    assert cfg.trainer.strategy == "ddp" and cfg.trainer.accelerator == "gpu"
    assert cfg.train.checkpoint_every_n_steps == 500


def test_optuna_search_composes(sweeps_extra):
    cfg = _compose("hparams_search=optuna", name="train", hydra=True)
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_.endswith("OptunaSweeper") and sweeper.direction == "maximize"
    assert set(sweeper.params) == {
        "model.finetune.optimizer.learning_rate",
        "model.finetune.batch_size",
        "model.finetune.max_epochs",
        "model.finetune.optimizer.warmup_ratio",
    }
    assert cfg.hydra.mode.name == "MULTIRUN"


def _agent_command(sweep_file: Path, rng: np.random.Generator, env: dict) -> tuple[list[str], dict]:
    """The command line ``wandb agent`` runs for one sampled parameter set (expanded with wandb's own
    helpers, as ``wandb.wandb_agent.Agent._run_job`` does)."""
    from wandb.sdk.launch.sweeps import utils as sweep_utils

    spec = yaml.safe_load(sweep_file.read_text())
    values = {}
    for name, p in spec["parameters"].items():
        if "values" in p:
            values[name] = p["values"][int(rng.integers(len(p["values"])))]
        elif p.get("distribution") == "log_uniform_values":
            values[name] = float(math.exp(rng.uniform(math.log(p["min"]), math.log(p["max"]))))
        else:
            values[name] = float(rng.uniform(p["min"], p["max"]))
    old = dict(os.environ)
    os.environ.update(env)
    try:
        command = sweep_utils.create_sweep_command(list(spec["command"]))
    finally:
        os.environ.clear()
        os.environ.update(old)
    macros = sweep_utils.create_sweep_command_args({"args": {k: {"value": v} for k, v in values.items()}})
    macros.update(interpreter=[sys.executable], program=[spec["program"]], env=["/usr/bin/env"])
    argv = []
    for chunk in map(str, command):
        argv += macros.get(chunk[2:-1], []) if chunk.startswith("${") and chunk.endswith("}") else [chunk]
    return argv, values


def _check_swept_values(cfg: dict, values: dict) -> None:
    for key, value in values.items():
        node = cfg
        for part in key.split("."):
            node = node[part]
        if key in ("saliency", "masking"):
            node = node["name"]
        assert node == (pytest.approx(value) if isinstance(value, float) else value), key
    assert cfg["logger"]["mode"] == "online" and cfg["logger"]["group"] == "sweep-abc123"


AGENT_ENV = {"WANDB_SWEEP_ID": "abc123", "WANDB_RUN_ID": "run9"}


@pytest.mark.parametrize("sweep_name", ["train", "evaluate"])
def test_wandb_sweep_command_reaches_the_config(sweep_name, monkeypatch):
    from omegaconf import OmegaConf

    argv, values = _agent_command(ROOT / f"sweeps/wandb/{sweep_name}.yaml", np.random.default_rng(0), AGENT_ENV)
    assert argv[:3] == ["/usr/bin/env", sys.executable, f"{sweep_name}.py"]
    assert not any(a.startswith("--") for a in argv)
    for name, value in AGENT_ENV.items():  # the run's own environment, which Hydra resolves ${oc.env:...} in
        monkeypatch.setenv(name, value)
    cfg = _compose(*argv[3:], name=sweep_name, hydra=True)
    assert cfg.hydra.run.dir == "outputs/wandb_sweeps/abc123/run9"
    job = OmegaConf.to_container(cfg, resolve=False)
    del job["hydra"]
    job["output_dir"] = "/tmp/unused"
    _check_swept_values(OmegaConf.to_container(OmegaConf.create(job), resolve=True), values)


@pytest.mark.slow
def test_wandb_sweep_commands_run(tmp_path):
    """The agent's command lines themselves (``--cfg job`` prints the resolved config instead of training)."""
    for sweep_name in ("train", "evaluate"):
        argv, values = _agent_command(ROOT / f"sweeps/wandb/{sweep_name}.yaml", np.random.default_rng(1), AGENT_ENV)
        out = subprocess.run(
            [*argv, "--cfg", "job", "--resolve"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **AGENT_ENV, "ITERMASK_CACHE": str(tmp_path)},
        )
        assert out.returncode == 0, out.stderr[-3000:]
        _check_swept_values(yaml.safe_load(out.stdout), values)


# -- slow: real multiruns with tiny settings ---------------------------------------------------------------

TINY = [
    "train.max_train_examples=96",
    "+trainer.limit_val_batches=2",
    "+trainer.limit_test_batches=2",
    "evaluation.n_examples=6",
    "evaluation.fractions=[0,0.1,0.5,1.0]",
    "evaluation.aopc_bins=[0.1,0.5]",
    "data.eval_batch_size=128",
    "logger=csv",
]


@pytest.fixture
def env(tmp_path):
    return {
        **os.environ,
        "ITERMASK_CACHE": str(tmp_path / "cache"),
        "WANDB_MODE": "offline",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_SILENT": "true",
        "PYTHONPATH": str(ROOT / "src"),
    }


def _run(args, env, timeout=600):
    out = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    return out


@pytest.mark.slow
def test_killed_multirun_resumes_without_recomputing(tmp_path, env):
    """Kill a 2-seed multirun once seed 0's result exists and seed 1's fine-tuning wrote last.ckpt; the same
    command (a new sweep folder) skips seed 0 and resumes seed 1's training from its checkpoint."""
    args = ["evaluate.py", "-m", "seed=0,1", *TINY, "train.checkpoint_every_n_steps=3"]
    proc = subprocess.Popen(
        [sys.executable, *args, f"hydra.sweep.dir={tmp_path}/first"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    cache = tmp_path / "cache"
    deadline = time.time() + 500
    try:
        while time.time() < deadline and proc.poll() is None:
            if (tmp_path / "first/0/results.json").is_file() and any(cache.glob("*/checkpoints/last.ckpt")):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the first multirun ended (or timed out) before it could be killed mid-way")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    first = json.loads((tmp_path / "first/0/results.json").read_text())
    assert not (tmp_path / "first/1/results.json").exists() and not (tmp_path / "first/report.md").exists()
    assert len(list((cache / "results").glob("*.json"))) == 1

    _run([*args, f"hydra.sweep.dir={tmp_path}/second"], env)
    log0 = (tmp_path / "second/0/evaluate.log").read_text()
    log1 = (tmp_path / "second/1/evaluate.log").read_text()
    assert "skipping: a result for config hash" in log0 and "fine-tuning" not in log0
    assert "reusing fine-tuned checkpoint" not in log0  # nothing loaded for a finished seed
    assert "resuming interrupted fine-tuning from" in log1 and "last.ckpt" in log1
    second = json.loads((tmp_path / "second/0/results.json").read_text())
    assert second["scores"] == first["scores"] and second["reused_from"].endswith(f"{first['config_hash']}.json")
    assert json.loads((tmp_path / "second/1/results.json").read_text())["seed"] == 1
    assert len(list((cache / "results").glob("*.json"))) == 2
    md = (tmp_path / "second/report.md").read_text()  # written by the Hydra callback
    assert "2 finished run(s) of 2 expected" in md and md.index("## Headline") < md.index("## Scores over seeds")


@pytest.mark.slow
def test_optuna_search_four_trials(tmp_path, env, sweeps_extra):
    _run(
        [
            "train.py",
            "hparams_search=optuna",
            "hydra.sweeper.n_trials=4",
            "hydra.sweeper.sampler.n_startup_trials=2",
            "model.finetune.max_epochs=1",
            "model.finetune.batch_size=32",
            "train.max_train_examples=64",
            "+trainer.limit_val_batches=1",
            "logger=csv",
            f"hydra.sweep.dir={tmp_path}/optuna",
        ],
        env,
    )
    best = yaml.safe_load((tmp_path / "optuna/optimization_results.yaml").read_text())
    # batch size and epochs were fixed on the command line (a small trial); the rest was searched
    assert set(best["best_params"]) == {
        "model.finetune.optimizer.learning_rate",
        "model.finetune.optimizer.warmup_ratio",
    }
    assert 1e-5 <= best["best_params"]["model.finetune.optimizer.learning_rate"] <= 1e-4
    metas = [json.loads(p.read_text()) for p in (tmp_path / "cache").glob("*/meta.json")]
    assert len(metas) == 4  # four trials, four different learning rates / warm-ups: four fine-tunings
    assert {m["config"]["model"]["finetune"]["batch_size"] for m in metas} == {32}
    assert best["best_value"] == pytest.approx(max(m["val_acc"] for m in metas))
    lr = best["best_params"]["model.finetune.optimizer.learning_rate"]
    assert any(
        m["val_acc"] == best["best_value"]
        and m["config"]["model"]["finetune"]["optimizer"]["learning_rate"] == pytest.approx(lr)
        for m in metas
    )


@pytest.mark.slow
def test_submitit_local_two_seeds(tmp_path, env, sweeps_extra):
    _run(
        [
            "evaluate.py",
            "-m",
            "hydra/launcher=submitit_local",
            "seed=0,1",
            *TINY,
            f"hydra.sweep.dir={tmp_path}/submitit",
        ],
        env,
    )
    results = sorted(json.loads(p.read_text())["seed"] for p in (tmp_path / "submitit").glob("*/results.json"))
    assert results == [0, 1]
    md = (tmp_path / "submitit/report.md").read_text()
    assert "2 finished run(s) of 2 expected" in md and "Seeds: 0, 1" in md


def test_report_callback_after_a_multirun(sweep, tmp_path, caplog):
    from omegaconf import OmegaConf

    from itermask.callbacks import ReportCallback

    config = OmegaConf.create(
        {
            "task_name": "evaluate",
            "hydra": {"sweep": {"dir": str(sweep)}},
            "logger": {"_target_": "pytorch_lightning.loggers.CSVLogger"},
        }
    )
    ReportCallback().on_multirun_end(config)
    assert "| gradient | one_shot = recursive | aopc_comprehensiveness_prob | probability | 3 | 0.1400 |" in unpadded(
        (sweep / "report.md").read_text()
    )
    assert not (sweep / "wandb").exists()  # CSV logger: no W&B summary run
    (tmp_path / "empty").mkdir()
    config.hydra.sweep.dir = str(tmp_path / "empty")
    with pytest.raises(SystemExit, match="no report for .*empty: NoRunsError: no finished runs"):
        ReportCallback().on_multirun_end(config)  # Hydra would make an exception a warning and exit 0
    assert "no report for" in caplog.text and "no finished runs" in caplog.text
    assert not (tmp_path / "empty" / "report.md").exists()


def test_constant_samples_compare_exactly():
    same = compare_samples([0.5, 0.5, 0.5], [0.5, 0.5])
    assert same["difference"] == 0 and same["p_value"] == 1.0 and (same["ci_low"], same["ci_high"]) == (0, 0)
    apart = compare_samples([0.5, 0.5], [0.25, 0.25], test="permutation")
    assert apart["difference"] == 0.25 and apart["p_value"] == 0.0 and math.isnan(apart["statistic"])


def test_reading_results_and_writing_the_report_imports_no_torch(tmp_path):
    """The report and the console summary work from results files alone: a fresh interpreter builds and
    writes the report of a sweep whose results carry OOD and attack sections, and never imports torch."""
    results = []
    for seed, value in enumerate((0.75, 0.8, 0.85)):
        result = make_result(seed, aopc=0.1 + seed / 100)
        result["config"].update(
            analyses=["ood", "attack"],
            ood={"_target_": "itermask.analyses.OODAnalysis", "level": "final"},
            attack={"_target_": "itermask.analyses.AttackAnalysis", "ranking": "one_shot"},
        )
        stats = {"fraction": [0.0, 0.5, 1.0], "values": {"final/auroc_mahalanobis": [0.5, value, 0.9]}}
        result["ood"] = {"statistics": {"gradient": {"one_shot": stats}}}
        result["attack"] = {
            "settings": {"ranking": "one_shot"},
            "methods": {"gradient": {"summary": {"success_rate": value}, "link": {}}},
        }
        results.append(result)
    root = write_sweep(tmp_path / "sweep", results)
    script = (
        "import sys\n"
        "from itermask import console\n"
        "from itermask.reporting import build_report, write_report\n"
        "from itermask.storage.files import read_json\n"
        f"root = {str(root)!r}\n"
        "written = write_report(build_report(root))\n"
        "lines = console.summary_lines(read_json(root + '/0/results.json'))\n"
        "markdown = written['report.md'].read_text()\n"
        "assert 'OOD AUROC of masked vs clean' in markdown and 'attack success_rate' in markdown, markdown\n"
        "assert lines[-1].startswith('OOD AUROC of masked vs clean inputs at 50 % masking'), lines\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


def test_forest_labels_shorten_override_keys_and_wrap():
    from itermask.reporting.render.first_screen import _forest_label

    long = "gradient · minilm[train.adversarial_augmentation.enabled=False, train.masking_augmentation.enabled=True]"
    assert _forest_label(long + " · one_shot") == (
        "gradient · minilm[adversarial_augmentation=False,\nmasking_augmentation=True] · one_shot"
    )
    assert _forest_label("occlusion · minilm_cda · recursive") == "occlusion · minilm_cda · recursive"
    assert _forest_label("gradient · minilm[seed=3] · one_shot") == "gradient · minilm[seed=3] · one_shot"
