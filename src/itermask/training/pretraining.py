"""Continued masked-language-model (MLM) pretraining of an encoder, optionally on two-sided counterfactually
augmented text: the small-scale counterpart of BERT-CDA (Webster et al. 2020, "Measuring and Reducing Gendered
Correlations in Pre-trained Models", arXiv 2010.06032, section 5: BERT further pretrained with MLM on text in
which every sentence with a gendered word appears both as written and with the gendered words swapped).

A model config with a ``pretrain`` node (``conf/model/minilm_mlm.yaml``, ``conf/model/minilm_cda.yaml``) runs
this stage before fine-tuning. Its output, an ``AutoModelForMaskedLM`` folder (encoder, MLM head whose decoder
is tied to the word embeddings, the base model's pooler, tokenizer) in the checkpoint cache under
``<cache_dir>/pretrain/<key>/model``, is the encoder that fine-tuning starts from and the masked-language model
of ``masking=mlm_infill`` and ``attack=mlm``.

* corpus: the dataset's training text (``cda: true``: two-sided CDA with a gendered word-pair list,
  :func:`augment_corpus`);
* head: the base encoder (all-MiniLM-L6-v2 ships none) gets a fresh MLM head, tied to the word embeddings,
  trained ``head_steps`` steps with the encoder frozen, then ``joint_steps`` steps jointly with the encoder
  (:class:`MaskedLmPretraining`);
* key: a hash of the base model, the corpus files' contents, the word list's contents (with CDA), every
  ``pretrain`` setting and its own ``seed``, fixed apart from the experiment ``seed``: one pretrained encoder
  serves every fine-tuning seed (as the paper's released encoders do);
* cache: the same :class:`~itermask.storage.cache.CheckpointCache` as fine-tuning (lock, checksummed
  ``meta.json``, a damaged entry moved aside and recomputed, exact resumption from ``last.ckpt``).
"""

from __future__ import annotations

import logging
import math
import re
import shutil
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from torch import Tensor
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, DataCollatorForLanguageModeling

from itermask.storage.cache import CheckpointCache, config_hash
from itermask.storage.keys import Fingerprint, component_settings, file_digest

log = logging.getLogger(__name__)

__all__ = [
    "SHIPPED_WORD_PAIRS",
    "shipped_word_pairs",
    "PRETRAIN_KEYS",
    "load_word_pairs",
    "swap_gendered",
    "has_gendered",
    "augment_corpus",
    "check_word_embeddings",
    "mlm_head",
    "masked_lm_from_encoder",
    "MaskedLmPretraining",
    "PretrainSettings",
    "pretrain_settings",
    "get_or_pretrain",
    "use_pretrained_mlm",
]

#: the shipped gendered word-pair list (``model.pretrain.word_pairs: null``); its header documents its sources
SHIPPED_WORD_PAIRS = "cda/gendered_pairs.txt"

#: the options of a ``model.pretrain`` node
PRETRAIN_KEYS = frozenset(
    {
        "cda",
        "word_pairs",
        "seed",
        "mlm_probability",
        "max_length",
        "batch_size",
        "head_steps",
        "joint_steps",
        "head_learning_rate",
        "learning_rate",
        "weight_decay",
        "warmup_ratio",
        "heldout_examples",
    }
)

_WORD = re.compile(r"[A-Za-z]+")


# -- counterfactual data augmentation ---------------------------------------------------------------------


def shipped_word_pairs() -> Path:
    """The path of the shipped list (:data:`SHIPPED_WORD_PAIRS`)."""
    return Path(str(resources.files("itermask") / "resources" / SHIPPED_WORD_PAIRS))


