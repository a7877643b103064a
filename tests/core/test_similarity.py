"""Linear CKA (Kornblith et al. 2019) and the relative parameter distance against hand-computed values and CKA's
published invariances."""

import math

import pytest
import torch

from itermask.core.similarity import encoder_similarity, layer_cka, linear_cka, relative_parameter_distance


def test_linear_cka_hand_computed():
    # x = [0, 1, 2] and y = [0, 1, 0] centred: x = [-1, 0, 1], y = [-1/3, 2/3, -1/3]; y.x = 0 -> CKA 0
    assert linear_cka(torch.tensor([[0.0], [1.0], [2.0]]), torch.tensor([[0.0], [1.0], [0.0]])) == pytest.approx(
        0.0, abs=1e-15
    )
    # x = [0, 1, 2, 3] (centred [-1.5, -.5, .5, 1.5], |x|^2 = 5), y = [0, 0, 1, 1] (centred [-.5, -.5, .5, .5],
    # |y|^2 = 1), y.x = 2: one feature each, so CKA = (y.x)^2 / (|x|^2 |y|^2) = 4 / 5
    x, y = torch.tensor([[0.0], [1.0], [2.0], [3.0]]), torch.tensor([[0.0], [0.0], [1.0], [1.0]])
    assert linear_cka(x, y) == pytest.approx(0.8, abs=1e-12)
    # two features: X = [[1, 0], [0, 1], [-1, 0], [0, -1]] (centred already, X^T X = 2 I, ||.||_F = 2 sqrt 2),
    # Y = X's first column only (Y^T Y = 2, ||Y^T X||_F^2 = 4): CKA = 4 / (2 sqrt 2 * 2) = 1 / sqrt 2
    big = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    assert linear_cka(big, big[:, :1]) == pytest.approx(1 / math.sqrt(2), abs=1e-12)


def test_linear_cka_invariances_and_self_similarity():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(50, 8, generator=generator)
    q, _ = torch.linalg.qr(torch.randn(8, 8, generator=generator, dtype=torch.float64))
    assert linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)  # CKA(X, X) = 1 (Kornblith et al., section 3)
    assert linear_cka(x, (x.double() @ q) * 3.7 + 5.0) == pytest.approx(1.0, abs=1e-12)  # orthogonal, scale, shift
    assert linear_cka(x, x * torch.tensor([1.0, 5.0, 1, 1, 1, 1, 1, 1])) < 0.99  # not invariant to anisotropic scaling
    independent = torch.randn(20000, 4, generator=generator)
    assert linear_cka(independent[:, :2], independent[:, 2:]) < 0.01  # n >> d: near 0 (expected ~ d / n)


def test_layer_cka_and_encoder_similarity():
    generator = torch.Generator().manual_seed(1)
    a = torch.randn(30, 3, 4, generator=generator)
    b = a.clone()
    b[:, 2] = torch.randn(30, 4, generator=generator)
    values = layer_cka(a, b)
    assert values[:2] == (pytest.approx(1.0), pytest.approx(1.0)) and values[2] < 0.9
    params_b = {"w": torch.tensor([3.0, 4.0]), "bias": torch.tensor([0.0]), "extra": torch.ones(3)}
    params_a = {"w": torch.tensor([3.0, 4.0]), "bias": torch.tensor([0.5]), "steps": torch.tensor([7])}
    # shared float parameters w and bias: ||(0, 0, .5)|| / ||(3, 4, 0)|| = 0.5 / 5
    assert relative_parameter_distance(params_a, params_b) == (pytest.approx(0.1), 3)
    result = encoder_similarity(a, b, params_a, params_b)
    assert result.cka == values and result.parameter_distance == pytest.approx(0.1)
    assert (result.n_texts, result.n_parameters) == (30, 3)


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        (torch.ones(4, 2), torch.randn(4, 2), "same for every input"),
        (torch.randn(4, 2), torch.randn(5, 2), "same n"),
        (torch.tensor([[float("nan")], [1.0]]), torch.randn(2, 1), "finite"),
    ],
)
def test_linear_cka_errors(x, y, message):
    with pytest.raises(ValueError, match=message):
        linear_cka(x, y)


def test_parameter_distance_errors():
    with pytest.raises(ValueError, match="share no parameter"):
        relative_parameter_distance({"a": torch.ones(2)}, {"b": torch.ones(2)})
    with pytest.raises(ValueError, match="all 0"):
        relative_parameter_distance({"a": torch.ones(2)}, {"a": torch.zeros(2)})
