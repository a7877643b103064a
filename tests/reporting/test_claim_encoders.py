"""Claim 1's encoder comparison (studies/robust_infidelity/encoders.py) on tiny local BERT encoders and the shipped
test texts: CKA and parameter distance against the core functions, the derived-values store, the notes."""

from pathlib import Path

import pytest
import torch
from conftest import tiny_bert_config
from results_helpers import make_result, unpadded
from transformers import BertModel

from itermask.core.similarity import layer_cka
from itermask.reporting.sweep import Run
from itermask.studies.robust_infidelity.encoders import encoder_tables, pooled_states
from itermask.studies.robust_infidelity.markdown import _encoder_lines

SOURCE = {"_target_": "itermask.data.files.shipped_source", "name": "rt_snippets"}


def _folder(tokenizer, path: Path, seed: int, scale: float = 0.0) -> str:
    torch.manual_seed(seed)
    model = BertModel(tiny_bert_config(tokenizer)).eval()
    with torch.no_grad():
        model.get_parameter("encoder.layer.1.output.dense.weight").mul_(1 + scale)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def _run(model: str, folder: str, cache: Path, pretrain: dict | None = None) -> Run:
    result = make_result(0, model=model)
    result["config"].update(cache_dir=str(cache), dataset={"name": "rt_snippets", "source": SOURCE})
    result["config"]["model"].update(pretrained=folder, **({"pretrain": pretrain} if pretrain else {}))
    result["config"]["trainer"] = {}
    return Run(cache / model, result)


def test_encoder_tables_compare_every_pair_and_store_them(tokenizer, tmp_path):
    base = _folder(tokenizer, tmp_path / "base", seed=0)
    moved = _folder(tokenizer, tmp_path / "moved", seed=0, scale=0.5)
    runs = [_run("a", base, tmp_path), _run("b", moved, tmp_path), _run("c", base, tmp_path)]
    pairs, accuracy, notes = encoder_tables(runs, ["a", "b", "c"], n_texts=40)
    assert notes == [] and accuracy.empty and list(zip(pairs.a, pairs.b)) == [("a", "b"), ("a", "c"), ("b", "c")]
    states_a, params_a = pooled_states(base, _texts(40), 64)
    states_b, params_b = pooled_states(moved, _texts(40), 64)
    assert pairs.cka[0] == pytest.approx(layer_cka(states_a, states_b), abs=1e-9)
    assert len(pairs.cka[0]) == 3 and pairs.cka[0][:2] == pytest.approx((1.0, 1.0)) and pairs.cka[0][2] < 1
    # only layer 1's output weight moved, by half: distance = 0.5 ||W|| / ||theta||
    w = params_b["encoder.layer.1.output.dense.weight"] / 1.5
    total = sum(float(p.double().square().sum()) for p in params_b.values())
    assert pairs.parameter_distance[0] == pytest.approx(0.5 * float(w.norm()) / total**0.5, rel=1e-6)
    assert pairs.parameter_distance[1] == 0.0 and pairs.cka[1] == pytest.approx((1.0,) * 3)
    assert len(list((tmp_path / "derived").rglob("encoder_similarity-*.pt"))) == 3
    again, _, _ = encoder_tables(runs, ["a", "b", "c"], n_texts=40)  # read back from the store
    assert again.cka.tolist() == pairs.cka.tolist()
    lines = "\n".join(_encoder_lines_of(pairs))
    assert "on the first 40 test texts" in lines and "| a | b |" in unpadded(lines)


def _texts(n: int) -> list[str]:
    from itermask.data.files import shipped_source

    return [str(t) for t in list(shipped_source("rt_snippets").load().splits["test"]["text"])[:n]]


def _encoder_lines_of(pairs):
    from itermask.studies.robust_infidelity.claims import Claims
    from itermask.studies.robust_infidelity.settings import ClaimSettings

    claims = Claims(ClaimSettings())
    claims.encoder_pairs = pairs
    return _encoder_lines(claims)


