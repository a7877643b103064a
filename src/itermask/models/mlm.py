"""The masked language models itermask loads: an MLM for ``masking=mlm_infill`` and the ``mlm`` attack
candidates (:func:`load_masked_lm`, loaded from the classifier's encoder or a pretrained folder), and the MLM head
that continued pretraining ties to an encoder's word embeddings (:func:`masked_lm_from_encoder`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from itermask.core.candidates import MlmCandidates
from itermask.core.masking import MlmInfill
from itermask.models.loading import model_path

__all__ = [
    "load_masked_lm",
    "PretrainedMlmInfill",
    "load_mlm_infill",
    "check_word_embeddings",
    "mlm_architecture",
    "mlm_head",
    "masked_lm_from_encoder",
    "PretrainedMlmCandidates",
]

_MLM_ALTERNATIVES = (
    "set masking.mlm_pretrained to a checkpoint with a masked-language-model head and the classifier's "
    "vocabulary, or choose another masking strategy (masking=mask_token, unk, pad, attention_off, "
    "random_token or delete)"
)


@contextmanager
def _transformers_errors_only() -> Iterator[None]:
    """Hold ``transformers``' log at errors only: its reports of missing or fresh weights are ours to give."""
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)


def load_masked_lm(
    pretrained: str,
    tokenizer,
    user: str = "mlm_infill",
    setting: str = "masking.mlm_pretrained",
    alternatives: str = _MLM_ALTERNATIVES,
) -> torch.nn.Module:
    """The masked-language model at ``pretrained``, checked to have an MLM head and ``tokenizer``'s vocabulary
    (its tokenizer must load from the same place); ``user``, ``setting`` and ``alternatives`` word the errors.

    Raises:
        ValueError: if the checkpoint cannot be loaded, has no MLM head (e.g. the packaged MiniLM), or its
            vocabulary differs from ``tokenizer``'s."""
    try:
        with _transformers_errors_only():  # the missing-weights report is ours to give, below
            path = model_path(pretrained, setting=setting, tokenizer=True)
            model, info = AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True)
    except (OSError, ValueError, KeyError) as error:  # OSError includes a missing local directory
        raise ValueError(
            f"{user} cannot load a masked-language model from {pretrained!r}: {error}; {alternatives}"
        ) from error
    prefix = f"{model.base_model_prefix}."
    head = {name for name, _ in model.named_parameters() if not name.startswith(prefix)}
    missing_head = sorted(head & set(info["missing_keys"]))
    if missing_head:
        raise ValueError(
            f"{user} needs a masked-language-model head, but {pretrained!r} has none "
            f"(it is an encoder without MLM weights: {missing_head[:3]} would be random); {alternatives}"
        )
    try:
        mlm_vocab = AutoTokenizer.from_pretrained(path).get_vocab()
    except (OSError, ValueError) as error:
        raise ValueError(
            f"{user} cannot load the tokenizer of {pretrained!r} to check its vocabulary: {error}"
        ) from error
    if mlm_vocab != tokenizer.get_vocab():
        raise ValueError(
            f"{user}: the vocabulary of {pretrained!r} ({len(mlm_vocab)} tokens) differs from the "
            f"classifier tokenizer's ({len(tokenizer.get_vocab())}), so its predicted ids would mean other "
            f"tokens; {alternatives}"
        )
    return model


class PretrainedMlmInfill(MlmInfill):
    """:class:`~itermask.core.masking.MlmInfill` whose model is loaded from ``mlm_pretrained`` when it is
    bound to the tokenizer (``conf/masking/mlm_infill.yaml``).

    Raises:
        ValueError: at :meth:`bind`, see :func:`load_masked_lm`."""

    def __init__(self, mlm_pretrained: str, chunk_size: int = 64, tokenizer=None) -> None:
        super().__init__(None, None, chunk_size, source=str(mlm_pretrained))
        if tokenizer is not None:
            self.bind(tokenizer)

    def _bind(self, tokenizer) -> None:
        if self.mlm is None:
            assert self.mlm_pretrained is not None  # set from the constructor's mlm_pretrained
            self.mlm = load_masked_lm(self.mlm_pretrained, tokenizer).eval().requires_grad_(False)
        super()._bind(tokenizer)


def load_mlm_infill(tokenizer, mlm_pretrained: str, chunk_size: int = 64) -> MlmInfill:
    """An :class:`~itermask.core.masking.MlmInfill` bound to ``tokenizer`` with the masked-language model
    loaded from ``mlm_pretrained`` (:func:`load_masked_lm`)."""
    return PretrainedMlmInfill(mlm_pretrained, chunk_size, tokenizer=tokenizer)


