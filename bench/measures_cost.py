"""What the evaluator's added faithfulness measures cost: masked rows, distinct rows and seconds per example of
each variant, beside the forwards floor of the same rows, and the time over the floor of the rows a variant adds.

    python bench/measures_cost.py [--examples 24] [--rounds 2] [--threads 2] [--schedules one_shot]
                                  [--token-budget N] [--out out.json]

The packaged MiniLM with a seeded random classification head (the cost does not depend on the weights), the
first ``--examples`` examples of the shipped test split's evaluation subset (``max_length`` 64), one batch
(``bench/throughput.py``'s :func:`load_inputs`); gradient saliency, ``mask_token``, the fractions of
``conf/evaluate.yaml``, ``--schedules`` (default one-shot only: the added directions exist only there, and the
recursive schedule's saliency calls would only add noise to the differences).

Variants: :data:`BASELINE` (every added measure off) and each of :data:`VARIANTS`, a dict of evaluator keyword
overrides on top of the baseline. Per variant, in each of ``--rounds`` rounds (variants in turn, so a load
change hits all alike; the best round is kept): the evaluation (:meth:`IterativeMaskingEvaluator.evaluate`),
timed, then its **floor**: the bare model forwards (``class_logits`` under ``torch.inference_mode``) of exactly
the row chunks its row engine ran (recorded in an untimed run before: the distinct rows, batched the same
way). Reported: masked rows asked for and distinct rows computed per example (``ForwardStats``; the clean input
counts one), seconds, floor seconds and, for the rows a variant adds over the baseline, added distinct rows per
example and (variant - baseline seconds) / (variant - baseline floor seconds). On a shared machine compare
ratios within one run; small added floors make that ratio noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

#: the baseline: every measure the variants add switched off (a measure that lands later adds its "off" here)
BASELINE: dict = {"least_first": False}
#: the variants, each a dict of evaluator keyword overrides of :data:`BASELINE` (one line per measure)
VARIANTS: list[dict] = [
    {"least_first": True},  # the symmetric relevance gain's least-important-first direction
]


def variant_name(overrides: dict) -> str:
    return "baseline" if not overrides else ", ".join(f"{k}={v}" for k, v in overrides.items())


def build(tokenizer, overrides: dict, schedules: list[str], token_budget: int | None):
    from throughput import default_grid

    from itermask.core.evaluation import IterativeMaskingEvaluator
    from itermask.core.masking import MaskToken
    from itermask.core.saliency import GradientSaliency

    extra = {"token_budget": token_budget} if token_budget else {}
    return IterativeMaskingEvaluator(
        GradientSaliency(),
        MaskToken(tokenizer),
        default_grid(),
        tokenizer.all_special_ids,
        schedules,
        **extra,
        **(BASELINE | overrides),
    )


def recorded_chunks(evaluator, model, batch) -> list:
    """The row chunks (trimmed :class:`TokenBatch`) the evaluator's row engine runs on ``batch``, in order."""
    import itermask.core.forwards as forwards

    chunks, original = [], forwards.class_logits

    def record(model, part):
        chunks.append(part)
        return original(model, part)

    forwards.class_logits = record
    try:
        evaluator.evaluate(model, batch)
    finally:
        forwards.class_logits = original
    return chunks


def floor_seconds(model, chunks: list) -> float:
    import torch

    from itermask.core.tokens import class_logits

    start = time.perf_counter()
    with torch.inference_mode():
        for part in chunks:
            class_logits(model, part)
    return time.perf_counter() - start


def measure(args) -> list[dict]:
    import torch
    from throughput import load_inputs

    torch.set_num_threads(args.threads)
    tokenizer, model, batch, _, _, _ = load_inputs(args.examples, 64)
    variants = [{}, *VARIANTS]
    evaluators = [build(tokenizer, v, args.schedules, args.token_budget) for v in variants]
    chunks, stats = [], []
    for ev in evaluators:  # warm-up, and the rows each variant's engine runs
        chunks.append(recorded_chunks(ev, model, batch))
        stats.append(ev.forward_stats)
    seconds = [[] for _ in variants]
    floors = [[] for _ in variants]
    for _ in range(args.rounds):
        for i, ev in enumerate(evaluators):
            start = time.perf_counter()
            ev.evaluate(model, batch)
            seconds[i].append(time.perf_counter() - start)
            floors[i].append(floor_seconds(model, chunks[i]))
    n = len(batch)
    rows = []
    for i, overrides in enumerate(variants):
        st = stats[i]
        row = {
            "variant": variant_name(overrides),
            "overrides": overrides,
            "rows_per_example": st.rows / n,
            "distinct_rows_per_example": st.computed / n,
            "forwards": st.forwards,
            "seconds": min(seconds[i]),
            "floor_seconds": min(floors[i]),
            "all_seconds": seconds[i],
            "all_floor_seconds": floors[i],
        }
        if i:
            base = rows[0]
            row["added_distinct_rows_per_example"] = (
                row["distinct_rows_per_example"] - base["distinct_rows_per_example"]
            )
            row["added_seconds"] = row["seconds"] - base["seconds"]
            row["added_floor_seconds"] = row["floor_seconds"] - base["floor_seconds"]
            added_floor = row["added_floor_seconds"]
            row["added_time_over_floor"] = row["added_seconds"] / added_floor if added_floor > 0 else float("nan")
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--schedules", nargs="+", default=["one_shot"])
    parser.add_argument("--token-budget", type=int, default=None, help="default: the library's")
    parser.add_argument("--out", default=None, help="write the rows as JSON")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = measure(args)
    load_after = os.getloadavg()[0]
    print(
        f"\n{args.examples} examples, {args.threads} thread(s), schedules {args.schedules}, best of {args.rounds} "
        f"rounds, load average {load_before:.1f} before, {load_after:.1f} after\n"
    )
    print(
        "| variant | rows / ex. | distinct / ex. | s | floor s | added distinct / ex. | added s | added floor s |",
        end="",
    )
    print(" added s / added floor s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        added = (
            f"{r['added_distinct_rows_per_example']:.2f} | {r['added_seconds']:.3f} | {r['added_floor_seconds']:.3f} | "
            f"{r['added_time_over_floor']:.2f}"
            if "added_seconds" in r
            else "- | - | - | -"
        )
        print(
            f"| {r['variant']} | {r['rows_per_example']:.1f} | {r['distinct_rows_per_example']:.2f} | "
            f"{r['seconds']:.3f} | {r['floor_seconds']:.3f} | {added} |"
        )
    if args.out:
        meta = {"examples": args.examples, "threads": args.threads, "schedules": args.schedules}
        meta |= {"rounds": args.rounds, "load_average": [load_before, load_after]}
        Path(args.out).write_text(json.dumps({**meta, "variants": rows}, indent=1))
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
