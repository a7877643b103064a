"""Token saliency methods behind one interface, :meth:`SaliencyMethod.attribute`.

Every method returns one score per token position, ``[B, L]``; higher means more salient (more
important for the target class). Padding positions get 0. Ranking only ever considers maskable
positions (:func:`itermask.tokens.maskable_positions`), so special tokens are never ranked; the
perturbation methods never perturb them either.

Families (each a small class; shared logic lives in the private bases):

* gradient methods (``gradient``, ``gradient_signed``, ``input_x_gradient``) differentiate the target
  output with respect to the word-embedding *output* (``model.get_input_embeddings()``), before position
  and segment embeddings are added, with Captum's layer attribution;
* path/reference methods (``integrated_gradients``, ``deeplift``) compare the input with a *baseline* in
  word-embedding space: the word embeddings of the input with every non-special token replaced by the
  pad token (``pad``) or the mask token (``mask``), or by the zero vector (``zero``);
* perturbation methods (``occlusion``, ``lime``, ``kernel_shap``) replace token ids by the pad or mask id
  and only run forwards;
* attention methods (``attention``, ``attention_rollout``) read the model's attention weights.

The target output is the softmax probability of the target class (``output="probability"``, default) or
its logit (``output="logit"``), for every method that explains an output.

Before an evaluation, call :func:`prepare_for_saliency` (or each method's :meth:`SaliencyMethod.check`) so
that a method that cannot run on a model fails before any work, with a message saying what to choose.
"""

from __future__ import annotations

import hashlib
import warnings
from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Iterable, Literal, Sequence

import torch
from captum._utils.models.linear_model import SkLearnRidge
from captum.attr import (
    DeepLift,
    FeatureAblation,
    IntegratedGradients,
    KernelShap,
    LayerGradientXActivation,
    Lime,
)
from torch import Tensor

from itermask.tokens import TokenBatch, class_logits, maskable_positions

__all__ = [
    "SaliencyMethod",
    "RandomSaliency",
    "GradientSaliency",
    "InputXGradientSaliency",
    "IntegratedGradientsSaliency",
    "DeepLiftSaliency",
    "OcclusionSaliency",
    "LimeSaliency",
    "KernelShapSaliency",
    "AttentionSaliency",
    "AttentionRolloutSaliency",
    "attention_rollout",
    "prepare_for_saliency",
    "example_seed",
    "OUTPUTS",
    "BASELINES",
]

OUTPUTS = ("probability", "logit")
#: baselines of the path/reference methods; the perturbation methods take the token ones (pad, mask)
BASELINES = ("pad", "mask", "zero")
TOKEN_BASELINES = ("pad", "mask")

_NEEDS_NO_ATTENTIONS = "gradient, integrated_gradients, occlusion, lime, kernel_shap or random"
_NEEDS_NO_EMBEDDINGS = "occlusion, lime, kernel_shap, attention or random"


