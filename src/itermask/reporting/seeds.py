"""Seed sensitivity: how much of a score's variation comes from the fine-tuning seed (the paper's first
claim, Crothers, Viktor & Japkowicz 2023, arXiv 2308.06795, Sec. 4), measured on per-example values.

For one score, ``values[s, e]`` holds its value for seed ``s`` and example ``e`` (the same evaluation
examples for every seed, one value per cell). It is read as a two-way random-effects model without
replication, ``y_se = mu + a_s + b_e + eps_se``, whose variance components are estimated by the ANOVA
method of moments (e.g. Searle, Casella & McCulloch 1992, *Variance Components*, Sec. 4.6):

- ``MS_seed = E sum_s (ybar_s. - ybar..)^2 / (S - 1)``, ``MS_example = S sum_e (ybar_.e - ybar..)^2 / (E - 1)``,
  ``MS_residual = sum (y_se - ybar_s. - ybar_.e + ybar..)^2 / ((S - 1)(E - 1))``;
- ``var_seed = (MS_seed - MS_residual) / E``, ``var_example = (MS_example - MS_residual) / S``,
  ``var_residual = MS_residual``, negative estimates clipped at 0;
- the **seed share of variance** ``var_seed / (var_seed + var_example + var_residual)``: unit-free, 0 when
  the seeds agree up to noise, 1 when only the seed matters. Its confidence interval is a percentile
  bootstrap over examples (seeds are few and fixed).

The mean squares are those of the two-way ANOVA table (``statsmodels``' ``anova_lm`` of ``y ~ C(seed) +
C(example)`` gives the same numbers; the tests check it); they are computed here in closed form so that
thousands of bootstrap resamples run in one vectorised pass. The Friedman test (:func:`scipy.stats.
friedmanchisquare`, examples as blocks, seeds as treatments) tests whether the seeds' per-example scores
differ. Rank stability: :func:`kendall_w` (Kendall & Babington Smith 1939; the one estimator of W, also the
claims') through :func:`kendalls_w`, and :func:`mean_spearman`.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
from scipy import stats

from itermask.reporting.variance import anova_components

__all__ = ["variance_components", "seed_share", "kendall_w", "kendalls_w", "mean_spearman", "MIN_SEEDS"]

#: fewer seeds than this get a visible warning in the report: a variance over 3 seeds is a rough estimate
MIN_SEEDS = 5


def variance_components(values: np.ndarray) -> dict[str, np.ndarray]:
    """The ANOVA (method of moments) variance components of ``values`` ``[..., S, E]`` (seeds x examples,
    any leading batch dimensions), see the module docstring: :func:`itermask.reporting.variance.
    anova_components` of one model.

    Returns:
        ``{"var_seed", "var_example", "var_residual", "share"}`` arrays of the leading shape; ``share`` is
        NaN where the total is 0 (every value equal).

    Raises:
        ValueError: with fewer than 2 seeds or 2 examples, or NaN values.
    """
    y = np.asarray(values, dtype=np.float64)
    if y.ndim < 2 or y.shape[-2] < 2 or y.shape[-1] < 2:
        raise ValueError(f"variance components need at least 2 seeds and 2 examples, got {y.shape[-2:]}")
    out = anova_components(y[..., None, :, :])
    return {
        "var_seed": out["seed_within_model"],
        "var_example": out["example"],
        "var_residual": out["residual"],
        "share": out["seed_within_model_share"],
    }


def seed_share(values: np.ndarray, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> dict:
    """The seed share of variance of ``values`` ``[S, E]`` with a bootstrap interval over examples, the
    Friedman test that the seeds differ and the mean Spearman correlation between seeds.

    Examples with a NaN for some seed (a score undefined there, e.g. a first-flip fraction of an example
    that never flips) are dropped; ``n_examples``/``n_dropped`` say how many were used and dropped.

    Returns:
        ``{"n_seeds", "n_examples", "n_dropped", "var_seed", "var_example", "var_residual", "share",
        "ci_low", "ci_high", "friedman_statistic", "friedman_p", "mean_spearman", "why"}``; a statistic that
        cannot be computed is NaN and ``why`` says why (``None`` otherwise).
    """
    y = np.asarray(values, dtype=np.float64)
    keep = ~np.isnan(y).any(axis=0)
    out: dict = {"n_seeds": int(y.shape[0]), "n_examples": int(keep.sum()), "n_dropped": int((~keep).sum())}
    out |= dict.fromkeys(("var_seed", "var_example", "var_residual", "share", "ci_low", "ci_high"), math.nan)
    out |= {"friedman_statistic": math.nan, "friedman_p": math.nan, "mean_spearman": math.nan, "why": None}
    y = y[:, keep]
    if y.shape[0] < 2 or y.shape[1] < 2:
        out["why"] = (
            f"needs at least 2 seeds and 2 examples with a value in every seed, got {y.shape[0]} x {y.shape[1]}"
        )
        return out
    point = variance_components(y)
    out.update({k: float(v) for k, v in point.items()})
    if math.isnan(out["share"]):
        out["why"] = "every value is the same: no variance to divide"
        return out
    rng = np.random.default_rng(seed)
    resampled = y[:, rng.integers(0, y.shape[1], size=(n_resamples, y.shape[1]))].transpose(1, 0, 2)  # [B, S, E]
    shares = variance_components(resampled)["share"]
    alpha = (1 - confidence) / 2
    out["ci_low"], out["ci_high"] = (float(q) for q in np.nanquantile(shares, [alpha, 1 - alpha]))
    out["mean_spearman"] = mean_spearman(y)
    if y.shape[0] >= 3:
        with warnings.catch_warnings():  # scipy warns when a block is constant
            warnings.simplefilter("ignore", RuntimeWarning)
            test = stats.friedmanchisquare(*y)
        out["friedman_statistic"], out["friedman_p"] = float(test.statistic), float(test.pvalue)
    else:
        out["why"] = "the Friedman test needs at least 3 seeds"
    return out


def mean_spearman(values: np.ndarray) -> float:
    """The mean over pairs of seeds of Spearman's rank correlation of their per-example values
    (``values`` ``[S, E]``); NaN with fewer than 2 seeds or where a seed's values are constant."""
    y = np.asarray(values, dtype=np.float64)
    with warnings.catch_warnings():  # scipy warns on constant input and returns NaN
        warnings.simplefilter("ignore")
        pairs = itertools.combinations(range(len(y)), 2)
        rhos = [stats.spearmanr(y[a], y[b]).statistic for a, b in pairs]  # pyright: ignore[reportAttributeAccessIssue] (scipy's result bunch)
    rhos = [r for r in rhos if np.isfinite(r)]
    return float(np.mean(rhos)) if rhos else math.nan


