"""Softmax statistics, ECE and OOD AUROC on constructed data with known answers."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from itermask.ood.statistics import (
    DegenerateScores,
    calibration_bins,
    calibration_error,
    expected_calibration_error,
    ood_auroc,
    predictive_entropy,
)

ROOT = Path(__file__).resolve().parents[2]


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
