"""Claim 1's mixed-model differences (statistics.mixed_model_differences): a balanced case checked against the
ANOVA solution by hand, the input errors, and the simulation check of bench/mixed_model_check.py (false-positive
rate and coverage of the 5 % test / 95 % interval on the preset's design)."""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from itermask.studies.robust_infidelity.statistics import mixed_model_differences

BENCH = Path(__file__).resolve().parents[2] / "bench" / "mixed_model_check.py"


def _bench():
    spec = importlib.util.spec_from_file_location("mixed_model_check", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_balanced_difference_matches_the_anova_solution():
    """In a balanced design REML equals the ANOVA estimates when those are positive (Searle, Casella & McCulloch
    1992, Sec. 6.7), so ``se(a - b)^2 = 2 MS_seed / (S E)`` with ``MS_seed = E sum_ms (y_ms. - y_m..)^2 /
    (M (S - 1))``, and the interval uses t with M (S - 1) = 6 df."""
    y, model, seed, example = _bench().simulate(np.random.default_rng(3), 25, 0.7)
    (row,) = mixed_model_differences(y, model, seed, example, [("m0", "m1")])
    cells = y.reshape(3, 3, 25).mean(axis=-1)  # [model, seed]
    means = cells.mean(axis=1)
    ms_seed = 25 * ((cells - means[:, None]) ** 2).sum() / (3 * 2)
    se = math.sqrt(2 * ms_seed / (3 * 25))
    assert row["estimate"] == pytest.approx(means[0] - means[1], abs=1e-9)
    assert (row["ci_high"] - row["estimate"]) / stats.t.ppf(0.975, 6) == pytest.approx(se, rel=1e-3)
    assert row["p_value"] == pytest.approx(2 * stats.t.sf(abs(means[0] - means[1]) / se, 6), rel=1e-3)
    assert (row["converged"], row["reason"], row["n_seeds"], row["n_examples"]) == (True, None, 3, 25)


def test_too_few_seeds_is_a_reason_not_a_number():
    y, model, seed, example = _bench().simulate(np.random.default_rng(0), 5, 0.0)
    keep = seed == 0
    (row,) = mixed_model_differences(y[keep], model[keep], seed[keep], example[keep], [("m0", "m2")])
    assert math.isnan(row["estimate"]) and math.isnan(row["p_value"])
    assert row["reason"] == "the mixed model needs 2 seeds of every model and 2 examples, got 1 and 5"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seed": [0]}, r"^scores, model, seed and example must be 1-D of one length"),
        ({"scores": "nan"}, r"^mixed-model differences need a finite score for every observation"),
        ({"pairs": [("m0", "m9")]}, r"^no observations of model\(s\) \['m9'\] named in pairs$"),
        ({"confidence": 1.0}, r"^confidence must be in \(0, 1\), got 1.0$"),
    ],
)
def test_bad_input_is_named(change, message):
    y, model, seed, example = _bench().simulate(np.random.default_rng(0), 4, 0.0)
    args = {"scores": y, "model": model, "seed": seed, "example": example, "pairs": [("m0", "m1")]}
    args |= {"confidence": 0.95} | change
    if isinstance(args["scores"], str):
        args["scores"] = np.where(np.arange(len(y)) == 3, np.nan, y)
    with pytest.raises(ValueError, match=message):
        mixed_model_differences(**args)


def test_false_positive_rate_is_about_five_percent():
    """200 datasets of the preset's design (3 models x 3 seeds x 25 examples) with no model effect: the 5 %
    test rejects in [0.02, 0.09] of them (fixed seed; bench/mixed_model_check.py reports 400)."""
    out = _bench().check(25, 200, 0.0, seed=0)
    assert 0.02 <= out["false_positive_rate"] <= 0.09
    assert out["failed"] <= 10  # non-converged fits are counted, not scored


def test_interval_covers_a_known_difference_at_about_95_percent():
    out = _bench().check(25, 200, 0.5, seed=1)
    assert 0.91 <= out["coverage"] <= 0.98
    assert out["failed"] <= 10
