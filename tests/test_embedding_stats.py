"""Embedding statistics on constructed data with known answers; representation capture on tiny random
models; masked fine-tuning; the checkpoint key; a small end-to-end run with the OOD analysis on."""

import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats as scipy_stats
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
from itermask.core.schedules import masked_counts
from itermask.core.tokens import TokenBatch, class_logits, maskable_positions
from itermask.ood.detectors import KNNScorer, MahalanobisScorer, MaSF, OODDetectors, empirical_p_values, simes
from itermask.ood.statistics import (
    DegenerateScores,
    calibration_bins,
    calibration_error,
    expected_calibration_error,
    masking_ood_statistics,
    ood_auroc,
    predictive_entropy,
)
from itermask.storage.store import SCHEMA_VERSION
from itermask.training.augmentation import RandomMaskingAugmentation

ROOT = Path(__file__).resolve().parents[1]


# --- Mahalanobis (Lee et al. 2018, Eq. 2) -----------------------------------------------------------


def _two_class_cross(a=2.0, b=4.0):
    """Class c: mean mu_c plus the 4 offsets (+-a, 0), (0, +-b): tied covariance diag(a^2/2, b^2/2)."""
    offsets = torch.tensor([[a, 0.0], [-a, 0.0], [0.0, b], [0.0, -b]])
    means = torch.tensor([[10.0, 0.0], [-10.0, 0.0]])
    x = torch.cat([means[0] + offsets, means[1] + offsets])
    y = torch.tensor([0] * 4 + [1] * 4)
    return x, y


def test_mahalanobis_exact_on_a_constructed_set():
    x, y = _two_class_cross()  # Sigma = diag(2, 8)
    scorer = MahalanobisScorer().fit(x, y)
    assert scorer.estimator == "empirical"
    np.testing.assert_allclose(scorer.means, [[10, 0], [-10, 0]])
    np.testing.assert_allclose(scorer.model.covariance_, [[2, 0], [0, 8]], atol=1e-12)
    queries = torch.tensor([[10.0, 4.0], [0.0, 0.0], [-12.0, -2.0]])
    # (0,4): 16/8 = 2 to class 0; (+-10,0): 100/2 = 50 to both; (-2,-2) from class 1: 4/2 + 4/8 = 2.5
    np.testing.assert_allclose(scorer.score(queries), [2.0, 50.0, 2.5], rtol=1e-10)


def test_mahalanobis_on_gaussians_is_chi_square():
    rng = np.random.default_rng(0)
    dim = 5
    root = rng.normal(size=(dim, dim))
    cov = root @ root.T + np.eye(dim)
    means = np.stack([np.full(dim, 20.0), np.full(dim, -20.0)])  # far apart: the own class is the closest
    labels = rng.integers(0, 2, size=40000)
    x = means[labels] + rng.multivariate_normal(np.zeros(dim), cov, size=len(labels))
    scorer = MahalanobisScorer().fit(torch.tensor(x), torch.tensor(labels))
    fresh = means[1] + rng.multivariate_normal(np.zeros(dim), cov, size=5000)
    scores = scorer.score(torch.tensor(fresh))
    assert scores.mean() == pytest.approx(dim, rel=0.05)  # E[chi^2_5] = 5
    assert scipy_stats.kstest(scores, scipy_stats.chi2(dim).cdf).pvalue > 0.01
    # a point at mu + Sigma^{1/2} v lies at squared distance |v|^2 = 9
    v = np.array([3.0, 0, 0, 0, 0])
    point = means[0] + np.linalg.cholesky(cov) @ v
    assert scorer.score(torch.tensor(point[None]))[0] == pytest.approx(9.0, rel=0.03)


