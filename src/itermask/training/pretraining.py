"""Continued masked-language-model (MLM) pretraining of an encoder, optionally on two-sided counterfactually
augmented text: the small-scale counterpart of BERT-CDA (Webster et al. 2020, "Measuring and Reducing Gendered
Correlations in Pre-trained Models", arXiv 2010.06032, section 5: BERT further pretrained with MLM on text in
which every sentence with a gendered word appears both as written and with the gendered words swapped).

A model config with a ``pretrain`` node (``conf/model/minilm_cda.yaml``) runs this stage before fine-tuning, on
the dataset's training text. Its output, an ``AutoModelForMaskedLM`` folder under
``<cache_dir>/pretrain/<key>/model``, is the encoder that fine-tuning starts from and the masked-language model of
``masking=mlm_infill`` and ``attack=mlm``. Its key has its own ``seed``: one pretrained encoder serves every
fine-tuning seed (as the paper's released encoders do).
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor
from transformers import DataCollatorForLanguageModeling, DataCollatorWithPadding
from transformers.trainer_pt_utils import LengthGroupedSampler

from itermask.data.loaders import ResumableDataLoader
from itermask.models.mlm import _pooler_weights, masked_lm_from_encoder, mlm_head
from itermask.storage.cache import CheckpointCache, config_hash
from itermask.storage.keys import Fingerprint, component_settings, file_digest, trainer_settings
from itermask.training.classifier import NO_DECAY
from itermask.training.corpus import augment_corpus, load_word_pairs, shipped_word_pairs
from itermask.training.resume import ExactResume, last_checkpoint_every, resume_checkpoint, step_seed

log = logging.getLogger(__name__)

__all__ = [
    "PRETRAIN_KEYS",
    "masked_lm_from_encoder",
    "MaskedLmPretraining",
    "PretrainSettings",
    "pretrain_settings",
    "get_or_pretrain",
    "schedule_steps",
    "use_pretrained_mlm",
]

#: the options of a ``model.pretrain`` node: the corpus and its masking, then the schedule and the optimiser
PRETRAIN_KEYS = frozenset(
    {"cda", "word_pairs", "seed", "mlm_probability", "max_length", "batch_size", "heldout_examples"}
    | {"head_steps", "joint_steps", "head_learning_rate", "learning_rate", "weight_decay", "warmup_ratio"}
)

#: in the key: bumped whenever the same settings would train other weights, so that an encoder cached by an older
#: itermask is never taken for this one's (2: each step's masks and dropout drawn from (seed, step); 3: batches of
#: texts of similar length, :func:`_corpus_loader`)
PROCEDURE = 3


class MaskedLmPretraining(pl.LightningModule):
    """Continued MLM pretraining with a freeze-then-joint schedule: ``head_steps`` optimizer steps train the
    head alone at ``head_learning_rate`` (the encoder, and so the tied decoder weight, frozen: ``requires_grad``
    off, which AdamW skips), then ``joint_steps`` steps train everything at ``learning_rate``, warmed up linearly
    over ``warmup_ratio`` of the joint steps and decayed linearly to 0. The loss is the cross-entropy of the
    head's logits at the masked positions only (the head runs on those ``[N, H]`` hidden states).

    ``heldout`` (input ids ``[B, L]``, attention mask ``[B, L]``, labels ``[B, L]`` with -100 off the masked
    positions) is scored after the frozen phase and at the end (:meth:`heldout_accuracy`, a fraction in
    [0, 1]), logged as ``mlm_acc_head_only`` and ``mlm_acc_joint``. ``model`` is a ``...ForMaskedLM`` model, its
    decoder tied to the word embeddings.

    ``masker`` (the Hugging Face MLM collator, BERT's 80/10/10 masking) masks each training batch (``input_ids``,
    ``attention_mask``, ``special_tokens_mask``, all ``[B, L]``) in :meth:`training_step`; without it the batches
    come masked, with ``labels``. Every random draw of a step (its masks, its dropout) comes from torch's generators
    seeded with :func:`~itermask.training.resume.step_seed` ``(seed, global_step)`` inside ``fork_rng``: a pure
    function of the seed and the step, not of the generators' history, so a run resumed from any checkpoint draws
    what an uninterrupted run draws (a step skipped for lack of masked tokens leaves ``global_step``, and so the
    seed, to the next batch)."""

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
        masker: DataCollatorForLanguageModeling | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.masker, self.seed = masker, int(seed)
        self.model: Any = model
        self.model.train()
        self.head = mlm_head(model)
        self.head_steps, self.joint_steps = int(head_steps), int(joint_steps)
        self.head_learning_rate, self.learning_rate = float(head_learning_rate), float(learning_rate)
        self.weight_decay, self.warmup_ratio = float(weight_decay), float(warmup_ratio)
        self.heldout = heldout
        self.accuracies: dict[str, float] = {}
        self._set_frozen(self.head_steps > 0)

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
        self.finish_scores()

    def finish_scores(self) -> None:
        """Take the end-of-training held-out scores not taken yet (Lightning skips ``on_train_end`` when a run
        resumes from the checkpoint of its last step)."""
        if self.frozen and "head_only" not in self.accuracies:  # no joint steps
            self._score("head_only")
        if "joint" not in self.accuracies and self.joint_steps > 0:
            self._score("joint")

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
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(step_seed(self.seed, self.global_step))
            if self.masker is not None:  # on the CPU: the collator draws from the CPU generator
                ids, labels = self.masker.torch_mask_tokens(
                    batch["input_ids"].cpu().clone(), special_tokens_mask=batch["special_tokens_mask"].cpu()
                )
                batch = {**batch, "input_ids": ids.to(self.device), "labels": labels.to(self.device)}
            logits, gold = self._masked_logits(batch["input_ids"], batch["attention_mask"], batch["labels"])
        if not len(gold):
            return None  # nothing masked in this batch (tiny batches only): skip the step
        loss = torch.nn.functional.cross_entropy(logits, gold)
        self.log("mlm_loss", loss, prog_bar=True, batch_size=len(batch["input_ids"]))
        self.log("encoder_frozen", float(self.frozen), batch_size=len(batch["input_ids"]))
        return loss

    def configure_optimizers(self):  # pyright: ignore[reportIncompatibleMethodOverride]  (Lightning's dict form)
        head = {id(p) for p in self.head.parameters()} - {id(p) for p in self.model.base_model.parameters()}
        named = list(self.model.named_parameters())  # tied parameters once
        decay = [p for n, p in named if id(p) not in head and not n.endswith(NO_DECAY)]
        no_decay = [p for n, p in named if id(p) not in head and n.endswith(NO_DECAY)]
        groups = [
            {"params": [p for _, p in named if id(p) in head], "weight_decay": 0.0, "lr": self.head_learning_rate},
            {"params": decay, "weight_decay": self.weight_decay, "lr": self.learning_rate},
            {"params": no_decay, "weight_decay": 0.0, "lr": self.learning_rate},
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
        step = int(checkpoint.get("global_step", 0))
        # a checkpoint of step head_steps precedes the frozen phase's score: stay frozen until it is taken
        unscored = 0 < self.head_steps == step and "head_only" not in self.accuracies
        self._set_frozen(step < self.head_steps or unscored)


@dataclass(frozen=True)
class PretrainSettings:
    """The continued-pretraining stage of a model with a ``pretrain`` node.

    Attributes:
        base: ``model.pretrained`` (the encoder pretraining starts from) and ``base_path`` its resolved folder.
        options: the ``pretrain`` node (:data:`PRETRAIN_KEYS`).
        pairs: the CDA swap table (``None`` without CDA).
        key: the cache key; ``payload`` what it hashes (the base model, the files' contents, the settings).
        load_texts: returns the corpus (the dataset's training text) and the held-out validation text."""

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
    steps = [node.get("head_steps", 0), node.get("joint_steps", 0)]  # joint_steps null: the rest of one pass
    if all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps) and sum(steps) == 0:
        problems.append("model.pretrain.head_steps + model.pretrain.joint_steps must be at least 1, got 0 and 0")
    return problems


def pretrain_settings(config: dict, fingerprint: Fingerprint, source, base_path: str) -> PretrainSettings:
    """The stage's settings of a resolved config (a plain dict) whose ``model`` has a ``pretrain`` node: the
    word list read (with CDA), the key computed from the ``fingerprint`` of the local files. Nothing is loaded
    but the word list; ``source``'s training text is the corpus, its validation text held out; ``base_path`` is
    ``model.pretrained`` resolved to a folder or hub id.

    Raises:
        FileNotFoundError: CDA with a word list that does not exist.
        ValueError: a malformed word list (:func:`load_word_pairs`)."""
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
        "procedure": PROCEDURE,
    }
    trainer = trainer_settings(config["trainer"], {}, set_by_stage=(*_TRAINER_OVERRIDES, "max_steps"))
    if trainer:  # trainer options that change the weights (absent while none is set: older keys unchanged)
        payload["trainer"] = trainer
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
    encoding = tokenizer(texts, truncation=True, max_length=max_length, return_special_tokens_mask=True)
    names = [n for n in ("input_ids", "attention_mask", "special_tokens_mask") if n in encoding]
    return [{n: encoding[n][i] for n in names} for i in range(len(texts))]