def load_word_pairs(path: str | Path, setting: str = "model.pretrain.word_pairs") -> dict[str, str]:
    """The swap table of a word-pair file: ``word -> partner`` (lower case) in both directions.

    The file holds one pair per line, two words separated by whitespace; ``#`` starts a comment. A word in
    several pairs swaps to its partner in the first pair that names it (so ``his her`` then ``hers his`` gives
    ``her -> his``, ``his -> her``, ``hers -> his``).

    Raises:
        FileNotFoundError: if there is no file at ``path`` (naming ``setting``).
        ValueError: a line that is not two words of letters, or a file without any pair.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(
            f"{setting}={path}: no word-pair file there; give a file of gendered word pairs (one pair per line, "
            f"e.g. 'he she'), or null for the shipped list itermask/resources/{SHIPPED_WORD_PAIRS}"
        )
    table: dict[str, str] = {}
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2 or not all(_WORD.fullmatch(w) for w in words) or words[0].lower() == words[1].lower():
            raise ValueError(
                f"{setting}={path}, line {number}: {line.strip()!r} is not a pair of two different words of letters"
            )
        first, second = (w.lower() for w in words)
        table.setdefault(first, second)
        table.setdefault(second, first)
    if not table:
        raise ValueError(f"{setting}={path} holds no word pair (one pair per line, e.g. 'he she')")
    return table


def _cased(word: str, like: str) -> str:
    """``word`` in the case of ``like``: upper (``HE`` -> ``SHE``; a single capital counts as capitalised),
    capitalised (``He`` -> ``She``) or as it is."""
    if len(like) > 1 and like.isupper():
        return word.upper()
    if like[0].isupper():
        return word[0].upper() + word[1:]
    return word


def swap_gendered(text: str, pairs: dict[str, str]) -> str:
    """``text`` with every word (a maximal run of ASCII letters) in ``pairs`` replaced by its partner, in the
    word's case (:func:`_cased`); everything else, punctuation and spacing included, unchanged.

    >>> swap_gendered("He thanked his Mother's actor.", {"he": "she", "she": "he", "his": "her",
    ...     "her": "his", "mother": "father", "father": "mother", "actor": "actress", "actress": "actor"})
    "She thanked her Father's actress."
    """
    return _WORD.sub(lambda m: _cased(pairs[w], m.group()) if (w := m.group().lower()) in pairs else m.group(), text)


def has_gendered(text: str, pairs: dict[str, str]) -> bool:
    """Whether ``text`` holds a word of ``pairs``."""
    return any(m.group().lower() in pairs for m in _WORD.finditer(text))


def augment_corpus(texts: list[str], pairs: dict[str, str], where: str = "the corpus") -> list[str]:
    """Two-sided counterfactual augmentation (Webster et al. 2020, section 5): every text as written, then
    the swapped version (:func:`swap_gendered`) of every text with a gendered word, in corpus order. The
    result has ``len(texts) + (number of texts with a gendered word)`` texts.

    Raises:
        ValueError: if no text holds a word of ``pairs`` (the augmentation would change nothing).
    """
    swapped = [swap_gendered(t, pairs) for t in texts if has_gendered(t, pairs)]
    if not swapped:
        raise ValueError(
            f"{where}: none of its {len(texts)} texts holds a word of the gendered word list, so counterfactual "
            "augmentation would change nothing; use a corpus with gendered words, a word list that matches it "
            "(model.pretrain.word_pairs), or model.pretrain.cda=false"
        )
    return list(texts) + swapped


# -- the model -------------------------------------------------------------------------------------------


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
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the fresh head's "newly initialized" report is expected
    try:
        model = AutoModelForMaskedLM.from_pretrained(path, tie_word_embeddings=True)
    finally:
        hf_logging.set_verbosity(verbosity)
    model.tie_weights()
    return model


def _pooler_weights(path: str, model: Any) -> dict[str, Tensor]:
    """The base encoder's weights that the masked-language model lacks (BERT's pooler), under the masked-language
    model's names, so that a classifier fine-tuned from the output starts from the same pooler as one
    fine-tuned from the base encoder."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        encoder = AutoModel.from_pretrained(path)
    finally:
        hf_logging.set_verbosity(verbosity)
    prefix = model.base_model_prefix
    have = set(model.base_model.state_dict())
    return {f"{prefix}.{k}": v.detach().clone() for k, v in encoder.state_dict().items() if k not in have}


