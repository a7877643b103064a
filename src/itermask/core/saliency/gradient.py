"""Gradient saliency methods: the gradient of the explained output with respect to the word-embedding
output (``model.get_input_embeddings()``), before position and segment embeddings are added, with Captum's
layer attribution."""

from __future__ import annotations

from typing import Literal, cast

from captum.attr import LayerGradientXActivation
from torch import Tensor

from itermask.core.saliency.base import SaliencyMethod

__all__ = ["GradientSaliency", "InputXGradientSaliency"]


class GradientSaliency(SaliencyMethod):
    """Gradient saliency (Simonyan et al. 2014, arXiv 1312.6034): ``d output_target / d e_i`` for the word
    embedding ``e_i`` of token ``i``, reduced over the embedding dimension: ``reduction="l2"`` (method name
    ``gradient``) takes the L2 norm as in Atanasova et al. 2020 (arXiv 2009.13295), non-negative;
    ``reduction="sum"`` (``gradient_signed``) sums the components, a signed score (the directional derivative
    along the all-ones direction).

    Raises:
        ValueError: for an unknown ``reduction``.
    """

    REDUCTIONS = {"l2": "gradient", "sum": "gradient_signed"}

    def __init__(
        self,
        reduction: Literal["l2", "sum"] = "l2",
        output: Literal["probability", "logit"] = "probability",
        absolute: bool = False,
    ) -> None:
        super().__init__(output=output, absolute=absolute)
        if reduction not in self.REDUCTIONS:
            raise ValueError(f"reduction must be one of {tuple(self.REDUCTIONS)}, got {reduction!r}")
        self.reduction = reduction
        self.name = self.REDUCTIONS[reduction]

    def describe(self) -> dict:
        return {**super().describe(), "reduction": self.reduction}

    def _scores(self, model, batch, target, example_ids):
        grads = _layer_attribution(self, model, batch, target, multiply_by_inputs=False)
        return grads.norm(dim=-1) if self.reduction == "l2" else grads.sum(dim=-1)


class InputXGradientSaliency(SaliencyMethod):
    """Input x gradient: ``sum_d e_id * d output_target / d e_id`` (signed; Shrikumar et al. 2016,
    arXiv 1605.01713), summed over the embedding dimension ``d``."""

    name = "input_x_gradient"

    def _scores(self, model, batch, target, example_ids):
        return _layer_attribution(self, model, batch, target, multiply_by_inputs=True).sum(dim=-1)


def _layer_attribution(method: SaliencyMethod, model, batch, target, multiply_by_inputs: bool) -> Tensor:
    """``[B, L, D]`` Captum ``LayerGradientXActivation`` at the word-embedding output: the gradient of the
    explained output, times the embeddings if ``multiply_by_inputs``."""
    layer = LayerGradientXActivation(
        method._forward_fn(model), method._embedding_layer(model), multiply_by_inputs=multiply_by_inputs
    )
    extra = (batch.attention_mask, batch.token_type_ids)
    # one layer, one input: a single tensor (Captum's return type covers lists of layers too)
    return cast(Tensor, layer.attribute(batch.input_ids, target=target, additional_forward_args=extra))