def _heldout(tokenizer, texts: list[str], max_length: int, probability: float, seed: int):
    """The held-out batch ``(ids, attention, labels)``: ``texts`` padded, a seeded ``probability`` share of their
    non-special tokens set to the mask token (at least one per text), labels -100 elsewhere."""
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
    """The pretrained encoder's folder: the cached one, or pretrained now under the entry's lock (resumed exactly
    if interrupted) with the trainer of ``make_trainer(**overrides)`` and, only then, the tracker run of
    ``make_logger()`` (or ``None``).

    Raises:
        ValueError: CDA on a corpus without a gendered word, before any model is loaded."""
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
        from itermask.tracking import finish, log_config, log_summary

        try:
            log_config(logger, {"model": settings.model_name, **settings.payload, "key": settings.key})
            meta = _pretrain(settings, cache, tokenizer, texts, heldout, make_trainer, logger)
            log_summary(logger, {k: v for k, v in meta.items() if isinstance(v, float)})
        except BaseException as error:
            finish(logger, failed=True, error=f"{type(error).__name__}: {error}")
            raise
        finish(logger)
    return settings.output


def _pretrain(settings, cache, tokenizer, texts, heldout_texts, make_trainer, logger) -> dict:
    """Pretrain the encoder of ``settings`` now, under the entry's lock: seeded MLM training on ``texts``, scored
    on ``heldout_texts``; write the entry's ``model`` folder (the decoder re-tied, the base model's pooler weights
    added), delete its checkpoints and finish the entry. Returns its ``meta.json`` content (accuracies as
    fractions, time in seconds)."""
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
    batch_size = int(o.get("batch_size", 32))
    head_steps, joint_steps = schedule_steps(o, len(texts))
    module = MaskedLmPretraining(
        model,
        head_steps=head_steps,
        joint_steps=joint_steps,
        head_learning_rate=float(o.get("head_learning_rate", 1e-3)),
        learning_rate=float(o.get("learning_rate", 5e-5)),
        weight_decay=float(o.get("weight_decay", 0.01)),
        warmup_ratio=float(o.get("warmup_ratio", 0.1)),
        heldout=heldout,
        masker=DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability, return_tensors="pt"),
        seed=seed,
    )
    loader = _corpus_loader(tokenizer, texts, max_length, seed, batch_size)
    resumed = _fit(module, loader, settings, cache, make_trainer, logger)
    model.tie_weights()
    state = {**model.state_dict(), **_pooler_weights(settings.base_path, model)}
    cache.write_model(settings.key, model, tokenizer, state_dict=state)
    shutil.rmtree(cache.entry(settings.key) / "checkpoints", ignore_errors=True)
    meta = {
        "key": settings.key,
        "config": settings.payload,
        "corpus_texts": len(texts),
        "head_steps": head_steps,
        "joint_steps": joint_steps,
        # texts seen, as passes over the corpus (1.0: every text once)
        "corpus_passes": (head_steps + joint_steps) * batch_size / max(1, len(texts)),
        "heldout_texts": len(heldout[0]),
        "heldout_masked_tokens": int((heldout[2] != -100).sum()),
        "mlm_acc_head_only": module.accuracies.get("head_only", math.nan),
        "mlm_acc_joint": module.accuracies.get("joint", math.nan),
        "pretrain_seconds": time.time() - start,
        "resumed": resumed,
    }
    cache.finish(settings.key, meta)
    return meta