def check_word_embeddings(model: Any, pretrained: str) -> None:
    """A masked-language model built from ``pretrained``'s config (on any device) must have an input word
    embedding matrix and an output projection of the same shape, to tie the head's decoder to.

    Raises:
        ValueError: naming ``model.pretrained`` and what is missing."""
    inputs = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    outputs = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    weight = getattr(inputs, "weight", None)
    if not isinstance(inputs, torch.nn.Embedding) or weight is None:
        raise ValueError(
            f"model.pretrained={pretrained!r} has no word-embedding matrix (get_input_embeddings() gives "
            f"{type(inputs).__name__}), so continued MLM pretraining has nothing to tie the head's decoder to; "
            "choose a Transformer encoder with word embeddings (BERT, RoBERTa, MiniLM), or drop model.pretrain"
        )
    if outputs is None or getattr(outputs, "weight", torch.empty(0)).shape != weight.shape:
        raise ValueError(
            f"model.pretrained={pretrained!r}: its masked-language-model head has no decoder of the word "
            "embeddings' shape to tie; choose a BERT-like encoder, or drop model.pretrain"
        )


def mlm_architecture(pretrained_path: str, pretrained: str) -> torch.nn.Module:
    """The masked-language model of ``pretrained``'s config on the ``meta`` device (no weights), checked
    (:func:`check_word_embeddings`) before any work.

    Raises:
        ValueError: no MLM class for the architecture, or no word embeddings to tie to."""
    config = AutoConfig.from_pretrained(pretrained_path)
    try:
        with torch.device("meta"):
            model = AutoModelForMaskedLM.from_config(config)
    except ValueError as error:
        raise ValueError(
            f"model.pretrained={pretrained!r}: transformers has no masked-language model for its architecture "
            f"({error}); drop model.pretrain"
        ) from error
    check_word_embeddings(model, pretrained)
    return model


def mlm_head(model: Any) -> torch.nn.Module:
    """The head of a ``...ForMaskedLM`` model: its one child besides the base model (``cls`` for BERT,
    ``lm_head`` for RoBERTa), mapping hidden states ``[..., H]`` to token logits ``[..., V]``.

    Raises:
        ValueError: if the model has not exactly one such child."""
    prefix = getattr(model, "base_model_prefix", "")
    children = [child for name, child in model.named_children() if name != prefix]
    if len(children) != 1:
        raise ValueError(f"{type(model).__name__} has no single MLM head beside its base model")
    return children[0]


def masked_lm_from_encoder(path: str) -> Any:
    """``AutoModelForMaskedLM`` with the encoder weights of ``path`` and a fresh head whose decoder weight is
    the word-embedding matrix itself (``tie_word_embeddings`` forced on)."""
    with _transformers_errors_only():  # the fresh head's "newly initialized" report is expected
        model = AutoModelForMaskedLM.from_pretrained(path, tie_word_embeddings=True)
    model.tie_weights()
    return model


def _pooler_weights(path: str, model: Any) -> dict[str, Tensor]:
    """The base encoder's weights that the masked-language model lacks (BERT's pooler), under its names, so that
    a classifier fine-tuned from the output starts from the same pooler as one fine-tuned from the base encoder."""
    with _transformers_errors_only():
        encoder = AutoModel.from_pretrained(path)
    prefix = model.base_model_prefix
    have = set(model.base_model.state_dict())
    return {f"{prefix}.{k}": v.detach().clone() for k, v in encoder.state_dict().items() if k not in have}


_MLM_CANDIDATE_ALTERNATIVES = (
    "set attack.candidates.mlm_pretrained to a checkpoint with a masked-language-model head and the "
    "classifier's vocabulary (e.g. the hub model the classifier was fine-tuned from: bert-base-uncased, "
    "roberta-base), or choose attack=embedding_neighbors or attack=mask"
)


class PretrainedMlmCandidates(MlmCandidates):
    """``attack.candidates.name=mlm``: the top-``k`` predictions of the masked-language model at
    ``mlm_pretrained`` (:class:`~itermask.core.candidates.MlmCandidates`, BAE-R), loaded and checked at :meth:`bind`.

    Raises:
        ValueError: ``k < 1``, ``chunk_size < 1``; at :meth:`bind`, see :func:`load_masked_lm`."""

    name = "mlm"

    def __init__(self, mlm_pretrained: str, k: int = 20, chunk_size: int = 16) -> None:
        super().__init__(None, k, chunk_size, source=str(mlm_pretrained))

    def _bind(self, tokenizer) -> None:
        if self.mlm is None:
            assert self.mlm_pretrained is not None  # set from the constructor's mlm_pretrained
            setting, user = "attack.candidates.mlm_pretrained", "attack candidates 'mlm'"
            model = load_masked_lm(self.mlm_pretrained, tokenizer, user, setting, _MLM_CANDIDATE_ALTERNATIVES)
            self.mlm = model.eval().requires_grad_(False)
        super()._bind(tokenizer)
