"""The report's "Which measure to trust" section (experiment=paper) on constructed multiruns whose measures have
known structure: one that every model and seed ranks alike and that passes the sanity benchmark, one that is
noise, one that the model moves; and its sentences, worded by the numbers."""

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from results_helpers import make_result, unpadded, write_sweep

from itermask.reporting import build_report, write_report
from itermask.studies.robust_infidelity.trust import MeasureTrust, TrustSettings, sentence, trust_table

MODELS = ["minilm", "minilm_mlm", "minilm_cda"]
METHODS = ["gradient", "integrated_gradients", "occlusion"]
SEEDS = [0, 1, 2]
N = 12
#: the per-method level of the consistent measure
LEVEL = {"gradient": 0.3, "integrated_gradients": 0.2, "occlusion": 0.1}


def _sweep(root, models=MODELS, ood=(0.5, 0.9, 0.8, 0.5), unlearnt=False, soft_ood=False):
    """Every (model, method, seed) job: ``aopc_comprehensiveness_prob`` = the method's level + example effect +
    small noise (consistent, no model effect; passes the sanity benchmark in every run); ``srg_prob`` = noise
    (fails it); ``soft_comprehensiveness`` = a model effect of 0.5 per model + noise."""
    rng = np.random.default_rng(0)
    example = rng.normal(0, 0.05, N)
    results, overrides, frames = [], [], []
    for i, model in enumerate(models):
        for method in METHODS:
            for seed in SEEDS:
                r = make_result(seed, model=model, accuracy=0.8 + 0.001 * seed, saliency=method, n_examples=N)
                r["scores"][method]["one_shot"]["fraction"] = [0.0, 0.1, 0.5, 1.0]
                r["ood"] = {
                    "statistics": {
                        method: {
                            "one_shot": {
                                "fraction": [0.0, 0.1, 0.5, 1.0],
                                "values": {"final/auroc_mahalanobis": list(ood)},
                            }
                        }
                    }
                }
                if soft_ood:  # the OOD AUROC of the soft inputs: 0.55, 0.60, 0.65 by seed
                    r["ood"]["soft_inputs"] = {method: {"soft_comprehensiveness": 0.55 + 0.05 * seed}}
                r["sanity"] = {
                    "methods": {
                        method: {
                            "aopc_comprehensiveness_prob": {"rho": -0.4, "ranks_known_order": True},
                            "srg_prob": {"rho": 0.05, "ranks_known_order": False},
                            "decision_flip_fraction": {"rho": None, "reason": "constant", "ranks_known_order": False},
                        }
                    }
                }
                if unlearnt and i == 0 and seed == 0:
                    r["model_check"] = {"meaningful": False, "problems": ["one class"]}
                results.append(r)
                overrides.append([f"model={model}", f"saliency={method}", f"seed={seed}"])
                frames.append(
                    pd.DataFrame(
                        {
                            "saliency": method,
                            "schedule": "one_shot",
                            "example_id": range(N),
                            "aopc_comprehensiveness_prob": LEVEL[method] + example + rng.normal(0, 0.005, N),
                            "srg_prob": rng.normal(0, 0.1, N),
                            "soft_comprehensiveness": 0.5 * i + example + rng.normal(0, 0.01, N),
                        }
                    )
                )
    write_sweep(root, results, overrides)
    for i, frame in enumerate(frames):
        (root / str(i) / "per_example").mkdir()
        frame.to_parquet(root / str(i) / "per_example" / "scores.parquet")
        steps = pd.DataFrame(
            {
                "saliency": frame.saliency.repeat(2).to_numpy(),
                "schedule": "one_shot",
                "example_id": frame.example_id.repeat(2).to_numpy(),
                "flip_rate": np.tile([0.0, 1.0], N) * (frame.example_id.repeat(2).to_numpy() % 2),
            }
        )
        steps.to_parquet(root / str(i) / "per_example" / "steps.parquet")
    return root


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    report = build_report(_sweep(tmp_path_factory.mktemp("trust")))
    return trust_table(report, TrustSettings()).set_index("column")


def test_the_table_has_a_row_per_measure_the_runs_hold_in_catalogue_order(table):
    assert list(table.index) == [
        "aopc_comprehensiveness_prob",
        "srg_prob",
        "soft_comprehensiveness",
        "decision_flip_fraction",
    ]
    row = table.loc["aopc_comprehensiveness_prob"]
    assert (row.n_models, row.n_seeds, row.n_methods, row.n_runs) == (3, 3, 3, 27)


