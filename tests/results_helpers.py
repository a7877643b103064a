"""Constructed results files and multirun folders for the reporting, tracking and integration tests."""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from itermask.storage.files import write_json_atomic
from itermask.storage.keys import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[1]


def _mean_std(values):
    n = len(values)
    mean = sum(values) / n
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


# -- hand-made result files ---------------------------------------------------------------------------


def make_result(
    seed,
    model="m",
    accuracy=0.8,
    aopc=0.1,
    random_aopc=0.05,
    fractions=(0.0, 0.5, 1.0),
    curve=None,
    saliency="gradient",
    masking="mask_token",
    n_examples=8,
    validation=None,
):
    """A results.json dict of the shape pipeline.run_evaluate writes, with chosen scores."""
    curve = list(curve if curve is not None else [0.9, 0.6 - aopc, 0.5])

    def summary(a, one_shot):
        out = {
            "n_examples": n_examples,
            "quantity": "probability",
            "steps": "fraction",
            "x": list(fractions),
            "fraction": list(fractions),
            "mean_k": [0.0, 3.0, 6.0],
            "target_prob": curve,
            "accuracy": [1.0, 0.5, 0.5],
            "flip_rate": [0.0, 0.25, 0.5],
            "comprehensiveness_prob": [0.0, a, 2 * a],
            "aopc_comprehensiveness_prob": a,
            "auc_prob": 0.6 - a,
            "first_flip_fraction": None,
            "never_flip_rate": 0.5,
        }
        if one_shot:
            out.update(sufficiency_prob=[0.1, 0.05, 0.0], aopc_sufficiency_prob=a / 2)
        return out

    scores = {saliency: {"one_shot": summary(aopc, True), "recursive": summary(aopc, False)}}
    scores["random"] = {"one_shot": summary(random_aopc, True), "recursive": summary(random_aopc, False)}
    config = {
        "task_name": "evaluate",
        "seed": seed,
        "output_dir": f"/somewhere/{seed}",
        "cache_dir": "/cache",
        "model": {"name": model, "pretrained": f"hub/{model}", "max_length": 64},
        "dataset": {"name": "d", "source": {"_target_": "x"}},
        "saliency": {"name": saliency},
        "masking": {"name": masking},
        "evaluation": {"n_examples": n_examples, "fractions": list(fractions), "token_budget": 8192},
        "logger": {"_target_": "pytorch_lightning.loggers.CSVLogger"},
        "train": {"max_train_examples": 100},
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "task": "evaluate",
        "seed": seed,
        "model": model,
        "dataset": "d",
        "n_evaluated": n_examples,
        "n_skipped_no_maskable": 0,
        "saliency": {"name": saliency, "output": "probability", "absolute": False},
        "masking": masking,
        "accuracy": {
            "test": accuracy,
            "validation": validation if validation is not None else accuracy - 0.01,
            "majority_class_test": 0.57,
        },
        "scores": scores,
        "relative_to_random": {
            "one_shot": {"aopc_comprehensiveness_prob": aopc - random_aopc},
            "recursive": {"aopc_comprehensiveness_prob": aopc - random_aopc},
        },
        "config": config,
    }


def write_sweep(root: Path, results, overrides=None):
    """Job folders 0, 1, ... with results.json and .hydra/overrides.yaml, like a Hydra multirun."""
    for i, result in enumerate(results):
        job = root / str(i)
        (job / ".hydra").mkdir(parents=True)
        ov = overrides[i] if overrides else [f"seed={result['seed']}"]
        (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(ov))
        if result is not None:
            write_json_atomic(job / "results.json", result)
    return root


def unpadded(text: str) -> str:
    """``text`` with the column padding of its Markdown tables (pandas' ``to_markdown`` pads every cell to its
    column's width) collapsed to one space on each side of a cell divider, so a row reads ``| a | b |``; escaped
    pipes (``\\|``) inside a cell are left alone."""
    import re

    return "\n".join(
        re.sub(r" *(?<!\\)\| *", " | ", line).strip() if line.startswith("|") else line for line in text.split("\n")
    )
