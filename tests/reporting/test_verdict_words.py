"""The verdicts' words follow their statistics (sign, interval, ties, NaN), and every verdict's smallest
detectable effect (:func:`detectable_effect`) matches statsmodels and the noncentral t by hand."""

import math

import pandas as pd
import pytest
from results_helpers import unpadded
from scipy import stats
from test_claims import make_paper_sweep

from itermask.studies.robust_infidelity import Claims, ClaimSettings
from itermask.studies.robust_infidelity.claim3 import _degenerate, _link_why
from itermask.studies.robust_infidelity.statistics import detectable_effect
from itermask.studies.robust_infidelity.verdicts import RAISES, _attack_link_part, direction

SCORE = "aopc_comprehensiveness_prob"
TAIL = (
    "(95 % bootstrap intervals over seeds; with {k} methods the smallest possible two-sided p-value is 2/{k}! = {p}: "
    "a weak test; the smallest rho this design detects at 80 % power is {rho})"
)


def test_direction_words_follow_sign_interval_ties_and_nan():
    assert direction(0.3, 0.1, 0.5) == "rises"
    assert direction(-0.3, -0.5, -0.1) == "falls"
    assert direction(-0.3) == "falls"  # no interval: the sign decides
    assert direction(0.3, -0.1, 0.5) == "does not change detectably"
    assert direction(-0.3, -0.5, 0.0) == "does not change detectably"  # an end on 0 contains it
    assert direction(0.0, -0.2, 0.2, name="rho") == "does not change (rho is exactly 0)"
    assert direction(math.nan, name="rho") == "cannot be judged (rho is not computable)"
    assert direction(-0.02, -0.03, -0.01, RAISES) == "lowers"
    # a treatment's verb reads "does not detectably change that", not "does not change detectably that"
    assert direction(-0.02, -0.03, 0.01, RAISES) == "does not detectably change"


def _link(rho, low, high, p, methods, why=None, n_seeds=3):
    ci_why = None if why or math.isnan(low) else _degenerate(rho, low, high, n_seeds, len(methods))
    row = {"model": "minilm", "methods": methods, "rho": rho, "ci_low": low, "ci_high": high, "p_value": p}
    claims = Claims(settings=ClaimSettings(score=SCORE))
    claims.attack_link = pd.DataFrame([{**row, "why": why, "ci_why": ci_why}])
    return _attack_link_part(claims)


FOUR, FIVE = ["a", "b", "c", "d"], ["a", "b", "c", "d", "e"]
T4 = TAIL.format(k=4, p="0.0833", rho="0.994 (Fisher z, two-sided alpha 0.05, 4 methods)")
T5 = TAIL.format(k=5, p="0.0167", rho="0.967 (Fisher z, two-sided alpha 0.05, 5 methods)")
HEAD = "the attack link (across methods, the score rising with the attack success rate): minilm: "


def test_attack_link_sentences_follow_the_sign_and_the_interval():
    # the issue's case: a negative rho whose seed-bootstrap interval ends at the estimate (3 seeds: 10 resamples)
    assert _link(-0.258, -0.775, -0.258, 0.75, FOUR) == (
        f"cannot judge (no model has a usable interval over seeds) {HEAD}{SCORE} falls with the attack success "
        "rate, rho = -0.258 (no usable interval over seeds: the bootstrap interval [-0.775, -0.258] has the "
        "estimate at its edge (3 seeds give 10 distinct resamples, rho over 4 methods takes few values)) "
        f"(exact p = 0.750, 4 methods) {T4}"
    )
    assert _link(0.9, 0.3, 1.0, 0.037, FIVE) == (
        f"supports {HEAD}{SCORE} rises with the attack success rate, rho = 0.900 [0.300, 1.000] "
        f"(exact p = 0.037, 5 methods) {T5}"
    )
    assert _link(0.4, -0.4, 0.8, 0.517, FIVE) == (
        f"does not support {HEAD}{SCORE} does not change detectably with the attack success rate, rho = 0.400 "
        f"[-0.400, 0.800] (exact p = 0.517, 5 methods) {T5}"
    )
    assert _link(-0.9, -1.0, -0.3, 0.037, FIVE) == (
        f"does not support {HEAD}{SCORE} falls with the attack success rate, rho = -0.900 [-1.000, -0.300] "
        f"(exact p = 0.037, 5 methods) {T5}"
    )
    assert _link(0.0, -0.6, 0.6, 1.0, FIVE) == (
        f"does not support {HEAD}{SCORE} does not change (rho is exactly 0) with the attack success rate, "
        f"rho = 0.000 [-0.600, 0.600] (exact p = 1.000, 5 methods) {T5}"
    )
    why = _link_why(FOUR, [0.2] * 4, [0.1, 0.2, 0.3, 0.4])
    assert why == "every method has the same mean score"
    assert _link(math.nan, math.nan, math.nan, math.nan, FOUR, why) == (
        f"cannot judge (no model has a usable interval over seeds) {HEAD}rho cannot be computed (every method "
        f"has the same mean score) {T4}"
    )
    assert _link_why(FOUR, [0.1, 0.2, 0.3, 0.4], [0.5] * 4) == "every method has the same mean attack success rate"
    assert _link_why(["a", "b"], [0.1, 0.2], [0.1, 0.2]) == "2 attacked method(s), rho needs 3"


def test_a_rho_of_one_on_the_interval_edge_is_usable_and_an_inner_estimate_too():
    assert _degenerate(1.0, 0.4, 1.0, 3, 4) is None
    assert _degenerate(0.4, 0.2, 0.8, 3, 4) is None
    assert str(_degenerate(0.4, 0.4, 0.8, 5, 4)).startswith(
        "the bootstrap interval [0.400, 0.800] has the estimate at its edge (5 seeds give 126"
    )


