"""The ffidelity analysis on a tiny random BERT: its result section, per-example columns, report rows and console
line; the fine-tuned copy kept per checkpoint (a second job with another saliency method reuses it); its
settings checked before any work; off by default without changing the results key."""

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
from itermask.analyses.ffidelity import FFidelityAnalysis
from itermask.core.metrics import metric_info

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ["ffid_plus_prob", "ffid_minus_prob", "ffid_plus_accuracy", "ffid_minus_accuracy"]


def _run(tmp_path: Path, folder: Path, name: str, *overrides: str) -> dict:
    job = tmp_path / "sweep" / name
    return run_tiny_job(
        folder,
        job,
        "ffidelity=on",
        "ffidelity.n_samples=3",
        "ffidelity.sizes=[0.2,0.6]",
        "ffidelity.beta=0.5",
        "ffidelity.steps=2",
        "ffidelity.learning_rate=1e-3",
        "evaluation.fractions=[0.0,0.5,1.0]",
        "evaluation.aopc_bins=[0.5]",
        *overrides,
    )


def test_ffidelity_section_columns_and_the_fine_tuned_copy_kept_per_checkpoint(tmp_path, tiny_bert_dir):
    first = _run(tmp_path, tiny_bert_dir, "gradient")
    section = first["ffidelity"]
    tune = section["fine_tune"]
    assert tune["steps"] == 2 and tune["reused"] is False and 0 <= tune["mean_share"] <= tune["max_share"] <= 0.5
    assert tune["n_labelled"] == 4 and 0 <= tune["accuracy_before"] <= 1 and 0 <= tune["accuracy_after"] <= 1
    assert set(section["methods"]) == {"gradient", "random"}
    entry = section["methods"]["gradient"]["one_shot"]
    assert entry["n"] == 4 and all(-1 <= entry[c] <= 1 for c in COLUMNS)
    assert entry["n_measured"] == 4 and entry["n_too_few_features"] == 0  # 14 tokens, beta 0.5: cap 7
    # 2 rankings x 4 examples x (clean + 2 directions x 2 sizes x 3 samples)
    assert section["rows"]["asked"] == 2 * 4 * (1 + 2 * 2 * 3)
    assert 0 < section["rows"]["computed"] <= section["rows"]["asked"]
    scores = pd.read_parquet(tmp_path / "sweep" / "gradient" / "per_example" / "scores.parquet")
    one_shot = scores[COLUMNS].to_numpy()[(scores.schedule == "one_shot").to_numpy()]
    recursive = scores[COLUMNS].to_numpy()[(scores.schedule == "recursive").to_numpy()]
    assert np.isfinite(one_shot).all() and np.isnan(recursive).all()  # defined on the one-shot ranking only
    gradient = scores.ffid_plus_prob.to_numpy()[
        ((scores.schedule == "one_shot") & (scores.saliency == "gradient")).to_numpy()
    ]
    assert float(gradient.mean()) == pytest.approx(entry["ffid_plus_prob"], abs=1e-12)
    rows = FFidelityAnalysis.report_measures(first)
    assert rows[("gradient", "one_shot", "FFid+ probability (higher is better)")] == entry["ffid_plus_prob"]
    # the OOD AUROC of its sampled inputs on the copy that scores them (a detector fitted on the copy's training
    # embeddings, stored once per copy)
    for side in ("plus", "minus"):
        assert 0 <= entry[f"ood_auroc_{side}"] <= 1
        label = f"ood final/auroc_mahalanobis, FFid{'+' if side == 'plus' else '-'} inputs (removal-fine-tuned copy)"
        assert rows[("gradient", "one_shot", label)] == entry[f"ood_auroc_{side}"]
    assert len(list((tmp_path / "cache" / "derived").rglob("ffidelity_ood_fit-*.pt"))) == 1
    assert any(line.startswith("F-Fidelity (gradient, one-shot)") for line in console.summary_lines(first))
    info = metric_info("ffid_minus_accuracy")
    assert info is not None and info.higher_is_more_faithful is False and info.unit == "fraction"

    # another saliency method on the same checkpoint: the fine-tuned copy is read back, not fine-tuned again
    second = _run(tmp_path, tiny_bert_dir, "input_x_gradient", "saliency=input_x_gradient")
    assert second["ffidelity"]["fine_tune"]["reused"] is True
    assert second["ffidelity"]["fine_tune"]["accuracy_after"] == tune["accuracy_after"]
    # the random explanation's values are the same: the same tuned weights, seeds and examples. Up to float32
    # round-off: the row engine is shared by the job's explanations, so a row of random's may have been run in
    # another chunk (other padding) with the method's rows; probabilities differ by a few ulps (6e-8 at 1)
    again, first_random = second["ffidelity"]["methods"]["random"]["one_shot"], section["methods"]["random"]["one_shot"]
    assert again.keys() == first_random.keys()
    for key, value in first_random.items():
        assert again[key] == (pytest.approx(value, abs=1e-6) if isinstance(value, float) else value), key
    assert len(list((tmp_path / "cache" / "derived").rglob("ffidelity_model-*.pt"))) == 1


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("ffidelity.alpha=1.5", "ffidelity.alpha=1.5: choose a number in (0, 1] (a removal probability)"),
        ("ffidelity.alpha=0", "ffidelity.alpha=0: choose a number in (0, 1] (at 0 nothing would be removed"),
        ("ffidelity.beta=-0.1", "ffidelity.beta=-0.1"),
        ("ffidelity.beta=0", "ffidelity.beta=0: choose a number in (0, 1] (at 0 the cap floor(beta * n) would be 0"),
        ("ffidelity.beta=1.5", "ffidelity.beta=1.5: choose a number in (0, 1] (a share of the features)"),
        ("ffidelity.n_samples=0", "ffidelity.n_samples=0: choose a whole number >= 1"),
        ("ffidelity.sizes=[0.5,1.5]", "ffidelity.sizes="),
        ("ffidelity.steps=0", "ffidelity.steps=0: choose a whole number >= 1"),
        ("ffidelity.learning_rate=0", "ffidelity.learning_rate=0"),
    ],
)
def test_bad_ffidelity_settings_are_clear_errors_in_the_settings_stage(override, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        plan_of(compose_config("ffidelity=on", override))


def test_ffidelity_off_by_default_keeps_the_results_key():
    off = keys_of(compose_config())
    assert off.results == keys_of(compose_config("ffidelity=none")).results
    assert off.results != keys_of(compose_config("ffidelity=on")).results
    rows = FFidelityAnalysis.report_measures({"ffidelity": {"methods": {"m": {}}}})
    assert math.isnan(rows[("m", "one_shot", "FFid+ probability (higher is better)")])


def test_the_console_counts_examples_too_short_to_measure():
    entry = {"ffid_plus_prob": 0.1, "ffid_minus_prob": 0.02, "n": 8, "n_measured": 6, "n_too_few_features": 2}
    section = {"settings": {"beta": 0.1}, "methods": {"gradient": {"one_shot": entry}}, "fine_tune": {"steps": 2}}
    lines = FFidelityAnalysis.summary_lines({"saliency": {"name": "gradient"}, "ffidelity": section})
    assert lines[1] == (
        "  F-Fidelity: 2 of 8 examples not measured (NaN, left out of the means): fewer than 1 / beta = 10 "
        "features, so the cap floor(beta * n) removes nothing"
    )
    entry["n_too_few_features"] = 0
    assert len(FFidelityAnalysis.summary_lines({"saliency": {"name": "gradient"}, "ffidelity": section})) == 1


def test_given_texts_without_a_training_split_are_refused_before_the_evaluation(tiny_bert, tokenizer, monkeypatch):
    import itermask
    from itermask.engine import run

    monkeypatch.setattr(run, "run", lambda *a, **k: pytest.fail("the evaluation ran"))
    with pytest.raises(ValueError, match=re.escape("ffidelity: F-Fidelity fine-tunes a copy of the classifier on a")):
        itermask.evaluate(tiny_bert, ["a good film", "a bad film"], tokenizer=tokenizer, measures=["ffidelity"])


def test_a_module_without_a_checkpoint_key_is_fine_tuned_and_not_stored(tiny_bert, tokenizer):
    from types import SimpleNamespace

    from itermask.analyses.base import EvaluationContext
    from itermask.core.masking import MaskToken
    from itermask.core.tokens import TokenBatch
    from itermask.models.trained import TrainedModel

    encoded = tokenizer(["a good film", "it is bad"], padding=True, return_tensors="pt")
    tokens = TokenBatch(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    data = SimpleNamespace(train_dataloader=lambda: [{"tokens": tokens, "labels": torch.tensor([1, 0])}])
    store = SimpleNamespace(get_or_compute=lambda *a: pytest.fail("stored under an empty key"))
    trained = TrainedModel("", None, {"fine_tuned": False})
    context = EvaluationContext(data, trained, tiny_bert, None, derived=store)  # pyright: ignore[reportArgumentType]
    assert not context.can_reuse and context.stored("kind", {}) is None
    inputs = SimpleNamespace(masking=MaskToken().bind(tokenizer), tokenizer=tokenizer)
    tuned, info = FFidelityAnalysis(steps=2, learning_rate=1e-3).tuned_model(inputs, context)  # pyright: ignore[reportArgumentType]
    assert info["steps"] == 2 and info["reused"] is False and tuned is not tiny_bert and not tuned.training
    changed = [k for k, v in tuned.state_dict().items() if not torch.equal(v, tiny_bert.state_dict()[k])]
    assert changed  # fine-tuned: some weights moved; the module handed over is left as it was


def test_a_job_without_the_one_shot_schedule_is_refused_before_the_fine_tuning():
    from types import SimpleNamespace

    (analysis,) = [a for a in plan_of(compose_config("ffidelity=on")).analyses if a.name == "ffidelity"]
    with pytest.raises(ValueError, match=re.escape("ffidelity needs the one_shot schedule's ranking: add one_shot")):
        analysis.check(SimpleNamespace(evaluation=SimpleNamespace(schedules=["recursive"])))
    analysis.check(SimpleNamespace(evaluation=SimpleNamespace(schedules=["one_shot", "recursive"])))


def test_max_examples_measures_the_naopc_subset_in_f_fidelity_and_the_removal_reference(tmp_path, tiny_bert_dir):
    """ffidelity.max_examples=2 and removal_reference.max_examples=2 of the 4 evaluated examples: both measure
    exactly the 2 that naopc.max_examples=2 bounds (by id alone); F-Fidelity's per-example columns are NaN for
    the other 2, and both sections and the console say 2 of 4."""
    from itermask.analyses.removal_reference import RemovalReferenceAnalysis
    from itermask.core.aopc_bounds import SUBSET_RULE, bounded_subset

    result = _run(
        tmp_path,
        tiny_bert_dir,
        "subset",
        "ffidelity.max_examples=2",
        "removal_reference=on",
        "removal_reference.strategies=[pad]",
        "removal_reference.ood_fit.n_fit_examples=40",
        "removal_reference.max_examples=2",
    )
    scores = pd.read_parquet(tmp_path / "sweep" / "subset" / "per_example" / "scores.parquet")
    one_shot = scores[(scores.schedule == "one_shot") & (scores.saliency == "gradient")]
    ids = np.sort(one_shot.example_id.to_numpy())
    chosen = sorted(ids[bounded_subset(ids, 2)].tolist())
    measured = sorted(one_shot.example_id[np.isfinite(one_shot.ffid_plus_prob)].tolist())
    assert len(ids) == 4 and measured == chosen
    for name in ("ffidelity", "removal_reference"):
        assert result[name]["examples"] == {"measured": 2, "evaluated": 4, "rule": SUBSET_RULE}
    assert result["ffidelity"]["methods"]["gradient"]["one_shot"]["n"] == 2
    frame = pd.read_parquet(tmp_path / "sweep" / "subset" / "per_example" / "removal_reference.parquet")
    assert sorted(set(frame.example_id)) == chosen
    lines = [*FFidelityAnalysis.summary_lines(result), *RemovalReferenceAnalysis.summary_lines(result)]
    for option in ("ffidelity.max_examples", "removal_reference.max_examples"):
        assert f"  measured on 2 of the 4 evaluated examples ({option}; {SUBSET_RULE})" in lines