class MaskedLmPretraining(pl.LightningModule):
    """Continued MLM pretraining with a freeze-then-joint schedule: ``head_steps`` optimizer steps train the
    head alone (the encoder, and so the tied decoder weight, frozen: ``requires_grad`` off, which AdamW skips),
    then ``joint_steps`` steps train everything.

    Learning rates: the head's is ``head_learning_rate`` while the encoder is frozen; in the joint phase every
    parameter follows ``learning_rate`` with linear warm-up over ``warmup_ratio`` of the joint steps and linear
    decay to 0. The loss is the cross-entropy of the head's logits at the masked positions only (the head runs
    on those ``[N, H]`` hidden states, not on all ``[B, L, H]``).

    ``heldout`` (input ids ``[B, L]``, attention mask ``[B, L]``, labels ``[B, L]`` with -100 off the masked
    positions) is scored after the frozen phase and at the end (:meth:`heldout_accuracy`): the share of masked
    positions whose top prediction is the original token (a fraction in [0, 1]); logged as ``mlm_acc_head_only``
    and ``mlm_acc_joint``.

    Args:
        model: a ``...ForMaskedLM`` model, its decoder tied to the word embeddings.
    """

    def __init__(
        self,
        model: Any,
        head_steps: int,
        joint_steps: int,
        head_learning_rate: float = 1e-3,
        learning_rate: float = 5e-5,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.1,
        heldout: tuple[Tensor, Tensor, Tensor] | None = None,
    ) -> None:
        super().__init__()
        self.model: Any = model
        self.model.train()
        self.head = mlm_head(model)
        self.head_steps, self.joint_steps = int(head_steps), int(joint_steps)
        self.head_learning_rate, self.learning_rate = float(head_learning_rate), float(learning_rate)
        self.weight_decay, self.warmup_ratio = float(weight_decay), float(warmup_ratio)
        self.heldout = heldout
        self.accuracies: dict[str, float] = {}
        self._set_frozen(self.head_steps > 0)

    # -- schedule

    def _set_frozen(self, frozen: bool) -> None:
        for parameter in self.model.base_model.parameters():
            parameter.requires_grad_(not frozen)

    @property
    def frozen(self) -> bool:
        return not next(self.model.base_model.parameters()).requires_grad

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self.frozen and self.global_step >= self.head_steps:
            if "head_only" not in self.accuracies and self.head_steps > 0:
                self._score("head_only")
            self._set_frozen(False)

    def on_train_end(self) -> None:
        if self.frozen and "head_only" not in self.accuracies:  # no joint steps
            self._score("head_only")
        self._score("joint" if self.joint_steps > 0 else "head_only")

    def _score(self, name: str) -> None:
        if self.heldout is None:
            return
        self.accuracies[name] = self.heldout_accuracy()
        log.info("held-out masked-token accuracy %s: %.4f", name, self.accuracies[name])
        if self.logger is not None:
            self.logger.log_metrics({f"mlm_acc_{name}": self.accuracies[name]}, step=self.global_step)

    def heldout_accuracy(self, batch_size: int = 64) -> float:
        """The share of the held-out masked positions whose top prediction is the original token."""
        assert self.heldout is not None
        ids, attention, labels = self.heldout
        training = self.model.training
        self.model.eval()
        right = total = 0
        with torch.inference_mode():
            for start in range(0, len(ids), batch_size):
                part = slice(start, start + batch_size)
                logits, gold = self._masked_logits(ids[part], attention[part], labels[part])
                right += int((logits.argmax(-1) == gold).sum())
                total += len(gold)
        self.model.train(training)
        return right / total if total else float("nan")

    def _masked_logits(self, ids: Tensor, attention: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
        """Logits ``[N, V]`` at the ``N`` masked positions (labels != -100) and their labels ``[N]``."""
        device = self.device
        hidden = self.model.base_model(input_ids=ids.to(device), attention_mask=attention.to(device)).last_hidden_state
        where = labels.to(device) != -100
        return self.head(hidden[where]), labels.to(device)[where]

    def training_step(self, batch: dict, batch_idx: int) -> Tensor | None:
        logits, gold = self._masked_logits(batch["input_ids"], batch["attention_mask"], batch["labels"])
        if not len(gold):
            return None  # nothing masked in this batch (tiny batches only): skip the step
        loss = torch.nn.functional.cross_entropy(logits, gold)
        self.log("mlm_loss", loss, prog_bar=True, batch_size=len(batch["input_ids"]))
        self.log("encoder_frozen", float(self.frozen), batch_size=len(batch["input_ids"]))
        return loss

    def configure_optimizers(self):
        no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "layernorm.weight")
        head = {id(p) for p in self.head.parameters()} - {id(p) for p in self.model.base_model.parameters()}
        named = list(self.model.named_parameters())  # tied parameters once
        groups = [
            {"params": [p for _, p in named if id(p) in head], "weight_decay": 0.0, "lr": self.head_learning_rate},
            {
                "params": [p for n, p in named if id(p) not in head and not n.endswith(no_decay)],
                "weight_decay": self.weight_decay,
                "lr": self.learning_rate,
            },
            {
                "params": [p for n, p in named if id(p) not in head and n.endswith(no_decay)],
                "weight_decay": 0.0,
                "lr": self.learning_rate,
            },
        ]
        optimizer = torch.optim.AdamW(groups)
        frozen, joint = self.head_steps, self.joint_steps
        warmup = int(self.warmup_ratio * joint)

        def joint_factor(step: int) -> float:
            into = step - frozen
            if into < warmup:
                return (into + 1) / (warmup + 1)
            return max(0.0, (joint - into) / max(1, joint - warmup))

        ratio = self.learning_rate / self.head_learning_rate
        schedules = [
            lambda step: 1.0 if step < frozen else joint_factor(step) * ratio,
            lambda step: 0.0 if step < frozen else joint_factor(step),
            lambda step: 0.0 if step < frozen else joint_factor(step),
        ]
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedules)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["mlm_accuracies"] = dict(self.accuracies)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.accuracies = dict(checkpoint.get("mlm_accuracies") or {})
        self._set_frozen(int(checkpoint.get("global_step", 0)) < self.head_steps)


