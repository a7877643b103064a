"""The interface of token saliency methods, :meth:`SaliencyMethod.attribute`, and :class:`RandomSaliency`.

Every method returns one score per token position, ``[B, L]``; higher means more salient (more important for
the target class), padding gets 0. Ranking only ever considers maskable positions
(:func:`itermask.core.tokens.maskable_positions`); the perturbation methods never perturb special tokens
either. The explained output is the softmax probability of the target class (``output="probability"``,
default) or its logit. Call :func:`prepare_for_saliency` before an evaluation, so that a method that cannot
run on a model fails before any work. Scores that cannot depend on the input are an error, not a ranking
(:meth:`SaliencyMethod.explain`).
"""

from __future__ import annotations

import hashlib
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from itermask.core.tokens import TokenBatch, TokenizerBound, class_logits

__all__ = [
    "SaliencyMethod",
    "Attribution",
    "SaliencyError",
    "ZeroSaliencyWarning",
    "RandomSaliency",
    "prepare_for_saliency",
    "example_seed",
    "OUTPUTS",
    "BASELINES",
    "TOKEN_BASELINES",
    "GRADIENT_TOKEN_BUDGET",
]

OUTPUTS = ("probability", "logit")
#: baselines of the path/reference methods; the perturbation methods take the token ones (pad, mask)
BASELINES = ("pad", "mask", "zero")
TOKEN_BASELINES = ("pad", "mask")
#: padded tokens (rows x padded length) per forward and backward of the methods that batch their own
#: gradient passes (integrated gradients' path points, DeepLift's input and baseline rows): a backward keeps
#: every layer's activations, so its chunks are a quarter of the forwards' default
#: (:data:`itermask.core.forwards.DEFAULT_TOKEN_BUDGET`); raise it on a GPU
GRADIENT_TOKEN_BUDGET = 2048

_NEEDS_NO_ATTENTIONS = "gradient, integrated_gradients, occlusion, lime, kernel_shap or random"
_NEEDS_NO_EMBEDDINGS = "occlusion, lime, kernel_shap, attention or random"


#: what autograd and Captum's layer hooks raise when the output does not depend on the word-embedding layer
_DISCONNECTED = (
    "does not require grad",  # autograd: the output has no graph back to the inputs
    "Forward hook did not obtain any outputs",  # Captum: the hooked embedding layer never ran
    "appears to not have been used in the graph",  # autograd.grad with allow_unused=False
)


class SaliencyError(RuntimeError):
    """A saliency method's scores cannot depend on the input (the message names the method, the model
    class and the likely cause)."""


class ZeroSaliencyWarning(UserWarning):
    """Some examples got identically zero saliency scores (they are then ranked by position only)."""


@dataclass
class Attribution:
    """Saliency scores of a batch and their per-example diagnostics (:meth:`SaliencyMethod.explain`).

    Attributes:
        scores: ``[B, L]`` float scores, 0 at padding.
        zero: ``[B]`` bool, the example's scores are identically zero at every attended position.
        completeness_gap: ``[B]`` float64, for methods with a baseline in embedding space
            (``integrated_gradients``, ``deeplift``): the sum of the example's attributions minus
            ``f(x) - f(baseline)``, in units of the explained output (probability or logit). Completeness
            (Sundararajan et al. 2017, arXiv 1703.01365, Prop. 1) and DeepLIFT's summation-to-delta
            (Shrikumar et al. 2017, arXiv 1704.02685, Eq. 1) say it is 0; for IG it is the path integral's
            discretisation error. ``None`` for other methods.
        output_difference: ``[B]`` float64 ``f(x) - f(baseline)`` of the explained output, or ``None``.
    """

    scores: Tensor
    zero: Tensor
    completeness_gap: Tensor | None = None
    output_difference: Tensor | None = None