def test_a_measure_every_run_ranks_alike_and_that_passes_the_sanity_benchmark_holds_up(table):
    row = table.loc["aopc_comprehensiveness_prob"]
    # every (model, seed) rater ranks gradient > integrated gradients > occlusion: W = 1
    assert row.kendall_w == pytest.approx(1.0)
    assert row.kendall_p < 0.01
    assert row.model_share < 0.01  # no model effect was built in
    assert (row.sanity_runs_ranking, row.sanity_runs, row.sanity_rho) == (27, 27, pytest.approx(-0.4))
    assert row.verdict == "holds up"
    # the OOD AUROC of the masked inputs: the mean over the steps strictly between 0 and 1 (0.9 and 0.8)
    assert row.ood_auroc == pytest.approx(0.85)


def test_a_noise_measure_does_not_hold_up(table):
    row = table.loc["srg_prob"]
    assert row.kendall_w < 0.5
    assert (row.sanity_runs_ranking, row.sanity_runs) == (0, 27)
    assert row.verdict == "does not hold up"


def test_a_measure_the_model_moves_has_a_large_model_share_and_difference(table):
    row = table.loc["soft_comprehensiveness"]
    assert row.model_share > 0.9
    # the largest difference at equivalent accuracy: minilm vs minilm_cda, 1.0 apart
    assert abs(row.largest_difference) == pytest.approx(1.0, abs=0.02)
    assert row.difference_pair == "minilm vs minilm_cda"
    assert row.difference_p_holm < 0.001
    assert math.isnan(row.ood_auroc) and "not measured" in row.ood_note
    assert row.sanity_runs == 0 and row.verdict == "not judged"
    assert row.sentence.startswith("soft comprehensiveness is not judged (no sanity benchmark in these runs")
    assert "the model moves it: models explain 99 % of its variance" in row.sentence


def test_the_soft_inputs_have_their_own_ood_auroc_when_the_runs_hold_it(tmp_path):
    report = build_report(_sweep(tmp_path, models=["minilm"], soft_ood=True))
    table = trust_table(report, TrustSettings()).set_index("column")
    # the soft inputs' own AUROC (mean of 0.55, 0.60, 0.65 over seeds), not the masked inputs' 0.85
    assert table.loc["soft_comprehensiveness"].ood_auroc == pytest.approx(0.60)
    assert table.loc["soft_comprehensiveness"].ood_note is None
    assert table.loc["aopc_comprehensiveness_prob"].ood_auroc == pytest.approx(0.85)


def test_the_decision_flip_fraction_is_the_mean_of_flip_rate_over_the_steps(tmp_path):
    report = build_report(_sweep(tmp_path, models=["minilm"]))
    table = trust_table(report, TrustSettings())
    row = table.set_index("column").loc["decision_flip_fraction"]
    # odd examples flip at one of two steps (0.5), even ones never (0): every method's mean is 0.25, a tie
    assert row.n_models == 1
    assert math.isnan(row.kendall_w)  # every rater ties every method: no ranking to agree on
    assert "every rater ties every object" in row.why
    # a constant measure's sanity rho is undefined in every run: not judged, not counted as failing
    assert (row.sanity_runs, row.verdict) == (0, "not judged") and math.isnan(row.sanity_rho)
    assert "sanity rho undefined in 9 of 9 runs (constant)" in row.why
    assert math.isnan(row.model_share) and "one model" in row.why


def test_with_one_model_the_seed_share_comes_from_the_seed_components(tmp_path):
    report = build_report(_sweep(tmp_path, models=["minilm"]))
    row = trust_table(report, TrustSettings()).set_index("column").loc["aopc_comprehensiveness_prob"]
    assert math.isnan(row.model_share) and math.isnan(row.largest_difference)
    assert 0 <= row.seed_share < 0.05  # the seeds add only noise of sd 0.005 beside examples of sd 0.05
    assert "models explain" not in row.sentence


def _row(**changes):
    row = {
        "measure": "SRG",
        "verdict": "holds up",
        "sanity_runs": 9,
        "sanity_runs_ranking": 9,
        "sanity_rho": -0.31,
        "kendall_w": 0.85,
        "model_share": 0.12,
        "difference_in_sd": 0.4,
        "difference_p_holm": 0.03,
        "seed_share": 0.02,
        "ood_auroc": 0.93,
        "why": None,
    }
    return {**row, **changes}