def test_mahalanobis_falls_back_to_ledoit_wolf_with_few_examples(caplog):
    torch.manual_seed(0)
    x, y = torch.randn(12, 32), torch.tensor([0, 1] * 6)
    with caplog.at_level(logging.WARNING, logger="itermask.embedding_stats"):
        scorer = MahalanobisScorer().fit(x, y, name="final")
    assert scorer.estimator == "ledoit_wolf" and 0 < scorer.shrinkage <= 1
    assert "Ledoit-Wolf" in caplog.text and "final" in caplog.text
    assert np.isfinite(scorer.score(torch.randn(4, 32))).all()
    forced = MahalanobisScorer("ledoit_wolf").fit(*_two_class_cross())
    assert forced.estimator == "ledoit_wolf"
    with pytest.raises(ValueError, match="covariance"):
        MahalanobisScorer("pinv")


def test_mahalanobis_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        MahalanobisScorer().fit(torch.zeros(1, 3), torch.tensor([0]))
    with pytest.raises(ValueError, match="gold label"):
        MahalanobisScorer().fit(torch.zeros(3, 3), torch.tensor([0, -1, 1]))


# --- kNN ---------------------------------------------------------------------------------------------


def test_knn_distance_known_answers():
    train = torch.tensor([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0], [6.0, 0.0]])
    assert KNNScorer(k=2, normalize=False).fit(train).score(torch.tensor([[0.0, 0.0]]))[0] == pytest.approx(1.0)
    np.testing.assert_allclose(
        KNNScorer(k=3, normalize=False).fit(train).score(torch.tensor([[2.0, 0.0], [6.0, 4.0]])), [2.0, math.sqrt(41)]
    )  # (6,4): 4, 5, sqrt(41)
    # normalised: (3, 3) -> (1, 1)/sqrt(2), nearest unit vector (1, 0) at sqrt(2 - sqrt(2))
    unit = KNNScorer(k=1).fit(torch.tensor([[1.0, 0.0], [0.0, -2.0]]))
    assert unit.score(torch.tensor([[3.0, 3.0]]))[0] == pytest.approx(math.sqrt(2 - math.sqrt(2)))
    with pytest.raises(ValueError, match="k=5"):
        KNNScorer(k=5).fit(train)
    with pytest.raises(ValueError, match="at least 1"):
        KNNScorer(k=0)


# --- MaSF ----------------------------------------------------------------------------------------------


def test_empirical_p_values_and_simes_by_hand():
    ref = np.array([1.0, 2.0, 3.0, 4.0])
    values = np.array([2.5, 0.0, 4.0])
    np.testing.assert_allclose(empirical_p_values(ref, values, "left"), [3 / 5, 1 / 5, 5 / 5])
    np.testing.assert_allclose(empirical_p_values(ref, values, "right"), [3 / 5, 5 / 5, 2 / 5])
    np.testing.assert_allclose(empirical_p_values(ref, values, "two-sided"), [1.0, 2 / 5, 4 / 5])
    np.testing.assert_allclose(empirical_p_values(ref, ref, "right", in_sample=True), [1, 3 / 4, 2 / 4, 1 / 4])
    # columns are independent: [n, 2] reference
    two = empirical_p_values(np.stack([ref, -ref], 1), np.array([[0.0, 0.0]]), "left")
    np.testing.assert_allclose(two, [[1 / 5, 5 / 5]])
    # Simes: min(3 * 0.01 / 1, 3 * 0.04 / 2, 3 * 0.5 / 3) = 0.03
    assert simes(np.array([[0.5, 0.01, 0.04]]))[0] == pytest.approx(0.03)
    with pytest.raises(ValueError, match="tail"):
        empirical_p_values(ref, values, "up")


def _layers(n, rng, shift=0.0):
    """[n, 3 layers, 16 dims] correlated Gaussians; ``shift`` moves 4 dims of every layer."""
    base = rng.normal(size=(n, 1, 16))
    x = 0.6 * base + rng.normal(size=(n, 3, 16))
    x[:, :, :4] += shift
    return torch.tensor(x, dtype=torch.float32)