def example_seed(seed: int, example_id: int) -> int:
    """A 64-bit generator seed for one example: the first 8 bytes of ``sha256("seed:example_id")``.

    Seeded methods draw per example from this seed, so their scores do not depend on how examples are
    batched."""
    digest = hashlib.sha256(f"{int(seed)}:{int(example_id)}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


class SaliencyMethod(ABC):
    """Base class: per-token saliency for a target class.

    Args:
        output: which output the method explains, ``"probability"`` (softmax of the target class) or
            ``"logit"``.
        absolute: rank by the absolute value of the score (for signed methods).

    Raises:
        ValueError: for an unknown ``output``.
    """

    name: str = "saliency"
    #: whether :meth:`attribute` needs autograd (callers must enable gradients)
    needs_gradients: bool = True
    #: whether the model must expose its word-embedding layer (``get_input_embeddings()``)
    needs_embeddings: bool = True
    #: whether the model must return attention weights (``attn_implementation="eager"``)
    needs_attentions: bool = False

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

    def check(self, model: torch.nn.Module) -> None:
        """Fail before any work if this method cannot run on ``model``; call once before an evaluation.

        Checks that the model exposes its word-embedding layer (methods with :attr:`needs_embeddings`)
        and returns attention weights (methods with :attr:`needs_attentions`; one forward of two tokens).

        Raises:
            ValueError: naming the problem and the methods to choose instead.
        """
        if self.needs_embeddings:
            self._embedding_layer(model)
        if self.needs_attentions:
            ids = torch.zeros((1, 2), dtype=torch.long, device=_model_device(model))
            self._attentions(model, TokenBatch(ids, torch.ones_like(ids)))

    def describe(self) -> dict:
        """The settings that define the method, for result files."""
        return {"name": self.name, "output": self.output, "absolute": self.absolute}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if k != "name")
        return f"{type(self).__name__}({args})"

    # -- shared helpers -----------------------------------------------------------------------------
    def _forward_fn(self, model):
        """A Captum forward: ``f(input_ids, attention_mask, token_type_ids) -> [B, C]`` outputs."""

        def forward(input_ids, attention_mask, token_type_ids=None):
            return self._output(class_logits(model, TokenBatch(input_ids, attention_mask, token_type_ids)))

        return forward

    def _output(self, logits: Tensor) -> Tensor:
        """``[N, C]`` logits -> the explained output (probabilities or logits)."""
        return logits.softmax(dim=-1) if self.output == "probability" else logits

    def _embedding_layer(self, model) -> torch.nn.Module:
        get = getattr(model, "get_input_embeddings", None)
        layer = get() if callable(get) else None
        if not isinstance(layer, torch.nn.Module):
            raise ValueError(
                f"{type(model).__name__} exposes no word-embedding layer (get_input_embeddings()); "
                f"saliency={self.name} needs one: choose {_NEEDS_NO_EMBEDDINGS}"
            )
        return layer

    def _attentions(self, model, batch: TokenBatch) -> tuple[Tensor, ...]:
        """The model's attention weights, one ``[B, H, L, L]`` tensor per layer.

        Raises:
            ValueError: if the model returns none (SDPA and flash attention return none; load the model
                with ``attn_implementation="eager"``, see :func:`prepare_for_saliency`).
        """
        try:
            with torch.inference_mode():
                output = model(**batch.model_inputs(), output_attentions=True)
            attentions = getattr(output, "attentions", None)
        except TypeError:  # a forward that takes no output_attentions
            attentions = None
        if not attentions or any(a is None for a in attentions):
            implementation = getattr(getattr(model, "config", None), "_attn_implementation", None)
            raise ValueError(
                f"{type(model).__name__} returned no attention weights (attention implementation "
                f"{implementation!r}; SDPA and flash attention return none); saliency={self.name} needs them: "
                "load the model with attn_implementation='eager' (itermask.saliency.prepare_for_saliency does), "
                f"or choose {_NEEDS_NO_ATTENTIONS}"
            )
        return tuple(attentions)


def _model_device(model: torch.nn.Module) -> torch.device:
    parameter = next(iter(model.parameters()), None)
    return parameter.device if parameter is not None else torch.device("cpu")


def prepare_for_saliency(model: torch.nn.Module, methods: Iterable[SaliencyMethod]) -> torch.nn.Module:
    """Make ``model`` serve ``methods`` and check that it can, before any evaluation work.

    Hugging Face transformers 5 loads models with SDPA attention, which returns no attention weights:
    when a method needs them (:attr:`SaliencyMethod.needs_attentions`) the model is switched to eager
    attention (``model.set_attn_implementation("eager")``, same weights and outputs). Then every method's
    :meth:`SaliencyMethod.check` runs.

    Returns:
        ``model`` (switched in place).

    Raises:
        ValueError: from a method's check (e.g. no attention weights even after the switch).
    """
    methods = list(methods)
    if any(method.needs_attentions for method in methods):
        config = getattr(model, "config", None)
        switch = getattr(model, "set_attn_implementation", None)
        if callable(switch) and getattr(config, "_attn_implementation", "eager") != "eager":
            switch("eager")
    for method in methods:
        method.check(model)
    return model


