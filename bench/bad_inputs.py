"""Runs ``evaluate.py`` (and ``train.py``) with bad inputs and damaged caches, the way a new user meets them,
and tabulates what happened: exit code, seconds until the process ended, whether fine-tuning had started,
and the last error (or repair) line. No assertions: the table is the result (issue 17). The cases of issue 36
(``bench/bad_input_cases.py``: the Python facade, ``pretrain.py``, the paper preset, the report command, hostile
strings) also get a class: clear and early, fine, or fix.

    python bench/bad_inputs.py [--out DIR] [--only NAME ...] [--update] [--skip-caches] [--timeout 600]

Writes ``<out>/bad_inputs.md`` and ``<out>/bad_inputs.json`` (``--update`` re-runs the ``--only`` cases into
an earlier table). Every run gets its own cache
(``ITERMASK_CACHE``), output folder and the CSV logger; the bad data files are written into ``<out>/data``.
Bad settings should fail before fine-tuning with a message naming the option; the cases a documented switch
repairs (``dataset.source.drop_missing_labels``, ``dataset.source.convert_texts``,
``dataset.source.merge_label_variants``) should finish with a logged repair, the cases a setting reads
(``dataset.source.encoding``) should finish; every damaged cache should be recomputed with a warning, and
the temporary file of a killed Parquet write be removed by the next run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import bad_input_cases as more
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "src/itermask/resources/rt_snippets"
#: Settings that keep a run that is meant to finish (repairs, cache cases) to about a minute on 2 cores.
SMALL = [
    "train.max_train_examples=64",
    "evaluation.n_examples=4",
    "evaluation.fractions=[0.0,0.5,1.0]",
    "evaluation.aopc_bins=[0.5]",
    "evaluation.schedules=[one_shot]",
    "evaluation.compare_random=false",
    "saliency=random",
    "data.eval_batch_size=128",
]
FINE_TUNING = re.compile(r"fine-tuning \S+ on \S+, seed")
REPAIR = re.compile(
    r"(dropped \d+ row\(s\) whose label|read \d+ number\(s\) in text column|merged labels that differ only)[^\n]*"
)
DAMAGED = re.compile(r"(cached checkpoint|stored result) \S+ is damaged[^\n]*")
FLAGGED = re.compile(r"faithfulness scores of this run MEAN NOTHING: [^\n]*")
REUSED = re.compile(r"(reusing fine-tuned checkpoint|skipping: a result for config hash) [^\n]*")


def write_data(folder: Path) -> dict[str, Path]:
    """The bad data files, from the shipped validation split (text, label 0/1)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = pd.read_csv(SHIPPED / "validation.csv", keep_default_na=False).head(200)[["text", "label"]]
    files = {}

    def csv(name, frame, **kw):
        files[name] = folder / f"{name}.csv"
        frame.to_csv(files[name], index=False, **kw)

    def jsonl(name, rows):
        files[name] = folder / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps(row) + "\n" for row in rows))

    frame = base.astype({"label": str})
    frame.loc[[3, 17, 42], "label"] = ""
    csv("blank_labels", frame)
    frame = base.astype({"label": str})
    frame.loc[[5, 9], "label"] = "NaN"
    csv("nan_labels", frame)
    frame = base.copy()
    frame["text"] = range(1000, 1000 + len(frame))
    csv("number_texts", frame)
    rows = base.to_dict("records")
    jsonl("mixed_labels", [{**r, "label": "positive" if i == 7 else r["label"]} for i, r in enumerate(rows)])
    jsonl("mixed_texts", [{**r, "text": 12345 if i == 11 else r["text"]} for i, r in enumerate(rows)])
    jsonl("null_labels", [{**r, "label": None if i in (2, 4) else r["label"]} for i, r in enumerate(rows)])
    train = pd.read_csv(SHIPPED / "train.csv", keep_default_na=False)[["text", "label"]]
    big = pd.concat([train, train]).head(10500).astype({"label": object})  # Arrow reads 10,000 rows per block
    big.iloc[10400:, big.columns.get_loc("label")] = "positive"
    csv("mixed_labels_late", big)
    csv("one_class", base.assign(label=1))
    frame = base.copy()
    frame.loc[[8], "text"] = "   "
    csv("blank_text", frame)
    files["empty"] = folder / "empty.csv"
    files["empty"].write_text("")
    files["excel"] = folder / "data.xlsx"
    files["excel"].write_bytes(b"PK\x03\x04")
    spellings = {0: ["neg", " neg", "NEG"], 1: ["pos", "pos ", "Pos"]}
    csv("label_variants", base.assign(label=[spellings[v][i % 3] for i, v in enumerate(base["label"])]))
    files["duplicated_header"] = folder / "duplicated_header.csv"
    base[["text", "text", "label"]].to_csv(files["duplicated_header"], index=False)  # header text,text,label
    files["latin1"] = folder / "latin1.csv"
    accented = base.assign(text=[t.replace("e", "\u00e9", 1) for t in base["text"]])
    files["latin1"].write_bytes(accented.to_csv(index=False).encode("latin-1", errors="replace"))
    files["folder"] = folder
    files["sweeps"] = folder.parent / "sweeps"
    whole = pd.read_csv(SHIPPED / "train.csv", keep_default_na=False)[["text", "label"]]
    for name, texts in (
        ("emoji", ["\U0001f600\U0001f600", "\U0001f44d", "\u2764\ufe0f \U0001f3ac", "\U0001f622"]),
        ("special_tokens", ["[CLS] [SEP]", "[UNK]", "[PAD] [MASK]", "[SEP]"]),
    ):
        split_folder = folder / f"{name}_test"
        split_folder.mkdir(exist_ok=True)
        whole.head(400).to_csv(split_folder / "train.csv", index=False)
        base.to_csv(split_folder / "validation.csv", index=False)
        pd.DataFrame({"text": texts * 5, "label": [0, 1] * 10}).to_csv(split_folder / "test.csv", index=False)
        files[f"{name}_test"] = split_folder
    files["empty_model"] = folder / "empty_model"
    files["empty_model"].mkdir(exist_ok=True)
    files["model_without_tokenizer"] = folder / "model_without_tokenizer"
    files["model_without_tokenizer"].mkdir(exist_ok=True)
    (files["model_without_tokenizer"] / "config.json").write_text('{"model_type": "bert"}\n')
    return files