def test_masf_p_values_uniform_in_distribution_and_small_when_shifted():
    rng = np.random.default_rng(1)
    masf = MaSF().fit(_layers(1500, rng), _layers(1500, rng))
    p = masf.p_values(_layers(2000, rng))
    assert scipy_stats.kstest(p, "uniform").pvalue > 0.01
    assert (p < 0.05).mean() == pytest.approx(0.05, abs=0.02)
    shifted = masf.p_values(_layers(500, rng, shift=4.0))
    assert (shifted < 0.05).mean() > 0.9
    assert np.median(shifted) < 0.01


def test_masf_auroc_is_1_for_far_apart_distributions_despite_the_p_value_floor():
    """N(0, 1) vs N(10, 1): every shifted input gets the smallest p-value 1 / (n_cal + 1), and so do the
    in-distribution inputs beyond every calibration sample; on p-values alone they tie and the AUROC stays
    below 1. The scores break those ties by the distance to the fit samples: AUROC 1.0, and every strict
    order of the p-values kept."""
    rng = np.random.default_rng(0)
    shape = (3, 8)
    masf = MaSF().fit(torch.tensor(rng.normal(size=(100, *shape))), torch.tensor(rng.normal(size=(100, *shape))))
    clean, far = torch.tensor(rng.normal(size=(400, *shape))), torch.tensor(rng.normal(10, 1, size=(400, *shape)))
    clean_p, far_p = masf.p_values(clean), masf.p_values(far)
    floor = 1 / (len(masf.level3) + 1)
    assert far_p.max() == pytest.approx(floor) and (clean_p == far_p.max()).sum() > 0
    assert ood_auroc(1 - clean_p, 1 - far_p) < 1
    clean_score, far_score = masf.scores(clean), masf.scores(far)
    assert ood_auroc(clean_score, far_score) == 1.0
    np.testing.assert_array_equal(masf.scores(clean, clean_p), clean_score)
    p, score = np.concatenate([clean_p, far_p]), np.concatenate([clean_score, far_score])
    lower = p[:, None] < p[None, :]  # a smaller p-value always scores higher
    assert (score[:, None] > score[None, :])[lower].all()
    assert ((1 - p <= score) & (score < 1 - p + floor)).all()


# --- softmax statistics, ECE, AUROC -----------------------------------------------------------------


def _logits_for(p1):
    """Two-class logits whose softmax gives class 1 probability ``p1``."""
    p1 = torch.tensor(p1, dtype=torch.float64)
    return torch.stack([torch.zeros_like(p1), torch.log(p1 / (1 - p1))], dim=-1)


def test_expected_calibration_error_by_hand():
    # confidences 0.95 (right), 0.75 (wrong), 0.7 (right), 0.55 (wrong), each alone in one of 15 bins
    logits = _logits_for([0.05, 0.75, 0.7, 0.45])
    labels = torch.tensor([0, 0, 1, 1])
    assert expected_calibration_error(logits, labels) == pytest.approx((0.05 + 0.75 + 0.3 + 0.55) / 4, abs=1e-6)
    # 0.72 (right) and 0.70 (wrong) share the bin (2/3, 11/15]: |0.5 - 0.71| * 2/3, plus 0.05 * 1/3
    logits = _logits_for([0.95, 0.72, 0.30])
    labels = torch.tensor([1, 1, 1])
    assert expected_calibration_error(logits, labels) == pytest.approx((0.05 + 2 * 0.21) / 3, abs=1e-6)
    with pytest.raises(ValueError, match="gold label"):
        expected_calibration_error(logits, torch.tensor([1, -1, 0]))
    with pytest.raises(ValueError, match="n_bins=0"):
        expected_calibration_error(logits, labels, n_bins=0)


