"""Token saliency methods behind one interface, :meth:`SaliencyMethod.attribute`.

Every method returns one score per token position, ``[B, L]``; higher means more salient (more
important for the target class). Padding positions get 0. Ranking only ever considers maskable
positions (:func:`itermask.tokens.maskable_positions`), so special tokens are never ranked.

Gradient methods differentiate the *target output*: the softmax probability of the target class
(``output="probability"``, default) or its logit (``output="logit"``). They use Captum's layer
attribution on the word-embedding layer (``model.get_input_embeddings()``), i.e. with respect to the
word-embedding *output*, before position and segment embeddings are added.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from typing import Literal

import torch
from captum.attr import LayerGradientXActivation, LayerIntegratedGradients
from torch import Tensor

from itermask.tokens import TokenBatch, class_logits

__all__ = [
    "SaliencyMethod",
    "RandomSaliency",
    "GradientSaliency",
    "InputXGradientSaliency",
    "IntegratedGradientsSaliency",
    "OUTPUTS",
]

OUTPUTS = ("probability", "logit")


class SaliencyMethod(ABC):
    """Base class: per-token saliency for a target class.

    Args:
        output: which output gradient methods explain, ``"probability"`` (softmax of the target class)
            or ``"logit"``.
        absolute: rank by the absolute value of the score (for signed methods).

    Raises:
        ValueError: for an unknown ``output``.
    """

    name: str = "saliency"
    #: whether :meth:`attribute` needs autograd (callers must enable gradients)
    needs_gradients: bool = True

    def __init__(self, output: Literal["probability", "logit"] = "probability", absolute: bool = False) -> None:
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
        self.output = output
        self.absolute = absolute

    def attribute(
        self, model: torch.nn.Module, batch: TokenBatch, target: Tensor, example_ids: Tensor | None = None
    ) -> Tensor:
        """Saliency of each token for class ``target``.

        Args:
            model: a classifier (see :mod:`itermask.tokens`), in eval mode.
            batch: ``[B, L]`` token batch (clean or masked).
            target: ``[B]`` long, the class to explain per example.
            example_ids: ``[B]`` long stable example ids (used by seeded methods so that scores do not
                depend on how examples are batched); defaults to the row index.

        Returns:
            ``[B, L]`` float scores, 0 at padding.
        """
        if example_ids is None:
            example_ids = torch.arange(len(batch), device=batch.device)
        scores = self._scores(model, batch, target, example_ids).float()
        if self.absolute:
            scores = scores.abs()
        return scores.masked_fill(~batch.attention_mask.bool(), 0.0).detach()

    @abstractmethod
    def _scores(self, model, batch: TokenBatch, target: Tensor, example_ids: Tensor) -> Tensor:
        """Raw ``[B, L]`` scores."""

    def bind(self, tokenizer) -> "SaliencyMethod":
        """Take what the method needs from the tokenizer (special ids, pad id); returns ``self``.
        The base class needs nothing."""
        return self

    def describe(self) -> dict:
        """The settings that define the method, for result files."""
        return {"name": self.name, "output": self.output, "absolute": self.absolute}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if k != "name")
        return f"{type(self).__name__}({args})"

    # -- shared by the gradient methods -------------------------------------------------------------
    def _forward_fn(self, model):
        """A Captum forward: ``f(input_ids, attention_mask, token_type_ids) -> [B, C]`` outputs."""

        def forward(input_ids, attention_mask, token_type_ids=None):
            logits = class_logits(model, TokenBatch(input_ids, attention_mask, token_type_ids))
            return logits.softmax(dim=-1) if self.output == "probability" else logits

        return forward

    @staticmethod
    def _embedding_layer(model) -> torch.nn.Module:
        layer = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
        if layer is None:
            raise ValueError(
                f"{type(model).__name__} exposes no word-embedding layer (get_input_embeddings()); "
                "gradient saliency needs one: choose saliency=random"
            )
        return layer


class RandomSaliency(SaliencyMethod):
    """Uniform random scores, the baseline every score is read against.

    Each example's scores come from a generator seeded by ``(seed, example_id)``, so they are the same
    however examples are batched, and the same for a clean and a masked copy of an example (the
    recursive schedule therefore reproduces the one-shot ranking for this method).

    Args:
        seed: base seed.
    """

    name = "random"
    needs_gradients = False

    def __init__(self, seed: int = 0) -> None:
        super().__init__(output="probability", absolute=False)
        self.seed = int(seed)

    def describe(self) -> dict:
        return {"name": self.name, "seed": self.seed}

    def _scores(self, model, batch, target, example_ids):
        rows = []
        for example_id in example_ids.tolist():
            digest = hashlib.sha256(f"{self.seed}:{example_id}".encode()).digest()
            generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
            rows.append(torch.rand(batch.input_ids.shape[1], generator=generator))
        return torch.stack(rows).to(batch.device) if rows else torch.empty(batch.input_ids.shape)


class GradientSaliency(SaliencyMethod):
    """Gradient norm: ``||d output_target / d e_i||_2`` for the word embedding ``e_i`` of token ``i``.

    Simonyan et al. 2014 (arXiv 1312.6034) saliency, reduced over the embedding dimension with the L2
    norm as in Atanasova et al. 2020 (arXiv 2009.13295). Non-negative.
    """

    name = "gradient"

    def _scores(self, model, batch, target, example_ids):
        method = LayerGradientXActivation(
            self._forward_fn(model), self._embedding_layer(model), multiply_by_inputs=False
        )
        grads = method.attribute(
            batch.input_ids, target=target, additional_forward_args=(batch.attention_mask, batch.token_type_ids)
        )
        return grads.norm(dim=-1)


class InputXGradientSaliency(SaliencyMethod):
    """Input x gradient: ``sum_d e_id * d output_target / d e_id`` (signed; Shrikumar et al. 2016,
    arXiv 1605.01713), summed over the embedding dimension ``d``."""

    name = "input_x_gradient"

    def _scores(self, model, batch, target, example_ids):
        method = LayerGradientXActivation(
            self._forward_fn(model), self._embedding_layer(model), multiply_by_inputs=True
        )
        attributions = method.attribute(
            batch.input_ids, target=target, additional_forward_args=(batch.attention_mask, batch.token_type_ids)
        )
        return attributions.sum(dim=-1)


class IntegratedGradientsSaliency(SaliencyMethod):
    """Integrated gradients on the word embeddings (Sundararajan et al. 2017, arXiv 1703.01365, Eq. 1),
    with Captum ``LayerIntegratedGradients``, summed over the embedding dimension (signed).

    The baseline is the input with every non-special token replaced by the pad token (special tokens
    and segment ids kept), the common choice for Transformers.

    Args:
        n_steps: Riemann steps of the path integral.
        internal_batch_size: examples x steps per internal forward (``None``: all at once).
        special_ids: ids kept in the baseline; set by :meth:`bind` from the tokenizer.
        pad_token_id: the baseline token; set by :meth:`bind`.
    """

    name = "integrated_gradients"

    def __init__(
        self,
        n_steps: int = 20,
        internal_batch_size: int | None = None,
        output: Literal["probability", "logit"] = "probability",
        absolute: bool = False,
        special_ids: list[int] | None = None,
        pad_token_id: int | None = None,
    ) -> None:
        super().__init__(output=output, absolute=absolute)
        if n_steps < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps}")
        self.n_steps = int(n_steps)
        self.internal_batch_size = internal_batch_size
        self.special_ids = special_ids
        self.pad_token_id = pad_token_id

    def bind(self, tokenizer) -> "IntegratedGradientsSaliency":
        """Take the pad id and special ids from ``tokenizer``; returns ``self``.

        Raises:
            ValueError: if the tokenizer has no pad token.
        """
        if tokenizer.pad_token_id is None:
            raise ValueError("integrated_gradients needs a pad token for its baseline; the tokenizer has none")
        self.pad_token_id = int(tokenizer.pad_token_id)
        self.special_ids = sorted(set(tokenizer.all_special_ids))
        return self

    def describe(self) -> dict:
        return {
            **super().describe(),
            "n_steps": self.n_steps,
            "internal_batch_size": self.internal_batch_size,
            "baseline": "pad",
        }

    def baseline_ids(self, batch: TokenBatch) -> Tensor:
        """``[B, L]`` baseline ids: non-special tokens replaced by the pad id."""
        if self.pad_token_id is None or self.special_ids is None:
            raise ValueError("IntegratedGradientsSaliency is not bound to a tokenizer: call bind(tokenizer)")
        special = torch.tensor(self.special_ids, device=batch.device, dtype=batch.input_ids.dtype)
        keep = torch.isin(batch.input_ids, special)
        return torch.where(keep, batch.input_ids, torch.full_like(batch.input_ids, self.pad_token_id))

    def _scores(self, model, batch, target, example_ids):
        method = LayerIntegratedGradients(self._forward_fn(model), self._embedding_layer(model))
        attributions = method.attribute(
            batch.input_ids,
            baselines=self.baseline_ids(batch),
            target=target,
            additional_forward_args=(batch.attention_mask, batch.token_type_ids),
            n_steps=self.n_steps,
            internal_batch_size=self.internal_batch_size,
        )
        return attributions.sum(dim=-1)