def test_the_sentence_follows_the_numbers():
    text = sentence(_row())
    assert text.startswith("SRG holds up on this run: ranks degraded explanations in their known order (9 of 9 runs")
    assert "models and seeds rank the methods alike (W 0.85)" in text
    assert "models explain 12 % of its variance" in text and "0.40 example sd, p_Holm 0.030" in text
    assert "its inputs are out of distribution (AUROC 0.93)" in text
    low = sentence(_row(sanity_runs_ranking=3, kendall_w=0.2, ood_auroc=0.55, verdict="does not hold up"))
    assert "does not consistently rank" in low and "rank the methods differently (W 0.20)" in low
    assert "near the training data (AUROC 0.55)" in low
    assert sentence(_row(verdict="mixed")).startswith("SRG gives a mixed picture on this run: ")
    assert "partly alike (W 0.50)" in sentence(_row(kendall_w=0.5)) and "partly out of distribution" in sentence(
        _row(ood_auroc=0.65)
    )
    bare = sentence(
        _row(
            sanity_runs=0,
            kendall_w=math.nan,
            model_share=math.nan,
            seed_share=math.nan,
            ood_auroc=math.nan,
            why="one run",
        )
    )
    assert bare == "SRG: one run."


def test_bad_settings_are_refused_naming_the_key():
    with pytest.raises(ValueError, match="trust has unknown key"):
        MeasureTrust(score="x")
    with pytest.raises(ValueError, match=r"trust\.measures=\['nope'\] is not allowed"):
        MeasureTrust(measures=["nope"])
    with pytest.raises(ValueError, match=r"trust\.schedule='sideways'"):
        MeasureTrust(schedule="sideways")
    with pytest.raises(ValueError, match="names bert, which no job of this multirun runs: choose from minilm"):
        MeasureTrust(models=["minilm", "bert"]).check_sweep(["minilm"])


def test_the_section_sits_after_the_claims_in_the_written_report(tmp_path):
    root = _sweep(tmp_path)
    multirun = {
        "hydra": {
            "callbacks": {
                "report": {
                    "claims": {
                        "_target_": "itermask.studies.robust_infidelity.RobustInfidelity",
                        "models": MODELS,
                        "n_resamples": 50,
                        "encoder_texts": 0,
                    },
                    "trust": {"_target_": "itermask.studies.robust_infidelity.MeasureTrust"},
                }
            }
        }
    }
    (root / "multirun.yaml").write_text(yaml.safe_dump(multirun))
    written = write_report(build_report(root))
    text = written["report.md"].read_text()
    assert "runs come from a classifier that learnt nothing" not in text
    assert text.index("## Claims") < text.index("## Which measure to trust")
    assert "| AOPC comprehensiveness | holds up | -0.40 (27/27) | 1.00 | 0 % |" in unpadded(text)
    frame = pd.read_csv(written["measure_trust.csv"])
    assert list(frame.column)[:2] == ["aopc_comprehensiveness_prob", "srg_prob"]


@pytest.mark.parametrize(
    ("changes", "verdict"),
    [
        ({}, "holds up"),
        ({"sanity_runs_ranking": 7}, "mixed"),  # 7 of 9 < 80 %
        ({"sanity_runs_ranking": 4}, "does not hold up"),  # fewer than half
        ({"kendall_w": 0.6}, "mixed"),
        ({"kendall_w": math.nan}, "holds up"),  # fewer than 2 methods: W not computed, not held against it
        ({"model_share": 0.5}, "mixed"),  # the model moves it
        ({"sanity_runs": 0, "sanity_runs_ranking": 0}, "not judged"),
    ],
)
def test_the_verdict_rules(changes, verdict):
    from itermask.studies.robust_infidelity.trust import _verdict

    assert _verdict(_row(**changes)) == verdict


def test_runs_of_a_classifier_that_learnt_nothing_are_warned_of(tmp_path):
    report = build_report(_sweep(tmp_path, unlearnt=True))
    text = "\n".join(MeasureTrust().markdown(report, {}))
    assert "**Warning:** 3 of these 27 runs come from a classifier that learnt nothing" in text


def test_ffidelity_measures_read_the_auroc_of_their_own_inputs_on_the_copy():
    from pathlib import Path

    from itermask.reporting.sweep import Run
    from itermask.studies.robust_infidelity.trust import MEASURES, _own_ood

    def run(plus, minus):
        one_shot = {"ood_auroc_plus": plus, "ood_auroc_minus": minus}
        return Run(
            Path("."),
            {"saliency": {"name": "gradient"}, "ffidelity": {"methods": {"gradient": {"one_shot": one_shot}}}},
        )

    runs = [run(0.62, 0.70), run(0.58, None), run(None, 0.80)]
    by_column = {m.column: m for m in MEASURES}
    assert _own_ood(runs, by_column["ffid_plus_prob"]) == pytest.approx(0.60)  # the runs that have it
    assert _own_ood(runs, by_column["ffid_minus_prob"]) == pytest.approx(0.75)
    assert math.isnan(_own_ood([run(None, None)], by_column["ffid_plus_prob"]))
