"""Out-of-distribution detectors fitted on in-distribution embeddings (plain library: tensors in, arrays
and small dataclasses out; no Hydra, no logging backend, no files).

Representations ("views") scored: ``final`` (input of the final linear layer) and ``layer_<i>`` (hidden
state ``i`` mean-pooled over attended tokens; ``layer_0`` is the embedding output). Higher scores are more
out-of-distribution. Detectors: the Mahalanobis score (:class:`MahalanobisScorer`; Lee et al. 2018, arXiv
1807.03888, Eq. 2, without the input preprocessing of Eq. 4 and the feature ensemble: each view is scored
alone), the k-nearest-neighbour distance (:class:`KNNScorer`; Sun et al. 2022, arXiv 2204.06507) and MaSF
(:class:`MaSF`; Madsen et al. 2023, arXiv 2310.07819, after Haroush et al. 2022, ICLR "A statistical framework
for efficient out of distribution detection"), on scikit-learn and scipy.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from scipy import stats as scipy_stats
from sklearn.covariance import EmpiricalCovariance, LedoitWolf
from sklearn.neighbors import NearestNeighbors
from torch import Tensor

from itermask.core.representations import Representations

log = logging.getLogger(__name__)

__all__ = [
    "COVARIANCES",
    "representation_views",
    "MahalanobisScorer",
    "KNNScorer",
    "MaSF",
    "empirical_p_values",
    "simes",
    "fisher",
    "OODDetectors",
]

Covariance = Literal["auto", "empirical", "ledoit_wolf"]
COVARIANCES = ("auto", "empirical", "ledoit_wolf")  # the values of Covariance


def representation_views(reps: Representations) -> dict[str, Tensor]:
    """The views scored: ``{"final": features [..., D], "layer_0": layer_mean[..., 0, :], ...}`` (only
    ``final`` when the hidden states were not captured)."""
    views = {"final": reps.features}
    if (layer_mean := reps.layer_mean) is not None:
        views |= {f"layer_{i}": layer_mean[..., i, :] for i in range(layer_mean.shape[-2])}
    return views


def _numpy(x: Tensor | np.ndarray) -> np.ndarray:
    return x.detach().cpu().double().numpy() if isinstance(x, Tensor) else np.asarray(x, dtype=np.float64)


class MahalanobisScorer:
    """Squared Mahalanobis distance to the closest class mean (Lee et al. 2018, arXiv 1807.03888, Eq. 2).

    Fitted on training embeddings ``f(x_i)`` with gold labels ``y_i``: class means ``mu_c`` and the tied
    covariance ``Sigma = 1/N sum_c sum_{i: y_i = c} (f(x_i) - mu_c)(f(x_i) - mu_c)^T``. The score of
    ``x`` is ``min_c (f(x) - mu_c)^T Sigma^-1 (f(x) - mu_c)`` (the negative of Lee et al.'s confidence
    ``M(x)``), so higher is more out-of-distribution.

    Args:
        covariance: ``"empirical"`` (maximum likelihood), ``"ledoit_wolf"`` (shrinkage; Ledoit & Wolf
            2004) or ``"auto"``: empirical unless the training set is too small for a full-rank
            estimate (``N - C < D``: fewer examples than the dimension plus classes), then Ledoit-Wolf
            with a logged warning.

    Attributes (after :meth:`fit`):
        classes: ``[C]`` class ids present in the training labels.
        means: ``[C, D]`` class means.
        estimator: ``"empirical"`` or ``"ledoit_wolf"``, the estimator used.
        shrinkage: Ledoit-Wolf's shrinkage coefficient in [0, 1], or ``None``.
    """

    def __init__(self, covariance: Covariance = "auto") -> None:
        if covariance not in COVARIANCES:
            raise ValueError(f"covariance must be one of {COVARIANCES}, got {covariance!r}")
        self.covariance = covariance
        self.estimator: str | None = None
        self.shrinkage: float | None = None

    def fit(self, features: Tensor, labels: Tensor, name: str = "embeddings") -> MahalanobisScorer:
        """Fit class means and the tied covariance on ``[N, D]`` training ``features`` and their ``[N]`` long gold
        ``labels`` (``name``: what the embeddings are, for the log message).

        Raises:
            ValueError: with fewer than 2 examples, mismatched shapes, or a negative (unknown) label.
        """
        x = _numpy(features)
        y = labels.detach().cpu().numpy() if isinstance(labels, Tensor) else np.asarray(labels)
        if x.ndim != 2 or y.shape != (x.shape[0],):
            raise ValueError(f"features must be [N, D] and labels [N], got {x.shape} and {y.shape}")
        if x.shape[0] < 2:
            raise ValueError(f"the Mahalanobis score needs at least 2 training examples, got {x.shape[0]}")
        if (y < 0).any():
            raise ValueError("the Mahalanobis score needs a gold label for every training example")
        self.classes = np.unique(y)
        self.means = np.stack([x[y == c].mean(axis=0) for c in self.classes])
        centred = x - self.means[np.searchsorted(self.classes, y)]
        n, dim = x.shape
        estimator = self.covariance
        if estimator == "auto":
            estimator = "empirical"
            if n - len(self.classes) < dim:
                estimator = "ledoit_wolf"
                log.warning(
                    "Mahalanobis (%s): %d training examples in %d classes are too few for a full-rank "
                    "covariance of dimension %d; using the Ledoit-Wolf shrinkage estimator",
                    name,
                    n,
                    len(self.classes),
                    dim,
                )
        if estimator == "ledoit_wolf":
            self.model = LedoitWolf(assume_centered=True).fit(centred)
            self.shrinkage = float(self.model.shrinkage_)
        else:
            self.model = EmpiricalCovariance(assume_centered=True).fit(centred)
            self.shrinkage = None
        self.estimator = estimator
        return self

    def score(self, features: Tensor) -> np.ndarray:
        """``[M]`` float64 squared Mahalanobis distance of ``features`` (``[M, D]``) to the closest class mean."""
        x = _numpy(features).astype(np.float64, copy=False)
        precision = self.model.get_precision()
        # the squared distances of sklearn's ``mahalanobis()`` (tested against it), by one matrix product per class:
        # sklearn goes through scipy's cdist, row by row, about 25 times slower on F-Fidelity's 20k rows
        distances = []
        for mean in self.means:
            centred = x - mean
            distances.append(np.einsum("ij,ij->i", centred @ precision, centred))
        return np.min(np.stack(distances), axis=0)


class KNNScorer:
    """Distance to the ``k``-th nearest training embedding (Sun et al. 2022, arXiv 2204.06507).

    Args:
        k: which neighbour (1 = the nearest).
        normalize: L2-normalise training and query embeddings first (Sun et al., Sec. 3); then the
            distance lies in [0, 2].

    Raises:
        ValueError: if ``k < 1``.
    """

    def __init__(self, k: int = 10, normalize: bool = True) -> None:
        if int(k) < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self.k, self.normalize = int(k), normalize

    def _prepare(self, features: Tensor) -> np.ndarray:
        x = _numpy(features)
        if self.normalize:
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        return x

    def fit(self, features: Tensor) -> KNNScorer:
        """Index ``[N, D]`` training embeddings.

        Raises:
            ValueError: if there are fewer than ``k`` of them.
        """
        x = self._prepare(features)
        if x.shape[0] < self.k:
            raise ValueError(
                f"kNN distance with k={self.k} needs at least {self.k} training embeddings, got {x.shape[0]}"
            )
        self.index = NearestNeighbors(n_neighbors=self.k).fit(x)
        return self

    def score(self, features: Tensor) -> np.ndarray:
        """``[M]`` Euclidean distance of each row of ``features`` (``[M, D]``) to its k-th nearest neighbour."""
        distances, _ = self.index.kneighbors(self._prepare(features), n_neighbors=self.k)
        return distances[:, -1]


def empirical_p_values(
    reference: np.ndarray, values: np.ndarray, tail: Literal["left", "right", "two-sided"], in_sample: bool = False
) -> np.ndarray:
    """Empirical-CDF p-values of ``values`` against ``reference`` samples, column by column.

    With ``n`` reference samples, ``left = (1 + #{ref <= v}) / (n + 1)`` and
    ``right = (1 + #{ref >= v}) / (n + 1)`` (the conformal p-value: valid, never 0, uniform on
    ``{1/(n+1), ..., 1}`` when ``v`` is exchangeable with the reference); ``two-sided =
    min(1, 2 min(left, right))``. With ``in_sample`` the values *are* the reference samples and each is
    compared with the others only (leave one out), which gives ``#{ref <= v} / n`` and ``#{ref >= v} / n``.
    ``reference``: ``[n, *C]`` samples per column; ``values``: ``[M, *C]``; ``tail``: which tail counts as
    extreme. Returns ``[M, *C]`` float64 p-values in (0, 1].

    Raises:
        ValueError: for an empty reference, mismatched columns or an unknown tail.
    """
    if tail not in ("left", "right", "two-sided"):
        raise ValueError(f"tail must be 'left', 'right' or 'two-sided', got {tail!r}")
    reference, values = np.asarray(reference, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if reference.shape[0] == 0 or reference.shape[1:] != values.shape[1:]:
        raise ValueError(f"reference {reference.shape} and values {values.shape} must be [n>0, *C] and [M, *C]")
    n = reference.shape[0]
    # batched binary search over columns: torch.searchsorted takes [C, n] sorted rows and [C, M] queries
    ref = torch.from_numpy(np.sort(reference.reshape(n, -1).T, axis=1).copy())
    query = torch.from_numpy(values.reshape(values.shape[0], -1).T.copy())
    at_most = torch.searchsorted(ref, query, right=True).T.numpy().reshape(values.shape)
    at_least = n - torch.searchsorted(ref, query, right=False).T.numpy().reshape(values.shape)
    if in_sample:
        left, right = at_most / n, at_least / n
    else:
        left, right = (1 + at_most) / (n + 1), (1 + at_least) / (n + 1)
    if tail == "left":
        return left
    if tail == "right":
        return right
    return np.minimum(1.0, 2 * np.minimum(left, right))


def simes(p_values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Simes' combined p-value ``min_i m p_(i) / i`` along ``axis`` (Simes 1986), computed as the
    smallest Benjamini-Hochberg adjusted p-value (``scipy.stats.false_discovery_control``)."""
    return scipy_stats.false_discovery_control(p_values, axis=axis, method="bh").min(axis=axis)


def fisher(p_values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Fisher's combination statistic ``-2 sum log p`` along ``axis`` (``scipy.stats.combine_pvalues``)."""
    return scipy_stats.combine_pvalues(p_values, method="fisher", axis=axis).statistic  # pyright: ignore[reportAttributeAccessIssue]  # scipy's stub types the result as a bare tuple


class MaSF:
    """MaSF out-of-distribution test, as Madsen et al. 2023 (arXiv 2310.07819) use it in their code
    (``ecoroar/ood/masf.py``), after Haroush et al. 2022.

    Input: hidden states max-pooled over the attended tokens, ``[N, L+1, H]``
    (:attr:`itermask.core.representations.Representations.layer_max`).

    1. Per layer and dimension, a two-sided empirical p-value against the *fit* samples.
    2. Per layer, Simes across the ``H`` dimensions; that statistic gets a two-sided empirical p-value
       against the *calibration* samples' Simes statistics.
    3. Fisher across the ``L+1`` layers; that statistic gets a right-tailed empirical p-value against the
       calibration samples' Fisher statistics. Small = out of distribution.

    Unlike Madsen et al.'s code, which fits every level on the same validation set, level 1 is fitted on
    one half and levels 2 and 3 are calibrated on the other (the calibration samples' own level-2
    p-values leave each sample out), so the final p-value is close to uniform on in-distribution data.
    Empirical p-values are conformal (:func:`empirical_p_values`), so none is 0 and Fisher needs no
    ``eps``. The final p-value cannot go below ``1 / (n_cal + 1)``, so an AUROC on p-values alone stays below 1
    however far apart the distributions are: it is computed on :meth:`scores`, which breaks those ties.
    """

    def fit(self, fit_part: Tensor, calibration_part: Tensor) -> MaSF:
        """Fit level 1 on ``fit_part`` ``[N1, L+1, H]`` and calibrate levels 2 and 3 on ``calibration_part``
        ``[N2, L+1, H]``.

        Raises:
            ValueError: if either part is empty or their shapes differ beyond the first dimension.
        """
        fit, calibration = _numpy(fit_part), _numpy(calibration_part)
        if fit.ndim != 3 or fit.shape[1:] != calibration.shape[1:]:
            raise ValueError(f"MaSF parts must be [N, L+1, H] alike, got {fit.shape} and {calibration.shape}")
        if len(fit) == 0 or len(calibration) < 2:
            raise ValueError(f"MaSF needs fit and calibration samples (got {len(fit)} and {len(calibration)})")
        self.level1 = fit
        self.center = fit.mean(axis=0)  # [L+1, H], for the tie-break of scores()
        self.scale = np.maximum(fit.std(axis=0), 1e-12)
        self.level2 = simes(empirical_p_values(fit, calibration, "two-sided"))  # [N2, L+1]
        self.level3 = fisher(empirical_p_values(self.level2, self.level2, "two-sided", in_sample=True))  # [N2]
        return self

    def p_values(self, layer_max: Tensor) -> np.ndarray:
        """``[M]`` float64 p-values (small = out of distribution) for ``layer_max`` ``[M, L+1, H]``."""
        x = _numpy(layer_max)
        level2 = simes(empirical_p_values(self.level1, x, "two-sided"))
        level3 = fisher(empirical_p_values(self.level2, level2, "two-sided"))
        return empirical_p_values(self.level3, level3, "right")

    def scores(self, layer_max: Tensor, p_values: np.ndarray | None = None) -> np.ndarray:
        """``[M]`` float64 out-of-distribution scores (higher = more out of distribution): ``1 - p``
        (:meth:`p_values`) with its ties broken by the distance to the fit samples.

        The p-values are multiples of ``1 / (n_cal + 1)`` (``n_cal``: the calibration samples), and every input
        beyond all of those gets the floor ``1 / (n_cal + 1)``, tying a far out-of-distribution input with the
        in-distribution inputs that land there too. Within one step inputs are ordered by the mean absolute
        z-score of their max-pooled hidden states against the fit samples (``u``, over every layer and
        dimension), added as ``0.9 * u / (1 + u) / (n_cal + 1)``, less than one step: every input with a
        smaller p-value still scores higher. ``layer_max``: ``[M, L+1, H]``; ``p_values``: its :meth:`p_values`
        when already computed.
        """
        x = _numpy(layer_max)
        p = self.p_values(layer_max) if p_values is None else np.asarray(p_values, dtype=np.float64)
        distance = np.abs((x - self.center) / self.scale).mean(axis=(1, 2))
        return (1 - p) + 0.9 * (distance / (1 + distance)) / (len(self.level3) + 1)


@dataclass
class OODDetectors:
    """Detectors fitted on in-distribution data, and why any could not be fitted.

    Attributes:
        mahalanobis, knn: ``{view: scorer}`` (see :func:`representation_views`).
        masf: the fitted MaSF test, or ``None``.
        missing: ``{"<view>/mahalanobis" | "<view>/knn_distance" | "masf": reason}``.
        info: what was fitted on (counts, covariance estimators), plain values.
    """

    mahalanobis: dict[str, MahalanobisScorer] = field(default_factory=dict)
    knn: dict[str, KNNScorer] = field(default_factory=dict)
    masf: MaSF | None = None
    missing: dict[str, str] = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @classmethod
    def fit(
        cls,
        train: Representations,
        train_labels: Tensor,
        calibration: Representations | None = None,
        k: int = 10,
        normalize_knn: bool = True,
        covariance: Covariance = "auto",
        split_seed: int = 0,
        knn: bool = True,
    ) -> OODDetectors:
        """Fit Mahalanobis and kNN (unless ``knn`` is false) on training-split representations ``[N, ...]`` and
        their ``[N]`` gold labels, MaSF on held-out ``calibration`` representations, split at random
        (``split_seed``) into a fit half and a calibration half (``None``: MaSF is missing). ``k``,
        ``normalize_knn``: see :class:`KNNScorer`; ``covariance``: see :class:`MahalanobisScorer`. A detector that
        cannot be fitted is recorded in ``missing`` with the reason (its ``ValueError``).
        """
        detectors = cls(info={"n_train": len(train), "n_calibration": 0 if calibration is None else len(calibration)})
        for view, features in representation_views(train).items():
            try:
                scorer = MahalanobisScorer(covariance).fit(features, train_labels, name=view)
                detectors.mahalanobis[view] = scorer
                detectors.info[f"{view}/covariance"] = scorer.estimator
                if scorer.shrinkage is not None:
                    detectors.info[f"{view}/shrinkage"] = scorer.shrinkage
            except ValueError as error:
                detectors.missing[f"{view}/mahalanobis"] = str(error)
            if not knn:
                detectors.missing[f"{view}/knn_distance"] = "the kNN detector was not asked for (knn=False)"
                continue
            try:
                detectors.knn[view] = KNNScorer(k, normalize_knn).fit(features)
            except ValueError as error:
                detectors.missing[f"{view}/knn_distance"] = str(error)
        if calibration is None:
            detectors.missing["masf"] = "no held-out calibration data was given"
        else:
            if calibration.layer_max is None:
                raise ValueError("MaSF needs the calibration data's max-pooled hidden states (layer_max)")
            order = torch.randperm(len(calibration), generator=torch.Generator().manual_seed(split_seed))
            half = len(calibration) // 2
            try:
                detectors.masf = MaSF().fit(calibration.layer_max[order[:half]], calibration.layer_max[order[half:]])
                detectors.info["masf_fit"], detectors.info["masf_calibration"] = half, len(calibration) - half
            except ValueError as error:
                detectors.missing["masf"] = str(error)
        return detectors
