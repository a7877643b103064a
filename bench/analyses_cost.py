"""What the analyses switched on by one option cost beside their forwards floor (issue 33): F-Fidelity
(``ffidelity=on``), the token-removal reference (``removal_reference=on``) and the degraded-explainer sanity
benchmark (``sanity=on``), with the masking stage for scale.

    python bench/analyses_cost.py [--examples 12] [--threads 2] [--floor-rounds 2] [--json out.json]
                                  [override ...]

One real evaluation job in this process (:func:`itermask.pipeline.run_evaluate` on the composed ``evaluate``
config with ``ffidelity=on removal_reference=on sanity=on evaluation.n_examples=<examples> logger=csv
reuse_results=false`` and the overrides given, e.g. ``saliency=occlusion``), its output in a temporary
folder. The fine-tuned checkpoint, and F-Fidelity's removal-fine-tuned copy with its OOD detector's training
embeddings (once per copy, shared by every job on it), come from the cache when an earlier job stored them
(run the bench twice and read the second); every other derived value is computed, not read back, so the
analyses do their work.

Per stage (the masking stage, then each analysis's ``run``): its wall seconds; the forwards its row engine
ran (every call of :func:`itermask.core.tokens.class_logits` through :mod:`itermask.core.forwards`,
recorded: the distinct rows, already de-duplicated and length-bucketed); rows per evaluated example; and the
**floor**: the same row chunks run again as bare ``class_logits`` forwards on the same models in eval mode
under ``torch.inference_mode``, after the job (the best of ``--floor-rounds``). Seconds / floor is what the
stage spends beyond its forwards (masks, rankings, statistics, OOD detectors, F-Fidelity's sampling, Python).
Not counted as forwards: saliency (the masking stage's; the sanity benchmark explains each example once
through its clean cache) and training. Compare ratios within one run on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "src" / "itermask" / "conf"
#: the stages timed: (label, module, class or function name)
STAGES = (
    ("masking", "itermask.engine.run", "evaluate_curves"),
    ("ffidelity", "itermask.analyses.ffidelity", "FFidelityAnalysis"),
    ("removal_reference", "itermask.analyses.removal_reference", "RemovalReferenceAnalysis"),
    ("sanity", "itermask.analyses.sanity", "SanityAnalysis"),
)


class Recorder:
    """Which stage is running, its wall seconds, and the ``(model, chunk)`` of every row-engine forward."""

    def __init__(self) -> None:
        self.stage: str | None = None
        self.seconds: dict[str, float] = {}
        self.chunks: dict[str, list] = {}

    def timed(self, label: str, call):
        def wrapper(*args, **kwargs):
            outer, self.stage = self.stage, label
            start = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - start
                self.stage = outer

        return wrapper


def instrument(recorder: Recorder) -> None:
    """Patch the row engine's forward, the timed stages, and the derived-value store (compute, except the
    removal-fine-tuned copy, which is training, not evaluation)."""
    import importlib

    import itermask.core.forwards as forwards
    from itermask.analyses.ffidelity import MODEL_KIND, OOD_FIT_KIND
    from itermask.storage.derived import DerivedStore

    PER_COPY = {MODEL_KIND, OOD_FIT_KIND}  # noqa: N806
    original = forwards.class_logits

    def record(model, part):
        if recorder.stage is not None:
            recorder.chunks.setdefault(recorder.stage, []).append((model, part))
        return original(model, part)

    forwards.class_logits = record
    for label, module_name, name in STAGES:
        module = importlib.import_module(module_name)
        target = getattr(module, name)
        if isinstance(target, type):
            target.run = recorder.timed(label, target.run)
        else:
            setattr(module, name, recorder.timed(label, target))
    reuse = DerivedStore.get_or_compute

    def get_or_compute(self, model_key, kind, fingerprint, compute):
        return reuse(self, model_key, kind, fingerprint, compute) if kind in PER_COPY else compute()

    DerivedStore.get_or_compute = get_or_compute


def floor_seconds(chunks: list, rounds: int) -> float:
    """The best of ``rounds`` timings of the bare forwards of ``chunks``."""
    import torch

    from itermask.core.tokens import class_logits

    for model in {id(m): m for m, _ in chunks}.values():
        model.eval()  # as in the job (the job's eval_mode gives the classifier back in its training mode: dropout on)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        with torch.inference_mode():
            for model, part in chunks:
                class_logits(model, part)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--floor-rounds", type=int, default=2, help="the floor: the best of this many timings")
    parser.add_argument("--json", default=None, help="write the rows as JSON")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the job, e.g. saliency=occlusion")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("WANDB_MODE", "offline")
    sys.path.insert(0, str(ROOT / "src"))
    from hydra import compose, initialize_config_dir

    from itermask.context import JobContext
    from itermask.pipeline import run_evaluate

    recorder = Recorder()
    instrument(recorder)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as out:
        overrides = [
            "ffidelity=on", "removal_reference=on", "sanity=on", "logger=csv", f"threads={args.threads}",
            "reuse_results=false",
            f"evaluation.n_examples={args.examples}", f"output_dir={out}", *args.overrides,
        ]  # fmt: skip
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(config_name="evaluate", overrides=overrides)
        start = time.perf_counter()
        result = run_evaluate(cfg, JobContext())
        job_seconds = time.perf_counter() - start
    n = int(result["n_evaluated"])
    rows = []
    for label, _, _ in STAGES:
        chunks = recorder.chunks.get(label, [])
        floor = floor_seconds(chunks, args.floor_rounds)
        seconds = recorder.seconds.get(label, float("nan"))
        rows.append({
            "stage": label,
            "seconds": seconds,
            "forwards": len(chunks),
            "rows_per_example": sum(len(part) for _, part in chunks) / n,
            "floor_seconds": floor,
            "over_floor": seconds / floor if floor > 0 else float("nan"),
        })  # fmt: skip
    load_after = os.getloadavg()[0]
    print(
        f"\n{n} examples, saliency={result['saliency']['name']}, {args.threads} thread(s), job {job_seconds:.1f} s, "
        f"load average {load_before:.1f} before, {load_after:.1f} after\n"
    )
    print("| stage | s | forwards | distinct rows / example | floor s | s / floor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['stage']} | {r['seconds']:.1f} | {r['forwards']} | {r['rows_per_example']:.0f} | "
            f"{r['floor_seconds']:.1f} | {r['over_floor']:.2f} |"
        )
    if args.json:
        meta = {"examples": n, "threads": args.threads, "overrides": args.overrides, "job_seconds": job_seconds}
        Path(args.json).write_text(json.dumps({**meta, "load_average": [load_before, load_after], "stages": rows}))
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
