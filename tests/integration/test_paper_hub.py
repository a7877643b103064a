"""experiment=paper_hub end to end, offline, through the same preset a user with internet runs.

The hub's models (roberta-base, facebook/FairBERTa, bert-large-uncased, fairnlp/bert-cda) are replaced by
tiny random models saved with ``save_pretrained`` into an offline Hugging Face hub cache (``HF_HUB_CACHE``,
the layout ``huggingface_hub`` reads with ``HF_HUB_OFFLINE=1``): a RoBERTa with a byte-level BPE tokenizer
and a BERT with a WordPiece tokenizer, both trained here on the shipped text (tests/conftest.py). So the
configs are exactly the user's: no ``model.pretrained`` override at all (one override could not give the
RoBERTa pair and the BERT pair of one multirun their own folders). Only sizes are overridden: seeds,
evaluation examples, training examples and the OOD fit set."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import build_tiny_classifier
from results_helpers import unpadded

ROOT = Path(__file__).resolve().parents[2]
HUB = {
    "roberta-base": "roberta",
    "facebook/FairBERTa": "roberta",
    "bert-large-uncased": "bert",
    "fairnlp/bert-cda": "bert",
}
SIZES = [
    "seed=0",
    "evaluation.n_examples=4",
    "train.max_train_examples=32",
    "model.finetune.max_epochs=1",
    "model.max_length=32",
    "+trainer.limit_val_batches=1",
    "ood.n_fit_examples=20",
    "data.eval_batch_size=512",
]


def offline_hub(cache: Path, tokenizers: dict) -> Path:
    """Tiny models under the hub ids of ``HUB`` in an offline hub cache at ``cache``."""
    commit = "0" * 40
    for seed, (repo, architecture) in enumerate(HUB.items()):
        folder = cache / f"models--{repo.replace('/', '--')}"
        snapshot = folder / "snapshots" / commit
        snapshot.mkdir(parents=True)
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_text(commit)
        tokenizer = tokenizers[architecture]
        model: Any = build_tiny_classifier(architecture, tokenizer, seed=seed)  # a transformers model
        model.save_pretrained(snapshot)
        tokenizer.save_pretrained(snapshot)
    return cache


@pytest.mark.slow
def test_paper_hub_preset_offline(tmp_path, architecture_tokenizers):
    hub = offline_hub(tmp_path / "hub", architecture_tokenizers)
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(hub),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "ITERMASK_CACHE": str(tmp_path / "cache"),
    }
    sweep = tmp_path / "multi"
    args = ["evaluate.py", "-m", "experiment=paper_hub", f"hydra.sweep.dir={sweep}", *SIZES]
    out = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    # 4 models x 3 methods, plus roberta masked and adversarial (one seed); the standard roberta gradient
    # job that claims 2 and 3 share with claim 1 runs once
    jobs = sorted(p.parent for p in sweep.glob("*/results.json"))
    assert len(jobs) == 4 * 3 + 1 + 1
    report = unpadded((sweep / "report.md").read_text())
    assert report.index("## Claims") < report.index("## Which measure to trust") < report.index("## Headline")
    # one seed per model: the measures are listed, the statistics over seeds say why they are missing
    assert "| AOPC comprehensiveness |" in report and "needs 2 seeds of every model, got 1" in report
    for n in (1, 2, 3):
        assert f"### Claim {n}:" in report
    assert "models roberta, fairberta, bert_large, bert_cda" in report
    assert "**Verdict:** cannot answer: " in report and "(standard fine-tuning) has 1 seed(s)" in report  # no CIs
    assert (sweep / "report_files" / "claim1.png").is_file()
    checkpoints = [p for p in (tmp_path / "cache").iterdir() if p.is_dir() and p.name not in ("results", "derived")]
    assert len(checkpoints) == 4 + 1 + 1  # one fine-tuning per model and variant (and seed)

    # a re-run with everything cached rewrites only the report
    again = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-5000:]
    logs = again.stdout + again.stderr
    assert logs.count("skipping: a result for config hash") == len(jobs)
    assert " on rt_snippets, seed " not in logs  # no "fine-tuning <model> on rt_snippets, seed <s>"
    assert (sweep / "report.md").read_text().startswith("# itermask report")
