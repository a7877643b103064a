"""How different claim 1's encoders are, read from the encoders the sweep's jobs fine-tuned from: linear CKA per
layer of their mean-pooled hidden states on the first ``claims.encoder_texts`` test texts and the relative
distance of their encoder parameters (:mod:`itermask.core.similarity`), and the held-out masked-token accuracy
of continued pretraining before (the base encoder frozen, the fresh MLM head trained alone) and after (the joint
steps), from the pretraining entry's ``meta.json``.

Computed here, in the report step, from the stored encoders: a comparison needs two encoders, while a job holds
one. Each pair's numbers are stored in the derived-values store (:class:`~itermask.storage.derived.DerivedStore`,
under the key of the pair), keyed by both encoders' identities (the continued-pretraining key, or the base
model's name and files) and the texts, so a rebuilt report reads them back."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from itermask.core.representations import pool_hidden_states
from itermask.core.similarity import encoder_similarity
from itermask.reporting.sweep import Run
from itermask.storage.cache import config_hash
from itermask.storage.derived import DerivedStore
from itermask.storage.keys import Fingerprint
from itermask.studies.robust_infidelity.runs import variant
from itermask.studies.robust_infidelity.settings import STANDARD

__all__ = ["encoder_tables", "pooled_states"]


def _encoder(result: dict) -> dict:
    """The encoder a result's classifier was fine-tuned from: ``folder``, ``identity`` (what its cache key
    hashes) and ``meta`` (the continued-pretraining entry's ``meta.json``, ``{}`` without the stage)."""
    from itermask.models.loading import resolve_pretrained
    from itermask.training.pretraining import pretrain_settings

    config = result["config"]
    model = config["model"]
    fingerprint = Fingerprint.from_hashed(result.get("data_files") or {})
    if model.get("pretrain") is None:
        identity = {"pretrained": model["pretrained"], "files": dict(fingerprint.model_files)}
        return {"folder": resolve_pretrained(model["pretrained"]), "identity": identity, "meta": {}}
    settings = pretrain_settings(config, fingerprint, None, "")  # the key only: no text is loaded
    meta_path = settings.entry / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"the pretrained encoder of {model['name']} is not in the cache ({settings.entry})")
    meta = json.loads(meta_path.read_text())
    return {"folder": str(settings.output), "identity": {"pretrain": settings.key}, "meta": meta}


def pooled_states(folder: str, texts: list[str], max_length: int, batch_size: int = 64) -> tuple[torch.Tensor, dict]:
    """The encoder at ``folder``: its mean-pooled hidden states ``[n, L+1, H]`` (float32, over the attended
    tokens, embeddings first) of ``texts`` truncated to ``max_length`` tokens, and its parameters (the pooler's
    left out: mean pooling does not use it, and continued pretraining copies it unchanged)."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer, encoder = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    parts = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                texts[start : start + batch_size],
                truncation=True,
                max_length=max_length,
                padding=True,
                return_tensors="pt",
            )
            out = encoder(**batch, output_hidden_states=True)
            parts.append(pool_hidden_states(out.hidden_states, batch["attention_mask"])[0])
    return torch.cat(parts), {n: p for n, p in encoder.state_dict().items() if not n.startswith("pooler.")}


def _test_texts(result: dict, n: int) -> list[str]:
    """The first ``n`` test texts of a result's data source (built from its config, as a job builds it)."""
    import hydra

    source = hydra.utils.instantiate(result["config"]["dataset"]["source"], _convert_="all")
    return [str(t) for t in list(source.load().splits["test"]["text"])[:n]]


def encoder_tables(
    runs: Sequence[Run], models: list[str], n_texts: int
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """``(pairs, accuracy, notes)`` of claim 1's ``models`` (one standard run each gives the encoder): per pair
    ``a, b, n_texts, parameter_distance, cka`` (a tuple, one value per layer); per pretrained model ``model,
    before, after, heldout_tokens`` (fractions); and one line per thing not computed, saying why."""
    first = {}
    for run in runs:
        if variant(run.result) == STANDARD and str(run.result["model"]) in models:
            first.setdefault(str(run.result["model"]), run.result)
    encoders, notes = {}, []
    for model in (m for m in models if m in first):
        try:
            encoders[model] = _encoder(first[model])
        except (OSError, ValueError, KeyError) as error:
            notes.append(f"{model}: encoder not compared: {error}")
    accuracy = [
        {"model": m, "before": e["meta"].get("mlm_acc_head_only", math.nan)}
        | {"after": e["meta"].get("mlm_acc_joint", math.nan), "heldout_tokens": e["meta"].get("heldout_masked_tokens")}
        for m, e in encoders.items()
        if e["meta"]
    ]
    if n_texts == 0 or len(encoders) < 2:
        return pd.DataFrame(), pd.DataFrame(accuracy), notes
    return pd.DataFrame(_pairs(encoders, first, n_texts, notes)), pd.DataFrame(accuracy), notes


def _pairs(encoders: dict[str, dict], first: dict[str, dict], n_texts: int, notes: list[str]) -> list[dict]:
    """The rows of every pair of ``encoders``, read from the derived-values store or computed (and stored)."""
    some = first[next(iter(encoders))]
    try:
        texts = _test_texts(some, n_texts)
    except Exception as error:  # noqa: BLE001 - whatever the data source raises, the report is still written
        notes.append(f"encoders not compared: the test texts cannot be loaded ({type(error).__name__}: {error})")
        return []
    max_length = int(some["config"]["model"]["max_length"])
    store = DerivedStore(Path(str(some["config"]["cache_dir"])).expanduser())
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    states: dict[str, Any] = {}

    def compute(a: str, b: str) -> dict:
        for m in (a, b):
            states[m] = states.get(m) or pooled_states(encoders[m]["folder"], texts, max_length)
        result = encoder_similarity(states[a][0], states[b][0], states[a][1], states[b][1])
        return {"cka": list(result.cka), "parameter_distance": result.parameter_distance, "n_texts": result.n_texts}

    rows = []
    for a, b in itertools.combinations(encoders, 2):
        fingerprint = {"a": encoders[a]["identity"], "b": encoders[b]["identity"], "texts": digest}
        fingerprint["max_length"] = max_length
        try:
            value = store.get_or_compute(
                config_hash(fingerprint), "encoder_similarity", fingerprint, lambda a=a, b=b: compute(a, b)
            )
        except (OSError, ValueError) as error:
            notes.append(f"{a} vs {b}: encoders not compared: {error}")
            continue
        rows.append({"a": a, "b": b, **value, "cka": tuple(value["cka"])})
    return rows