def test_expected_calibration_error_puts_a_confidence_of_one_in_the_last_bin():
    # the case: 0.95 (right) and exactly 1.0 (wrong, saturated float32 softmax) in 10 bins share
    # the last bin (0.9, 1]: |acc 0.5 - conf 0.975| = 0.475 (torchmetrics 1.9.0 gives 0.525, issue 3510)
    logits = torch.tensor([[0.0, math.log(0.95 / 0.05)], [100.0, 0.0]], dtype=torch.float64)
    assert logits.softmax(-1).amax(-1)[1].item() == 1.0
    assert expected_calibration_error(logits, torch.tensor([1, 1]), n_bins=10) == pytest.approx(0.475, abs=1e-12)
    # saturated float32 logits only: confidence exactly 1.0 each, 2 of 3 right -> |2/3 - 1| = 1/3
    saturated = torch.tensor([[0.0, 40.0], [0.0, 60.0], [-50.0, 50.0]], dtype=torch.float32)
    assert (saturated.softmax(-1).amax(-1) == 1.0).all()
    assert expected_calibration_error(saturated, torch.tensor([1, 1, 0]), n_bins=15) == pytest.approx(1 / 3, abs=1e-12)


def test_calibration_bins_close_each_bin_at_its_upper_edge():
    # bins [0, 0.1], (0.1, 0.2], ..., (0.9, 1.0]: 0.0 in the first, 1.0 in the last, an edge in the bin it closes
    confidence = np.array([0.0, 0.05, 0.1, 0.1000001, 0.3, 0.5, 0.95, 1.0])
    np.testing.assert_array_equal(calibration_bins(confidence, 10), [0, 0, 0, 1, 2, 4, 9, 9])
    np.testing.assert_array_equal(calibration_bins(np.array([0.0, 0.5, 1.0]), 1), [0, 0, 0])
    # a confidence of 0.0 (right) and 1.0 (wrong): each bin is off by 1
    assert calibration_error(np.array([0.0, 1.0]), np.array([True, False]), 10) == 1.0
    assert calibration_error(np.array([0.0, 1.0]), np.array([False, True]), 10) == 0.0


def test_expected_calibration_error_agrees_with_torchmetrics_away_from_the_edges():
    from torchmetrics.functional.classification import multiclass_calibration_error

    torch.manual_seed(0)
    logits, labels = torch.randn(500, 3) * 2, torch.randint(0, 3, (500,))
    probs = logits.double().softmax(-1)
    expected = multiclass_calibration_error(probs, labels, num_classes=3, n_bins=15, norm="l1")
    assert expected_calibration_error(logits, labels) == pytest.approx(float(expected), abs=1e-6)  # its float32


def test_entropy_and_auroc_by_hand():
    assert predictive_entropy(torch.zeros(1, 2)).item() == pytest.approx(math.log(2))
    assert predictive_entropy(torch.tensor([[0.0, 100.0]])).item() == pytest.approx(0.0, abs=1e-6)
    assert ood_auroc([0.1, 0.2], [0.3, 0.4]) == 1.0
    assert ood_auroc([0.1, 0.3], [0.2, 0.4]) == 0.75
    assert ood_auroc([1.0, 2.0], [1.0 + 1e-3, 2.0 + 1e-3]) == 0.75  # real differences still count
    with pytest.raises(ValueError, match="non-finite"):
        ood_auroc([0.1, float("nan")], [0.2, 0.3])


def test_auroc_with_one_extreme_score():
    # one huge score (a near-singular covariance, an outlier) must not collapse the others into ties
    assert ood_auroc([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 1e12]) == 1.0
    assert ood_auroc([1.0, 2.0, 3.0, 1e12], [4.0, 5.0, 6.0, 7.0]) == 12 / 16  # the huge clean one beats all
    assert ood_auroc([1e-3, 2e-3, 3e-3], [4e-3, 5e-3, 1e15]) == 1.0


def test_auroc_with_ties_counts_them_one_half():
    from sklearn.metrics import roc_auc_score

    clean, masked = [1.0, 2.0, 2.0, 3.0], [2.0, 3.0, 4.0]
    # masked 2: 1 clean below, 2 tied -> 2; masked 3: 3 below, 1 tied -> 3.5; masked 4: 4 -> 9.5 of 12
    assert ood_auroc(clean, masked) == 9.5 / 12
    rng = np.random.default_rng(0)
    clean, masked = rng.integers(0, 5, 40).astype(float), rng.integers(1, 7, 30).astype(float)
    truth = np.r_[np.zeros(40), np.ones(30)]
    assert ood_auroc(clean, masked) == pytest.approx(roc_auc_score(truth, np.r_[clean, masked]), abs=1e-15)