# -- settings, key and the cached stage ----------------------------------------------------------------------


@dataclass(frozen=True)
class PretrainSettings:
    """The continued-pretraining stage of a model with a ``pretrain`` node (see the module docstring).

    Attributes:
        base: ``model.pretrained`` (the encoder pretraining starts from) and ``base_path`` its resolved folder.
        texts: the corpus (the dataset's training text) and ``heldout_texts`` the validation text, loaded.
        pairs: the CDA swap table (``None`` without CDA).
        options: the ``pretrain`` node (:data:`PRETRAIN_KEYS`).
        key: the cache key; ``payload`` what it hashes.
    """

    model_name: str
    base: str
    base_path: str
    cache_dir: Path
    options: dict
    pairs: dict[str, str] | None
    key: str
    payload: dict
    dataset: str = ""
    load_texts: Any = field(default=None, repr=False)

    @property
    def entry(self) -> Path:
        return self.cache_dir / "pretrain" / self.key

    @property
    def output(self) -> Path:
        """The pretrained encoder's folder (exists once the stage has run)."""
        return self.entry / "model"


def check_pretrain_node(node: Any) -> list[str]:
    """The problems of a ``model.pretrain`` node (unknown keys, ranges), one message each."""
    if not isinstance(node, dict):
        return [f"model.pretrain must be a mapping of {sorted(PRETRAIN_KEYS)}, got {node!r}"]
    problems = [
        f"model.pretrain.{key} is not an option of continued pretraining (options: {sorted(PRETRAIN_KEYS)})"
        for key in node
        if key not in PRETRAIN_KEYS
    ]
    if not isinstance(node.get("cda", False), bool):
        problems.append(f"model.pretrain.cda must be true or false, got {node.get('cda')!r}")
    mlm = node.get("mlm_probability", 0.15)
    if isinstance(mlm, bool) or not isinstance(mlm, (int, float)) or not 0 < mlm < 1:
        problems.append(f"model.pretrain.mlm_probability must be a number in (0, 1), got {mlm!r}")
    steps = [node.get("head_steps", 0), node.get("joint_steps", 0)]
    if all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps) and sum(steps) == 0:
        problems.append("model.pretrain.head_steps + model.pretrain.joint_steps must be at least 1, got 0 and 0")
    return problems


