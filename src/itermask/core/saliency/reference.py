"""Saliency methods with a baseline (reference input).

Path/reference methods (``integrated_gradients``, ``deeplift``) compare the input with a *baseline* in
word-embedding space: the word embeddings of the input with every non-special token replaced by the pad
token (``pad``) or the mask token (``mask``), or by the zero vector (``zero``). The shared
:class:`_BaselineSaliency` also serves the perturbation methods (:mod:`.perturbation`), which replace token
ids by the pad or mask id."""

from __future__ import annotations

import warnings
from abc import abstractmethod
from collections.abc import Sequence
from typing import Literal

import torch
from captum.attr import DeepLift, IntegratedGradients
from torch import Tensor

from itermask.core.saliency.base import BASELINES, TOKEN_BASELINES, SaliencyMethod
from itermask.core.tokens import TokenBatch, class_logits, maskable_positions

__all__ = ["IntegratedGradientsSaliency", "DeepLiftSaliency"]


class _BaselineSaliency(SaliencyMethod):
    """A method that compares the input with a baseline in which every non-special token is replaced.

    Args:
        baseline: one of ``allowed``: ``"pad"`` / ``"mask"`` (the tokenizer's pad / mask token),
            ``"zero"`` (the zero word-embedding vector; embedding-space methods only).
        special_ids: ids kept in the baseline (and never perturbed); set by :meth:`bind`.
        pad_token_id, mask_token_id: set by :meth:`bind`.

    Raises:
        ValueError: for a baseline not in ``allowed``.
    """

    allowed_baselines: tuple[str, ...] = TOKEN_BASELINES

    def __init__(
        self,
        baseline: str = "pad",
        output: Literal["probability", "logit"] = "probability",
        absolute: bool = False,
        special_ids: Sequence[int] | None = None,
        pad_token_id: int | None = None,
        mask_token_id: int | None = None,
    ) -> None:
        super().__init__(output=output, absolute=absolute)
        if baseline not in self.allowed_baselines:
            raise ValueError(f"{self.name} baseline must be one of {self.allowed_baselines}, got {baseline!r}")
        self.baseline = baseline
        self.special_ids = None if special_ids is None else sorted(set(int(i) for i in special_ids))
        self.pad_token_id = pad_token_id
        self.mask_token_id = mask_token_id

    def _bind(self, tokenizer) -> None:
        """Take the special ids and the baseline token from ``tokenizer``.

        Raises:
            ValueError: if the tokenizer lacks the baseline's token (e.g. no mask token for ``mask``).
        """
        self.special_ids = sorted(set(int(i) for i in tokenizer.all_special_ids))
        self.pad_token_id = getattr(tokenizer, "pad_token_id", None)
        self.mask_token_id = getattr(tokenizer, "mask_token_id", None)
        if self.baseline in TOKEN_BASELINES and self._baseline_token() is None:
            raise ValueError(
                f"{self.name} with baseline={self.baseline!r} needs the tokenizer's {self.baseline} token; "
                f"{type(tokenizer).__name__} has none: choose another baseline from {self.allowed_baselines}"
            )

    def check(self, model: torch.nn.Module) -> None:
        self._require_bound()
        super().check(model)

    def describe(self) -> dict:
        return {**super().describe(), "baseline": self.baseline}

    def _baseline_token(self) -> int | None:
        return {"pad": self.pad_token_id, "mask": self.mask_token_id}.get(self.baseline)

    def _require_bound(self) -> None:
        if self.special_ids is None or (self.baseline in TOKEN_BASELINES and self._baseline_token() is None):
            raise ValueError(f"{type(self).__name__} is not bound to a tokenizer: call bind(tokenizer)")

    def kept(self, batch: TokenBatch) -> Tensor:
        """``[B, L]`` bool: positions the baseline keeps (special tokens, padding included)."""
        self._require_bound()
        return ~maskable_positions(batch, self.special_ids)

    def baseline_ids(self, batch: TokenBatch) -> Tensor:
        """``[B, L]`` baseline ids: non-special tokens replaced by the pad or mask id.

        Raises:
            ValueError: for the ``zero`` baseline, which has no ids, or if not bound.
        """
        if self.baseline not in TOKEN_BASELINES:
            raise ValueError(f"baseline {self.baseline!r} is a word-embedding vector and has no token ids")
        kept = self.kept(batch)
        return torch.where(kept, batch.input_ids, torch.full_like(batch.input_ids, self._baseline_token()))


class _EmbeddingForward(torch.nn.Module):
    """``model`` as a function of its word-embedding output: ``forward(embeddings, input_ids, ...)`` runs
    the model on ``input_ids`` with the word-embedding layer's output replaced by ``embeddings``
    (``[N, L, D]``), returning probabilities or logits ``[N, C]``.

    Captum's layer methods do the same internally, but they accept baselines only as model *inputs*
    (token ids), whose layer output they obtain by a forward pass; a zero word-embedding vector cannot be
    written as ids. Substituting the layer output also keeps everything else from the real input, e.g.
    RoBERTa's position ids, which it derives from the ids (pad ids would shift them).
    """

    def __init__(self, model: torch.nn.Module, layer: torch.nn.Module, method: SaliencyMethod) -> None:
        super().__init__()
        self.model = model
        self.layer = layer
        self.method = method

    def forward(self, embeddings: Tensor, input_ids: Tensor, attention_mask: Tensor, token_type_ids=None) -> Tensor:
        handle = self.layer.register_forward_hook(lambda module, inputs, output: embeddings)
        try:
            logits = class_logits(self.model, TokenBatch(input_ids, attention_mask, token_type_ids))
        finally:
            handle.remove()
        return self.method._output(logits)