def schedule_steps(options: dict, n_texts: int) -> tuple[int, int]:
    """``(head_steps, joint_steps)`` of a ``model.pretrain`` node over a corpus of ``n_texts`` texts: as given, or
    with ``joint_steps`` null the rest of one pass, ``ceil(n_texts / batch_size) - head_steps`` (at least 0), so
    that the two phases together see every text once.

    Raises:
        ValueError: no step at all (``head_steps`` 0 and a pass of 0 batches)."""
    head = int(options.get("head_steps", 0))
    joint = options.get("joint_steps", 0)
    if joint is None:
        joint = max(0, math.ceil(n_texts / int(options.get("batch_size", 32))) - head)
    if head + int(joint) < 1:
        raise ValueError(f"continued pretraining has no step: head_steps {head}, a corpus of {n_texts} texts")
    return head, int(joint)


def _corpus_loader(tokenizer, texts: list[str], max_length: int, seed: int, batch_size: int):
    """The resumable, seeded loader of the corpus ``texts`` (truncated to ``max_length`` tokens), padded and
    unmasked: :class:`MaskedLmPretraining` masks each batch, seeded by its step (a collator drawing from the global
    generator would tie the masks to the generator's history, which a resume does not repeat).

    Each pass draws a seeded permutation and batches texts of similar length (``transformers``'
    ``LengthGroupedSampler``: mega-batches of up to 50 batches, each sorted by length), so little of a batch is
    padding: a pass over the shipped training text takes about two thirds of the time of uniformly shuffled
    batches at batch size 16, and less than half at 32 (docs/pretraining.md). The sampler draws from the loader's
    generator, whose state :class:`ResumableDataLoader` records, so a resume repeats the pass's order."""
    data = _tokenized(tokenizer, texts, max_length)
    generator = torch.Generator().manual_seed(seed)
    lengths = [len(row["input_ids"]) for row in data]
    return ResumableDataLoader(
        data,
        batch_size=batch_size,
        sampler=LengthGroupedSampler(batch_size, lengths=lengths, generator=generator),
        generator=generator,
        collate_fn=DataCollatorWithPadding(tokenizer, return_tensors="pt"),
    )


