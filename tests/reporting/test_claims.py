"""The report's Claims section (experiment=paper) on constructed multirun folders with known answers: the
verdicts (supports / does not support), the statistics behind them and the section at the report's top."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from results_helpers import make_result, unpadded, write_sweep

from itermask.reporting import build_report, write_report
from itermask.studies.robust_infidelity import ClaimSettings, compute_claims, variant

MODELS = ["minilm", "minilm_mlm", "minilm_cda"]
METHODS = ["gradient", "occlusion"]
SEEDS = [0, 1, 2]
N_EXAMPLES = 10
SCORE = "aopc_comprehensiveness_prob"
CLAIMS = {"score": SCORE, "schedule": "one_shot", "accuracy_margin": 0.02, "models": MODELS, "n_resamples": 200}


def _result(model, method, seed, aopc, accuracy, kind="standard", success=None, ood=None):
    r = make_result(seed, model=model, accuracy=accuracy, aopc=aopc, random_aopc=0.05 + 0.002 * seed, saliency=method)
    r["n_evaluated"] = N_EXAMPLES
    r["config"]["train"]["masking_augmentation"] = {"enabled": kind == "masked", "batch_share": 0.5}
    r["config"]["train"]["adversarial_augmentation"] = {"enabled": kind == "adversarial", "batch_share": 0.5}
    rate = success if success is not None else 0.3 + 2 * aopc
    r["attack"] = {
        "settings": {"ranking": "one_shot"},
        "methods": {
            method: {"summary": {"success_rate": rate}},
            "random": {"summary": {"success_rate": 0.3 + 2 * (0.05 + 0.002 * seed)}},
        },
    }
    if ood is not None:
        r["ood"] = {
            "statistics": {
                method: {"one_shot": {"fraction": [0.0, 0.5, 1.0], "values": {"final/auroc_mahalanobis": ood}}}
            }
        }
    return r


def _overrides(model, method, seed, kind):
    return [
        f"model={model}",
        f"saliency={method}",
        f"train.masking_augmentation.enabled={kind == 'masked'}",
        f"train.adversarial_augmentation.enabled={kind == 'adversarial'}",
        f"seed={seed}",
    ]


def make_paper_sweep(
    root: Path, model_effect: float, accuracy_gap: float = 0.0, masked_auroc: float = 0.55, seeds=SEEDS
) -> Path:
    """A paper multirun: 3 models x 2 methods x 3 seeds (standard), plus minilm/gradient masked and
    adversarial. ``model_effect`` is added to minilm_mlm's gradient score; ``accuracy_gap`` to minilm_cda's
    accuracy; the masked runs' OOD AUROC at 50 % and 100 % masking is ``masked_auroc`` (standard: 0.9)."""
    rng = np.random.default_rng(0)
    examples = rng.normal(0, 0.05, N_EXAMPLES)
    results, overrides, scores = [], [], []
    jobs = [(m, k, s, "standard") for m in MODELS for k in METHODS for s in seeds]
    jobs += [("minilm", "gradient", s, kind) for kind in ("masked", "adversarial") for s in seeds]
    for model, method, seed, kind in jobs:
        aopc = {"gradient": 0.2, "occlusion": 0.3}[method] + 0.004 * (seed - 1)
        aopc += model_effect if (model == "minilm_mlm" and method == "gradient") else 0.0
        aopc += 0.05 if kind == "adversarial" else 0.0
        accuracy = 0.80 + 0.002 * seed + (accuracy_gap if model == "minilm_cda" else 0.0)
        standard_ood = [0.5, 0.88 + 0.01 * seed, 0.92 + 0.01 * seed]
        if method != "gradient":  # claim 2 reads the masked inputs of the masked runs' ranking (gradient) only
            standard_ood = [0.5, 0.6, 0.6]
        masked_ood = [0.5, masked_auroc + 0.01 * seed, masked_auroc + 0.01 * seed]
        ood = masked_ood if kind == "masked" else standard_ood
        success = 0.1 + 0.01 * seed if kind == "adversarial" else None
        results.append(_result(model, method, seed, aopc, accuracy, kind, success, ood))
        overrides.append(_overrides(model, method, seed, kind))
        per_example = []
        for explanation, value in ((method, aopc), ("random", 0.05 + 0.002 * seed)):
            noise = rng.normal(0, 0.01, N_EXAMPLES)
            per_example += [
                {
                    "saliency": explanation,
                    "schedule": "one_shot",
                    "example_id": e,
                    SCORE: value + examples[e] + noise[e],
                }
                for e in range(N_EXAMPLES)
            ]
        scores.append(pd.DataFrame(per_example))
    write_sweep(root, results, overrides)
    for i, frame in enumerate(scores):
        (root / str(i) / "per_example").mkdir()
        frame.to_parquet(root / str(i) / "per_example" / "scores.parquet")
    claims = {"_target_": "itermask.studies.robust_infidelity.RobustInfidelity", **CLAIMS}
    multirun = {"hydra": {"callbacks": {"report": {"claims": claims}}, "sweeper": {"_target_": "some.OtherSweeper"}}}
    (root / "multirun.yaml").write_text(yaml.safe_dump(multirun))
    return root


