"""The interface of token saliency methods, :meth:`SaliencyMethod.attribute`.

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
from abc import ABC, abstractmethod
from typing import Iterable, Literal

import torch
from torch import Tensor

from itermask.core.tokens import TokenBatch, TokenizerBound, class_logits

__all__ = ["SaliencyMethod", "RandomSaliency", "prepare_for_saliency", "example_seed", "OUTPUTS", "BASELINES", "TOKEN_BASELINES"]

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


class SaliencyMethod(TokenizerBound, ABC):
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
    #: whether the scores of a row depend only on that row (and its example id), not on the other rows of
    #: the batch: then a caller may split a batch into length chunks (as the evaluator does). Every
    #: built-in method is; a method that normalises over the batch, say, sets ``False``
    row_independent: bool = True

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