def example_seed(seed: int, example_id: int) -> int:
    """A 64-bit generator seed for one example: the first 8 bytes of ``sha256("seed:example_id")``.

    Seeded methods draw per example from this seed, so their scores do not depend on how examples are
    batched."""
    digest = hashlib.sha256(f"{int(seed)}:{int(example_id)}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


class SaliencyMethod(TokenizerBound, ABC):
    """Base class: per-token saliency for a target class, explaining ``output`` (``"probability"``, the softmax of
    the target class, or ``"logit"``); ``absolute`` ranks by the absolute value of the score (signed methods).

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
    #: whether identically zero scores are an error (whole batch) or a warning (some examples)
    zero_check: bool = True
    #: whether the method batches its own model calls across the rows of a batch (sorted by real length, in
    #: chunks of a token budget), or its scores of a row depend on the other rows: then a caller passes it the
    #: whole batch instead of length chunks of it
    batches_own_calls: bool = False
    #: how word features (``evaluation.features=word``) make a word's score from its pieces' scores: ``"sum"``
    #: (:class:`itermask.core.features.Features`), or ``"first"`` (the first piece's)
    word_score: str = "sum"

    def __init__(self, output: Literal["probability", "logit"] = "probability", absolute: bool = False) -> None:
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
        self.output = output
        self.absolute = absolute

    def attribute(
        self, model: torch.nn.Module, batch: TokenBatch, target: Tensor, example_ids: Tensor | None = None
    ) -> Tensor:
        """``[B, L]`` float saliency of each token of ``batch`` (clean or masked, ``[B, L]``) for the ``[B]`` classes
        ``target``, 0 at padding; ``model`` in eval mode. ``example_ids`` (``[B]``, default the row index) seed
        the seeded methods, so that scores do not depend on how examples are batched.

        Raises:
            SaliencyError: see :meth:`explain`.
        """
        return self.explain(model, batch, target, example_ids).scores

    def explain(
        self,
        model: torch.nn.Module,
        batch: TokenBatch,
        target: Tensor,
        example_ids: Tensor | None = None,
        sanity: bool = True,
    ) -> Attribution:
        """:meth:`attribute` with per-example diagnostics (:class:`Attribution`). With ``sanity=False`` zero scores are
        only flagged (:attr:`Attribution.zero`), not warned about or raised: for a caller that checks the whole of a
        split batch with :meth:`check_scores`, or re-explains masked or perturbed inputs (recursive masking,
        attacks), where a part may legitimately be all zeros.

        Warns:
            ZeroSaliencyWarning: if some (not all) examples' scores are identically zero (e.g. a saturated
                float32 softmax can give an exactly zero gradient). Not for ``random``.

        Raises:
            SaliencyError: for a gradient method called under ``torch.inference_mode()``; if the forward does not use
                the word embeddings it is given (the raw autograd or Captum hook failure, translated; Captum issue
                978), or if every example of a non-empty batch gets identically zero scores. Not for ``random``.
        """
        if example_ids is None:
            example_ids = torch.arange(len(batch), device=batch.device)
        if self.needs_gradients and torch.is_inference_mode_enabled():
            raise SaliencyError(
                f"saliency={self.name} needs gradients, but it was called under torch.inference_mode(), where no "
                "tensor can record them (Lightning runs predict_step and test_step so unless the trainer is "
                "built with Trainer(inference_mode=False)). Call it outside inference_mode, or build the trainer "
                "with inference_mode=False; torch.no_grad() is fine (the method turns gradients back on)"
            )
        try:
            scores, gap, difference = self._attribution(model, batch, target, example_ids)
        except (RuntimeError, AssertionError) as error:
            if not any(text in str(error) for text in _DISCONNECTED):
                raise
            raise SaliencyError(self._failure(model, f"failed ({error})")) from error
        scores = scores.float()
        if self.absolute:
            scores = scores.abs()
        attended = batch.attention_mask.bool()
        scores = scores.masked_fill(~attended, 0.0).detach()
        zero = ((scores == 0) | ~attended).all(dim=1)
        attribution = Attribution(scores, zero, _as_double(gap), _as_double(difference))
        if sanity:
            self.check_scores(attribution, model)
        return attribution

    def check_scores(self, attribution: Attribution, model: torch.nn.Module) -> None:
        """The zero-score sanity check of :meth:`explain` on one batch's ``attribution`` (no-op without
        :attr:`zero_check`, i.e. for ``random``).

        Warns:
            ZeroSaliencyWarning: if some (not all) examples' scores are identically zero.

        Raises:
            SaliencyError: if every example of a non-empty batch has identically zero scores.
        """
        zero, size = attribution.zero, len(attribution.zero)
        if not self.zero_check or not bool(zero.any()):
            return
        if bool(zero.all()):
            raise SaliencyError(self._failure(model, f"gave identically zero scores to all {size} examples of a batch"))
        warnings.warn(
            f"saliency={self.name} gave identically zero scores to {int(zero.sum())} of {size} examples "
            f"on {type(model).__name__} (they are ranked by position only); a saturated float32 softmax can "
            "give an exactly zero gradient: explain the logit (saliency.output=logit) to avoid that",
            ZeroSaliencyWarning,
            stacklevel=3,
        )

    def _failure(self, model: torch.nn.Module, what: str) -> str:
        """The message of a :class:`SaliencyError`: the method, the model class, ``what`` happened and the
        likely cause."""
        if self.needs_embeddings:
            get = getattr(model, "get_input_embeddings", None)
            layer = type(get()).__name__ if callable(get) else "none"
            cause = (
                f"the model's forward does not use the word embeddings it is given: the output of "
                f"get_input_embeddings() ({layer}) does not reach the logits (e.g. the forward embeds the ids "
                "with another module or detaches them; Captum issue 978)"
            )
        else:
            cause = "the model's output does not depend on the token ids it is given"
        return (
            f"saliency={self.name} on {type(model).__name__} {what}. Likely cause: {cause}. Identically zero "
            "scores can also come from a baseline equal to the input or from predictions saturated in float32 "
            "(explain the logit: saliency.output=logit)"
        )

    def _attribution(
        self, model, batch: TokenBatch, target: Tensor, example_ids: Tensor
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Raw ``[B, L]`` scores, and the ``[B]`` completeness gap and ``f(x) - f(baseline)`` where the method
        defines them (``None`` otherwise)."""
        return self._scores(model, batch, target, example_ids), None, None

    @abstractmethod
    def _scores(self, model, batch: TokenBatch, target: Tensor, example_ids: Tensor) -> Tensor:
        """Raw ``[B, L]`` scores."""

    def check(self, model: torch.nn.Module) -> None:
        """Fail before any work if this method cannot run on ``model``: it must expose its word-embedding layer
        (:attr:`needs_embeddings`) and return attention weights (:attr:`needs_attentions`; one forward of two tokens).

        Raises:
            ValueError: naming the problem and the methods to choose instead.
        """
        if self.needs_embeddings:
            self._embedding_layer(model)
        if self.needs_attentions:
            parameter = next(iter(model.parameters()), None)
            ids = torch.zeros((1, 2), dtype=torch.long, device="cpu" if parameter is None else parameter.device)
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
            ValueError: if the model returns none (SDPA and flash attention return none).
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


def _as_double(values: Tensor | None) -> Tensor | None:
    return None if values is None else values.detach().double()


def prepare_for_saliency(model: torch.nn.Module, methods: Iterable[SaliencyMethod]) -> torch.nn.Module:
    """``model`` made to serve ``methods`` and checked, before any evaluation work: Hugging Face transformers 5
    loads models with SDPA attention, which returns no attention weights, so when a method needs them
    (:attr:`SaliencyMethod.needs_attentions`) the model is switched in place to eager attention
    (``model.set_attn_implementation("eager")``, same weights and outputs); then every method's
    :meth:`SaliencyMethod.check` runs.

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
    """

    name = "random"
    needs_gradients = False
    needs_embeddings = False
    zero_check = False
    #: a word takes its first piece's score: words in a uniform random order (a sum would rank long words first)
    word_score = "first"

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
