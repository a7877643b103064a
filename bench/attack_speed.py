"""Examples per second of the default salience-guided attack (``conf/attack/embedding_neighbors.yaml``: k = 20
embedding neighbours, one-shot ranking, budget 0.2) and of ``attack=mask``, on the packaged MiniLM over the
first shipped test examples, on the CPU. No assertions.

    python bench/attack_speed.py [--model DIR] [--examples 64] [--threads N] [--saliency gradient] [--profile]

``--model`` takes a fine-tuned classifier directory (e.g. a cache entry's ``model/``; default: the packaged
encoder with a new random head, which flips far fewer decisions, so the attack runs longer per example).
Examples are batched as the evaluation batches them (64, sorted by length). ``--profile`` prints the
functions that took the most time (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

import torch
from omegaconf import OmegaConf
from saliency_speed import PACKAGED, ROOT, build, setup  # the shared loading of the saliency benchmark

from itermask.core.attack import GreedyAttack
from itermask.core.candidates import build_candidate_source, word_start_vocabulary
from itermask.core.masking import MaskToken
from itermask.core.tokens import TokenBatch


def attack_for(name: str, saliency: str, tokenizer) -> GreedyAttack:
    """The attack of ``conf/attack/<name>.yaml`` (search settings from ``mask.yaml``) ranking by
    ``conf/saliency/<saliency>.yaml``."""
    settings = OmegaConf.load(ROOT / "conf" / "attack" / "mask.yaml")
    own = OmegaConf.load(ROOT / "conf" / "attack" / f"{name}.yaml")
    settings.candidates = own.candidates
    method = build(saliency).bind(tokenizer)
    source = build_candidate_source(OmegaConf.to_container(settings.candidates)).bind(tokenizer)
    return GreedyAttack(
        method,
        MaskToken(tokenizer),
        source,
        tokenizer.all_special_ids,
        word_start=word_start_vocabulary(tokenizer),
        ranking=settings.ranking,
        budget=settings.budget,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=PACKAGED)
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64, help="as data.eval_batch_size")
    parser.add_argument("--max-length", type=int, default=64, help="as conf/model/minilm.yaml")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--saliency", default="gradient")
    parser.add_argument("--attacks", nargs="*", default=["embedding_neighbors", "mask"])
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    tokenizer, model, texts = setup(args)
    texts.sort(key=lambda t: len(tokenizer(t, truncation=True, max_length=args.max_length)["input_ids"]))
    batches = []
    for start in range(0, len(texts), args.batch_size):
        enc = tokenizer(
            texts[start : start + args.batch_size],
            padding=True,
            truncation=True,
            max_length=args.max_length,
            return_tensors="pt",
        )
        batches.append(TokenBatch(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")))
    print("| attack | examples/s | s | success rate | mean queries | forwards (candidate inputs) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in args.attacks:
        attack = attack_for(name, args.saliency, tokenizer)
        attack.attack(model, batches[0].index(slice(0, 2)).trim())  # warm-up (and neighbour table)
        profile = cProfile.Profile() if args.profile else None
        start = time.perf_counter()
        if profile:
            profile.enable()
        results = [attack.attack(model, batch, example_ids=torch.arange(len(batch))) for batch in batches]
        if profile:
            profile.disable()
        seconds = time.perf_counter() - start
        success = torch.cat([r.success for r in results]).float().mean().item()
        queries = torch.cat([r.queries for r in results]).double()
        print(
            f"| {name} ({args.saliency}) | {len(texts) / seconds:.2f} | {seconds:.1f} | {success:.2f} | "
            f"{queries.mean().item():.1f} | {int(queries.sum())} |",
            flush=True,
        )
        if profile:
            pstats.Stats(profile).sort_stats("cumulative").print_stats(18)
    print(
        f"\n{len(texts)} examples, torch threads {torch.get_num_threads()}, "
        f"load average {os.getloadavg()[0]:.1f}, model {args.model}"
    )


if __name__ == "__main__":
    main()
