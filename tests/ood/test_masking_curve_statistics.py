"""Representation capture on tiny random models, and the OOD statistics along a masking curve
(missing values with their reasons)."""

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import (
    DistilBertConfig,
    DistilBertForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
)

from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.masking import MaskToken
from itermask.core.representations import capture_representations, classifier_head
from itermask.core.saliency import RandomSaliency
from itermask.core.tokens import TokenBatch, class_logits, maskable_positions
from itermask.ood.detectors import OODDetectors
from itermask.ood.statistics import (
    masking_ood_statistics,
)

ROOT = Path(__file__).resolve().parents[2]


# --- representation capture ---------------------------------------------------------------------------


def _batch(tokenizer, texts):
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    return TokenBatch(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))


TEXTS = ["a fine and funny film", "the plot is thin , but the cast is good and it works", "bad"]


def test_capture_bert_matches_pooler_and_hidden_states(tiny_bert, tokenizer):
    batch = _batch(tokenizer, TEXTS)
    with torch.inference_mode(), capture_representations(tiny_bert) as records:
        logits = class_logits(tiny_bert, batch)
    assert len(records) == 1
    reps = records[0]
    with torch.inference_mode():
        out = tiny_bert.bert(**batch.model_inputs(), output_hidden_states=True)
        head = tiny_bert.classifier(out.pooler_output)
    torch.testing.assert_close(reps.features, out.pooler_output)
    torch.testing.assert_close(logits, head)
    assert reps.layer_mean.shape == (3, 3, 32)  # embeddings + 2 layers
    row = 2  # "bad": [CLS] bad [SEP] + padding
    n = int(batch.attention_mask[row].sum())
    torch.testing.assert_close(reps.layer_mean[row, 1], out.hidden_states[1][row, :n].mean(0))
    torch.testing.assert_close(reps.layer_max[row, 2], out.hidden_states[2][row, :n].amax(0))
    # the hooks are gone after the block
    assert not tiny_bert._forward_hooks and not tiny_bert._forward_pre_hooks
    assert not tiny_bert.classifier._forward_pre_hooks


@pytest.mark.parametrize("arch", ["roberta", "distilbert"])
def test_capture_finds_the_final_linear_layer(arch):
    torch.manual_seed(0)
    if arch == "roberta":
        model = RobertaForSequenceClassification(
            RobertaConfig(
                vocab_size=50,
                hidden_size=16,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=32,
                max_position_embeddings=40,
                pad_token_id=1,
            )
        ).eval()
    else:
        model = DistilBertForSequenceClassification(
            DistilBertConfig(vocab_size=50, dim=16, n_layers=2, n_heads=2, hidden_dim=32, max_position_embeddings=40)
        ).eval()
    ids = torch.randint(5, 50, (2, 6))
    with torch.inference_mode(), capture_representations(model) as records:
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
        if arch == "roberta":
            first = model.roberta(input_ids=ids).last_hidden_state[:, 0]
            expected = torch.tanh(model.classifier.dense(first))
        else:
            first = model.distilbert(input_ids=ids).last_hidden_state[:, 0]
            expected = torch.relu(model.pre_classifier(first))
    assert classifier_head(model) is (model.classifier.out_proj if arch == "roberta" else model.classifier)
    torch.testing.assert_close(records[0].features, expected)
    with pytest.raises(ValueError, match="final linear layer"):
        classifier_head(torch.nn.Sequential(torch.nn.Linear(2, 2)))


def _evaluate(model, tokenizer, collect, fractions=(0.0, 0.5, 1.0)):
    evaluator = IterativeMaskingEvaluator(
        RandomSaliency(seed=0),
        MaskToken(tokenizer),
        fractions,
        tokenizer.all_special_ids,
        collect_representations=collect,
    )
    batch = _batch(tokenizer, TEXTS)
    return evaluator.evaluate(model, batch, labels=torch.tensor([1, 1, 0]))


def test_evaluator_collects_representations_of_the_forwards_it_runs(tiny_bert, tokenizer):
    plain = _evaluate(tiny_bert, tokenizer, collect=False)
    curves = _evaluate(tiny_bert, tokenizer, collect=True)
    assert plain["one_shot"].features is None and plain["one_shot"].representations() is None
    for schedule in ("one_shot", "recursive"):
        c = curves[schedule]
        torch.testing.assert_close(c.logits, plain[schedule].logits)
        assert c.features.shape == (3, 3, 32) and c.layer_mean.shape == (3, 3, 3, 32)
        # fraction 0 masks nothing: the masked representation is the clean one
        torch.testing.assert_close(c.features[:, 0], c.clean_features)
        torch.testing.assert_close(c.layer_max[:, 0], c.clean_layer_max)
        assert not torch.allclose(c.features[:, 2], c.clean_features)
    # the logits stored match a direct forward of the fully masked input
    batch = _batch(tokenizer, TEXTS)
    full = MaskToken(tokenizer).apply(batch, maskable_positions(batch, tokenizer.all_special_ids)).batch
    with torch.inference_mode():
        out = tiny_bert.bert(**full.model_inputs())
    torch.testing.assert_close(curves["one_shot"].features[:, 2], out.pooler_output)


