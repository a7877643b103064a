"""Where the time of a multirun went, stage by stage, from its jobs' files (issue 34: the preset's time per stage).

    python bench/preset_stages.py <sweep folder> [<sweep folder> ...] [--markdown]

One row per finished job (``<job>/results.json``), in job order: its model, method and fine-tuning variant, then
the seconds of each stage as the job recorded them:

- ``pretrain``: the continued pretraining this job ran (its log's "continued MLM pretraining of ... -> <folder>",
  ``pretrain_seconds`` of ``<folder>/meta.json``);
- ``fine-tune``: the checkpoint's ``train_seconds`` (``<cache>/<checkpoint_key>/meta.json``) where this job
  fine-tuned it, blank where its log says it reused one ("reusing fine-tuned checkpoint");
- ``naopc bounds`` / ``naopc``: the bounds' own seconds where this job searched them (blank: reused), and the
  whole analysis;
- ``ffid copy`` / ``ffidelity``: the copy's fine-tuning where this job ran it, and the whole analysis;
- ``sanity``, ``removal ref``, ``attack``, ``ood``: each analysis's seconds (blank: off; ``ood``: its fit and
  scoring);
- ``rest``: the job's ``seconds`` less the above (data, saliency, the masking curves, the measures, writing);
- ``job``: ``seconds`` in ``results.json`` (from the job's start, fine-tuning included).

A job reused from an earlier multirun (``reuse_results``) keeps its first run's numbers; its folder here holds
a copy. Every continued pretraining in the caches is listed below the table. Wall times of whole commands are
measured outside (``/usr/bin/time``).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

COLUMNS = (
    "pretrain", "fine-tune", "naopc bounds", "naopc", "ffid copy", "ffidelity", "sanity", "removal ref",
    "attack", "ood",
)  # fmt: skip


def _seconds(section: object, *path: str) -> float:
    """``section[path...]`` as a float, NaN where absent."""
    for key in path:
        if not isinstance(section, dict) or key not in section:
            return math.nan
        section = section[key]
    return float(section) if isinstance(section, (int, float)) else math.nan


def _own(analysis: dict, part: str) -> float:
    """The seconds of an analysis's once-per-checkpoint ``part`` where this job ran it (NaN where reused)."""
    return math.nan if (analysis.get(part) or {}).get("reused", True) else _seconds(analysis, part, "seconds")


def job_row(path: Path) -> dict:
    """The stages of one job's ``results.json`` at ``path``."""
    r = json.loads(path.read_text())
    train = r["config"].get("train", {})
    variant = "masked" if train.get("masking_augmentation", {}).get("enabled") else "standard"
    variant = "adversarial" if train.get("adversarial_augmentation", {}).get("enabled") else variant
    meta = Path(r["config"]["cache_dir"]) / str(r.get("checkpoint_key")) / "meta.json"
    log = path.parent / f"{r.get('task', 'evaluate')}.log"
    text = log.read_text(errors="replace") if log.is_file() else ""
    ran = log.is_file() and "reusing fine-tuned checkpoint" not in text
    pretrained = re.search(r"continued MLM pretraining of .* -> (\S+)", text)
    pretrain_meta = Path(pretrained.group(1)) / "meta.json" if pretrained else None
    fine_tune = (
        json.loads(meta.read_text()).get("train_seconds") if r.get("fine_tuned") and ran and meta.is_file() else None
    )
    naopc, ffid = r.get("naopc") or {}, r.get("ffidelity") or {}
    stages = {
        "pretrain": json.loads(pretrain_meta.read_text())["pretrain_seconds"]
        if pretrain_meta is not None and pretrain_meta.is_file()
        else math.nan,
        "fine-tune": math.nan if fine_tune is None else float(fine_tune),
        "naopc bounds": _own(naopc, "bounds"),
        "naopc": _seconds(naopc, "seconds"),
        "ffid copy": _own(ffid, "fine_tune"),
        "ffidelity": _seconds(ffid, "seconds"),
        "sanity": _seconds(r.get("sanity"), "cost", "seconds"),
        "removal ref": _seconds(r.get("removal_reference"), "seconds"),
        "attack": _seconds(r.get("attack"), "seconds"),
        "ood": sum((r.get("ood") or {}).get("seconds", {}).values()) if r.get("ood") else math.nan,
    }  # fmt: skip
    # the bounds and the copy are inside their analyses' seconds; pretraining and fine-tuning are in no analysis
    inside = [k for k in COLUMNS if k not in ("naopc bounds", "ffid copy")]
    rest = float(r["seconds"]) - sum(v for k, v in stages.items() if k in inside and math.isfinite(v))
    return {
        "job": path.parent.name,
        "model": r["model"],
        "method": r["saliency"]["name"] if isinstance(r["saliency"], dict) else r["saliency"],
        "variant": variant,
        "seed": r["seed"],
        **stages,
        "rest": rest,
        "seconds": float(r["seconds"]),
    }


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "" if not math.isfinite(value) else f"{value:,.0f}"
    return str(value)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sweeps", nargs="+", type=Path)
    args = parser.parse_args(argv)
    header = ["sweep", "job", "model", "method", "variant", "seed", *COLUMNS, "rest", "job seconds"]
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join(["---"] * 6 + ["---:"] * (len(header) - 6)) + " |")
    totals: dict[object, dict[str, float]] = {}  # "sum" and each seed's
    caches = set()
    for sweep in args.sweeps:
        paths = sorted(sweep.glob("*/results.json"), key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
        for path in paths:
            row = job_row(path)
            caches.add(Path(json.loads(path.read_text())["config"]["cache_dir"]))
            for total in (totals.setdefault("sum", {}), totals.setdefault(("seed", row["seed"]), {})):
                for key in (*COLUMNS, "rest", "seconds"):
                    if math.isfinite(row[key]):
                        total[key] = total.get(key, 0.0) + row[key]
            print("| " + " | ".join(_cell(v) for v in (sweep.name, *row.values())) + " |")
    seeds = sorted((k for k in totals if k != "sum"), key=str)
    for name in [*(seeds if len(seeds) > 1 else []), "sum"]:  # a reused job keeps its first run's seconds
        label = "**sum**" if name == "sum" else f"**seed {name[1]}**"
        cells = " | ".join(_cell(totals[name].get(k, math.nan)) for k in (*COLUMNS, "rest", "seconds"))
        print(f"| {label} | | | | | | {cells} |")
    for cache in sorted(caches):
        for meta in sorted((cache / "pretrain").glob("*/meta.json")):
            m = json.loads(meta.read_text())
            seconds = {k: v for k, v in m.items() if "second" in k and isinstance(v, (int, float))}
            print(f"continued pretraining {meta.parent.name}: {seconds}")


if __name__ == "__main__":
    main()
