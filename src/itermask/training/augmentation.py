"""Training-batch augmentations: masked fine-tuning (the control of the out-of-distribution study) and
adversarial fine-tuning (the robustness study), each applied to a ``batch_share`` of the training batches.

Masked fine-tuning (:class:`RandomMaskingAugmentation`) follows Madsen et al. 2023 ("Faithfulness Measurable
Masked Language Models", arXiv 2310.07819) so that masked inputs are in distribution for the classifier: each
example draws a masking fraction ``f ~ U[0, 1]``, and ``k = floor(f * n + 0.5)`` of its ``n`` maskable tokens
(:func:`itermask.core.schedules.masked_counts`), chosen uniformly at random, are masked.

Adversarial fine-tuning (:class:`AdversarialAugmentation`) replaces every example by its adversarial version
against the current model where that version lowers the gold-label probability
(:class:`itermask.core.adversarial.FirstOrderAttack`), as A2T does (Yoo & Qi 2021, Findings of EMNLP, Sec. 3.1, 4).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

import torch
from torch import Tensor

from itermask.core.adversarial import FirstOrderAttack
from itermask.core.candidates import CandidateSource, input_embedding_matrix, word_start_vocabulary
from itermask.core.masking import MaskingStrategy
from itermask.core.schedules import masked_counts, top_k_mask
from itermask.core.tokens import TokenBatch, maskable_positions

__all__ = [
    "ADVERSARIAL_KEYS",
    "RandomMaskingAugmentation",
    "AdversarialAugmentation",
    "check_batch_share",
    "check_adversarial_keys",
    "masked_fine_tuning",
    "adversarial_fine_tuning",
]

#: the keys of ``train.adversarial_augmentation``
ADVERSARIAL_KEYS = frozenset({"enabled", "batch_share", "budget", "word_initial_only", "candidates"})


def check_batch_share(batch_share: float, setting: str) -> float:
    """``batch_share`` as a float.

    Raises:
        ValueError: if it lies outside [0, 1] (naming ``setting``)."""
    if isinstance(batch_share, bool) or not isinstance(batch_share, (int, float)) or not 0.0 <= batch_share <= 1.0:
        raise ValueError(f"{setting}.batch_share must be a number in [0, 1], got {batch_share}")
    return float(batch_share)


class RandomMaskingAugmentation:
    """Masks a uniformly random fraction of the maskable tokens (not ``special_ids``) in a ``batch_share`` (a
    probability; Madsen et al. 2023 use 0.5) of the training batches with ``strategy``, drawing batches,
    fractions and positions from its own generator seeded with ``seed``.

    Raises:
        ValueError: if ``batch_share`` lies outside [0, 1]."""

    def __init__(
        self, strategy: MaskingStrategy, special_ids: Iterable[int], batch_share: float = 0.5, seed: int = 0
    ) -> None:
        self.batch_share = check_batch_share(batch_share, "train.masking_augmentation")
        self.strategy = strategy
        self.special_ids = sorted(set(int(i) for i in special_ids))
        self.generator = torch.Generator().manual_seed(int(seed))

    def sample(self, batch: TokenBatch) -> tuple[Tensor, Tensor]:
        """Draw masks for one batch that is to be masked: ``(mask, fractions)``, the ``[B, L]`` bool positions to
        mask and the ``[B]`` float64 drawn masking fractions."""
        maskable = maskable_positions(batch, self.special_ids)
        fractions = torch.rand(len(batch), generator=self.generator, dtype=torch.float64)
        # per-example fractions: the diagonal of masked_counts' [B, B] grid keeps its rounding rule
        k = torch.diagonal(masked_counts(maskable.sum(dim=1).cpu(), fractions))
        scores = torch.rand(batch.input_ids.shape, generator=self.generator)
        mask = top_k_mask(scores, maskable.cpu(), k)
        return mask.to(batch.device), fractions

    def __call__(self, batch: TokenBatch) -> TokenBatch:
        """The batch to train on: masked with probability ``batch_share``, else ``batch`` itself."""
        if torch.rand((), generator=self.generator).item() >= self.batch_share:
            return batch
        mask, _ = self.sample(batch)
        return self.strategy.apply(batch, mask).batch

    def __repr__(self) -> str:
        return f"RandomMaskingAugmentation({self.strategy!r}, batch_share={self.batch_share})"


class AdversarialAugmentation:
    """Replaces the examples of a ``batch_share`` (a probability) of the training batches, chosen with a
    generator seeded with ``seed``, by their adversarial versions against the current model (``attack``, its
    candidate source bound).

    Raises:
        ValueError: if ``batch_share`` lies outside [0, 1]."""

    def __init__(self, attack: FirstOrderAttack, batch_share: float = 0.5, seed: int = 0) -> None:
        self.batch_share = check_batch_share(batch_share, "train.adversarial_augmentation")
        self.attack = attack
        self.generator = torch.Generator().manual_seed(int(seed))

    def __call__(
        self, model: torch.nn.Module, batch: TokenBatch, labels: Tensor
    ) -> tuple[TokenBatch, dict[str, float]]:
        """The batch to train on and what the attack did (empty when the batch is left clean): the shares
        ``adv_accepted`` and ``adv_flipped`` of the batch, ``adv_substituted`` the mean tokens substituted."""
        if torch.rand((), generator=self.generator).item() >= self.batch_share:
            return batch, {}
        adversarial = self.attack.generate(model, batch, labels)
        stats = {
            "adv_accepted": adversarial.accepted.float().mean().item(),
            "adv_flipped": adversarial.flipped.float().mean().item(),
            "adv_substituted": adversarial.n_substituted.float().mean().item(),
        }
        return adversarial.batch, stats

    def __repr__(self) -> str:
        return (
            f"AdversarialAugmentation({self.attack.candidates.describe()}, budget={self.attack.budget}, "
            f"batch_share={self.batch_share})"
        )


def masked_fine_tuning(
    spec: Mapping | None, strategy: MaskingStrategy, tokenizer, seed: int
) -> RandomMaskingAugmentation | None:
    """Masked fine-tuning of ``train.masking_augmentation`` (``spec``, a plain dict; ``None`` when disabled or
    absent) with the bound masking ``strategy``.

    Raises:
        ValueError: a batch share outside [0, 1]."""
    if not spec or not spec.get("enabled", False):
        return None
    return RandomMaskingAugmentation(strategy, tokenizer.all_special_ids, spec["batch_share"], seed=seed)


def check_adversarial_keys(spec: Mapping) -> None:
    """Raises ``ValueError`` naming the keys of ``train.adversarial_augmentation`` outside :data:`ADVERSARIAL_KEYS`."""
    if unknown := sorted(set(spec) - ADVERSARIAL_KEYS):
        raise ValueError(
            f"unknown train.adversarial_augmentation setting(s) {unknown}: known are {sorted(ADVERSARIAL_KEYS)}"
        )


def adversarial_fine_tuning(
    spec: Mapping, source: CandidateSource, tokenizer, model: torch.nn.Module, seed: int
) -> AdversarialAugmentation:
    """Adversarial fine-tuning of ``train.adversarial_augmentation`` (``spec``, a plain dict, enabled) with the
    candidate ``source`` (built, unbound) bound, the classifier architecture ``model`` checked for an
    input-embedding matrix, its batch choice seeded apart from masked fine-tuning's.

    Raises:
        ValueError: an unknown key, a bad batch share or budget, a source without token ids (``mask``), a
            model without an input-embedding matrix, or the source's own error when bound."""
    check_adversarial_keys(spec)
    attack = FirstOrderAttack(source, tokenizer.all_special_ids, None, spec.get("budget", 0.2))
    source.bind(tokenizer)
    if spec.get("word_initial_only", True):
        attack.word_start = word_start_vocabulary(tokenizer)
    input_embedding_matrix(model, "train.adversarial_augmentation")
    stream = int(hashlib.sha256(f"adversarial_augmentation:{seed}".encode()).hexdigest()[:12], 16)
    return AdversarialAugmentation(attack, spec.get("batch_share", 0.5), seed=stream)