def test_auroc_at_zero_masking_is_one_half():
    # masked 0 %: the clean inputs again, up to the float noise of differently padded batches (~1e-6 of the
    # scores' size, measured); the scores sit far from 0 (their size is 50x their spread)
    rng = np.random.default_rng(1)
    clean = 1000 + 20 * rng.normal(size=100)
    noisy = clean * (1 + 1e-7 * rng.normal(size=100))
    assert not np.array_equal(noisy, clean)
    assert ood_auroc(clean, noisy) == 0.5
    assert ood_auroc(clean, clean + 1e-6 * 27 * rng.normal(size=100)) == 0.5  # 1e-6 of the IQR
    # and a real shift of a share of a standard deviation is not noise
    assert ood_auroc(clean, clean + 2.0) > 0.5


def test_auroc_of_scores_that_all_tie_is_degenerate_not_one_half():
    with pytest.raises(DegenerateScores, match="tie"):
        ood_auroc([1.0, 1.0], [1.0, 1.0])
    assert isinstance(DegenerateScores("x"), ValueError)
    assert ood_auroc([5.0, 5.0, 5.0, 6.0], [5.0, 5.0, 5.0, 5.0]) == 6 / 16  # most tie, one does not


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

    from itermask.training.sources import shipped_source

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


# --- masked fine-tuning -------------------------------------------------------------------------------


def test_masking_augmentation_masks_a_uniform_fraction(tokenizer):
    batch = _batch(tokenizer, TEXTS * 4)
    augmentation = RandomMaskingAugmentation(MaskToken(tokenizer), tokenizer.all_special_ids, batch_share=1.0, seed=3)
    maskable = maskable_positions(batch, tokenizer.all_special_ids)
    mask, fractions = augmentation.sample(batch)
    assert not (mask & ~maskable).any()  # special tokens and padding are never masked
    expected = torch.diagonal(masked_counts(maskable.sum(1), fractions))
    assert torch.equal(mask.sum(1), expected)
    masked = augmentation(batch)
    assert (masked.input_ids == tokenizer.mask_token_id).sum() > 0
    assert torch.equal(masked.attention_mask, batch.attention_mask)
    never = RandomMaskingAugmentation(MaskToken(tokenizer), tokenizer.all_special_ids, batch_share=0.0)
    assert never(batch) is batch
    half = RandomMaskingAugmentation(MaskToken(tokenizer), tokenizer.all_special_ids, batch_share=0.5, seed=0)
    share = np.mean([half(batch) is not batch for _ in range(400)])
    assert 0.42 < share < 0.58
    # fractions are uniform on [0, 1]
    draws = torch.cat([augmentation.sample(batch)[1] for _ in range(300)]).numpy()
    assert scipy_stats.kstest(draws, "uniform").pvalue > 0.01
    with pytest.raises(ValueError, match="batch_share"):
        RandomMaskingAugmentation(MaskToken(tokenizer), [], batch_share=1.5)


