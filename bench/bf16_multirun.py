"""bf16 against fp32 on whole multiruns (issue 34): the same grid run under ``trainer.precision=32-true`` and
``bf16-mixed``, compared job by job.

    python evaluate.py -m seed=0,1,2 saliency=gradient,integrated_gradients,occlusion trainer.precision=<p> \
        evaluation.schedules=[one_shot] evaluation.n_examples=200 logger=csv hydra.sweep.dir=<sweep_p>
    python bench/bf16_multirun.py fp32=<sweep_32-true> bf16=<sweep_bf16-mixed> [bf16_eval=<sweep> ...]

Each ``name=folder`` is a multirun folder (job folders found at any depth, so several sweeps can share a parent);
the first is the reference. Jobs are matched by model, fine-tuning variant, seed and method, so a folder may
hold a part of the other's jobs (``experiment=paper model=minilm seed=0`` against the whole preset). Printed:
test accuracy per job; per later folder, the largest and the mean per-example absolute difference of each
measure from the reference (matched jobs, by example id) beside the measure's per-example standard deviation;
and per measure, folder, model and variant, the methods' ranking by their mean over the examples in each seed,
and each method's difference from the seeded random explanation over the seeds with a 95 % t interval (``*``:
it excludes 0; two seeds or more). The jobs' wall seconds are each ``results.json``'s ``seconds``; the
multiruns' wall times are measured outside (``/usr/bin/time``).
"""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

MEASURES = [
    "aopc_comprehensiveness_prob",
    "aopc_sufficiency_prob",
    "aopc_log_odds_drop",
    "srg_prob",
    "soft_comprehensiveness",
    "soft_sufficiency",
    "first_flip_fraction",
    # the costly measures (on their subset: NaN elsewhere), where the jobs ran them (experiment=paper)
    "naopc_comprehensiveness_prob",
    "naopc_sufficiency_prob",
    "ffid_plus_prob",
    "ffid_minus_prob",
]
METHODS = ("gradient", "integrated_gradients", "occlusion")


def _variant(result: dict) -> str:
    train = result["config"].get("train", {})
    if train.get("adversarial_augmentation", {}).get("enabled"):
        return "adversarial"
    return "masked" if train.get("masking_augmentation", {}).get("enabled") else "standard"


def load(sweep: str) -> dict:
    """``{(model, variant, seed, method): (results.json, per-example scores)}`` of every job folder under
    ``sweep`` (``variant``: standard, masked or adversarial fine-tuning)."""
    runs = {}
    for path in sorted(Path(sweep).rglob("results.json")):
        result = json.loads(path.read_text())
        method = result["saliency"]["name"] if isinstance(result["saliency"], dict) else result["saliency"]
        key = (result["model"], _variant(result), result["seed"], method)
        runs[key] = (result, pd.read_parquet(path.parent / "per_example/scores.parquet"))
    return runs


def differences(reference: dict, other: dict, measure: str) -> tuple[np.ndarray, float]:
    """Per-example ``|other - reference|`` of ``measure`` (matched by model, variant, seed, method and example
    id) and the mean per-example standard deviation of the reference's."""
    diffs, sds = [], []
    for key, (_, scores) in reference.items():
        theirs = other[key][1] if key in other else None
        if theirs is None or measure not in scores or measure not in theirs:  # an analysis off in the job
            continue
        for method in scores.saliency.unique():
            a = scores[scores.saliency == method].set_index("example_id")[measure]
            b = theirs[theirs.saliency == method].set_index("example_id")[measure]
            shared = a.index.intersection(b.index)
            diffs.append((b.loc[shared] - a.loc[shared]).abs().dropna().to_numpy())
            if not len(a.loc[shared].dropna()):
                continue
            sds.append(a.loc[shared].std())
    if not sds:
        return np.array([]), math.nan
    return np.concatenate(diffs), float(np.nanmean(sds))


def means(runs: dict, measure: str) -> dict:
    """``{(model, variant): {seed: {method: mean over the examples}}}`` (random from every job of a checkpoint:
    the same seeded explanation; NaN rows, outside a costly measure's subset, left out)."""
    out: dict = {}
    for (model, variant, seed, _), (_, scores) in runs.items():
        if measure not in scores:  # a job with the analysis off (experiment=paper's masked and adversarial)
            continue
        for method in scores.saliency.unique():
            value = scores[scores.saliency == method][measure].mean()
            if math.isfinite(value):
                out.setdefault((model, variant), {}).setdefault(seed, {})[method] = value
    return out


def over_random(by_seed: dict) -> dict:
    """``{method: (mean, low, high)}``: method - random over the seeds, 95 % t interval."""
    out = {}
    for method in METHODS:
        v = np.array([m[method] - m["random"] for _, m in sorted(by_seed.items()) if method in m])
        if len(v) >= 2:
            half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
            out[method] = (v.mean(), v.mean() - half, v.mean() + half)
    return out


def main() -> None:
    arms = {name: load(path) for name, path in (a.split("=", 1) for a in sys.argv[1:])}
    names = list(arms)
    print("test accuracy per job:")
    for n in names:
        accuracy = {"/".join(map(str, k[:3])): round(r["accuracy"]["test"], 4) for k, (r, _) in sorted(arms[n].items())}
        print(" ", n, accuracy, f"jobs' seconds {sum(r['seconds'] for r, _ in arms[n].values()):.1f}")
    for n in names[1:]:
        shared = sorted(set(arms[n]) & set(arms[names[0]]))
        print(f"\n{len(shared)} jobs in both; per-example |{n} - {names[0]}|, largest and mean (sd in {names[0]}):")
        for measure in MEASURES:
            x, sd = differences(arms[names[0]], arms[n], measure)
            if len(x):
                print(f"  {measure:32s} max {x.max():.4f}  mean {x.mean():.4f}  (sd {sd:.4f}, {len(x)} values)")
    print("\nmethods ranked per model and seed (mean over examples, descending); method - random over seeds:")
    for measure in MEASURES:
        print(f"- {measure}")
        for n in names:
            for group, by_seed in sorted(means(arms[n], measure).items()):
                ranks = "; ".join(
                    f"{seed}: " + ">".join(sorted(m, key=lambda k: -m[k])) for seed, m in sorted(by_seed.items())
                )
                print(f"    {n} {'/'.join(group)}: ranks {ranks}")
                cells = [
                    f"{k} {a:+.4f} [{lo:+.4f}, {hi:+.4f}]{' *' if lo > 0 or hi < 0 else ''}"
                    for k, (a, lo, hi) in over_random(by_seed).items()
                ]
                if cells:
                    print("       " + "; ".join(cells))


if __name__ == "__main__":
    main()