class RandomSaliency(SaliencyMethod):
    """Uniform random scores, the baseline every score is read against.

    Each example's scores come from a generator seeded by ``(seed, example_id)`` (:func:`example_seed`), so
    they are the same however examples are batched, and the same for a clean and a masked copy of an
    example (the recursive schedule therefore reproduces the one-shot ranking for this method).

    Args:
        seed: base seed.
    """

    name = "random"
    needs_gradients = False
    needs_embeddings = False

    def __init__(self, seed: int = 0) -> None:
        super().__init__(output="probability", absolute=False)
        self.seed = int(seed)

    def describe(self) -> dict:
        return {"name": self.name, "seed": self.seed}

    def _scores(self, model, batch, target, example_ids):
        rows = []
        for example_id in example_ids.tolist():
            generator = torch.Generator().manual_seed(example_seed(self.seed, example_id))
            rows.append(torch.rand(batch.input_ids.shape[1], generator=generator))
        return torch.stack(rows).to(batch.device) if rows else torch.empty(batch.input_ids.shape)


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
        grads = method.attribute(
            batch.input_ids, target=target, additional_forward_args=(batch.attention_mask, batch.token_type_ids)
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
        attributions = method.attribute(
            batch.input_ids, target=target, additional_forward_args=(batch.attention_mask, batch.token_type_ids)
        )
        return attributions.sum(dim=-1)


# -- methods with a baseline ------------------------------------------------------------------------


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

    def bind(self, tokenizer) -> "_BaselineSaliency":
        """Take the special ids and the baseline token from ``tokenizer``; returns ``self``.

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
        return self

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
        self._require_bound()
        layer = self._embedding_layer(model)
        embeddings = layer(batch.input_ids).detach()
        baseline = self.baseline_embeddings(layer, batch, embeddings).detach()
        attributions = self._attribute(
            _EmbeddingForward(model, layer, self),
            embeddings,
            baseline,
            target,
            (batch.input_ids, batch.attention_mask, batch.token_type_ids),
        )
        return attributions.sum(dim=-1)

    @abstractmethod
    def _attribute(self, forward: _EmbeddingForward, embeddings, baseline, target, extra) -> Tensor:
        """``[B, L, D]`` attributions of ``forward`` at ``embeddings`` against ``baseline``."""


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

    Raises:
        ValueError: for ``n_steps < 1`` or an unknown baseline.
    """

    name = "integrated_gradients"

    def __init__(
        self,
        n_steps: int = 20,
        internal_batch_size: int | None = None,
        baseline: str = "pad",
        output: Literal["probability", "logit"] = "probability",
        absolute: bool = False,
        special_ids: Sequence[int] | None = None,
        pad_token_id: int | None = None,
        mask_token_id: int | None = None,
    ) -> None:
        super().__init__(baseline, output, absolute, special_ids, pad_token_id, mask_token_id)
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
                embeddings.requires_grad_(), baselines=baseline, target=target, additional_forward_args=extra
            )


# -- perturbation methods ---------------------------------------------------------------------------


class _PerturbationSaliency(_BaselineSaliency):
    """A method that only runs forwards on inputs whose non-special tokens are replaced by the baseline
    token (pad or mask id; the attention mask is kept, so the replacement is attended to).

    Each example is explained on its own, trimmed to its own length: its features are its non-special
    tokens (special tokens are never features, never perturbed, and score 0), and a Captum perturbation
    method runs on the ``[1, n]`` ids of those tokens through a forward that writes them back into the
    example, ``perturbations_per_eval`` perturbed copies per forward pass.

    Args:
        perturbations_per_eval: perturbed copies of the example per forward pass (Captum's batching).

    Raises:
        ValueError: for ``perturbations_per_eval < 1``.
    """

    needs_gradients = False
    needs_embeddings = False

    def __init__(self, perturbations_per_eval: int = 64, **kwargs) -> None:
        super().__init__(**kwargs)
        if perturbations_per_eval < 1:
            raise ValueError(f"perturbations_per_eval must be >= 1, got {perturbations_per_eval}")
        self.perturbations_per_eval = int(perturbations_per_eval)

    def describe(self) -> dict:
        return {**super().describe(), "perturbations_per_eval": self.perturbations_per_eval}

    def attribute(self, model, batch, target, example_ids=None):
        with torch.inference_mode():
            return super().attribute(model, batch, target, example_ids)

    def _scores(self, model, batch, target, example_ids):
        maskable = ~self.kept(batch)
        baseline = self.baseline_ids(batch)
        forward = self._forward_fn(model)
        scores = torch.zeros(batch.input_ids.shape, device=batch.device)
        for row in range(len(batch)):
            positions = torch.nonzero(maskable[row]).flatten()
            if not len(positions):
                continue
            example = batch.index(slice(row, row + 1)).trim()  # its own length, not the batch's

            def row_forward(features: Tensor, example=example, positions=positions) -> Tensor:
                """``[P, n]`` ids of the non-special tokens -> ``[P, C]`` outputs."""
                tiled = example.tile(features.shape[0])
                ids = tiled.input_ids.clone()
                ids[:, positions] = features
                return forward(ids, tiled.attention_mask, tiled.token_type_ids)

            with self._sampling(int(example_ids[row])):
                attributions = self._attribute_row(
                    row_forward, batch.input_ids[row, positions][None], baseline[row, positions][None], int(target[row])
                )
            scores[row, positions] = attributions[0].to(scores.dtype)
        return scores

    @contextmanager
    def _sampling(self, example_id: int):
        """Context of one example's attribution (seeding, for sampling methods)."""
        yield

    @abstractmethod
    def _attribute_row(self, forward, features: Tensor, baselines: Tensor, target: int) -> Tensor:
        """``[1, n]`` scores of one example's ``[1, n]`` token ids ``features`` (baseline ids ``baselines``)."""