def test_checkpoint_key_includes_masking_augmentation_only_when_enabled():
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from itermask.settings import training_key_of as training_key

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        standard = compose("evaluate", overrides=["output_dir=/tmp/unused"])
        masked = compose("evaluate", overrides=["output_dir=/tmp/unused", "train.masking_augmentation.enabled=true"])
        masked_delete = compose(
            "evaluate",
            overrides=["output_dir=/tmp/unused", "train.masking_augmentation.enabled=true", "masking=delete"],
        )
        masked_share = compose(
            "evaluate",
            overrides=[
                "output_dir=/tmp/unused",
                "train.masking_augmentation.enabled=true",
                "train.masking_augmentation.batch_share=0.25",
            ],
        )
        standard_delete = compose("evaluate", overrides=["output_dir=/tmp/unused", "masking=delete"])
        experiment = compose(
            "evaluate", overrides=["output_dir=/tmp/unused", "experiment=masked_vs_standard"], return_hydra_config=True
        )
    keys = {
        name: training_key(cfg)[0]
        for name, cfg in [
            ("standard", standard),
            ("masked", masked),
            ("masked_delete", masked_delete),
            ("masked_share", masked_share),
            ("standard_delete", standard_delete),
        ]
    }
    assert len({keys["standard"], keys["masked"], keys["masked_delete"], keys["masked_share"]}) == 4
    assert keys["standard_delete"] == keys["standard"]  # disabled: the strategy does not matter
    # a disabled section leaves the key of standard fine-tuning as it was before the option existed
    legacy = standard.copy()
    with open_dict(legacy):
        del legacy.train.masking_augmentation
    assert training_key(legacy)[0] == keys["standard"]
    payload = training_key(masked)[1]
    # the key holds each component's config name and settings, not its module path (_target_)
    assert payload["train"]["masking_augmentation"]["strategy"] == {"name": "mask_token"}
    assert experiment.ood.level == "full"
    assert experiment.hydra.sweeper.params["train.masking_augmentation.enabled"] == "false,true"


