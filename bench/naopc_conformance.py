"""itermask's exact AOPC bounds against the NAOPC authors' published exact limits.

Edin et al. (ACL 2025, arXiv 2408.08137) publish, in their repository ``JoakimEdin/naopc`` (MIT), for 66 short
SST-2 and 339 short Yelp sentences and six public classifiers, the logits of every masked word subset
(``results/permutation_outputs/<data>_<model>.parquet``: ``id``, ``word_key`` (the masked words, 1-based,
``"[1, 3]"``), ``positive_logit``, ``negative_logit``) and the exact limits they computed from them by
enumerating every ordering (``results/aopc_limits_exact/<data>_<model>.parquet``: ``upper_limit``,
``lower_limit``, ...). Their target is the positive class's probability (``softmax([positive, negative])[0]``).

This script recomputes the limits from the outputs with :func:`itermask.core.exact_aopc_bounds` and compares
them example by example (tolerance 1e-6). Their search keeps its running maximum from 0 (``min_max_lookup["max"]
= 0.0``): when every ordering's sum of drops over ``k = 1..n-1`` is negative, their upper limit is
``drop(all)/n`` instead of the true maximum (above it: no ordering reaches it). Every difference is checked
against that reading and counted as explained.

    python bench/naopc_conformance.py --repo /path/to/naopc [--json out.json]
    python bench/naopc_conformance.py --repo /path/to/naopc --write-extract tests/core/data/naopc

``--write-extract`` writes the small extract the test suite reads (``tests/core/test_naopc_conformance.py``):
a few examples of every file, every explained difference among them, in a compact form (masks as bitmasks).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from itermask.core import exact_aopc_bounds

TOLERANCE = 1e-6


def positive_probability(frame: pd.DataFrame) -> np.ndarray:
    """The authors' target: ``softmax([positive_logit, negative_logit])[0]``, in float64."""
    logits = frame[["positive_logit", "negative_logit"]].to_numpy(np.float64)
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted[:, 0] / shifted.sum(axis=1)


def bitmasks(word_keys: pd.Series) -> np.ndarray:
    """``"[1, 3]"`` (1-based masked words) -> bitmask ``0b101``."""
    return np.array(
        [sum(1 << (int(w) - 1) for w in key.strip("[]").split(",") if w.strip()) for key in word_keys], dtype=np.int64
    )


def compact(outputs: pd.DataFrame) -> pd.DataFrame:
    """The outputs as ``id, mask, positive_logit, negative_logit`` (the extract's form)."""
    return pd.DataFrame(
        {
            "id": outputs["id"].to_numpy(np.int64),
            "mask": bitmasks(outputs["word_key"]),
            "positive_logit": outputs["positive_logit"].to_numpy(np.float64),
            "negative_logit": outputs["negative_logit"].to_numpy(np.float64),
        }
    )


def compare(outputs: pd.DataFrame, limits: pd.DataFrame) -> pd.DataFrame:
    """One row per example: ``id, n, upper, lower`` (ours), ``their_upper, their_lower``, ``their_reading`` (our
    bounds read with their running maximum from 0), ``agrees`` (both within 1e-6) and ``explained``.

    Args:
        outputs: compact outputs (:func:`compact`).
        limits: their exact limits (``id, upper_limit, lower_limit``).
    """
    outputs = outputs.assign(prob=positive_probability(outputs))
    theirs = limits.set_index("id")
    rows = []
    for example, group in outputs.groupby("id", sort=True):
        n = int(group["mask"].max()).bit_length()
        table = np.full(1 << n, np.nan)
        table[group["mask"].to_numpy()] = group["prob"].to_numpy()
        bounds = exact_aopc_bounds(table)
        drop_all = table[0] - table[-1]
        # their search starts its running maximum at 0 (over the sum of the drops at k = 1..n-1)
        reading = (max(bounds.upper * n - drop_all, 0.0) + drop_all) / n
        upper, lower = float(theirs.at[example, "upper_limit"]), float(theirs.at[example, "lower_limit"])
        agrees = abs(bounds.upper - upper) <= TOLERANCE and abs(bounds.lower - lower) <= TOLERANCE
        explained = abs(reading - upper) <= TOLERANCE and abs(bounds.lower - lower) <= TOLERANCE
        rows.append((example, n, bounds.upper, bounds.lower, upper, lower, reading, agrees, explained))
    columns = ["id", "n", "upper", "lower", "their_upper", "their_lower", "their_reading", "agrees", "explained"]
    return pd.DataFrame(rows, columns=columns)


def files(repo: Path) -> list[str]:
    return sorted(p.stem for p in (repo / "results" / "permutation_outputs").glob("*.parquet"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True, help="a checkout of github.com/JoakimEdin/naopc")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--write-extract", type=Path, default=None)
    parser.add_argument(
        "--per-file", type=int, default=3, help="examples per file in the extract (and all that differ)"
    )
    args = parser.parse_args()
    lines = [
        "| file | examples | agree (1e-6) | largest diff. of the agreeing (U, L) | differ | explained (max from 0) |",
        "|---|---|---|---|---|---|",
    ]
    extract, extract_limits, report, start = [], [], {}, time.perf_counter()
    for name in files(args.repo):
        outputs = compact(pd.read_parquet(args.repo / "results" / "permutation_outputs" / f"{name}.parquet"))
        limits = pd.read_parquet(args.repo / "results" / "aopc_limits_exact" / f"{name}.parquet")
        table = compare(outputs, limits)
        same = table[table["agrees"]]
        du = (same["upper"] - same["their_upper"]).abs().max()
        dl = (same["lower"] - same["their_lower"]).abs().max()
        differ = int((~table["agrees"]).sum())
        explained = int((~table["agrees"] & table["explained"]).sum())
        lines.append(f"| {name} | {len(table)} | {len(same)} | {du:.1e}, {dl:.1e} | {differ} | {explained} |")
        report[name] = {
            "examples": len(table),
            "agree": len(same),
            "max_du": du,
            "max_dl": dl,
            "differ": differ,
            "explained": explained,
        }
        if args.write_extract is not None:
            small = table[table["n"] <= 8]
            keep = set(small["id"].head(args.per_file)) | set(table.loc[~table["agrees"], "id"].head(2))
            extract.append(outputs[outputs["id"].isin(keep)].assign(file=name))
            extract_limits.append(
                limits[limits["id"].isin(keep)][["id", "upper_limit", "lower_limit"]].assign(file=name)
            )
    print("\n".join(lines))
    print(f"\n{sum(r['examples'] for r in report.values())} examples in {time.perf_counter() - start:.1f} s")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    if args.write_extract is not None:
        args.write_extract.mkdir(parents=True, exist_ok=True)
        pd.concat(extract).to_parquet(args.write_extract / "permutation_outputs.parquet", compression="zstd")
        pd.concat(extract_limits).to_parquet(args.write_extract / "aopc_limits_exact.parquet", compression="zstd")


if __name__ == "__main__":
    main()