def pretrain_settings(config: dict, fingerprint: Fingerprint, source, base_path: str) -> PretrainSettings:
    """The stage's settings of a resolved config whose ``model`` has a ``pretrain`` node: the word list read
    (with CDA), the key computed. Nothing is loaded but the word list.

    Args:
        config: the resolved config (a plain dict).
        fingerprint: the contents of the data source's local files (the corpus is its training split) and of
            a local ``model.pretrained`` folder (:class:`~itermask.storage.keys.Fingerprint`).
        source: the built data source (its training text is the corpus, its validation text held out).
        base_path: ``model.pretrained`` resolved to a folder or hub id.

    Raises:
        FileNotFoundError: CDA with a word list that does not exist.
        ValueError: a malformed word list (:func:`load_word_pairs`).
    """
    model = config["model"]
    options = dict(model["pretrain"])
    pairs, digest = None, None
    if options.get("cda", False):
        given = options.get("word_pairs")
        path = shipped_word_pairs() if given is None else Path(str(given)).expanduser()
        pairs = load_word_pairs(path)
        digest = file_digest(path)
    settings = {k: v for k, v in options.items() if k != "word_pairs"}
    source_node = component_settings(config["dataset"]["source"])
    payload = {
        "base": str(model["pretrained"]),
        "max_length": int(options.get("max_length", model["max_length"])),
        "dataset": {"name": config["dataset"]["name"], "source": source_node},
        "data_files": dict(fingerprint.data_files),
        "word_pairs": digest,
        "pretrain": settings,
        "precision": str(config["trainer"].get("precision", "32-true")),
    }
    if fingerprint.model_files:  # a local base folder: its files' contents (none for a hub id or package)
        payload["base_files"] = dict(fingerprint.model_files)

    def load_texts() -> tuple[list[str], list[str]]:
        splits = source.load().splits
        return list(splits["train"]["text"]), list(splits["validation"]["text"])

    return PretrainSettings(
        model_name=str(model["name"]),
        base=str(model["pretrained"]),
        base_path=base_path,
        cache_dir=Path(str(config["cache_dir"])).expanduser(),
        options=options,
        pairs=pairs,
        key=config_hash(payload),
        payload=payload,
        dataset=str(config["dataset"]["name"]),
        load_texts=load_texts,
    )


def _tokenized(tokenizer, texts: list[str], max_length: int) -> list[dict]:
    encoding = tokenizer(texts, truncation=True, max_length=max_length)
    names = [n for n in ("input_ids", "attention_mask") if n in encoding]
    return [{n: encoding[n][i] for n in names} for i in range(len(texts))]


def _heldout(tokenizer, texts: list[str], max_length: int, probability: float, seed: int):
    """The held-out batch: ``texts`` padded, a seeded ``probability`` share of their non-special tokens set
    to the mask token (at least one per text), labels -100 elsewhere. Returns ``(ids, attention, labels)``."""
    padded = tokenizer(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    ids, attention = padded["input_ids"], padded["attention_mask"]
    special = torch.tensor(
        [tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True) for row in ids.tolist()]
    ).bool()
    candidates = attention.bool() & ~special
    generator = torch.Generator().manual_seed(seed)
    masked = (torch.rand(ids.shape, generator=generator) < probability) & candidates
    scores = torch.rand(ids.shape, generator=generator).masked_fill(~candidates, -1.0)
    first = scores.argmax(dim=1)
    has_candidate = candidates.any(dim=1)
    masked[torch.arange(len(ids))[has_candidate], first[has_candidate]] = True
    labels = torch.where(masked, ids, torch.full_like(ids, -100))
    return torch.where(masked, tokenizer.mask_token_id, ids), attention, labels


def corpus_of(settings: PretrainSettings) -> tuple[list[str], list[str]]:
    """The training corpus (augmented with CDA) and the held-out validation text.

    Raises:
        ValueError: CDA on a corpus with no gendered word (:func:`augment_corpus`)."""
    texts, heldout = settings.load_texts()
    if settings.pairs is not None:
        texts = augment_corpus(texts, settings.pairs, f"the training text of dataset {settings.dataset}")
    return texts, heldout


def get_or_pretrain(settings: PretrainSettings, tokenizer, make_trainer, make_logger=None) -> Path:
    """The pretrained encoder's folder: the cached one, or pretrained now under the entry's lock (a damaged entry
    moved aside with a warning and recomputed; an interrupted run resumed exactly from its ``last.ckpt``).

    Args:
        tokenizer: the base model's tokenizer (saved with the output).
        make_trainer: builds the Lightning trainer (``cfg.trainer``) from keyword overrides.
        make_logger: starts the stage's tracker run (or returns ``None``); called only when pretraining runs.

    Raises:
        ValueError: CDA on a corpus without a gendered word, before any model is loaded.
    """
    cache = CheckpointCache(settings.cache_dir / "pretrain")
    with cache.lock(settings.key):
        if cache.reusable(settings.key) is not None:
            log.info("reusing pretrained encoder %s", settings.output)
            return settings.output
        texts, heldout = corpus_of(settings)  # the bad-corpus error, before any model
        log.info(
            "continued MLM pretraining of %s (%s, %d texts) -> %s",
            settings.base,
            "two-sided CDA" if settings.pairs is not None else "no augmentation",
            len(texts),
            settings.entry,
        )
        logger = make_logger() if make_logger is not None else None
        from itermask import tracking

        try:
            tracking.log_config(logger, {"model": settings.model_name, **settings.payload, "key": settings.key})
            meta = _pretrain(settings, cache, tokenizer, texts, heldout, make_trainer, logger)
            tracking.log_summary(logger, {k: v for k, v in meta.items() if isinstance(v, float)})
        except BaseException as error:
            tracking.finish(logger, failed=True, error=f"{type(error).__name__}: {error}")
            raise
        tracking.finish(logger)
    return settings.output


