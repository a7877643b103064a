"""The naopc analysis on a tiny random BERT: its result section, per-example columns and report rows; the
bounds computed once per checkpoint (a sweep over saliency methods reuses them; a damaged stored bound is
recomputed); its settings checked before any work; and the end-to-end run on shipped data."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import compose_config, keys_of, plan_of, run_tiny_job

from itermask import console
from itermask.analyses.naopc import NAOPCAnalysis

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, folder: Path, name: str, *overrides: str) -> dict:
    job = tmp_path / "sweep" / name
    return run_tiny_job(
        folder,
        job,
        "naopc=on",
        "naopc.exact_max_features=6",
        "naopc.beam_size=2",
        "evaluation.fractions=[0.0,0.1,0.5,1.0]",
        "evaluation.aopc_bins=[0.1,0.5]",
        *overrides,
    )


def test_naopc_bounds_once_per_checkpoint_and_damaged_bounds_recomputed(tmp_path, tiny_bert_dir):
    first = _run(tmp_path, tiny_bert_dir, "gradient")
    section = first["naopc"]
    bounds = section["bounds"]
    assert bounds["n_examples"] == first["n_evaluated"] == 4 and not bounds["reused"]
    assert bounds["n_exact"] + bounds["n_beam"] == 4 and bounds["n_exact"] >= 1  # max_length 16: up to 14 tokens
    assert section["rows"]["computed"] > 0 and section["rows"]["asked"] >= section["rows"]["computed"]
    assert bounds["mean_lower"] <= bounds["mean_upper"]
    one_shot = section["methods"]["gradient"]["one_shot"]
    assert math.isfinite(one_shot["naopc_comprehensiveness_prob"]) and math.isfinite(
        one_shot["aopc_authors_sufficiency_prob"]
    )
    assert "naopc_of_aopc_comprehensiveness_prob" in one_shot and "naopc_of_aopc_full_sufficiency_prob" in one_shot
    assert section["methods"]["gradient"]["recursive"]["missing"]["authors"].startswith("the recursive schedule")
    # per example: exact NAOPC within [0, 1]; the tables hold the columns and the bounds once per example
    job = tmp_path / "sweep" / "gradient" / "per_example"
    scores, examples = pd.read_parquet(job / "scores.parquet"), pd.read_parquet(job / "examples.parquet")
    assert {"naopc_comprehensiveness_prob", "naopc_of_aopc_comprehensiveness_prob"} <= set(scores.columns)
    assert len(examples) == 4 and set(examples.naopc_bounds) <= {"exact", "beam"}
    joined = scores[scores.schedule == "one_shot"].merge(examples, on="example_id")
    exact = joined[joined.naopc_bounds == "exact"]
    assert (
        (exact.aopc_authors_comprehensiveness_prob >= exact.naopc_lower - 1e-9)
        & (exact.naopc_comprehensiveness_prob <= 1 + 1e-9)
    ).all()
    by_hand = (exact.aopc_authors_comprehensiveness_prob - exact.naopc_lower) / (exact.naopc_upper - exact.naopc_lower)
    np.testing.assert_allclose(exact.naopc_comprehensiveness_prob, by_hand, rtol=1e-12)
    assert any(line.startswith("NAOPC (gradient, one-shot") for line in console.summary_lines(first))
    rows = NAOPCAnalysis.report_measures(first)
    assert (
        rows[("gradient", "one_shot", "NAOPC comprehensiveness (higher is better) [prob]")]
        == one_shot["naopc_comprehensiveness_prob"]
    )

    # another saliency method on the same checkpoint: the bounds are read back, no bound row is computed
    second = _run(tmp_path, tiny_bert_dir, "input_x_gradient", "saliency=input_x_gradient")
    assert second["naopc"]["bounds"]["reused"] is True
    assert second["naopc"]["bounds"]["mean_upper"] == bounds["mean_upper"]
    authors_rows = 1 + 2 * 2 * sum(pd.read_parquet(job / "examples.parquet").naopc_n_features)  # 2 rankings
    assert second["naopc"]["rows"]["asked"] <= authors_rows  # only the explanations' rows, no bound rows

    # a damaged stored bound is moved aside and recomputed
    stored = list((tmp_path / "cache" / "derived").rglob("naopc_bounds-*.pt"))
    assert len(stored) == 1
    stored[0].write_bytes(b"not a torch file")
    third = _run(tmp_path, tiny_bert_dir, "damaged", "saliency=input_x_gradient", "reuse_results=false")
    assert (
        third["naopc"]["bounds"]["reused"] is False and third["naopc"]["bounds"]["mean_upper"] == bounds["mean_upper"]
    )
    assert list((tmp_path / "cache" / "derived" / "damaged").iterdir())


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("naopc.exact_max_features=40", "naopc.exact_max_features=40: choose a whole number in 0..24"),
        ("naopc.exact_max_features=-1", "naopc.exact_max_features=-1"),
        ("naopc.beam_size=0", "naopc.beam_size=0: the beam search's width must be a whole number >= 1"),
        ("naopc.beam_size=2.5", "naopc.beam_size=2.5"),
    ],
)
def test_bad_naopc_settings_are_clear_errors_in_the_settings_stage(override, message):
    # the settings stage builds the analysis: the error comes before any data, tokenizer or model is read
    with pytest.raises(ValueError, match=re.escape(message)):
        plan_of(compose_config("naopc=on", override))


def test_naopc_off_by_default_keeps_the_results_key():
    off = keys_of(compose_config())
    assert off.results == keys_of(compose_config("naopc=none")).results
    assert off.results != keys_of(compose_config("naopc=on")).results


def test_flat_examples_are_nan_counted_and_named():
    from itermask.core.aopc_bounds import naopc

    upper, lower = (
        torch.tensor([0.5, 0.2, 0.3], dtype=torch.float64),
        torch.tensor([0.1, 0.2, 0.1], dtype=torch.float64),
    )
    exact = torch.tensor([True, True, False])
    bounds = {
        "example_ids": torch.tensor([7, 8, 9]),
        "n": torch.tensor([3, 1, 12]),
        "sets": {"authors": {"upper": upper, "lower": lower, "exact": exact}},
        "reused": False,
    }
    aopc = np.array([0.3, 0.2, 0.2])
    per_example = pd.DataFrame(
        {
            "saliency": "gradient",
            "schedule": "one_shot",
            "example_id": [7, 8, 9],
            "naopc_comprehensiveness_prob": naopc(aopc, upper.numpy(), lower.numpy()),
        }
    )
    section = NAOPCAnalysis()._section(None, bounds, per_example, "probability")  # pyright: ignore[reportArgumentType]
    b = section["bounds"]
    assert (b["n_exact"], b["n_beam"], b["beam_example_ids"]) == (2, 1, [9])
    assert (b["n_flat"], b["flat_example_ids"]) == (1, [8])  # example 8: one feature, U = L
    # (0.3 - 0.1) / 0.4 = 0.5 and (0.2 - 0.1) / 0.2 = 0.5; the flat example is NaN and left out of the mean
    assert np.isnan(per_example.naopc_comprehensiveness_prob[1])
    assert section["methods"]["gradient"]["one_shot"]["naopc_comprehensiveness_prob"] == pytest.approx(0.5)


def test_bounded_subset_is_chosen_by_id_alone_and_nested():
    import hashlib

    from itermask.core.aopc_bounds import bounded_subset

    ids = np.array([40, 3, 17, 8, 25])
    by_hash = sorted(ids.tolist(), key=lambda i: hashlib.sha256(f"naopc:{i}".encode()).digest())
    two = bounded_subset(ids, 2)
    assert sorted(ids[two].tolist()) == sorted(by_hash[:2])
    # the order of the ids does not matter, and a larger subset keeps the smaller one's examples
    assert set(ids[::-1][bounded_subset(ids[::-1], 2)].tolist()) == set(ids[two].tolist())
    assert set(ids[two].tolist()) <= set(ids[bounded_subset(ids, 3)].tolist())
    assert bounded_subset(ids, None).all() and bounded_subset(ids, 5).all() and bounded_subset(ids, 9).all()


def test_max_examples_bounds_a_subset_and_every_reader_says_so(tmp_path, tiny_bert_dir):
    from itermask.analyses.naopc import COVERAGE
    from itermask.core.aopc_bounds import bounded_subset

    result = _run(tmp_path, tiny_bert_dir, "subset", "naopc.max_examples=2")
    section = result["naopc"]
    b = section["bounds"]
    assert (b["n_examples"], b["n_bounded"], b["n_unbounded"], b["n_exact"] + b["n_beam"]) == (4, 2, 2, 2)
    assert b["subset"].startswith("bounds for 2 of the 4 evaluated examples (naopc.max_examples=2")
    examples = pd.read_parquet(tmp_path / "sweep" / "subset" / "per_example" / "examples.parquet")
    chosen = bounded_subset(examples.example_id.to_numpy(), 2)
    assert (examples.naopc_bounds[~chosen] == "none").all() and examples.naopc_upper[~chosen].isna().all()
    assert examples.naopc_upper[chosen].notna().all()
    scores = pd.read_parquet(tmp_path / "sweep" / "subset" / "per_example" / "scores.parquet")
    one_shot = scores[scores.schedule == "one_shot"].merge(examples[["example_id", "naopc_bounds"]], on="example_id")
    unbounded = one_shot[one_shot.naopc_bounds == "none"]
    # the authors' AOPC and NAOPC are measured on the bounded examples only
    assert unbounded.aopc_authors_comprehensiveness_prob.isna().all()
    assert unbounded.naopc_comprehensiveness_prob.isna().all()
    assert one_shot[one_shot.naopc_bounds != "none"].aopc_authors_comprehensiveness_prob.notna().all()
    bounded = one_shot[one_shot.naopc_bounds != "none"].groupby("saliency").naopc_comprehensiveness_prob.mean()
    assert section["methods"]["gradient"]["one_shot"]["naopc_comprehensiveness_prob"] == pytest.approx(
        bounded["gradient"], rel=1e-12
    )
    line = next(x for x in console.summary_lines(result) if x.startswith("NAOPC (gradient"))
    assert "2 not bounded (naopc.max_examples=2)" in line
    rows = NAOPCAnalysis.report_measures(result)
    assert rows[("gradient", "one_shot", COVERAGE)] == 0.5
    summary = pd.DataFrame({"score": [COVERAGE], "mean": [0.5]})
    assert NAOPCAnalysis.headline_lines(summary)[0].startswith(
        "NAOPC is measured on a subset: AOPC bounds for 50 % of the evaluated examples"
    )
    # every example bounded: no coverage row, no headline line
    assert COVERAGE not in {
        k[2] for k in NAOPCAnalysis.report_measures({**result, "naopc": {**section, "bounds": {**b, "n_unbounded": 0}}})
    }
    assert NAOPCAnalysis.headline_lines(pd.DataFrame({"score": [COVERAGE], "mean": [1.0]})) == []


def test_bad_max_examples_is_a_clear_error():
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match=re.escape(f"naopc.max_examples={bad!r}: give a whole number >= 1")):
            NAOPCAnalysis(max_examples=bad)


@pytest.mark.parametrize("analysis", ["naopc", "ffidelity", "removal_reference", "sanity"])
@pytest.mark.parametrize("value", ["maybe", "0", "2"])
def test_an_analysis_switch_that_is_not_a_boolean_is_refused(analysis, value):
    # 'maybe', 0 or 2 counted as on before (only false switched an analysis off)
    shown = repr(value) if value == "maybe" else value
    with pytest.raises(ValueError, match=re.escape(f"{analysis}.enabled must be true or false, got {shown}")):
        plan_of(compose_config(f"{analysis}=on", f"{analysis}.enabled={value}"))
    off = plan_of(compose_config(f"{analysis}=on", f"{analysis}.enabled=false"))
    assert analysis not in {a.name for a in off.analyses}  # false switches it off, its settings kept