def _claims(root):
    report = build_report(root)
    return report, compute_claims(report, ClaimSettings.from_dict(CLAIMS))


def test_variant_of_a_result():
    r = _result("m", "gradient", 0, 0.1, 0.8, "masked")
    assert variant(r) == "masked"
    r["config"]["train"] = {}
    assert variant(r) == "standard"


def test_claim1_supported_when_equivalent_models_differ(tmp_path):
    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.1))
    diffs = claims.model_differences
    row = diffs[
        (diffs.a == "minilm") & (diffs.b == "minilm_mlm") & (diffs.method == "gradient") & (diffs.measure == "score")
    ]
    # from the per-example scores (the mixed model): -0.1 plus the mean of their noise (sd 0.01 over 3 seeds x 10
    # examples a model, sd of the difference 0.0026)
    assert row.difference.iloc[0] == pytest.approx(-0.1, abs=0.003)
    assert row.ci_high.iloc[0] < 0
    assert claims.accuracy.equivalent.all()
    verdict = claims.verdicts[1]
    assert verdict.startswith("supports: at equivalent test accuracy (margin ±0.02, TOST), the gradient")
    assert "minilm and minilm_mlm by -0.1" in verdict
    assert "% mixed-model interval over every example of every seed, Holm p = " in verdict
    assert (row.n_seeds.iloc[0], row.n_examples.iloc[0], row.converged.iloc[0]) == (3, N_EXAMPLES, True)
    assert "seeds 0, 1, 2; 10 test examples" in verdict and "models minilm, minilm_mlm, minilm_cda" in verdict
    # the model effect shows in the nested variance components of gradient, not of occlusion
    comp = claims.components.set_index(["method", "component"])
    assert comp.loc[("gradient", "model"), "share"] > 0.5
    assert comp.loc[("occlusion", "model"), "share"] < 0.05
    assert comp.loc[("gradient", "model"), "n_examples"] == N_EXAMPLES
    # two models rank random < gradient < occlusion, minilm_mlm random < occlusion < gradient (0.2 + 0.1 is
    # 0.30000000000000004 > 0.3): rank sums (3, 7, 8), S = 14, W = 12 * 14 / (3^2 (3^3 - 3)) = 7 / 9
    assert claims.concordance["methods"] == ["random", "gradient", "occlusion"]
    assert claims.concordance["w"] == pytest.approx(7 / 9)


