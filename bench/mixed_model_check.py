"""Simulation check of claim 1's mixed-model differences
(:func:`itermask.studies.robust_infidelity.statistics.mixed_model_differences`).

The preset's design, 3 models x 3 seeds x ``E`` examples (25 or 200), scores
``y = mu_m + c_e + b_s(m) [+ (mc)_me] + eps`` with example sd 1.0, seed-within-model sd 0.5 and noise sd 1.0
(the example is 44 % of the variance, the seed 11 %: inside the 33-69 % example share measured on the
preset's runs). Each simulated dataset gets one fit; the pair (model 0, model 1) is read from it.

- ``--effect 0``: no model effect; the rate at which the 5 % test rejects (should be about 0.05).
- ``--effect d``: model 1 is ``d`` higher; how often the 95 % interval of ``0 - 1`` covers ``-d`` (about 0.95).

Each rate comes with its Clopper-Pearson 95 % interval (scipy's ``binomtest``).

- ``--against-statsmodels``: no rates; each dataset is also fitted with statsmodels' ``MixedLM`` (the fit used
  until 5 December 2026, with the model x example cell as a third variance component) on two models, where
  that variance is one as in :func:`mixed_model_differences` (which estimates it per pair), and the report
  counts the fits that did not converge and those whose contrast standard error is more than 0.1 % from the
  closed-form REML one. ``--sd-seed 0`` puts the seed variance on the boundary, as the random explanation's
  AOPC had in the preset's three-seed run.

    python bench/mixed_model_check.py --examples 25 --reps 400 --effect 0
    python bench/mixed_model_check.py --examples 25 --reps 400 --effect 0.5
    python bench/mixed_model_check.py --examples 25 --reps 2000 --sd-seed 0.05 --sd-model-example 1
    python bench/mixed_model_check.py --examples 50 --reps 20 --sd-seed 0 --against-statsmodels
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from scipy import stats

from itermask.studies.robust_infidelity.statistics import mixed_model_differences

SD_EXAMPLE, SD_SEED, SD_RESIDUAL = 1.0, 0.5, 1.0


def simulate(
    rng, n_examples: int, effect: float, n_models: int = 3, n_seeds: int = 3, sd_model_example=0.0, sd_seed=SD_SEED
):
    """One dataset: ``(scores, model, seed, example)`` arrays (model ``i`` named ``m<i>``; model 1 is
    ``effect`` higher)."""
    m, s, e = (a.ravel() for a in np.indices((n_models, n_seeds, n_examples)))
    means = np.where(np.arange(n_models) == 1, effect, 0.0)
    y = means[m] + rng.normal(0, SD_EXAMPLE, n_examples)[e] + rng.normal(0, sd_seed, (n_models, n_seeds))[m, s]
    y = y + rng.normal(0, sd_model_example, (n_models, n_examples))[m, e] + rng.normal(0, SD_RESIDUAL, len(y))
    return y, np.array([f"m{i}" for i in m]), s, e


def check(
    n_examples: int, reps: int, effect: float, seed: int = 0, sd_model_example: float = 0.0, sd_seed: float = SD_SEED
) -> dict:
    """The rejection rate at 5 % (``effect == 0``) or the 95 % coverage of the true ``m0 - m1`` over
    ``reps`` datasets, with its Clopper-Pearson interval and the count of fits that did not converge."""
    rng = np.random.default_rng(seed)
    hits = failed = 0
    for _ in range(reps):
        (row,) = mixed_model_differences(
            *simulate(rng, n_examples, effect, sd_model_example=sd_model_example, sd_seed=sd_seed), [("m0", "m1")]
        )
        if row["reason"] is not None:
            failed += 1
            continue
        hits += row["p_value"] < 0.05 if effect == 0 else row["ci_low"] <= -effect <= row["ci_high"]
    n = reps - failed
    ci = stats.binomtest(int(hits), n).proportion_ci(0.95) if n else None
    rate = hits / n if n else float("nan")
    name = "false_positive_rate" if effect == 0 else "coverage"
    return {name: rate, "ci_low": ci.low if ci else None, "ci_high": ci.high if ci else None, "n": n, "failed": failed}


def statsmodels_fit(y, model, seed, example, model_example: bool = False):
    """statsmodels' REML fit of the same model (its default optimizers; the example and the run, and with
    ``model_example`` the model x example cell, as variance components of one group, as in its "Variance
    components" documentation), warnings silenced."""
    import warnings

    import pandas as pd
    from statsmodels.regression.mixed_linear_model import MixedLM

    frame = pd.DataFrame({"score": y, "model": model, "example": example, "g": 0})
    frame["run"] = [f"{m}/{s}" for m, s in zip(model, seed)]
    vc = {"example": "0 + C(example)", "seed": "0 + C(run)"}
    if model_example:
        frame["cell"] = [f"{m}/{e}" for m, e in zip(model, example)]
        vc["model_example"] = "0 + C(cell)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MixedLM.from_formula("score ~ 0 + C(model)", frame, groups="g", vc_formula=vc).fit(reml=True)


def against_statsmodels(n_examples: int, reps: int, seed: int = 0, sd_seed: float = SD_SEED) -> dict:
    """Fit ``reps`` datasets of two models (no model effect) with statsmodels' ``MixedLM`` (REML, its default
    optimizers, one group with the example, the run and the model x example cell as variance components) and
    with :func:`mixed_model_differences`; count statsmodels' fits that did not converge and its converged fits
    whose ``m0 - m1`` standard error is more than 0.1 % from the closed-form one, and give the largest relative
    difference of those."""
    rng = np.random.default_rng(seed)
    not_converged = wrong = 0
    worst = 0.0
    for _ in range(reps):
        y, m, s, e = simulate(rng, n_examples, 0.0, n_models=2, sd_seed=sd_seed)
        (row,) = mixed_model_differences(y, m, s, e, [("m0", "m1")])
        fit = statsmodels_fit(y, m, s, e, model_example=True)
        if not fit.converged:
            not_converged += 1
            continue
        cov = np.asarray(fit.cov_params())
        se = float(np.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]))
        wrong += abs(se / row["se"] - 1) > 1e-3
        worst = max(worst, abs(se / row["se"] - 1))
    return {
        "reps": reps,
        "statsmodels_not_converged": not_converged,
        "statsmodels_converged_wrong_se": int(wrong),
        "largest_relative_se_error_when_converged": round(worst, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=25)
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--effect", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sd-model-example", type=float, default=0.0)
    parser.add_argument("--sd-seed", type=float, default=SD_SEED)
    parser.add_argument("--against-statsmodels", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.against_statsmodels:
        out = against_statsmodels(args.examples, args.reps, args.seed, args.sd_seed)
    else:
        out = check(args.examples, args.reps, args.effect, args.seed, args.sd_model_example, args.sd_seed)
    out |= {"examples": args.examples, "effect": args.effect, "seconds": round(time.perf_counter() - start, 1)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
