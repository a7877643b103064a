"""The measures study's three tables from a sweep folder (issue 33): per method, mean over seeds, the token-removal
reference (R-OMS: 1 - cos to ``delete`` / OOD AUROC of each masking strategy), the degraded-explainer sanity
benchmark (mean rho, and in how many seeds its 95 % BCa interval is on the expected side), the OOD AUROC of the
inputs each measure feeds a model, and each job's cost in seconds.

    python bench/measures_study_tables.py <sweep folder> [<sweep folder> ...]

The folders hold the jobs of ``python evaluate.py -m seed=... saliency=... naopc=on ffidelity=on
removal_reference=on sanity=on`` (docs/benchmarks.md, "The measures study"). Markdown on standard output.
"""

import glob
import json
import math
import sys

import numpy as np

ORDER = ["gradient", "integrated_gradients", "input_x_gradient", "deeplift", "occlusion", "lime", "attention"]
if len(sys.argv) < 2:
    sys.exit(__doc__)
runs = [json.load(open(p)) for root in sys.argv[1:] for p in sorted(glob.glob(f"{root}/*/results.json"))]
if not runs:
    sys.exit(f"no results.json under {sys.argv[1:]}")
name = lambda r: r["saliency"]["name"]  # noqa: E731
methods = sorted({name(r) for r in runs}, key=lambda m: ORDER.index(m) if m in ORDER else 99)
print(f"{len(runs)} jobs:", sorted((name(r), r["seed"]) for r in runs))
print("accuracy:", sorted({(r["seed"], round(r["accuracy"]["test"], 3), r["model_check"]["meaningful"]) for r in runs}))
short = {
    "gradient": "grad",
    "integrated_gradients": "IG",
    "input_x_gradient": "IxG",
    "deeplift": "DeepLIFT",
    "occlusion": "occl",
    "lime": "LIME",
    "attention": "attn",
}
# R-OMS of each method's own ranking: 1 - cos and AUROC, mean over seeds
rows = {}
for r in runs:
    m = name(r)
    for t in r["removal_reference"]["tables"][m]:
        rows.setdefault(t["strategy"], {}).setdefault(m, []).append(
            (1 - t["mean_cosine"], t["ood_auroc"] if t["ood_auroc"] is not None else math.nan)
        )
order = sorted(rows, key=lambda s: np.mean([x[0] for v in rows[s].values() for x in v]))
print("\nR-OMS: 1 - cos to delete / OOD AUROC, mean over seeds")
print("| strategy | " + " | ".join(short.get(m, m) for m in methods) + " |")
print("| --- | " + " | ".join("---:" for _ in methods) + " |")
for s in order:
    cells = []
    for m in methods:
        v = np.array(rows[s].get(m, []), dtype=float)
        cells.append(f"{v[:, 0].mean():.3g} / {np.nanmean(v[:, 1]):.2f}" if len(v) else "n/a")
    print(f"| {s} | " + " | ".join(cells) + " |")
# sanity
MEAS = [
    "aopc_comprehensiveness_prob",
    "aopc_sufficiency_prob",
    "naopc_comprehensiveness_prob",
    "naopc_sufficiency_prob",
    "srg_prob",
    "soft_comprehensiveness",
    "soft_sufficiency",
    "ffid_plus_prob",
    "ffid_minus_prob",
    "ffid_plus_accuracy",
    "ffid_minus_accuracy",
    "decision_flip_fraction",
    "aopc_log_odds_drop",
]
print("\nSanity: mean rho over seeds (seeds whose 95 % BCa interval is on the expected side / seeds)")
print("| measure | " + " | ".join(short.get(m, m) for m in methods) + " | methods passing in all seeds |")
print("| --- | " + " | ".join("---:" for _ in methods) + " | ---: |")
for meas in MEAS:
    cells, passing = [], 0
    for m in methods:
        v = [r["sanity"]["methods"][m].get(meas) for r in runs if name(r) == m and m in r["sanity"]["methods"]]
        v = [e for e in v if e]
        rhos = [e["rho"] for e in v if e.get("rho") is not None]
        ok = sum(bool(e.get("ranks_known_order")) for e in v)
        passing += bool(v) and ok == len(v)
        cells.append(f"{np.mean(rhos):+.2f} ({ok}/{len(v)})" if rhos else f"n/a (0/{len(v)})")
    print(f"| {meas} | " + " | ".join(cells) + f" | {passing}/{len(methods)} |")


# OOD AUROC of each measure's inputs
def inner(r, m, schedule="one_shot"):
    e = r["ood"]["statistics"][m][schedule]
    vals = [v for v, f in zip(e["values"]["final/auroc_mahalanobis"], e["fraction"]) if 0 < f < 1 and v is not None]
    return float(np.mean(vals)) if vals else math.nan


print("\nOOD AUROC of the inputs each measure feeds a model (Mahalanobis, final layer), mean over seeds")
print("| inputs | " + " | ".join(short.get(m, m) for m in methods) + " |")
print("| --- | " + " | ".join("---:" for _ in methods) + " |")
getters = {
    "masked (AOPC, NAOPC, SRG, flips; one-shot, steps 0 < f < 1)": lambda r, m: inner(r, m),
    "soft comprehensiveness": lambda r, m: ((r["ood"].get("soft_inputs") or {}).get(m) or {}).get(
        "soft_comprehensiveness"
    ),
    "soft sufficiency": lambda r, m: ((r["ood"].get("soft_inputs") or {}).get(m) or {}).get("soft_sufficiency"),
    "FFid+ (on its copy)": lambda r, m: r["ffidelity"]["methods"][m]["one_shot"].get("ood_auroc_plus"),
    "FFid- (on its copy)": lambda r, m: r["ffidelity"]["methods"][m]["one_shot"].get("ood_auroc_minus"),
}
for label, get in getters.items():
    cells = []
    for m in methods:
        v = [get(r, m) for r in runs if name(r) == m]
        v = [x for x in v if x is not None and math.isfinite(x)]
        cells.append(f"{np.mean(v):.3f} ({len(v)})" if v else "n/a")
    print(f"| {label} | " + " | ".join(cells) + " |")
print("\ncost per job (s): method seed: total / sanity / F-Fidelity / removal ref")
for r in sorted(runs, key=lambda r: (name(r), r["seed"])):
    print(
        name(r),
        r["seed"],
        round(r["seconds"]),
        round(r["sanity"]["cost"]["seconds"]),
        round(r["ffidelity"]["seconds"]),
        round(r["removal_reference"]["seconds"]),
        "sanity rows/ex:",
        r["sanity"]["cost"]["rows_per_example_explanation"],
    )
