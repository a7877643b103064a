"""What soft comprehensiveness and sufficiency (``evaluation.soft_draws``) cost per example, beside the bare
forwards of the same rows, and how much one example's value moves between draws (to choose the default ``R``).

    python bench/soft_cost.py [--examples 24] [--draws 5] [--spread-draws 20] [--threads 2] [--rounds 3]
                              [--json out.json]

The packaged MiniLM with a seeded random head (``bench/throughput.py``'s :func:`load_inputs`: the shipped
test split's evaluation subset, ``max_length`` 64), one batch of ``--examples``. Timed, best of ``--rounds``:

* ``soft``: :func:`itermask.core.soft_masking.soft_outputs` with ``--draws`` draws (``B x (2R + 1)``
  embedding rows: building the masks, the embedding look-up and the forwards), the default token budget;
* ``floor``: the same number of rows as plain token-id forwards (each example's clean row repeated
  ``2R + 1`` times, no de-duplication), in the same length chunks, under ``torch.inference_mode``.

The spread: the evaluator (gradient saliency, one-shot, ``mask_token``) with ``--spread-draws`` draws; per
example the sd over draws of the per-draw soft comprehensiveness / sufficiency, and the sd of the mean of
``R`` draws over examples read as ``sd / sqrt(R)``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def timed(works, rounds: int) -> list[float]:
    """The best of ``rounds`` wall times of each of ``works``, run in turn within each round (so that load from
    other processes on a shared machine falls on all of them alike)."""
    best = [float("inf")] * len(works)
    for _ in range(rounds):
        for i, work in enumerate(works):
            start = time.perf_counter()
            work()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=24)
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--spread-draws", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch
    from throughput import load_inputs

    from itermask.core.evaluation import IterativeMaskingEvaluator
    from itermask.core.evaluation_settings import DEFAULT_TOKEN_BUDGET
    from itermask.core.forwards import ForwardStats, length_chunks, row_lengths
    from itermask.core.masking import MaskToken
    from itermask.core.saliency import GradientSaliency
    from itermask.core.soft_masking import soft_draw_values, soft_outputs
    from itermask.core.tokens import class_logits, maskable_positions

    torch.set_num_threads(args.threads)
    tokenizer, model, batch, labels, ids, _ = load_inputs(args.examples, 64)
    maskable = maskable_positions(batch, tokenizer.all_special_ids)
    importance = torch.rand(maskable.shape, generator=torch.Generator().manual_seed(0))
    per = 2 * args.draws + 1
    stats = ForwardStats()

    def soft():
        soft_outputs(model, batch, maskable, importance, ids, args.draws, 0, DEFAULT_TOKEN_BUDGET, stats)

    rows = batch.index(torch.arange(len(batch)).repeat_interleave(per))
    chunks = length_chunks(row_lengths(rows), DEFAULT_TOKEN_BUDGET)

    def floor():
        with torch.inference_mode():
            for chunk in chunks:
                class_logits(model, rows.index(chunk).trim())

    load_before = os.getloadavg()[0]  # the machine may be shared: compare ratios within one run
    soft_s, floor_s = timed([soft, floor], args.rounds)
    evaluator = IterativeMaskingEvaluator(
        GradientSaliency(),
        MaskToken(tokenizer),
        [0.0, 0.5, 1.0],
        tokenizer.all_special_ids,
        schedules=["one_shot"],
        soft_draws=args.spread_draws,
    )
    curves = evaluator.evaluate(model, batch, labels, ids)["one_shot"]
    spread = {}
    for direction in ("comprehensiveness", "sufficiency"):
        values = soft_draw_values(curves, direction)
        defined = values[~values.isnan().any(dim=1)]
        sd = defined.std(dim=1)
        spread[direction] = {
            "n_defined": len(defined),
            "mean": defined.mean().item(),
            "between_examples_sd": defined.mean(dim=1).std().item(),
            "draw_sd_mean": sd.mean().item(),
            "draw_sd_max": sd.max().item(),
            **{f"sd_of_mean_R{r}": sd.mean().item() / r**0.5 for r in (1, 3, 5, 10)},
        }
    result = {
        "examples": len(batch),
        "draws": args.draws,
        "rows_per_example": per,
        "forwards": stats.forwards // args.rounds,
        "soft_seconds": soft_s,
        "floor_seconds": floor_s,
        "ratio": soft_s / floor_s,
        "ms_per_example": 1000 * soft_s / len(batch),
        "spread": spread,
        "threads": args.threads,
        "load_average_1m_before_after": [load_before, os.getloadavg()[0]],
        "median_length": statistics.median(row_lengths(batch).tolist()),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
