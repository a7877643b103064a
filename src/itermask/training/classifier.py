"""The Lightning module that fine-tunes a sequence classifier (:class:`SequenceClassifier`), with masked and
adversarial fine-tuning as optional batch augmentations."""

from __future__ import annotations

from collections.abc import Sequence

import pytorch_lightning as pl
import torch
from torch import Tensor
from transformers import get_linear_schedule_with_warmup

from itermask.core.tokens import TokenBatch, class_logits
from itermask.models.loading import load_classifier
from itermask.training.distributed import first_of_each, gather_to_all

__all__ = ["SequenceClassifier", "NO_DECAY"]

#: the parameters (by name ending) AdamW's weight decay is not applied to: biases and LayerNorm weights
NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "layernorm.weight")


class SequenceClassifier(pl.LightningModule):
    """Fine-tunes a Hugging Face sequence classifier with AdamW and linear warm-up/decay on the batches of
    :class:`itermask.data.datamodule.TokenCollator`. Logs ``train_loss``, ``val_acc`` and ``test_acc`` (accuracy,
    a fraction in [0, 1]).

    Args:
        pretrained, num_labels, label_names: the classifier (:func:`load_classifier`), names stored in its config.
        learning_rate, weight_decay: AdamW's peak learning rate and weight decay (none on :data:`NO_DECAY`).
        warmup_ratio: share of the optimisation steps spent warming up linearly from 0.
        masking_augmentation, adversarial_augmentation: masked and adversarial fine-tuning (``None``: off; not
            hyperparameters of the checkpoint); the latter runs first and logs its statistics
            (:class:`~itermask.training.augmentation.AdversarialAugmentation`).
        class_order: a given classifier evaluated without fine-tuning: its classes in the data's order
            (:func:`load_classifier`); ``None`` otherwise."""

    def __init__(
        self,
        pretrained: str,
        num_labels: int,
        label_names: Sequence[str] | None = None,
        learning_rate: float = 5e-5,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.1,
        masking_augmentation=None,
        adversarial_augmentation=None,
        class_order: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        # logger=False: the run config already holds these settings (itermask.tracking.log_config)
        self.save_hyperparameters(ignore=["masking_augmentation", "adversarial_augmentation"], logger=False)
        self.masking_augmentation = masking_augmentation
        self.adversarial_augmentation = adversarial_augmentation
        self.model = load_classifier(pretrained, num_labels, label_names, class_order=class_order)
        self.model.train()  # from_pretrained returns eval mode; Lightning keeps modules as it finds them

    def forward(self, tokens: TokenBatch) -> Tensor:
        """Logits ``[B, C]``."""
        return class_logits(self.model, tokens)

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        tokens, size = batch["tokens"], len(batch["labels"])
        if self.adversarial_augmentation is not None:
            tokens, stats = self.adversarial_augmentation(self.model, tokens, batch["labels"])
            for name, value in stats.items():
                self.log(name, value, batch_size=size)
        if self.masking_augmentation is not None:
            tokens = self.masking_augmentation(tokens)
        loss = torch.nn.functional.cross_entropy(self(tokens), batch["labels"])
        self.log("train_loss", loss, prog_bar=True, batch_size=size)
        return loss

    def _record(self, batch: dict) -> None:
        correct = self(batch["tokens"]).argmax(dim=-1) == batch["labels"]
        self._parts.append((batch["example_ids"].cpu(), correct.cpu()))

    def _log_accuracy(self, name: str, **kwargs) -> None:
        """Log ``name``: the share of correct predictions over the epoch's examples, gathered from every process,
        each example counted once (:func:`~itermask.training.distributed.first_of_each`)."""
        parts = [part for rank in gather_to_all(self.trainer, self._parts) for part in rank]
        self._parts = []
        if not parts:
            return
        ids = torch.cat([ids for ids, _ in parts])
        correct = torch.cat([c for _, c in parts])[first_of_each(ids)]
        self.log(name, correct.float().mean(), rank_zero_only=False, sync_dist=False, **kwargs)

    def on_validation_epoch_start(self) -> None:
        self._parts: list[tuple[Tensor, Tensor]] = []

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._record(batch)

    def on_validation_epoch_end(self) -> None:
        self._log_accuracy("val_acc", prog_bar=True)

    def on_test_epoch_start(self) -> None:
        self._parts = []

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._record(batch)

    def on_test_epoch_end(self) -> None:
        self._log_accuracy("test_acc")

    def configure_optimizers(self):  # pyright: ignore[reportIncompatibleMethodOverride]  (Lightning's dict form)
        named = list(self.model.named_parameters())
        groups = [
            {"params": [p for n, p in named if not n.endswith(NO_DECAY)], "weight_decay": self.hparams["weight_decay"]},
            {"params": [p for n, p in named if n.endswith(NO_DECAY)], "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW(groups, lr=self.hparams["learning_rate"])
        total = int(self.trainer.estimated_stepping_batches)
        scheduler = get_linear_schedule_with_warmup(optimizer, int(self.hparams["warmup_ratio"] * total), total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
