"""How different the paper preset's three encoders are (issue 34), measured as its report measures them: linear
CKA per layer of the mean-pooled hidden states on the first ``--texts`` test texts, and the relative distance of
the encoder parameters (:func:`itermask.core.similarity.encoder_similarity` through
:func:`itermask.studies.robust_infidelity.encoders.pooled_states`), for every pair of ``minilm`` (the packaged
MiniLM), ``minilm_mlm`` and ``minilm_cda`` (their continued pretraining, run first when not cached), with each
pretraining's held-out masked-token accuracy before and after and its wall time (from its ``meta.json``).

    python bench/encoder_similarity.py [--texts 256] [--threads 2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from itermask.core.similarity import encoder_similarity
from itermask.models.loading import resolve_pretrained
from itermask.settings import build, plain
from itermask.storage.keys import Fingerprint
from itermask.studies.robust_infidelity.encoders import pooled_states
from itermask.training.pretraining import pretrain_settings

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("minilm", "minilm_mlm", "minilm_cda")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    folders, texts, max_length = {}, None, 64
    for model in MODELS:
        with initialize_config_dir(config_dir=str(ROOT / "src" / "itermask" / "conf"), version_base="1.3"):
            config = plain(compose("train", overrides=["output_dir=/tmp/unused", f"model={model}"]))
        source = build(config["dataset"]["source"], "dataset.source")
        base = resolve_pretrained(config["model"]["pretrained"])
        max_length = int(config["model"]["max_length"])
        if texts is None:
            texts = [str(t) for t in list(source.load().splits["test"]["text"])[: args.texts]]
        if config["model"].get("pretrain") is None:
            folders[model] = base
            continue
        settings = pretrain_settings(config, Fingerprint.of(source, config["model"]["pretrained"]), source, base)
        if not (settings.entry / "meta.json").is_file():
            subprocess.run([sys.executable, str(ROOT / "pretrain.py"), f"model={model}", "logger=csv"], check=True)
        meta = json.loads((settings.entry / "meta.json").read_text())
        print(
            f"{model}: {meta['corpus_texts']} texts, {meta.get('head_steps')} + {meta.get('joint_steps')} steps, "
            f"{meta['pretrain_seconds']:.0f} s; held-out masked-token accuracy {meta['mlm_acc_head_only']:.4f} "
            f"(head alone) -> {meta['mlm_acc_joint']:.4f} (joint), {meta['heldout_masked_tokens']} tokens"
        )
        folders[model] = str(settings.output)
    assert texts is not None
    states = {m: pooled_states(folder, texts, max_length) for m, folder in folders.items()}
    print(f"\nlinear CKA per layer (embeddings, then layers 1-6) on the first {len(texts)} test texts")
    for a, b in itertools.combinations(MODELS, 2):
        result = encoder_similarity(states[a][0], states[b][0], states[a][1], states[b][1])
        cka = " ".join(f"{c:.4f}" for c in result.cka)
        print(f"{a} vs {b}: relative parameter distance {result.parameter_distance:.4f}; CKA {cka}")


if __name__ == "__main__":
    main()