# --- end to end -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_evaluate_with_ood_statistics_and_masked_fine_tuning(tmp_path):
    env = {
        **os.environ,
        "ITERMASK_CACHE": str(tmp_path / "cache"),
        "WANDB_MODE": "offline",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_SILENT": "true",
    }
    import pandas as pd

    # a small CSV (320 / 40 / 40 train / validation / test) keeps the accuracy pass and fitting short
    pd.read_csv(ROOT / "src/itermask/resources/rt_snippets/train.csv", keep_default_na=False).head(400).to_csv(
        tmp_path / "small.csv", index=False
    )
    args = [
        "dataset=csv",
        f"dataset.source.path={tmp_path}/small.csv",
        "train.max_train_examples=96",
        "train.masking_augmentation.enabled=true",
        "evaluation.n_examples=8",
        "evaluation.compare_random=false",
        "evaluation.fractions=[0.0,0.1,0.5,0.9,1.0]",
        "evaluation.aopc_bins=[0.1,0.5]",
        "ood.level=full",
        "ood.n_fit_examples=60",
        "ood.plots.umap_train_points=40",
        "ood.plots.umap_neighbors=5",
        f"hydra.run.dir={tmp_path}/run",
    ]
    out = subprocess.run(
        [sys.executable, "evaluate.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    result = json.loads((tmp_path / "run/results.json").read_text())
    assert result["config"]["train"]["masking_augmentation"]["enabled"] is True
    assert result["schema_version"] == SCHEMA_VERSION
    ood = result["ood"]
    fit = ood["fit"]
    assert fit["n_train"] == 60 and fit["masf_fit"] == fit["n_calibration"] // 2 > 10
    assert fit["masf_fit"] + fit["masf_calibration"] == fit["n_calibration"]
    assert ood["fit"]["final/covariance"] == "ledoit_wolf"  # 60 examples < hidden size 384
    assert "Ledoit-Wolf" in (tmp_path / "run/evaluate.log").read_text()
    assert list(ood["statistics"]) == ["gradient"]
    for method in ("gradient",):
        for schedule in ("one_shot", "recursive"):
            stats = ood["statistics"][method][schedule]
            assert stats["n_examples"] == result["n_evaluated"]
            # fraction 0 masks nothing: the masked inputs are the clean ones, exactly indistinguishable
            for key in ("final/auroc_mahalanobis", "final/auroc_knn_distance", "auroc_masf", "auroc_max_softmax"):
                assert stats["values"][key][0] == 0.5, key
            assert len(stats["values"]["layer_6/mahalanobis"]) == 5
            assert 0 <= min(stats["values"]["masf_flagged"]) <= max(stats["values"]["masf_flagged"]) <= 1
    for name in ("ood_statistics.png", "ood_umap.png", "ood_mahalanobis_auroc_by_layer.png"):
        assert (tmp_path / "run" / name).stat().st_size > 10000
    run_dir = next((tmp_path / "run/wandb").glob("offline-run-*"))
    images = list((run_dir / "files/media/images").rglob("*.png"))
    assert len(images) == 3
    assert list((run_dir / "files/media/table").glob("ood_statistics_*.table.json"))


# --- reporting ----------------------------------------------------------------------------------------


def _ood_section():
    stats = {
        "steps": "fraction",
        "x": [0.0, 0.5, 1.0],
        "fraction": [0.0, 0.5, 1.0],
        "n_examples": 2,
        "values": {
            "final/auroc_mahalanobis": [0.5, 0.75, 1.0],
            "layer_1/auroc_mahalanobis": [0.5, 0.6, 0.7],
            "masf_flagged": [0.0, 0.5, 1.0],
            "final/l2_norm": [3.0, 2.0, 1.0],
        },
        "clean": {"final/l2_norm": 3.0},
        "missing": {"ece": "ECE needs gold labels"},
    }
    return {"statistics": {"gradient": {"one_shot": stats, "recursive": stats}}}


def test_ood_rows_and_csv_logging(tmp_path):
    from pytorch_lightning.loggers import CSVLogger

    from itermask.analyses.ood import OOD_COLUMNS, OODAnalysis, ood_rows
    from itermask.tracking import log_artifacts

    rows = ood_rows(_ood_section())
    assert len(rows) == 2 * 4 * 3 and len(rows[0]) == len(OOD_COLUMNS)
    assert ["gradient/one_shot", "gradient", "one_shot", 0.5, "final/auroc_mahalanobis", 0.75] in rows
    logger = CSVLogger(str(tmp_path))
    log_artifacts(logger, OODAnalysis._artifacts(_ood_section(), images={}))
    import pandas as pd

    metrics = pd.read_csv(next(tmp_path.rglob("metrics.csv")))
    assert metrics["ood/gradient/recursive/final/auroc_mahalanobis@0.5"].dropna().tolist() == [0.75]
    assert metrics["ood/gradient/one_shot/masf_flagged@1"].dropna().tolist() == [1.0]
    assert not any(c.startswith("ood/gradient/one_shot/layer_1") for c in metrics.columns)  # per-layer: table only


def test_ood_statistics_reach_wandb_as_curves_over_the_masking_step(tmp_path):
    from pytorch_lightning.loggers import WandbLogger
    from test_tracking import history, read_wandb_run

    from itermask import tracking
    from itermask.analyses.ood import OODAnalysis

    logger = WandbLogger(project="itermask", save_dir=str(tmp_path), mode="offline")
    tracking.log_artifacts(logger, OODAnalysis._artifacts(_ood_section(), images={}))
    run_dir = Path(logger.experiment.dir).parent
    tracking.finish(logger)
    rows = [row for row in history(read_wandb_run(run_dir)) if "masked_fraction" in row]
    assert [row["masked_fraction"] for row in rows] == [0.0, 0.5, 1.0]
    assert [row["ood/gradient/recursive/final/auroc_mahalanobis"] for row in rows] == [0.5, 0.75, 1.0]
    assert [row["ood/gradient/one_shot/masf_flagged"] for row in rows] == [0.0, 0.5, 1.0]
    assert not any(key.startswith("ood/gradient/one_shot/layer_1") for row in rows for key in row)  # table only


def test_ood_figures(tmp_path):
    from itermask.ood import plots as ood_plots

    fig = ood_plots.statistics_figure(_ood_section()["statistics"], keys=["final/l2_norm", "ece"])
    first, second = fig.axes[:2]
    assert len(first.lines) == 2 + 1  # two curves and the clean value
    assert "ECE needs gold labels" in second.texts[0].get_text()
    layers = ood_plots.layer_figure(_ood_section()["statistics"]["gradient"], "auroc_mahalanobis")
    assert [line.get_label() for line in layers.axes[0].lines[:2]] == ["final", "layer_1"]
    path = ood_plots.save(fig, tmp_path / "f.png")
    assert path.read_bytes()[:4] == b"\x89PNG" and not list(tmp_path.glob(".f.*"))