def test_claim1_without_a_model_effect_finds_no_difference_that_survives_holm(tmp_path):
    """No model effect: of the 15 comparisons one uncorrected interval excludes 0 (gradient minus random, minilm -
    minilm_cda, p 0.041: statsmodels' MixedLM gives the same contrast and standard error when it converges; its
    default optimizer did not converge on these rows, which read n/a before 5 December 2026), as about 0.75 would
    by chance, and none survives Holm's correction: "supports in part", never "supports"."""
    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.0))
    verdict = claims.verdicts[1]
    assert verdict.startswith("supports in part: at equivalent test accuracy")
    assert "1 of 15 intervals exclude 0 (about 0.8 expected by chance)" in verdict
    assert "but no difference survives Holm's correction for the 15 comparisons" in verdict
    row = claims.model_differences.query("method == 'gradient' and measure == 'minus_random' and b == 'minilm_cda'")
    assert (row.a.iloc[0], row.p_value.iloc[0], row.se.iloc[0]) == (
        "minilm",
        pytest.approx(0.0413, abs=5e-4),
        pytest.approx(0.003587, rel=1e-3),
    )
    assert claims.concordance["w"] == pytest.approx(1.0)


def test_claim1_not_supported_when_accuracies_differ(tmp_path):
    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.1, accuracy_gap=0.05))
    acc = claims.accuracy.set_index(["a", "b"])
    assert acc.loc[("minilm", "minilm_cda"), "difference"] == pytest.approx(-0.05)
    assert not acc.loc[("minilm", "minilm_cda"), "equivalent"]
    assert acc.loc[("minilm", "minilm_mlm"), "equivalent"]  # still equivalent: the claim is tested there
    assert claims.verdicts[1].startswith("supports")


def test_claim2_and_claim3_verdicts(tmp_path):
    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.0))
    assert claims.conditions["base_model"] == "minilm"
    standard = claims.ood_summary["standard"]
    assert standard["mean"] == pytest.approx(np.mean([(0.88 + 0.01 * s + 0.92 + 0.01 * s) / 2 for s in SEEDS]))
    assert claims.verdicts[2].startswith("supports: masked inputs are out of distribution")
    # attack link: across random < gradient < occlusion the success rate rises with the score
    link = claims.attack_link.set_index("model")
    assert link.loc["minilm", "rho"] == pytest.approx(1.0)
    assert link.loc["minilm", "methods"] == ["gradient", "occlusion", "random"]
    adv = claims.adversarial[claims.adversarial.kind == "difference"].set_index("measure")
    assert adv.loc["score", "difference"] == pytest.approx(0.05)
    assert adv.loc["success_rate", "difference"] < 0
    # rho = 1 in every seed resample, but 3 methods cannot reach p < 0.05: supported in part only
    assert "supports in part the attack link" in claims.verdicts[3]
    assert "with 3 methods the smallest possible two-sided p-value is 2/3! = 0.333" in claims.verdicts[3]
    # accuracies equal across kinds here: a change at equivalent accuracy, against the paper's claim
    assert (
        "differs from the paper: adversarial fine-tuning raises faithfulness at equivalent accuracy"
        in (claims.verdicts[3])
    )


def test_claim2_not_supported_when_masked_fine_tuning_does_not_lower_auroc(tmp_path):
    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.0, masked_auroc=0.9))
    assert claims.verdicts[2].startswith("supports in part")


def test_one_seed_cannot_answer(tmp_path):
    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.1, seeds=[0]))
    assert claims.verdicts[1].startswith("cannot answer: minilm (standard fine-tuning) has 1 seed(s)")
    assert claims.verdicts[2].startswith("cannot answer: minilm (masked fine-tuning) has 1 seed(s)")
    assert claims.verdicts[3].startswith("cannot judge (no interval over seeds: fewer than 2 seeds) the attack link")
    assert "adversarial vs standard fine-tuning cannot be answered" in claims.verdicts[3]
    assert set(claims.components.why) == {"needs 2 models and 2 common seeds with per-example scores, got 3 and 1"}