class OcclusionSaliency(_PerturbationSaliency):
    """Occlusion / leave-one-out: ``f(x) - f(x with token i replaced by the baseline token)`` for each
    non-special token ``i`` (Li et al. 2016, arXiv 1612.08220, "erasure"; Zeiler & Fergus 2014), with Captum
    ``FeatureAblation``, each token its own feature: ``n + 1`` forwards of one example (in
    ``ceil(n / perturbations_per_eval) + 1`` passes). Special tokens get 0 and are never replaced.

    Args:
        baseline: ``"pad"`` (default) or ``"mask"``.
        perturbations_per_eval: see :class:`_PerturbationSaliency`.
    """

    name = "occlusion"

    def _attribute_row(self, forward, features, baselines, target):
        return FeatureAblation(forward).attribute(
            features, baselines=baselines, target=target, perturbations_per_eval=self.perturbations_per_eval
        )


class _SurrogateSaliency(_PerturbationSaliency):
    """Shared by LIME and Kernel SHAP: per example, the interpretable features are its non-special tokens
    (present = 1, replaced by the baseline token = 0); ``n_samples`` perturbed copies are run through the
    model and a weighted linear surrogate is fitted, whose coefficients are the scores.

    Sampling uses torch's CPU generator, seeded per example by :func:`example_seed` (``seed``,
    ``example_id``) inside ``torch.random.fork_rng``, so scores are reproducible, independent of batching,
    and leave the global random state untouched.

    Args:
        n_samples: perturbed samples per example (forwards per example).
        seed: base seed.

    Raises:
        ValueError: for ``n_samples < 1``.
    """

    def __init__(self, n_samples: int = 100, seed: int = 0, perturbations_per_eval: int = 100, **kwargs) -> None:
        super().__init__(perturbations_per_eval=perturbations_per_eval, **kwargs)
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        self.n_samples = int(n_samples)
        self.seed = int(seed)

    def describe(self) -> dict:
        return {**super().describe(), "n_samples": self.n_samples, "seed": self.seed}

    @contextmanager
    def _sampling(self, example_id: int):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(example_seed(self.seed, example_id))
            yield

    @abstractmethod
    def _explainer(self, forward):
        """The Captum explainer for one example's forward ``f(token ids [P, n]) -> [P, C]``."""

    def _attribute_row(self, forward, features, baselines, target):
        return self._explainer(forward).attribute(
            features,
            baselines=baselines,
            target=target,
            n_samples=self.n_samples,
            perturbations_per_eval=self.perturbations_per_eval,
        )


class LimeSaliency(_SurrogateSaliency):
    """LIME (Ribeiro et al. 2016, arXiv 1602.04938, Eq. 1-3) over token features with Captum ``Lime``.

    As the reference implementation's text explainer (``lime.lime_text``): samples draw each token present
    with probability 1/2 (Captum's default), are weighted by ``sqrt(exp(-d^2 / kernel_width^2))`` with
    ``d = 100 x`` the cosine distance between the sample's binary vector and the all-ones vector, and the
    surrogate is a ridge regression (``alpha``) with intercept.

    Args:
        kernel_width: width of the similarity kernel (lime_text's default 25).
        alpha: ridge penalty (lime_text's default 1.0).
        n_samples, seed, perturbations_per_eval, baseline: see :class:`_SurrogateSaliency`.
    """

    name = "lime"

    def __init__(self, kernel_width: float = 25.0, alpha: float = 1.0, **kwargs) -> None:
        super().__init__(**kwargs)
        if kernel_width <= 0 or alpha < 0:
            raise ValueError(f"lime needs kernel_width > 0 and alpha >= 0, got {kernel_width}, {alpha}")
        self.kernel_width = float(kernel_width)
        self.alpha = float(alpha)

    def describe(self) -> dict:
        return {**super().describe(), "kernel_width": self.kernel_width, "alpha": self.alpha}

    def similarity(self, original, perturbed, interpretable: Tensor, **kwargs) -> Tensor:
        """Kernel weight of one sample from its ``[1, n]`` binary interpretable vector ``z``: the cosine
        distance to all ones is ``1 - sqrt(|z| / n)``."""
        z = interpretable.double()
        distance = 100.0 * (1.0 - torch.sqrt(z.sum() / z.numel()))
        return torch.sqrt(torch.exp(-(distance**2) / self.kernel_width**2))

    def _explainer(self, forward):
        return Lime(forward, interpretable_model=SkLearnRidge(alpha=self.alpha), similarity_func=self.similarity)


