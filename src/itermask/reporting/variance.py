"""The one variance-component estimator of itermask: balanced ANOVA (method of moments) components of scores
``y[m, s, e]``, model ``m``, fine-tuning seed ``s`` of that model (seeds are nested in models: seed 0 of two
models are two fine-tunings) and evaluation example ``e`` (the same examples everywhere: crossed with both). The
seed sensitivity of one model (:func:`itermask.reporting.seeds.variance_components`, ``M = 1``) and the claims'
models-seeds-examples design (:func:`itermask.studies.robust_infidelity.statistics.nested_components`) both call
:func:`anova_components`.

The random-effects model ``y_mse = mu + a_m + b_s(m) + c_e + (ac)_me + eps_mse`` has the mean squares (``M``
models, ``S`` seeds per model, ``E`` examples; bars are means over the dotted indices)

- ``MS_model = S E sum_m (y_m.. - y...)^2 / (M - 1)``
- ``MS_seed = E sum_ms (y_ms. - y_m..)^2 / (M (S - 1))``
- ``MS_example = M S sum_e (y_..e - y...)^2 / (E - 1)``
- ``MS_model_x_example = S sum_me (y_m.e - y_m.. - y_..e + y...)^2 / ((M - 1)(E - 1))``
- ``MS_residual = sum_mse (y_mse - y_ms. - y_m.e + y_m..)^2 / (M (S - 1)(E - 1))``

with expectations ``E[MS_residual] = s2_r``, ``E[MS_mxe] = s2_r + S s2_me``, ``E[MS_seed] = s2_r + E s2_s``,
``E[MS_example] = s2_r + S s2_me + M S s2_e`` and ``E[MS_model] = s2_r + S s2_me + E s2_s + S E s2_m`` (the
expected-mean-squares rules for balanced designs, Searle, Casella & McCulloch 1992, *Variance Components*, Sec.
4.6; Montgomery, *Design and Analysis of Experiments*, Ch. 14); solving gives the estimates, negative ones clipped
at 0. With one model (``M = 1``) there is no model factor: the model and model x example components are 0 and the
example component is ``(MS_example - MS_residual) / S``, the two-way seeds x examples ANOVA without replication
(``statsmodels``' ``anova_lm`` of ``y ~ C(seed) + C(example)`` gives the same mean squares; the tests check it).
Closed form, vectorised over any leading dimensions, so that thousands of bootstrap resamples run in one pass.
numpy only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["COMPONENTS", "anova_components"]

#: the variance components of :func:`anova_components`, in report order
COMPONENTS = ("model", "seed_within_model", "example", "model_x_example", "residual")


def anova_components(values: np.ndarray) -> dict[str, np.ndarray]:
    """ANOVA variance components of ``values`` ``[..., M, S, E]`` (models x seeds within model x examples, any
    leading batch dimensions; ``M = 1``: one model), see the module docstring.

    Returns:
        ``{component: array of the leading shape}`` for :data:`COMPONENTS` (variances, in the score's unit
        squared), plus ``"total"`` and ``"<component>_share"`` (the component over the total; NaN where the
        total is 0, every value equal).

    Raises:
        ValueError: for fewer than 3 dimensions, fewer than 2 seeds per model or 2 examples, or NaN values.
    """
    y = np.asarray(values, dtype=np.float64)
    if y.ndim < 3:
        raise ValueError(f"variance components need values [models, seeds, examples], got shape {y.shape}")
    n_models, n_seeds, n_examples = y.shape[-3:]
    if n_models < 1 or n_seeds < 2 or n_examples < 2:
        raise ValueError(
            f"variance components need at least 2 seeds (per model) and 2 examples, got {n_models} x {n_seeds} x "
            f"{n_examples}"
        )
    if np.isnan(y).any():
        raise ValueError("variance components need a value for every model, seed and example (drop undefined ones)")
    axes = (-3, -2, -1)
    grand = y.mean(axis=axes, keepdims=True)
    model = y.mean(axis=(-2, -1), keepdims=True)  # y_m..
    cell = y.mean(axis=-1, keepdims=True)  # y_ms.
    example = y.mean(axis=(-3, -2), keepdims=True)  # y_..e
    model_example = y.mean(axis=-2, keepdims=True)  # y_m.e
    ms_seed = n_examples * ((cell - model) ** 2).sum(axis=axes) / (n_models * (n_seeds - 1))
    ms_example = n_models * n_seeds * ((example - grand) ** 2).sum(axis=axes) / (n_examples - 1)
    residual = y - cell - model_example + model
    ms_residual = (residual**2).sum(axis=axes) / (n_models * (n_seeds - 1) * (n_examples - 1))
    if n_models > 1:
        ms_model = n_seeds * n_examples * ((model - grand) ** 2).sum(axis=axes) / (n_models - 1)
        interaction = model_example - model - example + grand
        ms_mxe = n_seeds * (interaction**2).sum(axis=axes) / ((n_models - 1) * (n_examples - 1))
        between = np.clip((ms_model - ms_mxe - ms_seed + ms_residual) / (n_seeds * n_examples), 0, None)
        model_x_example = np.clip((ms_mxe - ms_residual) / n_seeds, 0, None)
    else:  # one model: no model factor, and its interaction with the examples is the residual's
        ms_mxe = ms_residual
        between = model_x_example = np.zeros_like(ms_residual)
    out = {
        "model": between,
        "seed_within_model": np.clip((ms_seed - ms_residual) / n_examples, 0, None),
        "example": np.clip((ms_example - ms_mxe) / (n_models * n_seeds), 0, None),
        "model_x_example": model_x_example,
        "residual": ms_residual,
    }
    total = sum(out[c] for c in COMPONENTS)
    out["total"] = total
    with np.errstate(invalid="ignore", divide="ignore"):
        for c in COMPONENTS:
            out[f"{c}_share"] = np.where(total > 0, out[c] / np.where(total > 0, total, 1), np.nan)
    return out