def test_claims_section_opens_the_report(tmp_path):
    root = make_paper_sweep(tmp_path, model_effect=0.1)
    written = write_report(build_report(root))
    text = written["report.md"].read_text()
    assert text.index("## Claims") < text.index("## Headline")
    for n in (1, 2, 3):
        assert f"### Claim {n}:" in text and f"report_files/claim{n}.png" in text
        assert (root / "report_files" / f"claim{n}.png").stat().st_size > 1000
    assert "**Verdict:** supports: at equivalent test accuracy" in text
    assert "Kendall's W of the ranking of random, gradient, occlusion" in text
    assert "| a | b | method | measure | seeds | examples | a - b | 95 % CI | p | p (Holm) | note |" in unpadded(text)
    assert "95 % Wald interval of a linear mixed model fitted by REML" in text
    assert (root / "report_files" / "claims_components.csv").is_file()


def test_no_claims_section_without_claim_settings(tmp_path):
    root = make_paper_sweep(tmp_path, model_effect=0.1)
    (root / "multirun.yaml").unlink()
    text = write_report(build_report(root))["report.md"].read_text()
    assert "## Claims" not in text


def test_unknown_claim_setting_is_named():
    with pytest.raises(ValueError, match="unknown key.*margin"):
        ClaimSettings.from_dict({"margin": 0.02})


def test_figure_names_of_long_variant_labels_stay_short_and_distinct():
    # experiment=paper compares e.g. roberta[<two swept settings>] with roberta[<two other values>]: the
    # comparison figure's name must fit a file system's 255 bytes
    from itermask.reporting.render.plots import MAX_SLUG, slug

    label = "roberta[train.adversarial_augmentation.enabled=False, train.masking_augmentation.enabled={}]"
    a, b = (
        slug(label.format(x), "vs", label.format(y), "rt_snippets") for x, y in (("False", "True"), ("True", "False"))
    )
    assert len(a) == len(b) == MAX_SLUG and a != b
    assert slug("minilm", "rt_snippets", "gradient") == "minilm_rt_snippets_gradient"


def test_claim1_supported_in_part_when_no_difference_survives_holm(tmp_path):
    """One raw-score interval excluding 0 among many comparisons, with a p-value Holm's correction cannot
    keep: "supports in part", and the differences are named as raw-score (masking sensitivity) ones."""
    from itermask.studies.robust_infidelity.comparisons import with_holm as _with_holm
    from itermask.studies.robust_infidelity.verdicts import verdict1 as _verdict1

    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.0))
    diffs = claims.model_differences.drop(columns="p_holm")
    first = diffs.index[(diffs.measure == "score") & (diffs.method == "random")][0]
    # the one hit: every other interval includes 0 (the constructed null has one by chance, a minus-random one)
    diffs.loc[diffs.index != first, ["ci_low", "ci_high", "p_value"]] = [-0.01, 0.01, 0.5]
    diffs.loc[first, ["difference", "ci_low", "ci_high", "p_value"]] = [0.03, 0.01, 0.05, 0.02]
    claims.model_differences = _with_holm(diffs, claims.accuracy)
    n = int(claims.model_differences.p_holm.notna().sum())
    assert claims.model_differences.loc[first, "p_holm"] == pytest.approx(min(1.0, 0.02 * n))
    verdict = _verdict1(claims)
    assert verdict.startswith("supports in part: at equivalent test accuracy (margin ±0.02, TOST), the random")
    assert f"no difference survives Holm's correction for the {n} comparisons" in verdict
    assert "The differences are in the raw scores only, the random explanation's included" in verdict
    # the same difference with a p-value that survives: supported
    diffs.loc[first, "p_value"] = 1e-6
    claims.model_differences = _with_holm(diffs, claims.accuracy)
    assert _verdict1(claims).startswith("supports: at equivalent test accuracy")
    assert f"1 of {n} differences survive Holm's correction" in _verdict1(claims)


