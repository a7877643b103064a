"""Cheap adversarial examples for adversarial fine-tuning: gradient ranking, candidates chosen by a
first-order estimate of the loss, one verification forward.

:class:`FirstOrderAttack` perturbs every example of a training batch for its gold label against the current
model in eval mode, with no search and a fixed cost (one forward and backward, one forward to verify):

1. **Gradient.** ``g_i = d L / d e_i``, the gradient of the cross-entropy loss of the gold label with respect
   to the word embedding ``e_i`` of every position ``i`` (the output of ``model.get_input_embeddings()``).
2. **Ranking.** The attackable positions (:func:`itermask.core.candidates.attackable_positions`) ranked by
   ``||g_i||_2`` (A2T's gradient word importance, Yoo & Qi 2021, "Towards Improving Adversarial Training of
   NLP Models", Findings of EMNLP, Sec. 3.1); the top ``k_max = floor(budget * n + 0.5)`` of the ``n``
   maskable tokens are perturbed (:func:`itermask.core.attack.budget_counts`).
3. **First-order choice.** At each of them, among the candidate source's token ids ``c``, the one with the
   largest first-order estimate of the loss increase ``g_i . (e(c) - e(x_i))`` is substituted, if that
   estimate is positive (HotFlip, Ebrahimi et al. 2018, ACL, Eq. 2, there over the whole vocabulary; A2T
   restricts it to meaning-keeping candidates). All substitutions are made at once, without new gradients.
4. **Verification.** One forward of the perturbed batch: an example's adversarial version is *accepted*
   when it lowers the gold-label probability, ``p(y | x_adv) < p(y | x)``; the others keep the clean input.

Examples the model already gets wrong are attacked too: their loss is raised further, as in loss-maximising
adversarial training.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
from torch import Tensor

from itermask.core.attack import budget_counts, check_budget
from itermask.core.candidates import NO_CANDIDATE, CandidateSource, attackable_positions, input_embedding_matrix
from itermask.core.measures import target_output
from itermask.core.schedules import top_k_mask
from itermask.core.tokens import TokenBatch, class_logits

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["AdversarialBatch", "FirstOrderAttack", "embedding_gradient", "first_order_estimates"]


@dataclass
class AdversarialBatch:
    """Adversarial versions of ``B`` training examples.

    Attributes:
        batch: ``[B, L]`` the inputs to train on: the adversarial version where accepted, else the clean one.
        accepted: ``[B]`` bool the adversarial version lowered the gold-label probability.
        flipped: ``[B]`` bool accepted, and the prediction went from the gold label to another class.
        n_substituted, n_proposed: ``[B]`` long tokens substituted in the batch (0 where not accepted) and in
            the proposal (before verification).
        clean_prob, adversarial_prob: ``[B]`` float gold-label probability of the clean input and the proposal.
        estimate: ``[B]`` float the first-order estimate of the loss increase of the proposal (nats, summed
            over its substitutions).
    """

    batch: TokenBatch
    accepted: Tensor
    flipped: Tensor
    n_substituted: Tensor
    n_proposed: Tensor
    clean_prob: Tensor
    adversarial_prob: Tensor
    estimate: Tensor

    def __len__(self) -> int:
        return len(self.accepted)


def embedding_gradient(model: torch.nn.Module, batch: TokenBatch, labels: Tensor) -> tuple[Tensor, Tensor]:
    """``(g [B, L, D], logits [B, C])``: the gradient of the summed cross-entropy loss of ``labels`` (``[B]``
    long) with respect to the word-embedding output (``model.get_input_embeddings()``), and the logits. The
    sum makes row ``b`` of ``g`` the gradient of example ``b``'s own loss. Parameter gradients are not
    touched (``torch.autograd.grad`` with respect to the embeddings only).

    Raises:
        ValueError: if the model has no input-embedding layer.
    """
    input_embedding_matrix(model, "adversarial fine-tuning (the first-order estimate)")
    captured: list[Tensor] = []

    def keep(module, args, output):
        output = output if output.requires_grad else output.detach().requires_grad_()
        captured.append(output)
        return output

    handle = cast("PreTrainedModel", model).get_input_embeddings().register_forward_hook(keep)
    try:
        with torch.enable_grad():
            logits = class_logits(model, batch)
            loss = torch.nn.functional.cross_entropy(logits.float(), labels.to(logits.device), reduction="sum")
            (grad,) = torch.autograd.grad(loss, captured[0])
    finally:
        handle.remove()
    return grad.detach(), logits.detach()


def first_order_estimates(layer: torch.nn.Module, grad: Tensor, originals: Tensor, candidates: Tensor) -> Tensor:
    """``[R, C]`` the first-order estimate of the loss change of replacing ``originals[r]`` by
    ``candidates[r, c]`` at a position with gradient ``grad[r]`` (``[R, D]``): ``grad . (e(c) - e(x))``, the
    embeddings ``e`` computed by the embedding ``layer`` itself (so scaled embeddings are exact); ``-inf``
    where ``candidates`` is :data:`~itermask.core.candidates.NO_CANDIDATE`."""
    valid = candidates != NO_CANDIDATE
    with torch.no_grad():
        new = layer(torch.where(valid, candidates, originals[:, None]).to(grad.device)).float()  # [R, C, D]
        old = layer(originals.to(grad.device)).float()  # [R, D]
    estimate = ((new - old[:, None]) * grad[:, None].float()).sum(dim=-1)
    return estimate.masked_fill(~valid.to(estimate.device), float("-inf"))


class FirstOrderAttack:
    """The cheap attack of adversarial fine-tuning (see the module docstring).

    Args:
        candidates: a bound candidate source whose candidates are token ids
            (:attr:`~itermask.core.candidates.CandidateSource.gives_token_ids`), e.g. embedding neighbours.
        special_ids, word_start: the attackable positions (:func:`~itermask.core.candidates.attackable_positions`).
        budget: the most tokens perturbed, as a share of the maskable ones, in (0, 1].

    Raises:
        ValueError: a source whose candidates are not token ids (``mask``), a budget outside (0, 1].
    """

    def __init__(
        self,
        candidates: CandidateSource,
        special_ids: Iterable[int],
        word_start: Tensor | None = None,
        budget: float = 0.2,
    ) -> None:
        if not candidates.gives_token_ids:
            raise ValueError(
                f"train.adversarial_augmentation.candidates: {candidates.name!r} proposes no token ids (it masks); "
                "the first-order estimate needs token ids: choose embedding_neighbors, wordnet or mlm"
            )
        check_budget(budget, setting="train.adversarial_augmentation")
        self.candidates, self.word_start, self.budget = candidates, word_start, float(budget)
        self.special_ids = sorted(set(int(i) for i in special_ids))

    def propose(self, model: torch.nn.Module, batch: TokenBatch, labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Steps 1-3: ``(ids [B, L] with the substitutions, estimate [B] summed over them, clean logits [B, C])``."""
        grad, logits = embedding_gradient(model, batch, labels)
        maskable, attackable = attackable_positions(batch, self.special_ids, self.word_start)
        k_max = budget_counts(maskable.sum(dim=1), self.budget)
        chosen = top_k_mask(grad.norm(dim=-1).to(batch.device), attackable, k_max)
        rows, positions = torch.nonzero(chosen, as_tuple=True)
        ids, estimate = batch.input_ids.clone(), torch.zeros(len(batch), device=batch.device)
        if not len(rows):
            return ids, estimate, logits
        candidates = self.candidates.candidates(batch.index(rows), positions).to(batch.device)
        originals = batch.input_ids[rows, positions]
        layer = cast("PreTrainedModel", model).get_input_embeddings()
        estimates = first_order_estimates(
            layer, grad[rows.to(grad.device), positions.to(grad.device)], originals, candidates
        ).to(batch.device)
        best, column = estimates.max(dim=1)
        take = best > 0
        ids[rows[take], positions[take]] = candidates[take, column[take]]
        estimate.index_add_(0, rows[take], best[take])
        return ids, estimate, logits

    def generate(self, model: torch.nn.Module, batch: TokenBatch, labels: Tensor) -> AdversarialBatch:
        """Adversarial versions of ``batch`` (``[B, L]``, clean) for the gold ``labels`` (``[B]``) against
        ``model`` (in eval mode while attacking; its mode is restored)."""
        training = model.training
        model.eval()
        try:
            self.candidates.prepare(model)
            ids, estimate, clean_logits = self.propose(model, batch, labels)
            proposal = batch.with_ids(ids)
            with torch.no_grad():  # not inference_mode: the ids go on into a training forward
                adversarial_logits = class_logits(model, proposal).float()
        finally:
            model.train(training)
        labels = labels.to(batch.device)
        clean = target_output(clean_logits, labels.to(clean_logits.device))
        adversarial = target_output(adversarial_logits, labels.to(adversarial_logits.device))
        n_proposed = (ids != batch.input_ids).sum(dim=1)
        accepted = (adversarial.to(batch.device) < clean.to(batch.device)) & (n_proposed > 0)
        flipped = (
            accepted
            & (clean_logits.argmax(dim=-1).to(batch.device) == labels)
            & (adversarial_logits.argmax(dim=-1).to(batch.device) != labels)
        )
        out = torch.where(accepted[:, None], ids, batch.input_ids)
        return AdversarialBatch(
            batch=batch.with_ids(out),
            accepted=accepted,
            flipped=flipped,
            n_substituted=torch.where(accepted, n_proposed, 0),
            n_proposed=n_proposed,
            clean_prob=clean.detach(),
            adversarial_prob=adversarial.detach(),
            estimate=estimate,
        )