def test_claim2_says_masked_fine_tuning_raises_the_auroc_when_it_does(tmp_path):
    from test_claims import _claims

    _, claims = _claims(make_paper_sweep(tmp_path, model_effect=0.0, masked_auroc=0.97))
    assert claims.verdicts[2].startswith(
        "supports in part: masked inputs are out of distribution for the standard fine-tuned minilm, but masked "
        "fine-tuning raises that"
    )
    assert "this design detects a mean AUROC 0.033 away from 0.5 (3 seeds)" in claims.verdicts[2]


def _power_t(d, df, nc, alpha=0.05):
    """Two-sided power of a t-test with noncentrality ``nc`` (the definition solve_power inverts)."""
    crit = stats.t.ppf(1 - alpha / 2, df)
    return stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)


def test_detectable_effect_matches_statsmodels_and_the_noncentral_t():
    effect, why = detectable_effect("two_sample", 3, 3, sd=0.01)
    assert why is None and effect == pytest.approx(0.030709, abs=1e-6)  # statsmodels' d = 3.0709 x 0.01
    assert _power_t(effect / 0.01, 4, effect / 0.01 * math.sqrt(3 * 3 / 6)) == pytest.approx(0.8, abs=1e-4)
    effect, _ = detectable_effect("one_sample", 5, sd=2.0)
    assert effect == pytest.approx(2 * 1.681997, abs=1e-5)
    assert _power_t(effect / 2, 4, effect / 2 * math.sqrt(5)) == pytest.approx(0.8, abs=1e-4)
    # Holm's strictest step over 21 comparisons needs a larger effect
    assert detectable_effect("two_sample", 3, 3, alpha=0.05 / 21)[0] > detectable_effect("two_sample", 3, 3)[0]
    # Fisher z with Spearman's variance 1.06 / (n - 3): tanh((1.959964 + 0.841621) sqrt(1.06 / (n - 3)))
    assert detectable_effect("rank_correlation", 4)[0] == pytest.approx(0.993773, abs=1e-5)
    assert detectable_effect("rank_correlation", 13)[0] == pytest.approx(0.722153, abs=1e-5)


def test_the_wald_t_minimum_detectable_effect_is_blooms_and_has_about_80_percent_power():
    # (t_0.975,6 + t_0.8,6) x se = (2.446912 + 0.905703) x 0.01 (Bloom 1995)
    effect, why = detectable_effect("wald_t", 6, sd=0.01)
    assert why is None and effect == pytest.approx(0.0335262, abs=1e-6)
    # its power under the noncentral t: 0.797, the approximation's known shortfall at few df (within 0.01 of 0.8)
    crit, delta = stats.t.ppf(0.975, 6), effect / 0.01
    assert stats.nct.sf(crit, 6, delta) + stats.nct.cdf(-crit, 6, delta) == pytest.approx(0.8, abs=0.01)
    assert detectable_effect("wald_t", 0, sd=0.01)[1] == (
        "a Wald t needs df >= 1 and a positive standard error, got df 0 and se 0.01"
    )
    assert math.isnan(detectable_effect("wald_t", 6, sd=0.0)[0])


def test_detectable_effect_says_why_it_cannot_and_rejects_bad_input():
    assert detectable_effect("rank_correlation", 3) == (
        pytest.approx(math.nan, nan_ok=True),
        "a rank correlation over 3 objects has no Fisher-z power (needs 4)",
    )
    assert detectable_effect("two_sample", 1, 3)[1] == "a t-test needs 2 values per group, got 1 and 3"
    assert detectable_effect("two_sample", 3, 3, sd=0.0)[1] == "no spread over seeds (sd = 0.0) to scale the effect by"
    with pytest.raises(ValueError, match="design must be"):
        detectable_effect("anova", 3)
    with pytest.raises(ValueError, match="alpha and power"):
        detectable_effect("one_sample", 3, alpha=1.5)


def test_the_claim3_table_marks_a_degenerate_interval():
    from itermask.studies.robust_infidelity.markdown import _claim3_lines

    claims = Claims(settings=ClaimSettings(score=SCORE))
    ci_why = _degenerate(-0.258, -0.775, -0.258, 3, 4)
    row = {"model": "minilm", "methods": FOUR, "rho": -0.258, "ci_low": -0.775, "ci_high": -0.258}
    claims.attack_link = pd.DataFrame([{**row, "p_value": 0.75, "why": None, "ci_why": ci_why}])
    table = _claim3_lines(claims, {}, 95)[2]
    assert "| minilm | a, b, c, d | -0.258 | -0.775, -0.258 (degenerate) | 0.750 |" in unpadded(table)


def test_claim1_states_the_smallest_difference_its_mixed_model_contrasts_detect():
    from itermask.studies.robust_infidelity.verdicts import _claim1_power

    claims = Claims(settings=ClaimSettings(score=SCORE))
    tested = pd.DataFrame([{"se": 0.01, "df": 6}, {"se": 0.02, "df": 6}, {"se": math.nan, "df": math.nan}])
    # two-sided alpha 0.05/3 (Holm's strictest step over 3 comparisons), 80 % power, t on 6 df
    k = stats.t.ppf(1 - 0.05 / 3 / 2, 6) + stats.t.ppf(0.8, 6)  # 3.2875 + 0.9057
    text = _claim1_power(claims, tested)
    assert f"detects a difference of {0.01 * k:.4f} to {0.02 * k:.4f} in the {SCORE} across the 2 comparisons" in text
    assert "alpha 0.05/3 = 0.017" in text and "t on 6 df" in text
    none = pd.DataFrame([{"se": math.nan, "df": math.nan}])
    assert _claim1_power(claims, none) == (
        " The smallest detectable difference is not computable (no contrast has a standard error)."
    )