class KernelShapSaliency(_SurrogateSaliency):
    """Kernel SHAP (Lundberg & Lee 2017, arXiv 1705.07874, Theorem 2) over token features with Captum
    ``KernelShap``: coalitions sampled from the Shapley kernel (all-present and all-absent first), fitted
    by linear regression. With a single token the Shapley value is ``f(x) - f(baseline)``, computed
    directly (the kernel is undefined for one feature).
    """

    name = "kernel_shap"

    def _explainer(self, forward):
        return _SingleFeatureSafeKernelShap(forward)


class _SingleFeatureSafeKernelShap(KernelShap):
    def attribute(self, inputs, baselines=None, target=None, **kwargs):  # noqa: D102 (Captum's)
        if inputs.shape[-1] > 1:
            return super().attribute(inputs, baselines=baselines, target=target, **kwargs)
        outputs = self.forward_func(torch.cat([inputs, baselines]))[:, target]
        return (outputs[0] - outputs[1]).reshape(1, 1)


# -- attention methods ------------------------------------------------------------------------------


def attention_rollout(attentions: Sequence[Tensor]) -> Tensor:
    """Attention rollout (Abnar & Zuidema 2020, arXiv 2005.00928, Sec. 3, Eq. 1).

    Per layer the heads are averaged, the identity is added for the residual connection and the rows are
    renormalised, ``A_l = norm(mean_h W_l + I)``; the layers are then multiplied, later layers on the
    left: ``R = A_N ... A_2 A_1``. ``R[b, i, j]`` is how much of token ``j`` flows into token ``i`` at the
    top.

    Args:
        attentions: ``N >= 1`` tensors ``[B, H, L, L]`` (layer 1 first), rows summing to 1 as a model's
            attention probabilities do.

    Returns:
        ``[B, L, L]`` float rollout.

    Raises:
        ValueError: for no layers or tensors not ``[B, H, L, L]`` of one shape.
    """
    attentions = list(attentions)
    if not attentions:
        raise ValueError("attention rollout needs at least one layer of attention weights")
    shape = attentions[0].shape
    if len(shape) != 4 or shape[-1] != shape[-2] or any(a.shape != shape for a in attentions):
        raise ValueError(f"attention weights must all be [B, H, L, L] of one shape, got {[tuple(a.shape) for a in attentions]}")
    identity = torch.eye(shape[-1], dtype=torch.float32, device=attentions[0].device)
    rollout = None
    for layer in attentions:
        augmented = layer.float().mean(dim=1) + identity
        augmented = augmented / augmented.sum(dim=-1, keepdim=True)
        rollout = augmented if rollout is None else augmented @ rollout
    return rollout


class _AttentionSaliency(SaliencyMethod):
    """Scores read from the attention weights of the model, row of the classification token (position
    0, ``[CLS]`` / ``<s>``); non-negative and class-independent (``target`` is ignored). The model must
    return attention weights: see :func:`prepare_for_saliency`."""

    needs_gradients = False
    needs_embeddings = False
    needs_attentions = True

    def __init__(self) -> None:
        super().__init__(output="probability", absolute=False)

    def describe(self) -> dict:
        return {"name": self.name, "row": 0}

    def _scores(self, model, batch, target, example_ids):
        return self._scores_from(self._attentions(model, batch))[:, 0, :]

    @abstractmethod
    def _scores_from(self, attentions: tuple[Tensor, ...]) -> Tensor:
        """``[B, L, L]`` token-to-token scores."""


class AttentionSaliency(_AttentionSaliency):
    """Raw attention: last layer, mean over heads, the classification token's row (e.g. Jain & Wallace
    2019, arXiv 1902.10186, who question it as an explanation)."""

    name = "attention"

    def _scores_from(self, attentions):
        return attentions[-1].float().mean(dim=1)


class AttentionRolloutSaliency(_AttentionSaliency):
    """Attention rollout (:func:`attention_rollout`), the classification token's row."""

    name = "attention_rollout"

    def _scores_from(self, attentions):
        return attention_rollout(attentions)