# --- the statistics along a masking curve, missing values with reasons --------------------------------


def _train_reps(model, tokenizer, n=40):
    import pandas as pd

    from itermask.data.files import shipped_source

    texts = pd.read_csv(shipped_source().files["train"], keep_default_na=False)["text"].head(n).tolist()
    batch = _batch(tokenizer, texts)
    with torch.inference_mode(), capture_representations(model) as records:
        class_logits(model, batch)
    return records[0], torch.tensor([i % 2 for i in range(n)])


def test_masking_ood_statistics_on_a_tiny_model(tiny_bert, tokenizer, caplog):
    # fraction 0 masks nothing: step 0 is the clean input, which the bucketed forwards compute once, so its
    # representations are the clean ones bit for bit, and the near-singular covariance below (40 examples, 32
    # dimensions), which would magnify any float noise, gives exactly the clean statistics at step 0
    curves = _evaluate(tiny_bert, tokenizer, collect=True)["one_shot"]
    assert torch.equal(curves.features[:, 0], curves.clean_features)
    assert torch.equal(curves.layer_mean[:, 0], curves.clean_layer_mean)
    train, labels = _train_reps(tiny_bert, tokenizer)
    with caplog.at_level(logging.WARNING):
        detectors = OODDetectors.fit(train, labels, calibration=train, k=50)  # 40 < 32 + 2 -> no; k too big
    assert detectors.info["final/covariance"] == "empirical"  # 40 - 2 >= 32
    assert detectors.missing["final/knn_distance"].startswith("kNN distance with k=50 needs at least 50")
    stats = masking_ood_statistics(curves, detectors)
    v = stats.values
    # fraction 0: masked inputs are the clean ones, so every AUROC is exactly 0.5 and distances are 0
    for key in (
        "final/auroc_mahalanobis",
        "layer_2/auroc_mahalanobis",
        "auroc_masf",
        "auroc_entropy",
        "auroc_max_softmax",
    ):
        assert v[key][0] == 0.5, key
    assert v["final/l2_to_clean"][0] == 0.0 and v["final/cosine_to_clean"][0] == pytest.approx(1.0)
    assert v["final/mahalanobis"][0] == pytest.approx(stats.clean["final/mahalanobis"])
    assert len(v["ece"]) == 3 and all(0 <= e <= 1 for e in v["ece"])
    # the kNN score could not be computed: recorded as missing with the reason, never as a number
    assert "final/knn_distance" not in v and "final/auroc_knn_distance" not in v
    assert "k=50" in stats.missing["final/knn_distance"] and "k=50" in stats.missing["final/auroc_knn_distance"]
    # no calibration data: MaSF is missing with its reason
    no_masf = masking_ood_statistics(curves, OODDetectors.fit(train, labels, calibration=None))
    assert no_masf.missing["masf_flagged"] == "no held-out calibration data was given"
    assert "masf_flagged" not in no_masf.values
    # unknown labels: ECE is missing with its reason
    curves.labels = torch.tensor([1, -1, 0])
    assert "gold labels" in masking_ood_statistics(curves, detectors).missing["ece"]
    json.dumps(stats.to_dict())  # plain JSON values


def test_masking_ood_statistics_on_count_steps(tiny_bert, tokenizer):
    evaluator = IterativeMaskingEvaluator(
        RandomSaliency(seed=0),
        MaskToken(tokenizer),
        None,
        tokenizer.all_special_ids,
        schedules=["one_shot"],
        steps="count",
        counts=[0, 1, 3],
        collect_representations=True,
    )
    batch = _batch(tokenizer, TEXTS)
    curves = evaluator.evaluate(tiny_bert, batch, labels=torch.tensor([1, 1, 0]))["one_shot"]
    train, labels = _train_reps(tiny_bert, tokenizer)
    stats = masking_ood_statistics(curves, OODDetectors.fit(train, labels, calibration=None, k=3)).to_dict()
    assert stats["steps"] == "count" and stats["x"] == [0.0, 1.0, 3.0]
    n = maskable_positions(batch, tokenizer.all_special_ids).sum(1).double()
    assert n.tolist() == [5, 12, 1]
    expected = [0.0, float((1 / n).mean()), float((torch.minimum(n, torch.tensor(3)) / n).mean())]
    assert stats["fraction"] == pytest.approx(expected)
    assert len(stats["values"]["final/auroc_knn_distance"]) == 3


def test_statistics_need_representations(tiny_bert, tokenizer):
    curves = _evaluate(tiny_bert, tokenizer, collect=False)["one_shot"]
    with pytest.raises(ValueError, match="collect_representations"):
        masking_ood_statistics(curves, OODDetectors())