def test_a_pretrained_encoder_not_in_the_cache_is_named(tokenizer, tmp_path):
    base = _folder(tokenizer, tmp_path / "base", seed=0)
    runs = [_run("a", base, tmp_path), _run("m", base, tmp_path, pretrain={"cda": False, "joint_steps": 2})]
    pairs, accuracy, notes = encoder_tables(runs, ["a", "m"], n_texts=10)
    assert pairs.empty and accuracy.empty and len(notes) == 1
    assert notes[0].startswith("m: encoder not compared: the pretrained encoder of m is not in the cache")


def test_the_report_finds_the_encoder_a_job_pretrained(tokenizer, tmp_path):
    """The report step derives the continued-pretraining key from a result (its config and data_files) exactly as
    the job did (engine.keys), and reads the held-out accuracies from that entry's meta.json."""
    import json

    from conftest import compose_config, keys_of

    from itermask.settings import plain

    cfg = compose_config("model=minilm_mlm", f"cache_dir={tmp_path}")
    keys = keys_of(cfg)
    assert keys.pretrain is not None
    entry = tmp_path / "pretrain" / keys.pretrain.key
    _folder(tokenizer, entry / "model", seed=1)
    meta = {"mlm_acc_head_only": 0.0284, "mlm_acc_joint": 0.0962, "heldout_masked_tokens": 915}
    (entry / "meta.json").write_text(json.dumps(meta))
    result = make_result(0, model="minilm_mlm")
    result.update(config=plain(cfg), data_files=keys.fingerprint.hashed())
    runs = [_run("minilm", _folder(tokenizer, tmp_path / "base", seed=0), tmp_path), Run(tmp_path / "m", result)]
    pairs, accuracy, notes = encoder_tables(runs, ["minilm", "minilm_mlm"], n_texts=20)
    assert notes == [] and list(zip(pairs.a, pairs.b)) == [("minilm", "minilm_mlm")]
    assert 0 < pairs.parameter_distance[0] and all(c < 1 for c in pairs.cka[0])  # two random encoders
    assert accuracy.to_dict("records") == [
        {"model": "minilm_mlm", "before": 0.0284, "after": 0.0962, "heldout_tokens": 915}
    ]
    from itermask.studies.robust_infidelity.claims import Claims
    from itermask.studies.robust_infidelity.settings import ClaimSettings

    claims = Claims(ClaimSettings(), encoder_pairs=pairs, mlm_accuracy=accuracy)
    lines = _encoder_lines(claims)
    assert "| minilm_mlm | 0.0284 | 0.0962 | 915 |" in unpadded(lines[-2])
    assert f"| minilm | minilm_mlm | {pairs.parameter_distance[0]:.4f} |" in unpadded("\n".join(lines))


def test_a_mixed_model_failure_reads_once_escaped_in_its_table_cell():
    """A reason with a "|" in it (statsmodels' "|grad| = 20", when MixedLM fitted claim 1) showed its escaping
    backslashes in report.md: the reason was escaped, then md_table escaped it again."""
    import pandas as pd

    from itermask.studies.robust_infidelity.claims import Claims
    from itermask.studies.robust_infidelity.markdown import _differences_lines
    from itermask.studies.robust_infidelity.settings import ClaimSettings

    nan = float("nan")
    row = {"a": "m", "b": "n", "method": "random", "measure": "score", "n_seeds": 3, "n_examples": 200}
    row |= {"difference": nan, "ci_low": nan, "ci_high": nan, "p_value": nan, "p_holm": nan}
    row |= {"reason": "MixedLM did not converge (REML: Gradient optimization failed, |grad| = 20)"}
    claims = Claims(ClaimSettings(), model_differences=pd.DataFrame([row]))
    (line,) = [x for x in "\n".join(_differences_lines(claims, 95)).splitlines() if x.startswith("| m ")]
    assert "failed, \\|grad\\| = 20)" in line and "\\\\" not in line