def kendalls_w(scores: np.ndarray) -> dict:
    """Kendall's W of ``scores`` ``[m, k]`` (``m`` seeds, the raters, each scoring ``k`` saliency methods), the
    seeds with a NaN left out: :func:`kendall_w` (whose chi-square p-value is Friedman's test with seeds as
    blocks, tie-corrected as scipy's ``friedmanchisquare``), with at least 3 methods and 2 seeds.

    Returns:
        ``{"n_seeds", "n_methods", "w", "p_value", "why"}`` (NaN and a reason with fewer than 3 methods or 2
        seeds).
    """
    x = np.asarray(scores, dtype=np.float64)
    x = x[~np.isnan(x).any(axis=1)]
    m, k = x.shape
    out = {"n_seeds": int(m), "n_methods": int(k), "w": math.nan, "p_value": math.nan, "why": None}
    if k < 3 or m < 2:
        out["why"] = f"Kendall's W needs at least 3 methods and 2 seeds, got {k} methods and {m} seeds"
        return out
    result = kendall_w(x, n_permutations=0)
    out.update(w=result["w"], p_value=result["p_chi2"], why=result["why"])
    return out


def _tie_term(ranks: np.ndarray) -> float:
    """``sum over tie groups of (t^3 - t)`` of one rater's ranks."""
    _, counts = np.unique(ranks, return_counts=True)
    return float((counts**3 - counts).sum())


def _w(ranks: np.ndarray, ties: float) -> np.ndarray:
    """W of rank matrices ``[..., m, k]`` with the rank sums over raters (the tie term fixed by the ranks)."""
    m, k = ranks.shape[-2:]
    sums = ranks.sum(axis=-2)
    s = ((sums - m * (k + 1) / 2) ** 2).sum(axis=-1)
    return 12 * s / (m**2 * (k**3 - k) - m * ties)


def kendall_w(scores: np.ndarray, n_permutations: int = 9999, seed: int = 0) -> dict:
    """Kendall's coefficient of concordance of ``scores`` ``[m, k]`` (``m`` raters, e.g. models, each
    scoring ``k`` objects, e.g. saliency methods; each rater's scores are ranked, ties as mid ranks), with the
    tie correction (Kendall & Babington Smith 1939): ``W = 12 S / (m^2 (k^3 - k) - m T)``, ``S`` the squared
    deviations of the rank sums, ``T`` the raters' ``sum (t^3 - t)`` over tie groups. Two p-values: the
    chi-square ``m (k - 1) W`` on ``k - 1`` df (Friedman's test with raters as blocks, tie-corrected as scipy's
    ``friedmanchisquare``), and a permutation p-value from ``n_permutations`` seeded shuffles of each rater's
    ranks (0: none, NaN).

    Returns:
        ``{"m", "k", "w", "chi2", "p_chi2", "p_permutation", "why"}``; ``w`` is 1 when every rater ranks
        the objects alike and 0 when the rank sums are all equal. NaN and ``why`` with fewer than 2 raters
        or objects, NaN scores, or when every rater ties every object.
    """
    x = np.asarray(scores, dtype=np.float64)
    out = {"m": 0, "k": 0, "w": math.nan, "chi2": math.nan, "p_chi2": math.nan, "p_permutation": math.nan}
    out["why"] = None
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        out["why"] = f"Kendall's W needs at least 2 raters and 2 objects, got shape {x.shape}"
        return out
    m, k = x.shape
    out.update(m=int(m), k=int(k))
    if np.isnan(x).any():
        out["why"] = "a score is missing (NaN): every rater must score every object"
        return out
    ranks = np.stack([stats.rankdata(row) for row in x])
    ties = sum(_tie_term(row) for row in ranks)
    if m**2 * (k**3 - k) - m * ties <= 0:
        out["why"] = "every rater ties every object: no ranking to agree on"
        return out
    w = float(_w(ranks, ties))
    chi2 = m * (k - 1) * w
    p_permutation = math.nan
    if n_permutations > 0:
        order = np.random.default_rng(seed).random((n_permutations, m, k)).argsort(axis=-1)
        permuted = np.take_along_axis(np.broadcast_to(ranks, (n_permutations, m, k)), order, axis=-1)
        null = _w(permuted, ties)  # shuffling keeps each rater's ties, so the tie term is unchanged
        p_permutation = float((1 + (null >= w - 1e-12).sum()) / (n_permutations + 1))
    out.update(w=w, chi2=float(chi2), p_chi2=float(stats.chi2.sf(chi2, k - 1)), p_permutation=p_permutation)
    return out