class _Constant:
    """A degenerate detector: the same score for every input (MaSF: the same p-value)."""

    def __init__(self, value):
        self.value = value

    def score(self, features):
        return np.full(len(features), self.value) + 1e-9 * np.random.default_rng(0).normal(size=len(features))

    def p_values(self, layer_max):
        return np.full(len(layer_max), self.value)


def test_degenerate_detectors_are_missing_with_a_warning_never_one_half(tiny_bert, tokenizer, caplog):
    curves = _evaluate(tiny_bert, tokenizer, collect=True)["one_shot"]
    train, labels = _train_reps(tiny_bert, tokenizer)
    detectors = OODDetectors.fit(train, labels, calibration=train, k=3)
    # Mahalanobis on the final-layer input and kNN on layer 1 constant (up to float noise), MaSF p = 1
    detectors.mahalanobis["final"], detectors.knn["layer_1"], detectors.masf = (
        _Constant(7.0),
        _Constant(0.3),
        _Constant(1.0),
    )
    with caplog.at_level(logging.WARNING, logger="itermask.ood.statistics"):
        stats = masking_ood_statistics(curves, detectors)
    for key, detector in (
        ("final/mahalanobis", "mahalanobis on final"),
        ("final/auroc_mahalanobis", "mahalanobis on final"),
        ("layer_1/knn_distance", "knn_distance on layer_1"),
        ("layer_1/auroc_knn_distance", "knn_distance on layer_1"),
        ("auroc_masf", "MaSF"),
        ("masf_flagged", "MaSF"),
        ("masf_p_median", "MaSF"),
    ):
        assert key not in stats.values, key
        assert stats.missing[key].startswith(
            f"degenerate detector: {detector} gives every clean and masked input the same score"
        )
    assert "degenerate detector: mahalanobis on final" in caplog.text and "degenerate detector: MaSF" in caplog.text
    # the others are computed as usual
    assert len(stats.values["layer_1/auroc_mahalanobis"]) == 3 and len(stats.values["final/auroc_knn_distance"]) == 3


def test_stored_per_example_mahalanobis_scores_are_the_detectors_and_reproduce_the_auroc(
    tiny_bert, tokenizer, tmp_path
):
    import pandas as pd

    from itermask.analyses.base import EvaluatedCurves
    from itermask.analyses.ood import OODAnalysis
    from itermask.ood.statistics import ood_auroc

    # 25 % of the one-token text "bad" masks 0 tokens: a k = 0 row past step 0, scored as the clean input
    fractions = (0.0, 0.25, 0.5, 1.0)
    curves = _evaluate(tiny_bert, tokenizer, collect=True, fractions=fractions)
    assert (curves["one_shot"].k[:, 1] == 0).tolist() == [False, False, True]
    train, labels = _train_reps(tiny_bert, tokenizer)
    detectors = OODDetectors.fit(train, labels, knn=False)
    computed = {"random": {s: masking_ood_statistics(c, detectors) for s, c in curves.items()}}
    evaluated = EvaluatedCurves({"random": curves}, "random", None, "fraction", fractions)
    written = OODAnalysis._write_example_scores(tmp_path, evaluated, computed)
    assert list(written) == ["per_example/ood.parquet"]
    stored = pd.read_parquet(tmp_path / "per_example/ood.parquet")
    assert stored.mahalanobis.dtype == np.float32 and len(stored) == 2 * 3 * 4
    scorer = detectors.mahalanobis["final"]
    for schedule, c in curves.items():
        rows = pd.DataFrame(stored[stored.schedule == schedule]).sort_values(by=["example_id", "step"])
        assert rows.example_id.tolist() == np.repeat(c.example_ids.numpy(), 4).tolist()
        assert rows.k.tolist() == c.k.reshape(-1).tolist()
        # the detector on the representations directly, the k = 0 inputs scored as their clean input
        assert c.features is not None and c.clean_features is not None
        clean = scorer.score(c.clean_features)
        direct = scorer.score(c.features.reshape(12, -1)).reshape(3, 4)
        direct = np.where(c.k.numpy() == 0, clean[:, None], direct)
        masked = rows.mahalanobis.to_numpy().reshape(3, 4)
        np.testing.assert_allclose(masked, direct, rtol=1e-6)
        np.testing.assert_allclose(rows.clean_mahalanobis.to_numpy().reshape(3, 4)[:, 0], clean, rtol=1e-6)
        stored_auroc = computed["random"][schedule].to_dict()["values"]["final/auroc_mahalanobis"]
        assert [ood_auroc(masked[:, 0], masked[:, s]) for s in range(4)] == stored_auroc
        assert [ood_auroc(rows.clean_mahalanobis.to_numpy()[::4], masked[:, s]) for s in range(4)] == stored_auroc