class _EmbeddingPathSaliency(_BaselineSaliency):
    """A reference method in word-embedding space, summed over the embedding dimension (signed).

    The baseline embeddings are those of the input with every non-special token's word embedding replaced
    by the pad token's, the mask token's, or the zero vector (special tokens and padding keep theirs).
    """

    allowed_baselines = BASELINES

    def baseline_embeddings(self, layer: torch.nn.Module, batch: TokenBatch, embeddings: Tensor) -> Tensor:
        """``[B, L, D]`` baseline word embeddings for ``batch`` whose word embeddings are ``embeddings``."""
        if self.baseline == "zero":
            return embeddings * self.kept(batch)[..., None].to(embeddings.dtype)
        return layer(self.baseline_ids(batch))

    def _scores(self, model, batch, target, example_ids):
        return self._attribution(model, batch, target, example_ids)[0]

    def _attribution(self, model, batch, target, example_ids):
        """Scores ``[B, L]``, the completeness gap ``[B]`` (Captum's convergence delta: the attributions'
        sum minus ``f(x) - f(baseline)``) and ``f(x) - f(baseline)`` ``[B]``."""
        self._require_bound()
        layer = self._embedding_layer(model)
        embeddings = layer(batch.input_ids).detach()
        baseline = self.baseline_embeddings(layer, batch, embeddings).detach()
        attributions, gap = self._attribute(
            _EmbeddingForward(model, layer, self),
            embeddings,
            baseline,
            target,
            (batch.input_ids, batch.attention_mask, batch.token_type_ids),
        )
        scores = attributions.sum(dim=-1)
        gap = gap.detach().double()
        return scores, gap, scores.detach().double().sum(dim=-1) - gap

    @abstractmethod
    def _attribute(self, forward: _EmbeddingForward, embeddings, baseline, target, extra) -> tuple[Tensor, Tensor]:
        """``[B, L, D]`` attributions of ``forward`` at ``embeddings`` against ``baseline`` and the ``[B]``
        convergence delta (``return_convergence_delta=True``)."""


class IntegratedGradientsSaliency(_EmbeddingPathSaliency):
    """Integrated gradients on the word embeddings (Sundararajan et al. 2017, arXiv 1703.01365, Eq. 1),
    with Captum ``IntegratedGradients`` (Gauss-Legendre steps), summed over the embedding dimension
    (signed). Completeness: the scores of an example sum to ``f(x) - f(baseline)`` up to the path
    integral's discretisation error (Prop. 1 of the paper).

    Args:
        baseline: ``"pad"`` (default, the common choice for Transformers), ``"mask"`` or ``"zero"``; see
            :class:`_EmbeddingPathSaliency`.
        n_steps: steps of the path integral.
        internal_batch_size: examples x steps per internal forward (``None``: all at once).
        **kwargs: ``baseline``, ``output``, ``absolute`` and the ids of :class:`_BaselineSaliency`.

    Raises:
        ValueError: for ``n_steps < 1`` or an unknown baseline.
    """

    name = "integrated_gradients"

    def __init__(self, n_steps: int = 20, internal_batch_size: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if n_steps < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps}")
        self.n_steps = int(n_steps)
        self.internal_batch_size = internal_batch_size

    def describe(self) -> dict:
        return {**super().describe(), "n_steps": self.n_steps, "internal_batch_size": self.internal_batch_size}

    def _attribute(self, forward, embeddings, baseline, target, extra):
        return IntegratedGradients(forward).attribute(
            embeddings,
            baselines=baseline,
            target=target,
            additional_forward_args=extra,
            n_steps=self.n_steps,
            internal_batch_size=self.internal_batch_size,
            return_convergence_delta=True,
        )


class DeepLiftSaliency(_EmbeddingPathSaliency):
    """DeepLIFT (Shrikumar et al. 2017, arXiv 1704.02685, rescale rule) on the word embeddings, with Captum
    ``DeepLift``, summed over the embedding dimension (signed).

    It runs on BERT, RoBERTa, DistilBERT, ELECTRA and DeBERTa-v2, but note what Captum's rules cover: the
    rescale rule replaces gradients only at non-linearities that are ``torch.nn`` modules of the kinds
    Captum supports (ReLU, Tanh, Sigmoid, ELU, Softplus, ...). In these Transformers GELU is a transformers
    module Captum does not know, and LayerNorm, the attention softmax and (for ``output="probability"``) the
    output softmax are functional, so those contribute their plain gradient at the input: the scores do
    not in general sum to ``f(x) - f(baseline)`` (DeepLIFT's summation-to-delta), and the result is close to
    ``(x - baseline) . grad f(x)``. Measured on the fine-tuned packaged MiniLM (16 shipped test examples,
    logit, pad baseline): the sums miss ``f(x) - f(baseline)`` by 112 % (median relative error; IG with 50
    steps: < 0.1 %), and the token ranking barely agrees with IG's (median Spearman 0.02). The config
    explains the logit, since a functional output softmax would only add a plain gradient.

    Args:
        baseline: ``"pad"`` (default), ``"mask"`` or ``"zero"``; see :class:`_EmbeddingPathSaliency`.
    """

    name = "deeplift"

    def _attribute(self, forward, embeddings, baseline, target, extra):
        with warnings.catch_warnings():  # Captum announces its temporary hooks on every call
            warnings.filterwarnings("ignore", message="Setting forward, backward hooks", category=UserWarning)
            return DeepLift(forward).attribute(
                embeddings.requires_grad_(),
                baselines=baseline,
                target=target,
                additional_forward_args=extra,
                return_convergence_delta=True,
            )
