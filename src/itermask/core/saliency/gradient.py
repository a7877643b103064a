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
    """Gradient saliency: ``d output_target / d e_i`` for the word embedding ``e_i`` of token ``i``,
    reduced over the embedding dimension.

    Simonyan et al. 2014 (arXiv 1312.6034). ``reduction="l2"`` (method name ``gradient``) takes the L2
    norm as in Atanasova et al. 2020 (arXiv 2009.13295), non-negative; ``reduction="sum"`` (method name
    ``gradient_signed``) sums the gradient's components, a signed score (the directional derivative along
    the all-ones direction).

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
        method = LayerGradientXActivation(
            self._forward_fn(model), self._embedding_layer(model), multiply_by_inputs=False
        )
        # one layer, one input: a single tensor (Captum's return type covers lists of layers too)
        grads = cast(
            Tensor,
            method.attribute(
                batch.input_ids, target=target, additional_forward_args=(batch.attention_mask, batch.token_type_ids)
            ),
        )
        return grads.norm(dim=-1) if self.reduction == "l2" else grads.sum(dim=-1)


class InputXGradientSaliency(SaliencyMethod):
    """Input x gradient: ``sum_d e_id * d output_target / d e_id`` (signed; Shrikumar et al. 2016,
    arXiv 1605.01713), summed over the embedding dimension ``d``."""

    name = "input_x_gradient"

    def _scores(self, model, batch, target, example_ids):
        method = LayerGradientXActivation(
            self._forward_fn(model), self._embedding_layer(model), multiply_by_inputs=True
        )
        attributions = cast(
            Tensor,
            method.attribute(
                batch.input_ids, target=target, additional_forward_args=(batch.attention_mask, batch.token_type_ids)
            ),
        )
        return attributions.sum(dim=-1)
