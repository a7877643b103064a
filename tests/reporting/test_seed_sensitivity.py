"""Seed sensitivity (variance components, Friedman, Kendall's W, Spearman) on constructed data, the
per-example result files, and the report's headline for a constructed sweep with per-example tables."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import AdditiveModel
from results_helpers import unpadded
from scipy import stats

from itermask.reporting.seeds import kendalls_w, mean_spearman, seed_share, variance_components

# -- variance components ---------------------------------------------------------------------------------


def test_variance_components_match_the_anova_table_of_statsmodels():
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    rng = np.random.default_rng(1)
    y = rng.normal(0, 0.3, (4, 1)) + rng.normal(0, 1, (1, 30)) + rng.normal(0, 0.5, (4, 30))
    frame = pd.DataFrame([(s, e, y[s, e]) for s in range(4) for e in range(30)], columns=["seed", "example", "y"])
    ms = anova_lm(smf.ols("y ~ C(seed) + C(example)", frame).fit())["mean_sq"]
    vc = variance_components(y)
    assert vc["var_seed"] == pytest.approx((ms["C(seed)"] - ms["Residual"]) / 30)
    assert vc["var_example"] == pytest.approx((ms["C(example)"] - ms["Residual"]) / 4)
    assert vc["var_residual"] == pytest.approx(ms["Residual"])


def test_seed_share_recovers_a_known_share_within_its_interval():
    # seed effects with sample variance exactly 0.25, example effects ~ N(0, 1), noise ~ N(0, 0.5^2):
    # the seed share is 0.25 / (0.25 + 1 + 0.25) = 1/6
    rng = np.random.default_rng(0)
    offsets = np.array([-1.5, -0.5, 0.5, 1.5, 0.0, 0.0])
    offsets = (offsets - offsets.mean()) / offsets.std(ddof=1) * 0.5
    y = offsets[:, None] + rng.normal(0, 1, (1, 400)) + rng.normal(0, 0.5, (6, 400))
    out = seed_share(y, n_resamples=1000)
    assert out["ci_low"] <= 1 / 6 <= out["ci_high"]
    assert out["share"] == pytest.approx(1 / 6, abs=0.03)
    assert out["ci_high"] - out["ci_low"] < 0.1
    # seeds that differ only by noise: the share is near 0 and clipped, never negative
    noise = rng.normal(0, 1, (1, 400)) + rng.normal(0, 0.5, (6, 400))
    assert 0 <= seed_share(noise, n_resamples=200)["share"] < 0.02


def test_seed_share_negative_estimates_are_clipped_and_degenerate_cases_say_why():
    # the seed means are exactly equal, so MS_seed = 0 < MS_residual: var_seed clips at 0
    y = np.array([[1.0, 2.0, 3.0], [2.0, 3.0, 1.0]])
    assert variance_components(y)["var_seed"] == 0.0
    flat = seed_share(np.ones((3, 5)))
    assert math.isnan(flat["share"]) and "no variance" in flat["why"]
    one_example = seed_share(np.array([[0.1, np.nan], [0.2, 0.3], [0.4, 0.5]]))
    assert one_example["n_examples"] == 1 and one_example["n_dropped"] == 1
    assert math.isnan(one_example["share"]) and "at least 2 seeds and 2 examples" in one_example["why"]


def test_friedman_and_spearman_agree_with_scipy():
    rng = np.random.default_rng(3)
    y = rng.normal(size=(3, 12)) + np.array([[0.0], [0.4], [0.8]])
    y[1, 4] = np.nan  # example 4 is undefined in seed 1: dropped for every seed
    out = seed_share(y, n_resamples=100)
    kept = np.delete(y, 4, axis=1)
    reference = stats.friedmanchisquare(*kept)
    assert (out["friedman_statistic"], out["friedman_p"]) == pytest.approx((reference.statistic, reference.pvalue))
    pairs = [stats.spearmanr(kept[a], kept[b]).statistic for a, b in itertools.combinations(range(3), 2)]
    assert out["mean_spearman"] == pytest.approx(np.mean(pairs)) == pytest.approx(mean_spearman(kept))
    assert out["n_examples"] == 11 and out["n_dropped"] == 1
    assert "Friedman" in seed_share(y[:2], n_resamples=10)["why"]  # two seeds: no Friedman test


def test_kendalls_w_by_hand_and_from_scipy():
    # 3 seeds rank 4 methods; no ties: W = 12 S / (m^2 (k^3 - k)), S = sum of squared deviations of rank sums
    scores = np.array([[0.1, 0.2, 0.3, 0.4], [0.1, 0.3, 0.2, 0.4], [0.2, 0.1, 0.3, 0.4]])
    ranks = np.argsort(np.argsort(scores, axis=1), axis=1) + 1
    sums = ranks.sum(axis=0)
    m, k = scores.shape
    w = 12 * ((sums - sums.mean()) ** 2).sum() / (m**2 * (k**3 - k))
    out = kendalls_w(scores)
    assert out["w"] == pytest.approx(w) == pytest.approx(7 / 9)
    assert out["p_value"] == pytest.approx(stats.friedmanchisquare(*scores.T).pvalue)
    assert kendalls_w(np.ones((3, 4)) * np.arange(4))["w"] == pytest.approx(1.0)
    assert math.isnan(kendalls_w(scores[:, :2])["w"]) and "3 methods" in kendalls_w(scores[:, :2])["why"]


# -- per-example result files ------------------------------------------------------------------------------


class _Data:
    """What the per-example analysis reads of a data module: the evaluated split and the label names."""

    def __init__(self, split: str, rows: dict):
        import datasets

        self.splits = {split: datasets.Dataset.from_dict(rows)}
        self.label_names = ["negative", "positive"]


def _context(tmp_path, toy_tokenizer):
    from itermask.analyses.base import AnalysisInputs, EvaluatedCurves, EvaluationContext
    from itermask.core.evaluation import IterativeMaskingEvaluator
    from itermask.core.evaluation_settings import EvaluationSettings
    from itermask.core.masking import MaskToken
    from itermask.core.saliency import InputXGradientSaliency, RandomSaliency
    from itermask.core.tokens import TokenBatch

    model = AdditiveModel({5: 2.0, 6: 1.0, 7: -1.0})
    batch = TokenBatch(torch.tensor([[1, 5, 6, 7, 2], [1, 7, 7, 6, 2]]), torch.ones(2, 5, dtype=torch.long))
    fractions = [0.0, 0.5, 1.0]
    curves = {}
    for method in (InputXGradientSaliency(output="logit"), RandomSaliency(seed=1)):
        evaluator = IterativeMaskingEvaluator(method, MaskToken(toy_tokenizer), fractions, [0, 1, 2, 3, 4])
        curves[method.name] = evaluator.evaluate(model, batch, torch.tensor([1, 0]), torch.tensor([10, 11]))
    evaluation = EvaluationSettings(
        split="test",
        n_examples=None,
        subset_seed=0,
        steps="fraction",
        fractions=tuple(fractions),
        counts=(),
        aopc_bins=(0.5,),
        segments=None,
        schedules=("one_shot", "recursive"),
        target="predicted",
        quantity="probability",
        compare_random=True,
    )

    inputs = AnalysisInputs(
        evaluation, toy_tokenizer, MaskToken(toy_tokenizer), {}, "input_x_gradient", "", tmp_path / "job"
    )
    data = _Data("test", {"example_id": [11, 10, 12], "text": ["c c b", "a b c", "unused"], "label": [0, 1, 1]})
    return (inputs, EvaluationContext(data, None, None, None), EvaluatedCurves.of(curves)), curves


def test_per_example_tables_rows_columns_and_values(tmp_path, toy_tokenizer):
    from itermask.analyses.per_example import PerExampleAnalysis
    from itermask.core import measures, metrics
    from itermask.storage.per_example import load_per_example

    context, curves = _context(tmp_path, toy_tokenizer)
    output = PerExampleAnalysis().run(*context)
    tables = load_per_example(tmp_path / "job")
    steps, scores, examples = tables.steps, tables.scores, tables.examples
    # 2 methods x 2 schedules x 2 examples x 3 steps; one score row per (method, schedule, example)
    assert (
        len(steps) == 24
        and len(scores) == 8
        and output.result["per_example"]["rows"] == {"steps": 24, "scores": 8, "examples": 2, "tokens": 10}
    )
    assert {
        "saliency",
        "schedule",
        "example_id",
        "label",
        "target",
        "n_maskable",
        "step",
        "x",
        "k",
        "target_prob",
        "target_logit",
        "comprehensiveness_prob",
        "log_odds_drop",
        "sufficiency_prob",
        "flip_rate",
        "accuracy",
    } <= set(steps.columns)
    assert "fraction" not in steps.columns and "mean_k" not in steps.columns  # grid descriptors: x and k are there
    row = steps[(steps.saliency == "input_x_gradient") & (steps.schedule == "one_shot") & (steps.example_id == 10)]
    one_shot = curves["input_x_gradient"]["one_shot"]
    assert row.k.tolist() == [0, 2, 3] and row.target.tolist() == [1, 1, 1]
    assert row.comprehensiveness_prob.tolist() == pytest.approx(measures.comprehensiveness(one_shot)[0].tolist())
    # p(y|x) with a, b (weights 2, 1) masked: sigmoid(-1); and the logit is the sum of the kept weights
    assert row.target_prob.tolist()[1] == pytest.approx(1 / (1 + math.exp(1))) and row.target_logit.tolist()[
        1
    ] == pytest.approx(-1.0)
    recursive = steps[(steps.schedule == "recursive")]
    assert recursive.sufficiency_prob.isna().all()  # undefined for the recursive schedule
    assert set(scores.columns) >= {
        "aopc_comprehensiveness_prob",
        "aopc_full_log_odds_drop",
        "auc_prob",
        "first_flip_fraction",
        "first_flip_count",
        "never_flip_rate",
    }
    summary = metrics.summarize(one_shot, bins=[0.5])
    mine = scores[(scores.saliency == "input_x_gradient") & (scores.schedule == "one_shot")]
    assert mine.aopc_comprehensiveness_prob.mean() == pytest.approx(summary["aopc_comprehensiveness_prob"])
    # texts once per evaluated example, matched by id (not by position)
    assert examples.example_id.tolist() == [10, 11] and examples.text.tolist() == ["a b c", "c c b"]
    assert examples.label_name.tolist() == ["positive", "negative"]
    # tokens: one row per (example, token), every explanation's columns under its role; [CLS]=1 and [SEP]=2
    # are special (rank -1, never masked)
    tokens = tables.tokens
    assert tokens is not None and len(tokens) == 2 * 5 and "segment" not in tokens  # single texts
    mine = tokens[tokens.example_id == 10]
    assert mine.token_id.tolist() == [1, 5, 6, 7, 2]
    assert mine.token.tolist() == toy_tokenizer.convert_ids_to_tokens([1, 5, 6, 7, 2])
    assert mine.explained_rank.tolist() == [-1, 1, 2, 3, -1]  # weights 2 > 1 > -1
    assert sorted(mine.random_rank.tolist()) == [-1, -1, 1, 2, 3]
    # k = 0, 2, 3 tokens at the three steps: the recursive schedule masks two tokens at step 1, one at step 2
    assert mine.explained_masked_step_recursive.tolist()[0] == -1
    assert sorted(mine.explained_masked_step_recursive)[2:] == [1, 1, 2]
    assert "explained_masked_step_one_shot" not in tokens  # follows from the rank and k
    assert mine.explained_score.iloc[1] > mine.explained_score.iloc[2] > mine.explained_score.iloc[3]
    assert set(output.artifacts.files) == {
        "per_example/steps.parquet",
        "per_example/scores.parquet",
        "per_example/examples.parquet",
        "per_example/tokens.parquet",
    }
    assert output.artifacts.tables["per_example_scores"][0][:3] == ["saliency", "schedule", "example_id"]
    # the examples table: text, label, prediction and scores as columns (filters), the view as HTML
    from itermask.views import Html

    columns, rows = output.artifacts.tables["examples"]
    assert columns[:5] == ["example_id", "text", "label", "prediction", "target_prob"] and columns[-1] == "view"
    assert "explained/one_shot/aopc_comprehensiveness_prob" in columns
    assert "random/recursive/aopc_comprehensiveness_prob" in columns
    assert "explained/recursive/aopc_sufficiency_prob" not in columns  # undefined for the recursive schedule
    row = dict(zip(columns, rows[0]))
    assert row["example_id"] == 10 and row["text"] == "a b c" and row["label"] == "positive"
    ten = scores[(scores.saliency == "input_x_gradient") & (scores.schedule == "one_shot") & (scores.example_id == 10)]
    assert row["explained/one_shot/aopc_comprehensiveness_prob"] == pytest.approx(
        ten.aopc_comprehensiveness_prob.iloc[0]
    )
    assert isinstance(row["view"], Html) and 'data-example="10"' in row["view"]


def test_the_results_store_keeps_and_restores_the_per_example_files(tmp_path, toy_tokenizer):
    from itermask.analyses.per_example import PerExampleAnalysis
    from itermask.storage.store import ResultStore

    context, _ = _context(tmp_path, toy_tokenizer)
    files = PerExampleAnalysis().run(*context).artifacts.files
    store = ResultStore(tmp_path / "cache")
    store.put("k", {"seed": 0, "config": {}}, files)
    reused = store.reuse("k", tmp_path / "new")
    assert reused["reused_from"].endswith("k.json")
    for relative, path in files.items():
        assert (tmp_path / "new" / relative).read_bytes() == path.read_bytes()


# -- the report leads with its point ---------------------------------------------------------------------


def _sweep_with_per_example(tmp_path):
    """Three seeds of gradient vs random; per-example AOPC comprehensiveness with a seed effect."""
    from results_helpers import make_result, write_sweep

    from itermask.storage.per_example import write_per_example

    rng = np.random.default_rng(0)
    examples = np.arange(20)
    effects = rng.normal(0, 0.05, 20)
    matrix = {"gradient": [], "random": []}
    results = []
    for seed, offset in zip(range(3), (0.0, 0.02, 0.04)):
        values = {
            m: 0.1 + (0.05 if m == "gradient" else 0.0) + offset + effects + rng.normal(0, 0.01, 20) for m in matrix
        }
        for m in matrix:
            matrix[m].append(values[m])
        result = make_result(seed, aopc=float(values["gradient"].mean()), random_aopc=float(values["random"].mean()))
        result["n_test"], result["n_evaluated"] = 1342, 20
        results.append(result)
    root = write_sweep(tmp_path / "sweep", results)
    for i, seed_values in enumerate(zip(matrix["gradient"], matrix["random"])):
        # sufficiency: defined for one-shot only (NaN for recursive); saliency_zero: a diagnostic, not a score
        frames = [
            pd.DataFrame(
                {
                    "saliency": m,
                    "schedule": s,
                    "example_id": examples,
                    "aopc_comprehensiveness_prob": v,
                    "aopc_sufficiency_prob": v / 2 if s == "one_shot" else np.nan,
                    "saliency_zero": False,
                }
            )
            for m, v in zip(("gradient", "random"), seed_values)
            for s in ("one_shot", "recursive")
        ]
        write_per_example(root / str(i), {"scores": pd.concat(frames, ignore_index=True)})
    return root, {m: np.stack(v) for m, v in matrix.items()}, results


def test_the_report_leads_with_the_headline(tmp_path):
    from itermask.reporting import build_report, write_report

    root, matrix, results = _sweep_with_per_example(tmp_path)
    report = build_report(root)
    head = report.headline
    row = head[(head.schedule == "one_shot") & (head.score == "aopc_comprehensiveness_prob")].iloc[0]
    differences = [r["relative_to_random"]["one_shot"]["aopc_comprehensiveness_prob"] for r in results]
    assert row["difference"] == pytest.approx(np.mean(differences))
    assert row["p_value"] == pytest.approx(stats.ttest_1samp(differences, 0).pvalue)
    assert row["n_better"] == 3 and row["n_seeds"] == 3
    expected = seed_share(matrix["gradient"], n_resamples=2000, seed=0)
    assert row["seed_share"] == pytest.approx(expected["share"]) and row["share_ci_low"] == pytest.approx(
        expected["ci_low"]
    )
    sens = report.seed_sensitivity
    assert set(sens.explanation) == {"gradient", "random"} and (sens.n_examples == 20).all()
    assert set(zip(sens.schedule, sens.score)) == {
        ("one_shot", "aopc_comprehensiveness_prob"),
        ("recursive", "aopc_comprehensiveness_prob"),
        ("one_shot", "aopc_sufficiency_prob"),
    }
    report.seed_sensitivity["why"] = np.nan  # no notes, as a frame read back or concatenated holds them
    write_report(report)
    md = (root / "report.md").read_text()
    sections = [line for line in md.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["## What this run found", "## Headline"]  # the findings in words, then the numbers
    found = md[: md.index("## Headline")]
    assert "gradient (m, d, mask_token), one_shot: AOPC comprehensiveness (probability)" in found
    assert "over 3 seed(s)" in found and "better than random in 3 of 3 seed(s)" in found
    headline = md[md.index("## Headline") : md.index(sections[2])]
    assert "only 3 seed(s)" in headline  # fewer than 5 seeds: a visible warning
    assert "on 1,342 test examples; the scores below on 20 evaluation examples" in headline
    assert "3 of 3 seeds" in headline and f"{row['seed_share']:.3f} [" in headline
    assert "aopc_comprehensiveness_prob (probability, higher = more faithful)" in headline
    # random gives the same per-example values under both schedules: one row in the seed-sensitivity table
    assert "| random | one_shot = recursive | aopc_comprehensiveness_prob |" in unpadded(md)
    # a row without a note has an empty note cell, not pandas' "nan"
    flat = unpadded(md)
    sensitivity = flat[flat.index("## Seed sensitivity") : flat.index("## Scores over seeds")]
    assert "| nan |" not in sensitivity and "aopc_comprehensiveness_prob | 20 / 0 |" in sensitivity