def split_args(folder: Path, *extra: str) -> list[str]:
    """Per-split files ``train.csv``, ``validation.csv``, ``test.csv`` of ``folder``."""
    return ["dataset=csv", *(f"dataset.source.{s}={folder / s}.csv" for s in ("train", "validation", "test")), *extra]


def csv_args(path: Path, *extra: str) -> list[str]:
    return ["dataset=csv", f"dataset.source.path={path}", *extra]


def cases(files: dict[str, Path]) -> list[tuple[str, list[str], str]]:
    """``(name, arguments, expected)``; ``expected`` is ``error``, ``repair``, ``ok``, ``flagged`` (finishes with
    its scores flagged as meaningless) or ``train-error`` (train.py)."""
    f = files
    #: a single override, named by itself
    plain = [
        "evaluation.token_budget=0",
        "evaluation.token_budget=abc",
        "data.eval_batch_size=0",
        "data.num_workers=-1",
        "model.finetune.batch_size=0",
        "model.finetune.max_epochs=0",
        "trainer.max_epochs=0",
        "model.max_length=0",
        "evaluation.aopc_bins=[]",
        "evaluation.n_examples=0",
        "evaluation.subset_seed=-1",
        "evaluation.quantity=logits",
        "evaluation.steps=percent",
        "train.max_train_examples=0",
        "train.checkpoint_every_n_steps=0",
    ]
    return [(override, [override], "error") for override in plain] + [
        ("negative seed", ["seed=-1"], "error"),
        ("seed above NumPy's range", ["seed=4294967296"], "error"),
        ("seed not a number", ["seed=abc"], "error"),
        ("seed null", ["seed=null"], "error"),
        ("seed 1.5", ["seed=1.5"], "error"),
        ("train.py: negative seed", ["seed=-3"], "train-error"),
        ("train.py: batch size -4", ["model.finetune.batch_size=-4"], "train-error"),
        ("train.py: debug=smoke (an evaluate.py group)", ["debug=smoke"], "train-error"),
        ("negative learning rate", ["model.finetune.optimizer.learning_rate=-1e-5"], "error"),
        ("learning rate 0", ["model.finetune.optimizer.learning_rate=0"], "error"),
        ("warm-up ratio 1.5", ["model.finetune.optimizer.warmup_ratio=1.5"], "error"),
        ("negative weight decay", ["model.finetune.optimizer.weight_decay=-0.1"], "error"),
        ("model.max_length=1000 (> positions)", ["model.max_length=1000"], "error"),
        ("model.max_length=1 (< special tokens)", ["model.max_length=1"], "error"),
        ("AOPC bin off the grid", ["evaluation.aopc_bins=[0.33]"], "error"),
        ("fraction above 1", ["evaluation.fractions=[0.0,0.5,1.5]"], "error"),
        ("no fractions", ["evaluation.fractions=[]"], "error"),
        ("a list setting given one value (evaluation.fractions=0.1)", ["evaluation.fractions=0.1"], "error"),
        ("negative token count", ["evaluation.steps=count", "evaluation.counts=[-1,2]"], "error"),
        ("unknown schedule", ["evaluation.schedules=[one_shot,iterative]"], "error"),
        ("no schedules", ["evaluation.schedules=[]"], "error"),
        ("unknown target policy", ["evaluation.target=gloden"], "error"),
        ("target class 7 of 2", ["evaluation.target=7"], "error"),
        ("unknown split", ["evaluation.split=nope"], "error"),
        ("segment 1 of single texts", ["evaluation.segments=[1]"], "error"),
        ("saliency.n_steps=0", ["saliency=integrated_gradients", "saliency.n_steps=0"], "error"),
        (
            "saliency.internal_batch_size=0",
            ["saliency=integrated_gradients", "saliency.internal_batch_size=0"],
            "error",
        ),
        ("saliency.n_samples=0 (lime)", ["saliency=lime", "saliency.n_samples=0"], "error"),
        ("saliency.n_samples=-3 (kernel_shap)", ["saliency=kernel_shap", "saliency.n_samples=-3"], "error"),
        ("saliency.kernel_width=0 (lime)", ["saliency=lime", "saliency.kernel_width=0"], "error"),
        ("mlm_infill without an MLM head", ["masking=mlm_infill"], "error"),
        ("ood.knn_k=0", ["ood.enabled=true", "ood.knn_k=0"], "error"),
        ("unknown model", ["model=nonexistent"], "error"),
        ("missing local model directory", ["model.pretrained=./no-such-model"], "error"),
        ("validation share 0", csv_args(f["blank_text"], "dataset.source.validation_ratio=0"), "error"),
        ("test share 1.2", csv_args(f["blank_text"], "dataset.source.test_ratio=1.2"), "error"),
        (
            "several bad settings at once",
            ["model.finetune.batch_size=0", "evaluation.token_budget=-1", "seed=-2"],
            "error",
        ),
        ("CSV: blank labels", csv_args(f["blank_labels"]), "error"),
        (
            "CSV: blank labels, drop_missing_labels=true",
            csv_args(f["blank_labels"], "dataset.source.drop_missing_labels=true", *SMALL),
            "repair",
        ),
        ("CSV: labels written NaN", csv_args(f["nan_labels"]), "error"),
        ("JSONL: null labels", csv_args(f["null_labels"]), "error"),
        ("CSV: numbers in the text column", csv_args(f["number_texts"]), "error"),
        (
            "CSV: numbers as texts, convert_texts=true",
            csv_args(f["number_texts"], "dataset.source.convert_texts=true", *SMALL),
            "repair",
        ),
        ("JSONL: labels mix integers and words", csv_args(f["mixed_labels"]), "error"),
        ("JSONL: texts mix words and numbers", csv_args(f["mixed_texts"]), "error"),
        ("CSV: label kind changes after 10,000 rows", csv_args(f["mixed_labels_late"]), "error"),
        ("CSV: one class only", csv_args(f["one_class"]), "error"),
        ("CSV: a blank text", csv_args(f["blank_text"]), "error"),
        ("CSV: no such text column", csv_args(f["blank_text"], "dataset.source.text_column=review"), "error"),
        ("CSV: empty file", csv_args(f["empty"]), "error"),
        ("CSV: file does not exist", csv_args(f["empty"].with_name("nowhere.csv")), "error"),
        ("unsupported file type (.xlsx)", csv_args(f["excel"]), "error"),
        ("CSV: labels pos, 'pos ', Pos, neg, ' neg', NEG", csv_args(f["label_variants"]), "error"),
        (
            "CSV: label variants, merge_label_variants=true",
            csv_args(f["label_variants"], "dataset.source.merge_label_variants=true", *SMALL),
            "repair",
        ),
        ("CSV: header text,text,label", csv_args(f["duplicated_header"]), "error"),
        ("CSV: data path is a directory", csv_args(f["folder"]), "error"),
        ("CSV: Latin-1 file", csv_args(f["latin1"]), "error"),
        ("CSV: Latin-1 file, encoding=latin-1", csv_args(f["latin1"], "dataset.source.encoding=latin-1", *SMALL), "ok"),
        ("CSV: unknown encoding", csv_args(f["latin1"], "dataset.source.encoding=latin-9x"), "error"),
        ("CSV: test texts only emoji", split_args(f["emoji_test"], *SMALL), "error"),
        ("CSV: test texts only special tokens", split_args(f["special_tokens_test"], *SMALL), "error"),
        ("empty model.pretrained folder", [f"model.pretrained={f['empty_model']}"], "error"),
        ("model.pretrained folder without tokenizer", [f"model.pretrained={f['model_without_tokenizer']}"], "error"),
        # issue 25: repeated or unordered list items, timeouts, sampling methods' samples, DDP, launchers
        ("AOPC bins [0.5,0.5]", ["evaluation.aopc_bins=[0.5,0.5]"], "error"),
        ("AOPC bins [0.5,0.1] (not ascending)", ["evaluation.aopc_bins=[0.5,0.1]"], "error"),
        ("schedules [one_shot,one_shot]", ["evaluation.schedules=[one_shot,one_shot]"], "error"),
        ("fractions [0,1,0.5] (not ascending)", ["evaluation.fractions=[0.0,1.0,0.5]"], "error"),
        ("fractions with 0.5 twice", ["evaluation.fractions=[0.0,0.5,0.5,1.0]"], "error"),
        ("counts [0,2,1] (not ascending)", ["evaluation.steps=count", "evaluation.counts=[0,2,1]"], "error"),
        ("segments [0,0]", ["evaluation.segments=[0,0]"], "error"),
        ("analyses [ood,ood]", ["analyses=[ood,ood]"], "error"),
        ("ood.plots.umap_fractions [0.5,0.1]", ["ood.plots.umap_fractions=[0.5,0.1]"], "error"),
        ("logger.init_timeout=-5 (W&B)", ["logger=wandb", "logger.init_timeout=-5"], "error"),
        ("logger.init_timeout=0 (W&B)", ["logger=wandb", "logger.init_timeout=0"], "error"),
        ("cache_lock_timeout=0", ["cache_lock_timeout=0"], "error"),
        ("cache_lock_timeout=-1", ["cache_lock_timeout=-1"], "error"),
        ("threads=0", ["threads=0"], "error"),
        ("threads=-2", ["threads=-2"], "error"),
        ("job_devices=[0,0]", ["job_devices=[0,0]"], "error"),
        ("saliency.n_samples=1 (lime)", ["saliency=lime", "saliency.n_samples=1"], "error"),
        ("saliency.n_samples=2 (kernel_shap)", ["saliency=kernel_shap", "saliency.n_samples=2"], "error"),
        ("trainer.strategy=ddp_spawn", ["trainer.strategy=ddp_spawn"], "error"),
        ("trainer.devices=abc", ["trainer.devices=abc"], "error"),
        (
            "DDP in a multirun (-m trainer=ddp)",
            ["-m", "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", f"hydra.sweep.dir={f['sweeps']}/ddp"],
            "error",
        ),
        ("cache_dir is a file", [f"cache_dir={f['empty']}", *SMALL], "error"),
        ("unquoted non-ASCII path", ["dataset=csv", f"dataset.source.path={f['folder']}/donn\u00e9es.csv"], "error"),
        (
            "trainer.strategy=ddp without trainer=ddp (one CPU process)",
            ["trainer.strategy=ddp", "trainer.accelerator=cpu", *SMALL],
            "ok",
        ),
        ("learning rate 1000 (meaningless model)", [*SMALL, "model.finetune.optimizer.learning_rate=1000"], "flagged"),
        # flagged (exit 0) until stop 53; refused since: a subset of one class cannot be fine-tuned on
        ("train.max_train_examples=1 (one example)", [*SMALL, "train.max_train_examples=1"], "error"),
        # stop 49's new-user review
        ("dataset.source.name=bogus (shipped data)", ["dataset.source.name=bogus"], "error"),
        ("misspelt group saliancy=gradient", ["saliancy=gradient"], "error"),
        ("misspelt section evalution.n_examples=5", ["evalution.n_examples=5"], "error"),
        ("mistyped key added with +evaluation.n_exampels=5", ["+evaluation.n_exampels=5"], "error"),
        ("CSV: no such file (relative path)", ["dataset=csv", "dataset.source.path=nonexist.csv"], "error"),
        ("hub model without the hub (model=roberta)", ["model=roberta"], "error"),
        ("hub dataset without the hub (dataset=sst2)", ["dataset=sst2"], "error"),
        # stop 53's new-user review
        (
            "train.max_train_examples=2, a subset of one class (seed 2)",
            [*SMALL, "seed=2", "train.max_train_examples=2"],
            "error",
        ),
        ("model.pretrained= (empty)", ["model.pretrained="], "error"),
        ("model.pretrained is a file", [f"model.pretrained={f['empty']}"], "error"),
        ("two saliency methods as a list (saliency=[gradient,occlusion])", ["saliency=[gradient,occlusion]"], "error"),
        ("experiment=paper seed= (empty seed)", ["experiment=paper", "seed="], "error"),
    ]


