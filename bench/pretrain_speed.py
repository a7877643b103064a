"""Wall time of continued MLM pretraining (``model=minilm_mlm`` / ``model=minilm_cda``,
:mod:`itermask.training.pretraining`) on the CPU, projected from timed steps of the stage's own length-grouped
batches: the target (issue 34) is at most 5 minutes per encoder on 2 cores, over the whole training text. No
assertions.

    python bench/pretrain_speed.py [--model minilm_cda] [--steps 5] [--threads 2]

Runs ``--steps`` optimizer steps of each phase (head alone with the encoder frozen, then joint) of
:class:`~itermask.training.pretraining.MaskedLmPretraining` in a plain loop (forward, backward, AdamW step) on
batches of the model's corpus with its settings (``conf/model/<model>.yaml``), times one held-out evaluation,
and prints seconds per step and the projected stage: ``head_steps x frozen + joint_steps x joint + 2 x
held-out`` (the model loading and corpus tokenizing, a few seconds, not counted). The real stage's wall time is
``pretrain_seconds`` in its cache entry's ``meta.json`` (``python pretrain.py model=<model>``). On a shared,
loaded machine the wall time overstates the cost; the projected CPU seconds divided by the threads is the wall
time on idle cores (assuming both threads stay busy).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from transformers import DataCollatorForLanguageModeling

from itermask.models.loading import load_tokenizer, resolve_pretrained
from itermask.settings import build, plain
from itermask.storage.keys import Fingerprint
from itermask.training import pretraining

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm_cda")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per phase (after one warm-up step)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        config = plain(compose("train", overrides=["output_dir=/tmp/unused", f"model={args.model}"]))
    source = build(config["dataset"]["source"], "dataset.source")
    base = resolve_pretrained(config["model"]["pretrained"])
    settings = pretraining.pretrain_settings(config, Fingerprint.of(source, base), source, base)
    o = settings.options
    tokenizer = load_tokenizer(base)
    texts, heldout_texts = pretraining.corpus_of(settings)
    length, probability = int(settings.payload["max_length"]), float(o["mlm_probability"])
    heldout = pretraining._heldout(tokenizer, heldout_texts[: o["heldout_examples"]], length, probability, 0)
    model = pretraining.masked_lm_from_encoder(base)
    head_steps, joint_steps = pretraining.schedule_steps(o, len(texts))  # joint_steps null: the rest of one pass
    module = pretraining.MaskedLmPretraining(model, head_steps, joint_steps, heldout=heldout)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability, return_tensors="pt")
    # the stage's own batches (the corpus loader's: seeded, length-grouped), masked as the collator masks them
    loader = pretraining._corpus_loader(tokenizer, texts, length, int(o.get("seed", 0)), int(o["batch_size"]))
    batches = []
    for batch, _ in zip(loader, range(args.steps + 1)):
        ids, labels = collator.torch_mask_tokens(
            batch["input_ids"].clone(), special_tokens_mask=batch["special_tokens_mask"]
        )
        batches.append({**batch, "input_ids": ids, "labels": labels})
    module.log = lambda *a, **k: None  # no trainer attached
    per_step, cpu_per_step = {}, {}
    for phase, frozen in (("frozen", True), ("joint", False)):
        module._set_frozen(frozen)
        times, cpu = [], []
        for batch in batches[: args.steps + 1]:
            start, start_cpu = time.perf_counter(), time.process_time()
            loss = module.training_step(batch, 0)
            assert loss is not None
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        per_step[phase] = sum(times[1:]) / args.steps
        cpu_per_step[phase] = sum(cpu[1:]) / args.steps
    start, start_cpu = time.perf_counter(), time.process_time()
    module.heldout_accuracy()
    heldout_seconds, heldout_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    total = head_steps * per_step["frozen"] + joint_steps * per_step["joint"] + 2 * heldout_seconds
    cpu_total = head_steps * cpu_per_step["frozen"] + joint_steps * cpu_per_step["joint"] + 2 * heldout_cpu
    print(f"model={args.model} threads={args.threads} batch={o['batch_size']} corpus={len(texts)} texts")
    frozen, joint = per_step["frozen"], per_step["joint"]
    print(f"frozen step {frozen:.2f} s, joint step {joint:.2f} s, held-out {heldout_seconds:.1f} s")
    print(f"projected stage: {head_steps} x frozen + {joint_steps} x joint + 2 held-out = {total:.0f} s")
    # on a loaded machine wall time overstates the cost: CPU seconds / threads is the wall time on idle cores
    idle = cpu_total / args.threads
    print(f"CPU seconds of the projected stage: {cpu_total:.0f} (/ {args.threads} threads = {idle:.0f} s)")


if __name__ == "__main__":
    main()
