"""Tokenized splits for Lightning: the collator that pads examples into :class:`~itermask.core.tokens.TokenBatch`
and the data module that tokenizes a :class:`~itermask.data.sources.DataSource` once."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import datasets
import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader
from transformers.trainer_pt_utils import LengthGroupedSampler

from itermask.core.tokens import TokenBatch, maskable_positions
from itermask.data.loaders import ResumableDataLoader
from itermask.data.sources import DataSource
from itermask.data.splits import LabelledSplits

log = logging.getLogger(__name__)

__all__ = ["TextClassificationDataModule", "TokenCollator", "segment_ids", "word_ids"]


def segment_ids(encoding, rows: int) -> list[list[int]] | None:
    """Segment of each token of ``encoding`` (a tokenizer's unpadded output for ``rows`` texts or text pairs):
    ``0`` / ``1`` for the first / second text, ``-1`` for special tokens, from the fast tokenizer's
    ``sequence_ids()``; ``None`` for a slow tokenizer (masking within a segment then uses token type ids)."""
    if not getattr(encoding, "is_fast", False):
        return None
    return [[-1 if s is None else int(s) for s in encoding.sequence_ids(i)] for i in range(rows)]


def word_ids(encoding, rows: int) -> list[list[int]] | None:
    """Word of each token of ``encoding`` (as in :func:`segment_ids`), from the fast tokenizer's ``word_ids()``:
    ``0, 1, ...``, a sentence pair's second text numbered after the first's (the tokenizer restarts at 0 for it),
    ``-1`` for special tokens; ``None`` for a slow tokenizer (it has no word ids)."""
    if not getattr(encoding, "is_fast", False):
        return None
    out = []
    for i in range(rows):
        words, segments = encoding.word_ids(i), encoding.sequence_ids(i)
        offset = 1 + max((w for w, s in zip(words, segments) if w is not None and s == 0), default=-1)
        out.append([-1 if w is None else int(w) + (offset if s == 1 else 0) for w, s in zip(words, segments)])
    return out


@dataclass
class TokenCollator:
    """Pads tokenized examples (dynamic padding) into a dict of a :class:`~itermask.core.tokens.TokenBatch`
    (``"tokens"``; ``segment_ids`` and ``word_ids`` features padded with ``-1`` become its ``segment_ids`` and
    ``word_ids``, which the model never sees), ``"labels"`` ``[B]`` and ``"example_ids"`` ``[B]``."""

    tokenizer: Any
    model_input_names: Sequence[str] = field(default=("input_ids", "attention_mask", "token_type_ids"))

    def __call__(self, features: list[dict]) -> dict:
        keys = [k for k in self.model_input_names if k in features[0]]
        padded = self.tokenizer.pad([{k: f[k] for k in keys} for f in features], return_tensors="pt")
        extra = [self._padded(features, name, padded["input_ids"]) for name in ("segment_ids", "word_ids")]
        tokens = TokenBatch(padded["input_ids"], padded["attention_mask"], padded.get("token_type_ids"), *extra)
        return {
            "tokens": tokens,
            "labels": torch.tensor([f["label"] for f in features], dtype=torch.long),
            "example_ids": torch.tensor([f["example_id"] for f in features], dtype=torch.long),
        }

    def _padded(self, features: list[dict], name: str, input_ids: torch.Tensor) -> torch.Tensor | None:
        """The per-token feature ``name`` of every example padded with ``-1`` like ``input_ids``, or ``None``."""
        if name not in features[0]:
            return None
        out = torch.full_like(input_ids, -1)
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        for row, feature in enumerate(features):
            values = torch.as_tensor(feature[name], dtype=torch.long)
            start = out.shape[1] - len(values) if left else 0
            out[row, start : start + len(values)] = values
        return out


class TextClassificationDataModule(pl.LightningDataModule):
    """The tokenized splits of ``source`` (a :class:`DataSource`) and their data loaders.

    Args:
        max_length: truncation length in tokens.
        batch_size, eval_batch_size: training batch size; batch size for validation, test and masking evaluation.
        max_train_examples: train on a seeded random subset of this many examples (``None``: all).
        group_by_length: training batches of examples of similar length (``transformers``'
            ``LengthGroupedSampler``: a seeded permutation cut into mega-batches of up to 50 batches, each sorted
            by length), else uniformly shuffled batches.
        seed: seed of that subset and of shuffling.

    Raises:
        ValueError: for a non-positive ``max_train_examples``."""

    def __init__(
        self,
        source: DataSource,
        tokenizer,
        max_length: int = 128,
        batch_size: int = 16,
        eval_batch_size: int = 64,
        max_train_examples: int | None = None,
        group_by_length: bool = False,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        if max_train_examples is not None and max_train_examples <= 0:
            raise ValueError(f"train.max_train_examples must be positive or null (all), got {max_train_examples}")
        self.source = source
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.max_train_examples = max_train_examples
        self.group_by_length = group_by_length
        self.seed = seed
        self.num_workers = num_workers
        self.data: LabelledSplits | None = None
        self._warned: set[tuple] = set()
        self.tokenized: datasets.DatasetDict | None = None
        self.collator = TokenCollator(tokenizer, tuple(tokenizer.model_input_names))

    @property
    def label_names(self) -> list[str]:
        return self._loaded().label_names

    @property
    def has_text_pairs(self) -> bool:
        """Whether the examples are sentence pairs (a second text column, segment 1)."""
        return any("text_pair" in split.column_names for split in self._loaded().splits.values())

    def setup(self, stage: str | None = None) -> None:
        if self.tokenized is not None:
            return
        self.data = self.source.load()
        splits = dict(self.data.splits)
        if self.max_train_examples is not None and self.max_train_examples < len(splits["train"]):
            splits["train"] = splits["train"].shuffle(seed=self.seed).select(range(self.max_train_examples))
            if len(kept := set(splits["train"]["label"])) < 2:
                raise ValueError(
                    f"train.max_train_examples={self.max_train_examples} keeps examples of {len(kept)} class only "
                    f"(seed {self.seed}), of the training split's {len(self.data.label_names)}: a classifier needs "
                    "at least 2 classes to learn from; raise train.max_train_examples"
                )

        def tokenize(rows):
            encoding = self.tokenizer(rows["text"], rows.get("text_pair"), truncation=True, max_length=self.max_length)
            segments = segment_ids(encoding, len(rows["text"]))
            if segments is not None:
                encoding["segment_ids"] = segments
                encoding["word_ids"] = word_ids(encoding, len(rows["text"]))
            encoding["length"] = [len(ids) for ids in encoding["input_ids"]]
            return encoding

        self.tokenized = datasets.DatasetDict(
            {name: data.map(tokenize, batched=True, desc=f"tokenizing {name}") for name, data in splits.items()}
        )
        self._warn_truncated()

    def _warn_truncated(self) -> None:
        """Warn when examples reach ``max_length`` tokens, so the tokenizer may have cut them: in an evaluated
        split, any; in the training split, 1 % or more (a few long training texts are expected)."""
        assert self.tokenized is not None
        for name, data in self.tokenized.items():
            full = int(np.sum(np.asarray(data["length"]) >= self.max_length)) if len(data) else 0
            if full and (name != "train" or full >= 0.01 * len(data)):
                log.warning(
                    "model.max_length=%d: %d of the %d %s examples reach it and may be cut (the rest of a longer "
                    "text is never seen, masked or explained); raise model.max_length, up to what the model's "
                    "position embeddings allow, to keep them whole",
                    self.max_length,
                    full,
                    len(data),
                    name,
                )

    @property
    def splits(self) -> datasets.DatasetDict:
        """The tokenized splits; ``RuntimeError`` before :meth:`setup`."""
        if self.tokenized is None:
            raise RuntimeError("call setup() first")
        return self.tokenized

    def training_labels(self) -> list[int]:
        """The class ids of the whole training split as loaded (not only the ``max_train_examples`` subset
        fine-tuned on); ``RuntimeError`` before :meth:`setup`."""
        return list(self._loaded().splits["train"]["label"])

    def _loaded(self) -> LabelledSplits:
        """The splits as loaded (before tokenizing); ``RuntimeError`` before :meth:`setup`."""
        self.splits  # noqa: B018  (raises before setup())
        assert self.data is not None  # setup() loads them before tokenizing
        return self.data

    def _loader(self, data, batch_size: int, shuffle: bool = False) -> DataLoader:
        """A loader over ``data``; a shuffling one (training) is a :class:`ResumableDataLoader`, its batches of
        similar lengths with ``group_by_length`` (the sampler draws from the loader's generator, whose state the
        loader records for an exact resume)."""
        generator = torch.Generator().manual_seed(self.seed) if shuffle else None
        sampler = None
        if shuffle and self.group_by_length:
            sampler = LengthGroupedSampler(batch_size, lengths=list(data["length"]), generator=generator)
        return (ResumableDataLoader if shuffle else DataLoader)(
            data,
            batch_size=batch_size,
            shuffle=shuffle and sampler is None,
            sampler=sampler,
            generator=generator,
            collate_fn=self.collator,
            num_workers=self.num_workers,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.splits["train"], self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.eval_loader(self.by_length(self.splits["validation"]))

    def test_dataloader(self) -> DataLoader:
        return self.eval_loader(self.by_length(self.splits["test"]))

    @staticmethod
    def by_length(data: datasets.Dataset) -> datasets.Dataset:
        """Bucket by length: sorted by token count, so each batch pads to a similar length."""
        order = np.argsort(np.asarray(data["length"]), kind="stable")
        return data.select(order)

    def evaluation_subset(
        self, n_examples: int | None, subset_seed: int = 0, split: str = "test", option: str = "evaluation.n_examples"
    ) -> datasets.Dataset:
        """A fixed random subset of ``split``, sorted by length: the same examples for every experiment seed and
        method (it depends only on ``subset_seed`` and the split). ``option`` names the setting that chose
        ``n_examples`` in messages.

        Raises:
            ValueError: for an unknown split or a non-positive size."""
        tokenized = self.splits
        if split not in tokenized:
            raise ValueError(f"unknown split {split!r}; choose from {list(tokenized)}")
        data = tokenized[split]
        if n_examples is not None:
            if n_examples <= 0:
                raise ValueError(f"{option} must be positive or null, got {n_examples}")
            if n_examples < len(data):
                rows = np.random.default_rng(subset_seed).choice(len(data), size=n_examples, replace=False)
                data = data.select(np.sort(rows))
            elif n_examples > len(data) and (warned := (option, n_examples, split)) not in self._warned:
                self._warned.add(warned)  # the resources and the evaluator ask for the same subset: said once
                log.warning(
                    "%s=%d, but split %r has only %d examples: using all %d",
                    option,
                    n_examples,
                    split,
                    len(data),
                    len(data),
                )
        return self.by_length(data)

    def check_maskable(
        self,
        split: str = "test",
        n_examples: int | None = None,
        subset_seed: int = 0,
        segments: int | Sequence[int] | None = None,
    ) -> int:
        """Check, before fine-tuning, that the evaluation subset (:meth:`evaluation_subset` of ``split``,
        ``n_examples``, ``subset_seed``) has examples to mask; return how many have a maskable token.

        A maskable token (:func:`~itermask.core.tokens.maskable_positions`) is a real token, within ``segments``
        (``None``: every segment), that is neither a special token of the tokenizer nor ``[UNK]``. The evaluation
        skips an example without one; when more than half of the subset has none, a warning says so.

        Raises:
            ValueError: if no example of the subset has a maskable token, naming the split, the count and the
                tokens of an example; or for an unknown split or a bad size (:meth:`evaluation_subset`)."""
        data = self.evaluation_subset(n_examples, subset_seed, split)
        counts = self._maskable_counts(data, segments)
        none = [i for i, count in enumerate(counts) if count == 0]
        if none and 2 * len(none) > len(data):
            self._report_unmaskable(data, none, split, segments)
        return len(data) - len(none)

    def _maskable_counts(self, data: datasets.Dataset, segments: int | Sequence[int] | None) -> list[int]:
        """The number of maskable tokens (:meth:`check_maskable`) of each example of ``data`` (a tokenized split
        or subset, in its order)."""
        special = set(self.tokenizer.all_special_ids)
        if self.tokenizer.unk_token_id is not None:
            special.add(int(self.tokenizer.unk_token_id))
        counts = []
        for start in range(0, len(data), self.eval_batch_size):
            rows = data.select(range(start, min(start + self.eval_batch_size, len(data))))
            tokens = self.collator([rows[i] for i in range(len(rows))])["tokens"]
            counts.extend(maskable_positions(tokens, special, segments).sum(dim=1).tolist())
        return counts

    def _report_unmaskable(
        self, data: datasets.Dataset, unmaskable: list[int], split: str, segments: int | Sequence[int] | None
    ) -> None:
        """Report the rows ``unmaskable`` (non-empty) of the evaluation subset ``data`` of ``split``, which have no
        maskable token, showing the text and tokens of the first: a warning, or ``ValueError`` if no example of
        ``data`` has one."""
        first = data[unmaskable[0]]
        shown = self.tokenizer.convert_ids_to_tokens(first["input_ids"])
        within = "" if segments is None else f" within evaluation.segments={list(np.atleast_1d(segments))}"
        example = (
            f"e.g. example_id {first['example_id']}, {first['text'][:80]!r}"
            + (f" / {first['text_pair'][:80]!r}" if first.get("text_pair") is not None else "")
            + f", tokenizes to {shown[:12]}"
        )
        if len(unmaskable) == len(data):
            raise ValueError(
                f"no example of the evaluation subset of split {split!r} has a maskable token{within}: all "
                f"{len(data)} tokenize to special tokens or [UNK] only, which are never masked ({example}). A text "
                "of emoji or symbols the tokenizer does not know becomes [UNK] and carries nothing to explain. "
                "Check the data, the tokenizer (model.pretrained) and evaluation.segments"
            )
        log.warning(
            "%d of %d examples of the evaluation subset of split %r have no maskable token%s (only special tokens "
            "or [UNK]); the evaluation skips them and scores the other %d (%s)",
            len(unmaskable),
            len(data),
            split,
            within,
            len(data) - len(unmaskable),
            example,
        )

    def evaluation_dataloader(
        self, n_examples: int | None, subset_seed: int = 0, split: str = "test", option: str = "evaluation.n_examples"
    ) -> DataLoader:
        """Loader over :meth:`evaluation_subset` with ``eval_batch_size``."""
        return self.eval_loader(self.evaluation_subset(n_examples, subset_seed, split, option))

    def eval_loader(self, data: datasets.Dataset) -> DataLoader:
        """Loader over ``data`` (a tokenized split or a subset of one), in its order, with ``eval_batch_size``."""
        return self._loader(data, self.eval_batch_size)

    def input_digest(self, data: datasets.Dataset) -> str:
        """Hex SHA-256 of what an evaluation reads of ``data`` (a tokenized split or a subset of one): every
        example's model inputs, label and example id, in order (:func:`~itermask.storage.derived.token_digest`).
        Equal digests mean identical examples."""
        from itermask.storage.derived import token_digest

        columns = ("input_ids", "token_type_ids", "segment_ids", "label", "example_id")
        names = [n for n in columns if n in data.column_names]
        return token_digest(data[n] for n in names)
