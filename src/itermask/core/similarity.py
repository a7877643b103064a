"""How different two encoders are: linear CKA between their representations of the same inputs, per layer
(:func:`linear_cka`, :func:`layer_cka`), and the relative distance of their shared parameters
(:func:`relative_parameter_distance`), together an :class:`EncoderSimilarity`.

Linear CKA follows Kornblith, Norouzi, Lee & Hinton, "Similarity of Neural Network Representations Revisited"
(ICML 2019, arXiv 1905.00414), section 3 (Eq. for linear CKA on column-centred features,
``||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)``) and the authors' notebook (google-research/google-research,
``representation_similarity/Demo.ipynb``: ``feature_space_linear_cka``, the same centring and formula, in
float64). Written here: no maintained library computes it (torchmetrics has no CKA; the PyPI packages named
for it, e.g. torch-cka, are single-author hook-based model comparers, not a function of two matrices).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["EncoderSimilarity", "linear_cka", "layer_cka", "relative_parameter_distance", "encoder_similarity"]


@dataclass(frozen=True)
class EncoderSimilarity:
    """Two encoders ``a`` and ``b`` compared.

    Attributes:
        cka: linear CKA per layer (``[L+1]``: the embeddings' output, then each layer's), in [0, 1]; 1 when
            the representations differ only by an orthogonal transform and isotropic scaling.
        parameter_distance: ``||theta_a - theta_b||_2 / ||theta_b||_2`` over the shared parameters (a ratio).
        n_texts: the inputs the CKA was computed on.
        n_parameters: the scalar parameters compared (those of the same name and shape in both)."""

    cka: tuple[float, ...]
    parameter_distance: float
    n_texts: int
    n_parameters: int


def linear_cka(x: Tensor, y: Tensor) -> float:
    """Linear CKA of the representations ``x`` (``[n, d1]``) and ``y`` (``[n, d2]``) of the same ``n`` inputs
    (rows), computed in float64 on column-centred copies (module docstring).

    Raises:
        ValueError: if they are not 2-D with the same number of rows (at least 2), are not finite, or either
            is constant across the inputs (its centred features are all 0: CKA is 0/0)."""
    if x.dim() != 2 or y.dim() != 2 or len(x) != len(y) or len(x) < 2:
        raise ValueError(
            f"linear CKA needs two [n, d] matrices of the same n >= 2 inputs, got {list(x.shape)} and {list(y.shape)}"
        )
    x, y = x.double(), y.double()
    if not (torch.isfinite(x).all() and torch.isfinite(y).all()):
        raise ValueError("linear CKA needs finite representations, got NaN or infinite values")
    x, y = x - x.mean(dim=0), y - y.mean(dim=0)
    norm_x, norm_y = torch.linalg.matrix_norm(x.T @ x), torch.linalg.matrix_norm(y.T @ y)
    if norm_x == 0 or norm_y == 0:
        raise ValueError("linear CKA is undefined: a representation is the same for every input (0/0)")
    return float(torch.linalg.matrix_norm(y.T @ x) ** 2 / (norm_x * norm_y))


def layer_cka(a: Tensor, b: Tensor) -> tuple[float, ...]:
    """Linear CKA per layer of ``a`` and ``b`` (``[n, L, d]``: ``n`` inputs, ``L`` layers, e.g. mean-pooled
    hidden states).

    Raises:
        ValueError: if the shapes' inputs or layers differ, or a layer's CKA is undefined (:func:`linear_cka`)."""
    if a.dim() != 3 or b.dim() != 3 or a.shape[:2] != b.shape[:2]:
        raise ValueError(
            "layer CKA needs two [n, layers, d] tensors of the same n and layers, "
            f"got {list(a.shape)} and {list(b.shape)}"
        )
    return tuple(linear_cka(a[:, layer], b[:, layer]) for layer in range(a.shape[1]))


def relative_parameter_distance(a: Mapping[str, Tensor], b: Mapping[str, Tensor]) -> tuple[float, int]:
    """``(||theta_a - theta_b||_2 / ||theta_b||_2, number of scalars)`` over the floating-point parameters that
    both state dicts have under the same name and shape (float64 sums).

    Raises:
        ValueError: if they share no such parameter, or ``theta_b`` is all zeros."""
    shared = [n for n, t in b.items() if t.is_floating_point() and n in a and a[n].shape == t.shape]
    if not shared:
        raise ValueError("the two encoders share no parameter of the same name and shape")
    difference = math.fsum(float((a[n].double() - b[n].double()).square().sum()) for n in shared)
    reference = math.fsum(float(b[n].double().square().sum()) for n in shared)
    if reference == 0:
        raise ValueError("relative parameter distance is undefined: the reference encoder's parameters are all 0")
    return math.sqrt(difference / reference), sum(b[n].numel() for n in shared)


def encoder_similarity(
    states_a: Tensor, states_b: Tensor, params_a: Mapping[str, Tensor], params_b: Mapping[str, Tensor]
) -> EncoderSimilarity:
    """Encoders ``a`` and ``b`` compared: :func:`layer_cka` of their states (``[n, L, d]``) on the same inputs and
    :func:`relative_parameter_distance` of their parameters (``b`` the reference)."""
    distance, count = relative_parameter_distance(params_a, params_b)
    return EncoderSimilarity(layer_cka(states_a, states_b), distance, len(states_a), count)