def run(script: str, args: list[str], work: Path, env: dict, timeout: int, command: list[str] | None = None) -> dict:
    """Run ``script`` with ``args`` in its own output folder (or ``command`` as it is); what happened."""
    work.mkdir(parents=True, exist_ok=True)
    start = time.time()
    logger = [] if any(a.startswith("logger=") for a in args) else ["logger=csv"]
    try:
        out = subprocess.run(
            command or [sys.executable, script, *args, *logger, f"hydra.run.dir={work}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        rc, text = out.returncode, out.stdout + out.stderr
    except subprocess.TimeoutExpired as error:
        rc, text = "timeout", (error.stdout or b"").decode() + (error.stderr or b"").decode()
    seconds = time.time() - start
    (work / "console.txt").write_text(text)
    return {
        "rc": rc,
        "seconds": round(seconds, 1),
        "fine_tuning_started": bool(FINE_TUNING.search(text)),
        "message": message(text, rc),
        "console": str(work / "console.txt"),
    }


def message(text: str, rc) -> str:
    """The error the user reads (Hydra's composition error spans two lines), or on success the repair or
    damage warning that was logged."""
    if rc == 0:
        notes = [match.group(0) for pattern in (REPAIR, DAMAGED, FLAGGED) for match in pattern.finditer(text)]
        done = [line for line in text.splitlines() if line.startswith("finished: ")]  # a facade snippet's
        return " | ".join(done[-1:] + notes) or "(no error)"
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith("Set the environment variable HYDRA_FULL_ERROR")
    ]
    for i, line in enumerate(lines):
        if line.startswith(("Error merging override", "Could not override")) or "Could not find" in line:
            return " ".join(lines[i : i + 2])
    if hints := [line for line in lines if line.startswith("hint: ")]:  # the entry points' check before Hydra
        return " ".join(hints)
    # a bad setting of a single run: one message, "bad setting: ..." (itermask.problems.ConfigError)
    errors = [i for i, line in enumerate(lines) if line.startswith("bad setting: ")]
    errors = errors or [i for i, line in enumerate(lines) if re.match(r"^[\w.]*(Error|Exception)\b.*?:", line)]
    if not errors:
        return lines[-1] if lines else ""
    last = lines[errors[-1]]
    if count := re.search(r"(\d+) invalid settings:$", last):  # a SettingsError lists one problem per line
        last += " " + "; ".join(lines[errors[-1] + 1 : errors[-1] + 1 + int(count.group(1))])
    return re.sub(r"^[\w.]+\.(\w+(Error|Exception))", r"\1", last)


def cache_cases() -> list[tuple[str, str, str]]:
    """``(name, file under the cache, damage)``: the stored result, then the checkpoint's files."""
    return [
        ("stored result cut in half", "result", "cut"),
        ("stored result emptied", "result", "empty"),
        ("stored result zeroed", "result", "zero"),
        ("checkpoint weights cut in half", "model/model.safetensors", "cut"),
        ("checkpoint weights deleted", "model/model.safetensors", "delete"),
        ("checkpoint weights: 64 bytes zeroed", "model/model.safetensors", "zero"),
        ("checkpoint config cut in half", "model/config.json", "cut"),
        ("checkpoint config deleted", "model/config.json", "delete"),
        ("checkpoint meta.json cut in half", "meta.json", "cut"),
    ]


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "cut":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "delete":
        path.unlink()
    elif how == "zero":
        start = min(len(data) // 2, max(len(data) - 64, 0))
        path.write_bytes(data[:start] + bytes(64) + data[start + 64 :])


def run_cache_cases(out: Path, env: dict, timeout: int) -> list[dict]:
    """One small run fills a cache; each case copies it, damages one file and runs the same job again (with
    ``reuse_results=false`` for the checkpoint cases, which the stored result would otherwise short-cut)."""
    pristine = out / "caches" / "pristine"
    first = run("evaluate.py", SMALL, out / "caches" / "first", {**env, "ITERMASK_CACHE": str(pristine)}, timeout)
    rows = [{"case": "cache: first run (fills the cache)", "expected": "ok", **first}]
    for name, target, how in cache_cases():
        cache = out / "caches" / name.replace(" ", "_").replace(":", "")
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(pristine, cache)
        if target == "result":
            path = next((cache / "results").glob("*.json"))
            args = SMALL
        else:
            path = next(p for p in cache.iterdir() if (p / "meta.json").is_file()) / target
            args = [*SMALL, "reuse_results=false"]
        damage(path, how)
        row = run(
            "evaluate.py", args, cache.with_name(cache.name + "-run"), {**env, "ITERMASK_CACHE": str(cache)}, timeout
        )
        rows.append({"case": f"cache: {name}", "expected": "recompute", **row})
    return rows


def run_stale_temporary_case(out: Path, env: dict, timeout: int) -> dict:
    """A Parquet write killed mid-way leaves its 0-byte temporary file in the job folder (the name written
    before temporaries carried host and process id, and one of a process that has exited); the re-run's
    write of the tables removes them. The row's message says how many were left after the run."""
    work = out / "runs" / "stale_temporaries"
    shutil.rmtree(work, ignore_errors=True)
    folder = work / "per_example"
    folder.mkdir(parents=True)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    host = socket.gethostname().replace(".", "_")
    planted = [folder / ".steps.parquet.k2j4l5.tmp", folder / f".scores.parquet.{host}.{child.pid}.x1y2z3.tmp"]
    for path in planted:
        path.write_bytes(b"")
    row = run("evaluate.py", SMALL, work, {**env, "ITERMASK_CACHE": str(out / "cache" / "stale_temporaries")}, timeout)
    left = [path.name for path in planted if path.exists()]
    row["message"] = f"{row['message']} / {len(left)} of {len(planted)} stale temporaries left {left}"
    return {"case": "killed Parquet write: stale temporaries in the job folder", "expected": "ok", **row}


def run_path_spelling_case(out: Path, env: dict, timeout: int) -> dict:
    """A CSV given first by a relative and then by an absolute path, in one cache: the second run reuses the
    first's checkpoint (the keys hash the file's contents, never its path's spelling)."""
    data = out / "data" / "spelling"
    data.mkdir(parents=True, exist_ok=True)
    base = pd.read_csv(SHIPPED / "train.csv", keep_default_na=False)[["text", "label"]].head(400)
    base.to_csv(data / "d.csv", index=False)
    cache = {**env, "ITERMASK_CACHE": str(out / "cache" / "spelling")}
    shutil.rmtree(out / "cache" / "spelling", ignore_errors=True)
    relative = os.path.relpath(data / "d.csv", ROOT)
    first = run("evaluate.py", csv_args(Path(relative), *SMALL), out / "runs" / "spelling_relative", cache, timeout)
    second = run("evaluate.py", csv_args(data / "d.csv", *SMALL), out / "runs" / "spelling_absolute", cache, timeout)
    text = Path(second["console"]).read_text()
    reused = REUSED.search(text)
    entries = [p for p in (out / "cache" / "spelling").iterdir() if p.is_dir() and p.name != "results"]
    second["message"] = (
        f"first run (dataset.source.path={relative}): rc {first['rc']}, fine-tuned: {first['fine_tuning_started']}; "
        f"second (absolute path): {reused.group(0) if reused else 'NOT reused: fine-tuned again'}; "
        f"{len(entries)} checkpoint(s) in the cache"
    )
    return {"case": "CSV by a relative, then an absolute path (one cache)", "expected": "reuse", **second}


def run_new_case(i: int, case: tuple, out: Path, env: dict, timeout: int) -> dict:
    """One case of :mod:`bad_input_cases` (issue 36), with its class (:func:`bad_input_cases.verdict`)."""
    name, kind, args, expected = case
    work = out / "runs" / f"new{i}"
    command = {
        "python": [sys.executable, "-c", *args],
        "reporting": [sys.executable, "-m", "itermask.reporting", *args],
    }.get(kind)
    script = "pretrain.py" if kind == "pretrain" else "evaluate.py"
    row = {"case": name, "expected": expected, **run(script, args, work, env, timeout, command)}
    row["class"] = more.verdict(row, Path(row["console"]).read_text())
    return row


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table, every cell escaped (a hostile label in a message must not become a tag in
    the docs site)."""
    from itermask.formatting import md_table

    header = ["#", "input", "expected", "class", "exit code", "seconds", "fine-tuning started", "message"]
    return (
        md_table(
            header,
            [
                [i, r["case"], r["expected"], r.get("class", ""), r["rc"], r["seconds"]]
                + ["yes" if r["fine_tuning_started"] else "no", r["message"][:400]]
                for i, r in enumerate(rows, 1)
            ],
        )
        + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/itermask-bad-inputs"))
    parser.add_argument("--only", nargs="*", help="run only the cases whose name contains one of these")
    parser.add_argument("--skip-caches", action="store_true", help="skip the damaged-cache cases")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per run")
    parser.add_argument(
        "--update",
        action="store_true",
        help="replace the rows of the cases run in <out>/bad_inputs.json, keep the others",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "offline",
        "HYDRA_FULL_ERROR": "0",
        "PYTHONPATH": str(ROOT / "src"),
    }
    files = write_data(args.out / "data")
    rows = []
    for i, (name, case_args, expected) in enumerate(cases(files)):
        if args.only and not any(word in name for word in args.only):
            continue
        script = "train.py" if expected == "train-error" else "evaluate.py"
        env_case = {**env, "ITERMASK_CACHE": str(args.out / "cache" / str(i))}
        row = {
            "case": name,
            "expected": "error" if expected == "train-error" else expected,
            **run(script, case_args, args.out / "runs" / str(i), env_case, args.timeout),
        }
        rows.append(row)
        print(
            f"{row['rc']!s:>7} {row['seconds']:6.1f}s ft={row['fine_tuning_started']!s:5} {name}: "
            f"{row['message'][:160]}",
            flush=True,
        )
    new_files = more.write_files(args.out / "data", SHIPPED)
    for i, case in enumerate(more.cases(new_files, args.out / "sweeps")):
        if args.only and not any(word in case[0] for word in args.only):
            continue
        row = run_new_case(
            i, case, args.out, {**env, "ITERMASK_CACHE": str(args.out / "cache" / f"new{i}")}, args.timeout
        )
        rows.append(row)
        print(
            f"{row['rc']!s:>7} {row['seconds']:6.1f}s {row['class']:15} {case[0]}: {row['message'][:160]}", flush=True
        )
    if not args.only or any(word in "killed Parquet write: stale temporaries" for word in args.only):
        row = run_stale_temporary_case(args.out, env, args.timeout)
        rows.append(row)
        print(
            f"{row['rc']!s:>7} {row['seconds']:6.1f}s ft={row['fine_tuning_started']!s:5} {row['case']}: "
            f"{row['message'][:160]}",
            flush=True,
        )
    if not args.only or any(word in "CSV by a relative, then an absolute path" for word in args.only):
        row = run_path_spelling_case(args.out, env, args.timeout)
        rows.append(row)
        print(
            f"{row['rc']!s:>7} {row['seconds']:6.1f}s ft={row['fine_tuning_started']!s:5} {row['case']}: "
            f"{row['message'][:160]}",
            flush=True,
        )
    if not args.skip_caches and not args.only:
        for row in run_cache_cases(args.out, env, args.timeout):
            rows.append(row)
            print(
                f"{row['rc']!s:>7} {row['seconds']:6.1f}s ft={row['fine_tuning_started']!s:5} {row['case']}: "
                f"{row['message'][:160]}",
                flush=True,
            )
    load = os.getloadavg()
    if args.update and (args.out / "bad_inputs.json").is_file():
        new = {row["case"]: row for row in rows}
        old = json.loads((args.out / "bad_inputs.json").read_text())["rows"]
        rows = [new.pop(row["case"], row) for row in old] + list(new.values())
    (args.out / "bad_inputs.json").write_text(json.dumps({"load_average": load, "rows": rows}, indent=2))
    (args.out / "bad_inputs.md").write_text(
        f"Load average at the end: {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}\n\n" + table(rows)
    )
    print(args.out / "bad_inputs.md")


if __name__ == "__main__":
    main()