def test_claim1_cannot_answer_when_no_mixed_model_fit_is_usable(tmp_path):
    """Every fit at equivalent accuracy failed: the verdict says so with the fit's reason, not "does not
    support" over zero intervals."""
    from itermask.studies.robust_infidelity.comparisons import with_holm as _with_holm
    from itermask.studies.robust_infidelity.verdicts import verdict1 as _verdict1

    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.1))
    diffs = claims.model_differences.drop(columns="p_holm")
    diffs[["difference", "ci_low", "ci_high", "p_value"]] = np.nan
    diffs["reason"] = "no finite positive standard error of m - n (se = 0.0)"
    claims.model_differences = _with_holm(diffs, claims.accuracy)
    verdict = _verdict1(claims)
    assert verdict.startswith(
        "cannot answer: no between-model difference could be estimated (no finite positive standard error of m - n "
        "(se = 0.0)) (models"
    )


def test_claim3_adversarial_change_with_an_accuracy_change_is_not_separated(tmp_path):
    from itermask.studies.robust_infidelity.verdicts import verdict3 as _verdict3

    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.0))
    adv = claims.adversarial.copy()
    adv.loc[adv.kind == "accuracy", "equivalent"] = False
    claims.adversarial = adv
    verdict = _verdict3(claims, "minilm", "gradient")
    assert "adversarial fine-tuning changes faithfulness, but test accuracy changes too, so this run cannot" in verdict
    assert "test accuracy not shown equivalent within ±0.02" in verdict
    # no change in the score: agrees with the paper
    adv.loc[(adv.kind == "difference") & (adv.measure == "score"), ["ci_low", "ci_high"]] = [-0.01, 0.02]
    assert "agrees with the paper: adversarial fine-tuning is not shown to change faithfulness" in _verdict3(
        claims, "minilm", "gradient"
    )


def test_claim1_without_equivalent_accuracies_tells_too_few_seeds_from_incomparable_models(tmp_path):
    """No pair shown equivalent in accuracy: "does not support" only when every pair's 90 % interval lies
    outside the margin; otherwise "cannot answer", with the margin this design's TOST could show at 80 % power
    (2 seeds of experiment=paper said "does not support" at intervals of ±0.058 around 0.009)."""
    from itermask.studies.robust_infidelity.verdicts import verdict1 as _verdict1

    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.0))
    acc = claims.accuracy.copy()
    acc["equivalent"] = False
    acc[["difference", "ci_low", "ci_high", "p_value"]] = [0.07, 0.05, 0.09, 0.9]
    claims.accuracy = acc
    verdict = _verdict1(claims)
    assert verdict.startswith(
        "does not support: no pair of models has equivalent test accuracy: every pair's 90 % interval lies "
        "outside ±0.02 (TOST; e.g. minilm - minilm_mlm: 0.0700 [0.0500, 0.0900] at 90 %, p = 0.900)"
    )
    # intervals that straddle the margin, Welch se 0.02 on 1 df: (t_{0.95,1} + t_{0.9,1}) * 0.02 = 0.1878
    acc[["difference", "ci_low", "ci_high", "se", "df"]] = [0.009, -0.049, 0.067, 0.02, 1.0]
    verdict = _verdict1(claims)
    assert verdict.startswith(
        "cannot answer: no pair of models is shown equivalent in test accuracy within ±0.02 (TOST; e.g. minilm - "
        "minilm_mlm: 0.0090 [-0.0490, 0.0670] at 90 %, p = 0.900); at 80 % power this design's TOST shows "
        "identical accuracies equivalent only within ±0.1878 to ±0.1878, wider than ±0.02: more seeds are needed, "
        "so score differences cannot be separated from accuracy differences (models"
    )
    # one pair precise enough (se 0.001 on 100 df: margin 0.0030) whose accuracies still differ too much
    acc.loc[acc.index[0], ["se", "df"]] = [0.001, 100.0]
    assert "would show identical accuracies equivalent within ±0.02 for 1 of 3 pairs (margins ±0.0030 to " in (
        _verdict1(claims)
    )
    assert "whose accuracies differ too much to show it; the others need more seeds" in _verdict1(claims)


