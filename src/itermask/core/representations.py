"""Capturing a classifier's internal representations during the forward passes it already runs
(:func:`capture_representations`, so the masked forwards of the evaluation yield them at no extra cost):

* ``features``: the input of the classifier's *final* linear layer (:func:`classifier_head`), captured with a
  forward pre-hook on it: the pooler output for BERT (MiniLM; ``tanh(dense([CLS]))``) and DeBERTa
  (``classifier``), ``tanh/gelu(classifier.dense([CLS]))`` for RoBERTa and ELECTRA (``classifier.out_proj``),
  ``relu(pre_classifier([CLS]))`` for DistilBERT (``classifier``); each after dropout, the identity in eval
  mode, so the captured vector is the head's pre-dropout activation.
* ``layer_mean`` / ``layer_max``: every hidden state the encoder returns with ``output_hidden_states``
  (the embedding output and each of the ``L`` layers), mean- and max-pooled over the attended
  (non-padding) tokens, special tokens included. Max-pooling is MaSF's signal (Madsen et al. 2023, their
  code ``ecoroar/ood/masf.py``); mean-pooling is the usual sentence embedding.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import Tensor

__all__ = ["Representations", "classifier_head", "capture_representations", "pool_hidden_states"]


@dataclass
class Representations:
    """Representations of ``N`` inputs.

    Attributes:
        features: ``[N, D]`` float, input of the classifier's final linear layer.
        layer_mean: ``[N, L+1, H]`` float, hidden states (embedding output first) mean-pooled over the
            attended tokens; ``None`` when only the final layer's input was captured.
        layer_max: ``[N, L+1, H]`` float, the same max-pooled; ``None`` likewise.
    """

    features: Tensor
    layer_mean: Tensor | None = None
    layer_max: Tensor | None = None

    def __len__(self) -> int:
        return self.features.shape[0]

    @staticmethod
    def concat(parts: Iterable[Representations]) -> Representations:
        """Stack along the example dimension.

        Raises:
            ValueError: if there are no parts.
        """
        parts = list(parts)
        if not parts:
            raise ValueError("no representations were captured (no forward pass ran inside the capture)")

        def joined(name: str) -> Any:  # a tensor, ``None`` only for an optional field
            values = [getattr(p, name) for p in parts]
            return None if any(v is None for v in values) else torch.cat(values)

        return Representations(*(joined(f.name) for f in fields(Representations)))

    def map(self, fn) -> Representations:
        """Apply ``fn`` to every tensor (e.g. a reshape or ``.cpu()``); absent ones stay ``None``."""
        values: list[Any] = [None if (v := getattr(self, f.name)) is None else fn(v) for f in fields(Representations)]
        return Representations(*values)


def classifier_head(model: torch.nn.Module) -> torch.nn.Linear:
    """The final linear layer of a Hugging Face sequence classifier (see the module docstring):
    ``classifier.out_proj`` (RoBERTa, ELECTRA), else ``classifier`` (BERT, DistilBERT, DeBERTa), else ``score``
    (decoder-style classifiers), the first that is a ``torch.nn.Linear``.

    Raises:
        ValueError: if the model has none of them.
    """
    classifier = getattr(model, "classifier", None)
    for candidate in (getattr(classifier, "out_proj", None), classifier, getattr(model, "score", None)):
        if isinstance(candidate, torch.nn.Linear):
            return candidate
    raise ValueError(
        f"cannot find the final linear layer of {type(model).__name__}: expected a torch.nn.Linear at "
        "'classifier.out_proj', 'classifier' or 'score' (Hugging Face sequence classifiers)"
    )


def pool_hidden_states(hidden_states: Iterable[Tensor], attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """``(mean, max)``, each ``[B, L+1, H]`` float32: the ``L+1`` ``hidden_states`` (``[B, T, H]``) pooled over
    the attended tokens of ``attention_mask`` (``[B, T]``).

    Raises:
        ValueError: if a row has no attended token.
    """
    mask = attention_mask.bool()[:, :, None]  # [B, T, 1]
    count = mask.sum(dim=1)
    if (count == 0).any():
        raise ValueError("cannot pool the hidden states of an input with no attended token")
    means, maxima = [], []
    for states in hidden_states:  # one layer at a time: no [B, L+1, T, H] copy
        states = states.float()
        means.append((states * mask).sum(dim=1) / count)
        maxima.append(states.masked_fill(~mask, float("-inf")).amax(dim=1))
    return torch.stack(means, dim=1), torch.stack(maxima, dim=1)


@contextmanager
def capture_representations(model: torch.nn.Module, hidden_states: bool = True) -> Iterator[list[Representations]]:
    """Record :class:`Representations` of every forward pass of ``model`` run inside the block: yields a list
    that receives one per forward pass, in call order, on the model's device; the hooks are removed on exit.
    The model must be called with keyword arguments (as :func:`itermask.core.tokens.class_logits` does). With
    ``hidden_states`` (default) ``output_hidden_states=True`` is added to each call and every layer is pooled;
    without it only the final layer's input is recorded (no extra cost).

    Raises:
        ValueError: on entry if the final linear layer cannot be found (:func:`classifier_head`); during
            a forward pass if the model returns no hidden states or the head was not reached.
    """
    head = classifier_head(model)
    records: list[Representations] = []
    captured: list[Tensor] = []

    def before_model(module, args, kwargs):
        captured.clear()
        return args, {**kwargs, "output_hidden_states": True} if hidden_states else kwargs

    def before_head(module, args):
        captured.append(args[0].detach().float())

    def after_model(module, args, kwargs, output):
        if len(captured) != 1:
            raise ValueError(f"the final linear layer ran {len(captured)} times in one forward pass, expected once")
        if not hidden_states:
            records.append(Representations(captured[0]))
            return
        hidden = getattr(output, "hidden_states", None)
        if hidden is None:
            raise ValueError(f"{type(module).__name__} returned no hidden states with output_hidden_states=True")
        mask = kwargs.get("attention_mask")
        if mask is None:
            mask = torch.ones(hidden[0].shape[:2], dtype=torch.long, device=hidden[0].device)
        mean, maximum = pool_hidden_states([h.detach() for h in hidden], mask)
        records.append(Representations(captured[0], mean, maximum))

    handles = [
        model.register_forward_pre_hook(before_model, with_kwargs=True),
        head.register_forward_pre_hook(before_head),
        model.register_forward_hook(after_model, with_kwargs=True),
    ]
    try:
        yield records
    finally:
        for handle in handles:
            handle.remove()