def _pretrain(settings, cache, tokenizer, texts, heldout_texts, make_trainer, logger) -> dict:
    from itermask.training.resume import ExactResume, ResumableDataLoader, resume_checkpoint

    start = time.time()
    o = settings.options
    seed = int(o.get("seed", 0))
    max_length = int(settings.payload["max_length"])
    probability = float(o.get("mlm_probability", 0.15))
    pl.seed_everything(seed, workers=True)
    model = masked_lm_from_encoder(settings.base_path)
    n_heldout = o.get("heldout_examples")
    heldout = _heldout(
        tokenizer, heldout_texts[:n_heldout] if n_heldout else heldout_texts, max_length, probability, seed
    )
    module = MaskedLmPretraining(
        model,
        head_steps=int(o.get("head_steps", 0)),
        joint_steps=int(o.get("joint_steps", 0)),
        head_learning_rate=float(o.get("head_learning_rate", 1e-3)),
        learning_rate=float(o.get("learning_rate", 5e-5)),
        weight_decay=float(o.get("weight_decay", 0.01)),
        warmup_ratio=float(o.get("warmup_ratio", 0.1)),
        heldout=heldout,
    )
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability, return_tensors="pt")
    loader = ResumableDataLoader(
        _tokenized(tokenizer, texts, max_length),
        batch_size=int(o.get("batch_size", 32)),
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
        collate_fn=collator,
    )
    entry = cache.entry(settings.key)
    every = max(10, (module.head_steps + module.joint_steps) // 4)  # a checkpoint with AdamW state: ~270 MB for MiniLM
    checkpoint = ModelCheckpoint(
        dirpath=entry / "checkpoints",
        every_n_train_steps=every,
        save_top_k=0,
        save_last=True,
        enable_version_counter=False,
    )
    resume = ExactResume()
    trainer = make_trainer(
        callbacks=[checkpoint, resume],
        logger=logger if logger is not None else False,
        max_steps=module.head_steps + module.joint_steps,
        max_epochs=-1,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    last = resume_checkpoint(cache, settings.key, what="continued pretraining")
    trainer.fit(module, train_dataloaders=loader, ckpt_path=str(last) if last is not None else None)
    model.tie_weights()
    tmp = entry / "model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    state = {**model.state_dict(), **_pooler_weights(settings.base_path, model)}
    model.save_pretrained(tmp, state_dict=state)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(entry / "model", ignore_errors=True)
    tmp.rename(entry / "model")
    shutil.rmtree(entry / "checkpoints", ignore_errors=True)
    meta = {
        "key": settings.key,
        "config": settings.payload,
        "corpus_texts": len(texts),
        "heldout_texts": len(heldout[0]),
        "heldout_masked_tokens": int((heldout[2] != -100).sum()),
        "mlm_acc_head_only": module.accuracies.get("head_only", math.nan),
        "mlm_acc_joint": module.accuracies.get("joint", math.nan),
        "pretrain_seconds": time.time() - start,
        "resumed": None if last is None else str(last),
    }
    cache.finish(settings.key, meta)
    return meta


def use_pretrained_mlm(component: Any, base: str, folder: str) -> None:
    """Point a masked-language-model component (``masking=mlm_infill``, attack or adversarial candidates
    ``mlm``; or an object holding one as ``source``) whose ``mlm_pretrained`` is the base ``model.pretrained``
    (the configs' default ``${model.pretrained}``: the classifier's own encoder) at the pretrained encoder
    ``folder``, before it is bound. Anything else is left as it is."""
    for target in (component, getattr(component, "source", None)):
        if target is not None and getattr(target, "mlm_pretrained", None) == base and getattr(target, "mlm", 1) is None:
            target.mlm_pretrained = folder
