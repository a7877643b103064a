"""Mahalanobis, kNN and MaSF detectors on constructed data with known answers."""

import logging
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats as scipy_stats

from itermask.ood.detectors import KNNScorer, MahalanobisScorer, MaSF, empirical_p_values, simes
from itermask.ood.statistics import (
    ood_auroc,
)

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize("covariance", ["empirical", "ledoit_wolf"])
def test_mahalanobis_scores_equal_sklearns_distances(covariance):
    """score() computes the distances by matrix products instead of sklearn's mahalanobis() (scipy's cdist);
    they agree to float64 round-off, for both estimators, with the closest of 3 class means."""
    rng = np.random.default_rng(0)
    train = torch.tensor(rng.normal(size=(300, 16)) @ rng.normal(size=(16, 16)), dtype=torch.float32)
    labels = torch.tensor(rng.integers(0, 3, 300))
    scorer = MahalanobisScorer(covariance).fit(train, labels)
    query = torch.tensor(rng.normal(size=(50, 16)) * 2, dtype=torch.float32)
    x = query.double().numpy()
    expected = np.min(np.stack([scorer.model.mahalanobis(x - mean) for mean in scorer.means]), axis=0)
    np.testing.assert_allclose(scorer.score(query), expected, rtol=1e-9, atol=1e-9)


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