def test_adversarial_power_is_on_welchs_degrees_of_freedom():
    """The smallest detectable difference over seeds is (t_{0.975, df} + t_{0.8, df}) se on the Welch df, never
    narrower than the Welch interval's half-width (2 seeds a side, one spread and one not: df about 1)."""
    from scipy import stats

    from itermask.reporting import compare_samples
    from itermask.studies.robust_infidelity.verdicts import _detectable_difference

    diff = compare_samples([0.1, 0.3], [0.2, 0.2001], 0.95)
    assert diff["df"] == pytest.approx(1.0, abs=1e-4)
    expected = (stats.t.ppf(0.975, diff["df"]) + stats.t.ppf(0.8, diff["df"])) * diff["se"]
    assert float(_detectable_difference(diff, 0.05)) == pytest.approx(expected, abs=1e-4)
    assert expected > (diff["ci_high"] - diff["ci_low"]) / 2


def test_claim1_names_its_accuracy_gate_and_a_close_test_the_word_hinges_on(tmp_path):
    """The verdict lists every pair's TOST p, shown equivalent or not, and says what it would read were a pair
    whose p lies within a factor 2 of 0.05 decided the other way (the bf16 rerun of the preset moved one such p
    from 0.051 to 0.030 and the word from "supports in part" to "supports"); a far p gets no such sentence."""
    from itermask.studies.robust_infidelity.comparisons import with_holm as _with_holm
    from itermask.studies.robust_infidelity.verdicts import verdict1 as _verdict1

    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.1))
    assert claims.verdicts[1].endswith(
        "Accuracy shown equivalent within ±0.02 (TOST, alpha 0.05): minilm - minilm_mlm (p = 0.000), minilm - "
        "minilm_cda (p = 0.000), minilm_mlm - minilm_cda (p = 0.000)."
    )
    diffs = claims.model_differences.drop(columns="p_holm")

    def verdict(equivalent, p_values):
        acc = claims.accuracy.copy()
        acc["equivalent"], acc["p_value"] = equivalent, p_values
        claims.accuracy, claims.model_differences = acc, _with_holm(diffs, acc)
        return _verdict1(claims)

    # only the pair holding the effect is equivalent, at p 0.03: without it no pair is, and the word changes
    text = verdict([True, False, False], [0.03, 0.5, 0.5])
    assert text.startswith("supports: ")
    assert text.endswith(
        "Accuracy shown equivalent within ±0.02 (TOST, alpha 0.05): minilm - minilm_mlm (p = 0.030); not shown: "
        "minilm - minilm_cda (p = 0.500), minilm_mlm - minilm_cda (p = 0.500). The word hinges on a close "
        "equivalence test: minilm - minilm_mlm is shown equivalent at p = 0.030 (within a factor 2 of 0.05); "
        'decided the other way, the verdict would read "cannot answer".'
    )
    # the same pair at p 0.001 (outside [0.025, 0.1)): no hinge is named
    assert "hinges" not in verdict([True, False, False], [0.001, 0.5, 0.5])
    # the effect's pair just misses (p 0.07) beside an equivalent pair without an effect: were it shown
    # equivalent, its differences would join Holm's family and the word would be "supports"
    text = verdict([False, True, False], [0.07, 0.001, 0.5])
    assert not text.startswith("supports: ")
    assert text.endswith(
        "The word hinges on a close equivalence test: minilm - minilm_mlm is not shown equivalent at p = 0.070 "
        '(within a factor 2 of 0.05); decided the other way, the verdict would read "supports".'
    )
    # a close p whose flip leaves the word as it is: listed, no hinge
    text = verdict([True, True, False], [0.001, 0.04, 0.5])
    assert "minilm - minilm_cda (p = 0.040)" in text and "hinges" not in text