#: The trainer options this stage sets over the config's (with ``max_steps``), so not in its key. Accumulation is
#: fine-tuning's setting; this stage's batch is ``model.pretrain.batch_size``.
_TRAINER_OVERRIDES = {"max_epochs": -1, "limit_val_batches": 0, "num_sanity_val_steps": 0, "accumulate_grad_batches": 1}


def _fit(module: MaskedLmPretraining, loader, settings, cache, make_trainer, logger) -> dict | None:
    """Train ``module`` on ``loader`` for ``head_steps + joint_steps`` optimizer steps, writing ``last.ckpt``
    about four times a run (at least 10 steps apart) and resuming exactly from the one an interrupted run left.
    Returns ``None``, or after a resume ``{"checkpoint", "epoch", "global_step", "batches_into_epoch"}``."""
    every = max(10, (module.head_steps + module.joint_steps) // 4)  # a checkpoint with AdamW state: ~270 MB for MiniLM
    resume = ExactResume()  # the loader's position (the masks and dropout are seeded per step)
    trainer = make_trainer(
        callbacks=[last_checkpoint_every(cache.entry(settings.key), every), resume],
        logger=logger if logger is not None else False,
        max_steps=module.head_steps + module.joint_steps,
        **_TRAINER_OVERRIDES,
    )
    last = resume_checkpoint(cache, settings.key, what="continued pretraining")
    ckpt = str(last) if last is not None else None
    trainer.fit(module, train_dataloaders=loader, ckpt_path=ckpt, weights_only=True)
    module.finish_scores()
    return None if last is None else {"checkpoint": str(last), **(resume.resumed or {})}


def use_pretrained_mlm(component: Any, base: str, folder: str) -> None:
    """Point a masked-language-model component (or an object holding one as ``source``) whose ``mlm_pretrained``
    is the base ``model.pretrained`` (the configs' default) at the pretrained encoder ``folder``, before it is
    bound."""
    for target in (component, getattr(component, "source", None)):
        if target is not None and getattr(target, "mlm_pretrained", None) == base and getattr(target, "mlm", 1) is None:
            target.mlm_pretrained = folder
