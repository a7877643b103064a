"""Exact resume of continued MLM pretraining through ``pretrain.py``: an uninterrupted run, a run killed (SIGKILL)
right after it wrote its first ``last.ckpt`` and run again, and a run killed while exporting the encoder (after its
``model/`` folder is written, before the checkpoints are deleted and ``meta.json`` finishes the entry) and run
again. Prints, per run, the max |weight difference| of the exported encoder to the uninterrupted one, the held-out
masked-token accuracies, the step it resumed from and the wall time, as JSON; exits 1 unless every difference is 0.

    python bench/pretrain_resume.py --out /tmp/pretrain-resume model=minilm_cda model.pretrain.head_steps=4 \\
        model.pretrain.joint_steps=16 model.pretrain.batch_size=4 model.pretrain.max_length=32

The arguments after ``--out`` are ``pretrain.py`` overrides. The kills are SIGKILLs the process sends itself from
a wrapper of Lightning's checkpoint write or of the cache's model write, so each lands at the same point every time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[1]

#: ``python -c KILLER <point> <overrides>``: pretrain.py, killed by SIGKILL right after ``point`` is written
KILLER = """
import os, runpy, signal, sys
point = sys.argv.pop(1)
if point == "checkpoint":
    from pytorch_lightning.callbacks import ModelCheckpoint as owner; name = "_save_checkpoint"
else:
    from itermask.storage.cache import CheckpointCache as owner; name = "write_model"
original = getattr(owner, name)
def killed_after(*args, **kwargs):
    original(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
setattr(owner, name, killed_after)
sys.argv[0] = "pretrain.py"
runpy.run_path("pretrain.py", run_name="__main__")
"""


def _run(cache: Path, overrides: list[str], kill: str | None = None) -> float:
    """Run ``pretrain.py`` with ``cache`` (killed after ``kill`` when given); returns its wall seconds."""
    command = [sys.executable, *(["-c", KILLER, kill] if kill else ["pretrain.py"])]
    command += [f"cache_dir={cache}", f"hydra.run.dir={cache}/run-{kill or 'plain'}", "logger=csv", *overrides]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True)
    expected = -signal.SIGKILL if kill else 0
    if done.returncode != expected:
        raise SystemExit(f"{' '.join(command[-len(overrides) :])}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def _entry(cache: Path) -> Path:
    (entry,) = [p for p in (cache / "pretrain").iterdir() if p.is_dir()]
    return entry


def scenarios(out: Path, overrides: list[str]) -> dict:
    """The three runs under ``out`` (one cache folder each); per run its numbers (see the module docstring)."""
    results, reference = {}, None
    for name, kill in (("uninterrupted", None), ("killed_at_checkpoint", "checkpoint"), ("killed_in_export", "model")):
        cache = out / name
        seconds = 0.0
        if kill:
            seconds += _run(cache, overrides, kill)
            entry = _entry(cache)
            assert (entry / "checkpoints" / "last.ckpt").is_file() and not (entry / "meta.json").exists(), name
        seconds += _run(cache, overrides)
        meta = json.loads((_entry(cache) / "meta.json").read_text())
        weights = load_file(str(_entry(cache) / "model" / "model.safetensors"))
        reference = reference or weights
        assert weights.keys() == reference.keys(), name
        difference = max(float((weights[k].double() - reference[k].double()).abs().max()) for k in weights)
        results[name] = {
            "max_abs_weight_difference": difference,
            "bit_identical": all(torch.equal(weights[k], reference[k]) for k in weights),
            "mlm_acc_head_only": meta["mlm_acc_head_only"],
            "mlm_acc_joint": meta["mlm_acc_joint"],
            "heldout_masked_tokens": meta["heldout_masked_tokens"],
            "resumed_from_step": (meta["resumed"] or {}).get("global_step"),
            "wall_seconds": round(seconds, 1),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="an empty folder for the three caches")
    args, overrides = parser.parse_known_args()
    results = scenarios(args.out, overrides)
    print(json.dumps(results, indent=2))
    sys.exit(0 if all(r["bit_identical"] for r in results.values()) else 1)


if __name__ == "__main__":
    main()
