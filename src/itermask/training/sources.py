"""Data sources of labelled text: shipped, Hugging Face hub, local files.

Every source yields a :class:`datasets.DatasetDict` with the splits ``train``, ``validation`` and ``test``
and the columns ``text`` (str), optionally ``text_pair`` (str), ``label`` (int in ``[0, C)``) and
``example_id`` (the row's index in its split, stable across runs), plus the label names. A new source is
one :class:`DataSource` subclass (implementing ``_raw``, and :meth:`DataSource.local_files` when it reads
local files, so that editing them changes the cache keys) plus one ``conf/dataset/<name>.yaml``.
"""

from __future__ import annotations

import codecs
import csv
import json
import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import datasets
import numpy as np

log = logging.getLogger(__name__)

__all__ = [
    "REPAIR_SWITCHES",
    "NOT_IN_KEY_AT_DEFAULT",
    "LabelledSplits",
    "DataSource",
    "HubSource",
    "FileSource",
    "shipped_source",
    "validate_splits",
    "SPLITS",
]

SPLITS = ("train", "validation", "test")
#: the file types a :class:`FileSource` reads
DATA_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json")
#: Source settings that turn bad rows into a logged repair instead of an error. They are left out of the
#: checkpoint and result keys: off, the job fails on the rows they would repair, so a finished job's data
#: are the same either way.
REPAIR_SWITCHES = ("drop_missing_labels", "convert_texts", "merge_label_variants")
#: Source settings added after keys were stored, left out of the checkpoint and result keys while they hold
#: this default (so the jobs that keep it keep their keys): ``{setting: default}``.
NOT_IN_KEY_AT_DEFAULT = {"encoding": "utf-8"}
#: Label values read as missing (pandas' default NA strings, which ``keep_default_na=False`` keeps as text),
#: unless ``label_names`` names them.
MISSING_LABELS = frozenset(
    {
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    }
)


@dataclass
class LabelledSplits:
    """Loaded data: the three splits and the names of the classes (``label_names[i]`` is class ``i``).

    ``label_mapping`` records how string labels of a file were mapped to ids (``None`` if they were ids).
    """

    splits: datasets.DatasetDict
    label_names: list[str]
    label_mapping: dict[str, int] | None = None

    @property
    def num_labels(self) -> int:
        return len(self.label_names)


class DataSource:
    """Base class of the data sources: :meth:`load` returns validated :class:`LabelledSplits`.

    Args:
        text_column: column holding the text.
        label_column: column holding the label (ids or strings).
        text_pair_column: second text column for sentence-pair tasks, or ``None``.
        label_names: class names in id order; read from the data when ``None``.
        validation_ratio: share of ``train`` carved off as validation when the source has no
            validation split (also for test, with ``test_ratio``).
        test_ratio: share of ``train`` carved off as test when the source has no test split.
        seed: seed of those carvings (fixed, independent of the experiment seed).
        drop_labels: raw label values whose rows are dropped from every split before anything else
            (e.g. ``[-1]`` for SNLI's pairs without a gold label).
        drop_missing_labels: drop rows whose label is missing or blank (``None``, NaN, ``""``, ``"NaN"``,
            ``"NA"``, ...), logging how many per split; off (default), such rows are an error naming them.
        convert_texts: read numbers in a text column as text (``5`` -> ``"5"``), with a logged note; off
            (default), a text column holding anything but strings is an error naming the rows.
        merge_label_variants: string labels that are equal once surrounding whitespace is stripped and case
            is folded (``str.strip().casefold()``: ``"pos"``, ``"pos "``, ``"Pos"``, ``"POS"``) become one
            class, named by that stripped, case-folded form (``"pos"``), with a logged note; a label given in
            ``label_names`` takes its variants in the data. Labels without a variant are kept as written. Off
            (default), such variants are an error naming them.
    """

    def __init__(
        self,
        text_column: str = "text",
        label_column: str = "label",
        text_pair_column: str | None = None,
        label_names: Sequence[str] | None = None,
        validation_ratio: float = 0.1,
        test_ratio: float = 0.1,
        seed: int = 0,
        drop_labels: Sequence[Any] | None = None,
        drop_missing_labels: bool = False,
        convert_texts: bool = False,
        merge_label_variants: bool = False,
    ) -> None:
        self.text_column = text_column
        self.label_column = label_column
        self.text_pair_column = text_pair_column
        self.label_names = list(label_names) if label_names is not None else None
        self.validation_ratio = validation_ratio
        self.test_ratio = test_ratio
        self.seed = seed
        self.drop_labels = list(drop_labels) if drop_labels is not None else []
        self.drop_missing_labels = bool(drop_missing_labels)
        self.convert_texts = bool(convert_texts)
        self.merge_label_variants = bool(merge_label_variants)
        for name, ratio in (("validation_ratio", validation_ratio), ("test_ratio", test_ratio)):
            if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio < 1:
                raise ValueError(f"dataset.source.{name} must be a number in (0, 1), got {ratio!r}")
        roles = {"text_column": text_column, "label_column": label_column, "text_pair_column": text_pair_column}
        named = [(role, column) for role, column in roles.items() if column is not None]
        for i, (role, column) in enumerate(named):
            for other, other_column in named[i + 1 :]:
                if column == other_column:
                    raise ValueError(
                        f"dataset.source.{role} and dataset.source.{other} both name the column {column!r}: "
                        "each must name its own column (the text, the label, the second text of a pair)"
                    )

    def _drop(self, raw: datasets.DatasetDict) -> datasets.DatasetDict:
        if not self.drop_labels:
            return raw
        if any(self.label_column not in data.column_names for data in raw.values()):
            return raw  # the missing column is reported by load()
        dropped = set(self.drop_labels)
        return datasets.DatasetDict(
            {
                split: data.filter(
                    lambda labels: [label not in dropped for label in labels],
                    input_columns=self.label_column,
                    batched=True,
                    desc=f"dropping labels {sorted(dropped, key=str)}",
                )
                for split, data in raw.items()
            }
        )

    def _raw(self) -> datasets.DatasetDict:
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__

    def where(self, split: str) -> str:
        """Where the rows of ``split`` as read come from, for error messages."""
        return f"{self.describe()}, split {split!r}"

    def local_files(self) -> dict[str, str]:
        """``{name: path}`` of the local files the source reads (none for a hub dataset); their contents
        are hashed into the checkpoint and result keys."""
        return {}

    def load(self) -> LabelledSplits:
        """Load, carve missing splits, normalise columns and validate.

        Raises:
            ValueError: missing column, empty text (:meth:`_check_columns`), string labels that differ only in
                case or surrounding whitespace without ``merge_label_variants``, empty split, label out of range
                (:func:`validate_splits`).
        """
        raw = self._raw()
        if "train" not in raw:
            raise ValueError(f"{self.describe()}: no 'train' split (found {sorted(raw)})")
        # each row's index in the split as read, so errors name the row of the file, not of a carved split
        raw = datasets.DatasetDict({s: d.add_column(_SOURCE_ROW, list(range(len(d)))) for s, d in raw.items()})
        raw = datasets.DatasetDict({split: self._checked(str(split), data) for split, data in self._drop(raw).items()})
        columns = {self.text_column: "text", self.label_column: "label"}
        if self.text_pair_column:
            columns[self.text_pair_column] = "text_pair"
        self._check_columns(raw, columns)  # the splits as read, before any is carved: every row counted
        raw = self._carve(raw)
        names, mapping = self._label_names(raw)
        out = {}
        for split in SPLITS:
            data = raw[split].select_columns(list(columns)).rename_columns({k: v for k, v in columns.items() if k != v})
            if mapping is not None:
                labels = [mapping.get(str(v), -1) for v in data["label"]]
                data = data.remove_columns("label").add_column("label", labels)
            data = data.add_column("example_id", list(range(len(data))))
            out[split] = data
        loaded = LabelledSplits(datasets.DatasetDict(out), names, mapping)
        validate_splits(loaded, source=self.describe())
        return loaded

    def _check_columns(self, raw: datasets.DatasetDict, columns: dict[str, str]) -> None:
        """Every split as read has the configured columns and no empty text (in any text column).

        Raises:
            ValueError: naming the split, the column and, for empty texts, their count and first data row.
        """
        for split, data in raw.items():
            missing = [c for c in columns if c not in data.column_names]
            if missing:
                names = [c for c in data.column_names if c != _SOURCE_ROW]
                raise ValueError(
                    f"{self.describe()}: split {split!r} has no column(s) {missing}; its columns are {names}. "
                    + (delimiter_hint(names) or "Set text_column/label_column accordingly.")
                )
            labels = data[self.label_column]
            distinct = len(set(map(str, labels)))
            if distinct > max(MAX_DISTINCT_LABELS, len(labels) // 2):
                raise ValueError(
                    f"{self.describe()}: the label column {self.label_column!r} has {distinct} distinct values in "
                    f"the {len(labels)} rows of split {split!r}, not a few classes: is it a text column? "
                    f"(text_column={self.text_column!r}, label_column={self.label_column!r}; swap them if so)"
                )
            for column in columns:
                if column == self.label_column:
                    continue
                empty = _empty_rows(data[column])
                if empty:
                    source_rows = data[_SOURCE_ROW]
                    empty = [source_rows[i] for i in empty]
                    raise ValueError(
                        f"{self.describe()}: split {split!r} has {len(empty)} empty {column!r} value(s), the first "
                        f"at data row {min(empty)} of the {split!r} data as read (0-based, header line not counted)"
                    )

    def _checked(self, split: str, data: datasets.Dataset) -> datasets.Dataset:
        """One split as read, its values checked: rows with a missing label dropped (``drop_missing_labels``)
        or refused, numbers in a text column converted (``convert_texts``) or refused, a column mixing kinds of
        values (numbers and words) refused; integer labels written as text become integers.

        Raises:
            ValueError: naming the file (or source and split), the column and the first offending rows.
        """
        where = self.where(split)
        if self.label_column in data.column_names:
            data = self._checked_labels(where, data)
        for column in (self.text_column, self.text_pair_column):
            if column and column in data.column_names:
                data = self._checked_texts(where, data, column)
        return data

    def _checked_labels(self, where: str, data: datasets.Dataset) -> datasets.Dataset:
        column, named = self.label_column, {str(name) for name in self.label_names or ()}
        values = data[column]
        missing = [i for i, v in enumerate(values) if _missing_label(v, named)]
        if missing:
            rows = _row_list(data, missing)
            if not self.drop_missing_labels:
                raise ValueError(
                    f"{where}: column {column!r} has {len(missing)} missing or blank label(s), at {rows}; a missing "
                    "label is not a class. Fill them in, or drop these rows with "
                    "dataset.source.drop_missing_labels=true"
                )
            log.warning(
                "%s: dropped %d row(s) whose label (column %r) is missing or blank "
                "(dataset.source.drop_missing_labels=true), at %s",
                where,
                len(missing),
                column,
                rows,
            )
            data = data.select(sorted(set(range(len(values))) - set(missing)))
            values = data[column]
        kinds = _kinds(values, data[_SOURCE_ROW], label=True)
        if len(kinds) > 1 and not (named and {str(v) for v in values} <= named):
            raise ValueError(
                f"{where}: column {column!r} mixes kinds of labels: {_examples(kinds)}; give every label as a class "
                "id (integer) or every label as a class name"
            )
        if set(kinds) == {"integer"} and any(isinstance(v, str) for v in values):
            data = data.remove_columns(column).add_column(column, [int(v) for v in values])
        return data

    def _checked_texts(self, where: str, data: datasets.Dataset, column: str) -> datasets.Dataset:
        values = data[column]
        others = [i for i, v in enumerate(values) if v is not None and not isinstance(v, str)]
        if not others:
            return data
        numbers = all(_plain_number(values[i]) for i in others)
        kinds = _kinds(values, data[_SOURCE_ROW])
        if numbers and self.convert_texts:
            log.warning(
                "%s: read %d number(s) in text column %r as text (dataset.source.convert_texts=true), at %s",
                where,
                len(others),
                column,
                _row_list(data, others),
            )
            texts = [v if v is None or isinstance(v, str) else str(v) for v in values]
            return data.remove_columns(column).add_column(column, texts)
        found = (
            f"mixes kinds of values: {_examples(kinds)}"
            if len(kinds) > 1
            else f"holds no text, only {_examples(kinds)}"
        )
        hint = "; read its numbers as text with dataset.source.convert_texts=true" if numbers else ""
        raise ValueError(f"{where}: text column {column!r} {found}, at {_row_list(data, others)}{hint}")

    def _carve(self, raw: datasets.DatasetDict) -> datasets.DatasetDict:
        raw = datasets.DatasetDict(dict(raw))
        original, carved = raw["train"], []
        for split, ratio in (("test", self.test_ratio), ("validation", self.validation_ratio)):
            if split in raw:
                continue
            if len(raw["train"]) < 2:
                raise ValueError(f"{self.describe()}: too few training rows to carve a {split} split")
            parts = raw["train"].train_test_split(test_size=ratio, seed=self.seed, shuffle=True)
            raw["train"], raw[split] = parts["train"], parts["test"]
            carved.append(split)
        self._check_carved(original, raw, carved)
        return raw

    def _check_carved(self, original: datasets.Dataset, raw: datasets.DatasetDict, carved: list[str]) -> None:
        """After carving: the training split keeps every class the rows as read have.

        Raises:
            ValueError: a file too small to carve from (naming its row count, the shares and the lost classes).
        """
        if not carved or self.label_column not in original.column_names:
            return
        lost = sorted(set(map(str, original[self.label_column])) - set(map(str, raw["train"][self.label_column])))
        if lost:
            shares = ", ".join(f"{s} {getattr(self, f'{s}_ratio'):g}" for s in carved)
            raise ValueError(
                f"{self.describe()}: too small to carve {' and '.join(carved)} split(s) from: its {len(original)} "
                f"training rows leave {len(raw['train'])} for training after carving ({shares} of the rows), with no "
                f"example of class(es) {lost}. Give more rows (several per class), or give the validation and test "
                "files (dataset.source.validation/test)"
            )

    def _label_names(self, raw: datasets.DatasetDict) -> tuple[list[str], dict[str, int] | None]:
        feature = raw["train"].features[self.label_column]
        if isinstance(feature, datasets.ClassLabel):
            return list(self.label_names or feature.names), None
        values = set()
        for split in SPLITS:
            values.update(raw[split].unique(self.label_column))
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
            if self.label_names is None:
                top = max(values) if values else 0
                return [str(i) for i in range(int(top) + 1)], None
            return list(self.label_names), None
        # string labels: map to ids, in the order of label_names when given, else sorted
        strings = sorted(str(v) for v in values)
        if self.label_names is not None:
            names = list(self.label_names)
            mapping = {name: i for i, name in enumerate(names)}
            by_form: dict[str, list[str]] = {}
            for name in names:
                by_form.setdefault(_label_form(name), []).append(name)
            unknown = [v for v in strings if v not in mapping]
            variants = {v: by_form[_label_form(v)][0] for v in unknown if len(by_form.get(_label_form(v), ())) == 1}
            if variants and self.merge_label_variants:
                self._log_merge({name: [v for v in strings if variants.get(v) == name or v == name] for name in names})
                mapping.update({v: mapping[name] for v, name in variants.items()})
            elif variants:
                raise ValueError(
                    f"{self.describe()}: labels {sorted(variants)} differ from label_names {names} only in case or "
                    "surrounding whitespace. Correct them in the data, or merge them into the label_names they match "
                    "with dataset.source.merge_label_variants=true (strips surrounding whitespace and ignores case)"
                )
            unknown = [v for v in unknown if v not in variants]
            if unknown:
                raise ValueError(f"{self.describe()}: labels {unknown} are not among the expected label_names {names}")
            return names, mapping
        groups: dict[str, list[str]] = {}
        for value in strings:
            groups.setdefault(_label_form(value), []).append(value)
        merged = {form: group for form, group in groups.items() if len(group) > 1}
        if not merged:
            return strings, {name: i for i, name in enumerate(strings)}
        if not self.merge_label_variants:
            listed = "; ".join(str(group) for group in merged.values())
            raise ValueError(
                f"{self.describe()}: labels that differ only in case or surrounding whitespace would be separate "
                f"classes ({len(strings)} classes instead of {len(groups)}): {listed}. Correct them in the data, or "
                "merge each group into one class with dataset.source.merge_label_variants=true (strips surrounding "
                f"whitespace and ignores case; the classes are then named {sorted(merged)})"
            )
        name_of = {value: form if form in merged else value for form, group in groups.items() for value in group}
        names = sorted(set(name_of.values()))
        self._log_merge({form: group for form, group in merged.items()})
        return names, {value: names.index(name) for value, name in name_of.items()}

    def _log_merge(self, groups: dict[str, list[str]]) -> None:
        merged = {name: group for name, group in groups.items() if group != [name]}
        log.warning(
            "%s: merged labels that differ only in case or surrounding whitespace "
            "(dataset.source.merge_label_variants=true): %s",
            self.describe(),
            "; ".join(f"{group} -> {name!r}" for name, group in merged.items()),
        )


class HubSource(DataSource):
    """A dataset on the Hugging Face hub (needs internet, or a populated ``datasets`` cache).

    Args:
        path: hub dataset id, e.g. ``"cornell-movie-review-data/rotten_tomatoes"``.
        name: configuration name (``"sst2"`` of ``"nyu-mll/glue"``), or ``None``.
        splits: which hub split serves as ``train``/``validation``/``test`` (e.g. SST-2's test labels
            are hidden, so ``test: validation``); splits not named are carved from ``train``.
        **kwargs: see :class:`DataSource`.
    """

    def __init__(self, path: str, name: str | None = None, splits: Mapping[str, str] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.path = path
        self.name = name
        self.splits = dict(splits or {"train": "train", "validation": "validation", "test": "test"})

    def describe(self) -> str:
        return f"hub dataset {self.path}" + (f"/{self.name}" if self.name else "")

    def _raw(self) -> datasets.DatasetDict:
        loaded = datasets.load_dataset(self.path, self.name)
        missing = [hub for hub in self.splits.values() if hub not in loaded]
        if missing:
            raise ValueError(f"{self.describe()}: no split(s) {missing}; it has {sorted(loaded)}")
        return datasets.DatasetDict({ours: loaded[hub] for ours, hub in self.splits.items()})


class FileSource(DataSource):
    """Local CSV, TSV or JSON-lines files.

    Give either one ``path`` (split by ``validation_ratio``/``test_ratio``) or per-split files
    ``train`` (required), ``validation`` and ``test`` (carved from train when absent). String labels are
    mapped to ids (sorted, or in the order of ``label_names``) and the mapping recorded.

    Args:
        path: one file holding every row.
        train, validation, test: per-split files instead.
        encoding: the files' text encoding (Python codec name: ``"utf-8"``, ``"latin-1"``, ``"cp1252"``, ...).
        **kwargs: see :class:`DataSource`.

    Raises:
        FileNotFoundError: a named file does not exist.
        IsADirectoryError: a named file is a directory.
        ValueError: no file named, or an unknown encoding; when loading (:meth:`load`): an unknown extension,
            a header naming a column twice, or a file that cannot be decoded with ``encoding``.
    """

    def __init__(
        self,
        path: str | None = None,
        train: str | None = None,
        validation: str | None = None,
        test: str | None = None,
        encoding: str = "utf-8",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if path is None and train is None:
            raise ValueError("dataset=csv needs dataset.source.path (one file) or dataset.source.train")
        if path is not None and train is not None:
            raise ValueError("give either dataset.source.path or per-split files, not both")
        try:
            codecs.lookup(str(encoding))
        except LookupError:
            raise ValueError(
                f"dataset.source.encoding={encoding!r} is not a text encoding Python knows; e.g. utf-8, latin-1, cp1252"
            ) from None
        self.encoding = str(encoding)
        files = {"train": path or train, "validation": validation, "test": test}
        self.files = {k: os.fspath(v) for k, v in files.items() if v is not None}
        self.single_file = path is not None
        for split, file in self.files.items():
            setting = f"dataset.source.{'path' if self.single_file else split}"
            if Path(file).is_dir():
                raise IsADirectoryError(_directory_message(setting, file, self.single_file))
            if not Path(file).is_file():
                raise FileNotFoundError(f"{split} file not found: {file}")

    def local_files(self) -> dict[str, str]:
        """``{"path": file}`` for a single file, else ``{split: file}``."""
        return {"path": self.files["train"]} if self.single_file else dict(self.files)

    def where(self, split: str) -> str:
        return f"{self.files['train']}" if self.single_file else f"{self.files[split]} ({split} file)"

    def describe(self) -> str:
        if self.single_file:
            return f"file {self.files['train']} (its rows are the 'train' data; missing splits are carved from it)"
        return f"files {self.files}"

    def _raw(self) -> datasets.DatasetDict:
        suffixes = {Path(f).suffix.lower() for f in self.files.values()}
        options: dict[str, Any]
        if suffixes <= {".csv"}:
            builder, options = "csv", {"keep_default_na": False}
        elif suffixes <= {".tsv"}:
            builder, options = "csv", {"keep_default_na": False, "sep": "\t"}
        elif suffixes <= {".jsonl", ".json"}:
            builder, options = "json", {}
        elif len(suffixes) > 1:
            raise ValueError(f"the split files mix types {sorted(suffixes)}: give every split in one format")
        else:
            raise ValueError(f"unsupported file type(s) {sorted(suffixes)}: use .csv, .tsv or .jsonl")
        options["encoding"] = self.encoding
        loaded = {}
        for split, file in self.files.items():
            self._check_decodable(file)
            if duplicated := _duplicated_columns(file, str(options.get("sep", ",")), self.encoding):
                raise ValueError(
                    f"{file}: the header names column(s) {duplicated} more than once, so which of them is meant is "
                    "ambiguous (the first would be read, the others renamed); give every column a distinct name"
                )
            try:
                loaded[split] = datasets.load_dataset(builder, data_files={split: file}, split=split, **options)
            except Exception as error:  # datasets raises for an empty file
                if Path(file).stat().st_size == 0 or "corresponds to no data" in str(error):
                    raise ValueError(f"{self.describe()}: split {split!r} is empty ({file})") from error
                # Arrow types a column from the first block of rows: a column whose kind of value changes later
                # fails with a cast error that names neither the column nor the rows; find them here
                if mixed := _mixed_columns(file, str(options.get("sep", ",")), self.encoding):
                    raise ValueError(
                        f"{file}: {'; '.join(mixed)}. Give each column one kind of value (labels all class ids or "
                        "all class names)"
                    ) from error
                cause = f"{error}: {error.__cause__}" if error.__cause__ is not None else str(error)
                # a tab-separated file named .csv whose texts hold commas fails to parse (rather than reading as
                # one column, which the source's column check explains): say so from its header
                hint = delimiter_hint(_header_names(file, str(options.get("sep", ",")), self.encoding))
                raise ValueError(
                    f"{self.describe()}: cannot read {split} file {file}: {cause}" + (f" {hint}" if hint else "")
                ) from error
        return datasets.DatasetDict(loaded)

    def _check_decodable(self, file: str) -> None:
        """Decode ``file`` with :attr:`encoding` in 1 MiB blocks.

        Raises:
            ValueError: naming the file, the byte offset and line of the first undecodable byte, and the
                setting that reads a Latin-1 file.
        """
        decoder = codecs.getincrementaldecoder(self.encoding)()
        offset, lines = 0, 0
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                try:
                    decoder.decode(block)
                except UnicodeDecodeError as error:
                    # error.object is this block after the bytes of an incomplete character the decoder held back
                    # from the last block (never a newline)
                    at = offset - (len(error.object) - len(block)) + error.start
                    line = lines + error.object[: error.start].count(b"\n") + 1
                    bad = error.object[error.start : error.end]
                    raise ValueError(
                        f"{file} cannot be read as {self.encoding}: byte(s) {bad.hex(' ')} at byte offset {at} (line "
                        f"{line}) are not valid {self.encoding} ({error.reason}). If the file is Latin-1 (ISO-8859-1), "
                        "set dataset.source.encoding=latin-1 (Windows-1252: cp1252), or save it as UTF-8"
                    ) from None
                offset += len(block)
                lines += block.count(b"\n")
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"{file} cannot be read as {self.encoding}: it ends inside a character ({error.reason}) at byte "
                    f"offset {offset - (len(error.object) - error.start)}. If the file is Latin-1 (ISO-8859-1), set "
                    "dataset.source.encoding=latin-1 (Windows-1252: cp1252), or save it as UTF-8"
                ) from None


#: more distinct labels than this, and than half the rows of a split, is taken for a text column named as labels
MAX_DISTINCT_LABELS = 50

#: delimiters a file read as comma-separated may really use, with their names
_OTHER_DELIMITERS = {"\t": "tab", ";": "semicolon", "|": "pipe"}


def delimiter_hint(names: list[str]) -> str | None:
    """Advice when a file read with commas has one column whose name holds another delimiter (a
    tab-separated file named ``.csv``, say): which delimiter, and what to do; ``None`` otherwise. The names
    pandas makes up for the extra fields of rows whose texts hold commas (``__index_level_<i>__``,
    ``Unnamed: <i>``) do not count as columns."""
    names = [n for n in names if not (str(n).startswith("__index_level_") or str(n).startswith("Unnamed: "))]
    if len(names) != 1:
        return None
    for delimiter, label in _OTHER_DELIMITERS.items():
        if delimiter in names[0]:
            fix = "name it .tsv" if delimiter == "\t" else "save it comma-separated (or tab-separated, as .tsv)"
            return f"The file was read with commas but its header looks {label}-separated ({names[0]!r}): {fix}."
    return None


def _directory_message(setting: str, folder: str, single_file: bool) -> str:
    """Why a directory cannot be a data file, with the data files it holds as the settings to give them."""
    data = sorted(p.name for p in Path(folder).iterdir() if p.is_file() and p.suffix.lower() in DATA_SUFFIXES)
    message = f"{setting}={folder} is a directory; it must name a data file (.csv, .tsv or .jsonl)"
    splits = sorted(
        (name for name in data if Path(name).stem in SPLITS), key=lambda name: SPLITS.index(Path(name).stem)
    )
    if splits and any(Path(name).stem == "train" for name in splits):
        given = " ".join(f"dataset.source.{Path(name).stem}={Path(folder) / name}" for name in splits)
        return f"{message}; it holds {splits}: give them as {given}" + (
            " dataset.source.path=null" if single_file else ""
        )
    if data:
        return f"{message}; it holds {data}: name one of them, e.g. {setting}={Path(folder) / data[0]}"
    return f"{message}; it holds no such file"


def _header_names(file: str, sep: str, encoding: str) -> list[str]:
    """The column names of a CSV/TSV file's first line read with ``sep`` (empty for JSON lines or a file that
    cannot be read line by line)."""
    if Path(file).suffix.lower() in (".jsonl", ".json"):
        return []
    try:
        with open(file, newline="", encoding=encoding) as handle:
            return next(csv.reader(handle, delimiter=sep), [])
    except (OSError, ValueError, csv.Error):
        return []


def _duplicated_columns(file: str, sep: str, encoding: str) -> list[str]:
    """Column names given more than once in a CSV/TSV header, or in one row of a JSON-lines file (blank CSV
    names, which pandas numbers ``Unnamed: <i>``, are not counted); empty when there are none or the file
    cannot be read line by line."""
    if Path(file).suffix.lower() not in (".jsonl", ".json"):
        return sorted(_repeated(name for name in _header_names(file, sep, encoding) if name.strip()))
    found: set[str] = set()
    try:
        with open(file, encoding=encoding) as handle:
            for line in handle:
                if line.strip():
                    json.loads(line, object_pairs_hook=lambda pairs: found.update(_repeated(k for k, _ in pairs)))
    except (OSError, ValueError):
        return []
    return sorted(found)


def _repeated(names) -> set[str]:
    seen: set[str] = set()
    repeated: set[str] = set()
    for name in names:
        (repeated if name in seen else seen).add(name)
    return repeated


_SOURCE_ROW = "__itermask_source_row__"
_INTEGER = re.compile(r"[+-]?\d+")


def _label_form(label: str) -> str:
    """What :attr:`DataSource.merge_label_variants` compares: the label stripped of surrounding whitespace,
    case folded."""
    return label.strip().casefold()


def _missing_label(value, named: set[str]) -> bool:
    """Whether a raw label value is missing: ``None``, NaN, blank, or an NA string not among ``named``."""
    if value is None or isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and (not value.strip() or value in MISSING_LABELS and value not in named)


def _plain_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _kind(value, label: bool) -> str:
    """What kind of value a cell holds, for type errors: ``text``, ``integer``, ``number``, ``boolean``, or
    the Python type name (lists, dicts). A label written as an integer in text counts as an integer."""
    if isinstance(value, str):
        return "integer" if label and _INTEGER.fullmatch(value.strip()) else "text"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return type(value).__name__


def _kinds(values, source_rows, label: bool = False) -> dict[str, tuple[int, Any]]:
    """``{kind: (data row, value)}`` of the first value of each kind, missing values left out."""
    kinds: dict[str, tuple[int, Any]] = {}
    for value, row in zip(values, source_rows):
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            kinds.setdefault(_kind(value, label), (row, value))
    return kinds


def _examples(kinds: dict[str, tuple[int, Any]]) -> str:
    return " and ".join(f"{kind} (e.g. {value!r} at data row {row})" for kind, (row, value) in kinds.items())


def _cell_kind(value) -> str:
    """The kind of a cell of a file as read by Python (:func:`_mixed_columns`): a CSV cell is text, named
    ``integer`` or ``number`` when it is written as one."""
    if not isinstance(value, str):
        return _kind(value, label=False)
    try:
        float(value)
    except ValueError:
        return "text"
    return "integer" if _INTEGER.fullmatch(value.strip()) else "number"


def _mixed_columns(file: str, sep: str = ",", encoding: str = "utf-8") -> list[str]:
    """Columns of a CSV/TSV or JSON-lines file whose cells hold more than one kind of value (numbers and
    words), each named with its first example of each kind; empty when there is none (or the file cannot be
    read line by line)."""
    kinds: dict[str, dict[str, tuple[int, Any]]] = {}
    try:
        with open(file, newline="", encoding=encoding) as handle:
            if Path(file).suffix.lower() in (".jsonl", ".json"):
                rows = (json.loads(line) for line in handle if line.strip())
            else:
                rows = csv.DictReader(handle, delimiter=sep)
            for index, row in enumerate(rows):
                for column, value in row.items() if isinstance(row, dict) else ():
                    if value is not None and value != "":
                        kinds.setdefault(str(column), {}).setdefault(_cell_kind(value), (index, value))
    except (OSError, ValueError, csv.Error):  # not line-delimited JSON, undecodable text: no diagnosis
        return []
    return [
        f"column {column!r} mixes kinds of values: {_examples(found)}"
        for column, found in kinds.items()
        if len(found) > 1
    ]


def _row_list(data: datasets.Dataset, indices: list[int], shown: int = 5) -> str:
    """The data rows as read (0-based, header line not counted) of ``indices``, the first ``shown`` of them."""
    source_rows = data[_SOURCE_ROW]
    rows = ", ".join(str(source_rows[i]) for i in indices[:shown])
    more = f" and {len(indices) - shown} more" if len(indices) > shown else ""
    return f"data row(s) {rows}{more} (0-based, header line not counted)"


def _empty_rows(texts) -> list[int]:
    """Indices of missing or blank texts."""
    return [i for i, text in enumerate(texts) if text is None or not str(text).strip()]


def shipped_source(name: str = "rt_snippets") -> FileSource:
    """The dataset shipped with itermask (``itermask/resources/<name>``), with its fixed splits.

    ``rt_snippets``: Rotten Tomatoes review snippets (Pang & Lee), labels ``negative``/``positive``;
    see ``itermask/resources/rt_snippets/README.md`` for provenance and licence.

    Raises:
        ValueError: for an unknown name.
    """
    root = resources.files("itermask") / "resources" / name
    if not root.is_dir():
        raise ValueError(f"no shipped dataset named {name!r}")
    return FileSource(
        train=str(root / "train.csv"),
        validation=str(root / "validation.csv"),
        test=str(root / "test.csv"),
        label_names=["negative", "positive"],
    )


def validate_splits(loaded: LabelledSplits, source: str = "dataset") -> None:
    """Check that every split is non-empty and every label in ``[0, C)`` (empty texts are found earlier, in the
    splits as read: :meth:`DataSource._check_columns`).

    Raises:
        ValueError: naming the split and the first offending row or label values.
    """
    if loaded.num_labels < 2:
        raise ValueError(f"{source}: a classifier needs at least 2 classes, found {loaded.label_names}")
    for split in SPLITS:
        data = loaded.splits[split]
        if len(data) == 0:
            raise ValueError(f"{source}: split {split!r} is empty")
        labels = np.asarray(data["label"])
        if split == "train":
            missing = sorted(set(range(loaded.num_labels)) - set(labels.tolist()))
            if missing:
                raise ValueError(
                    f"{source}: class(es) {[loaded.label_names[i] for i in missing]} (ids {missing}) never occur "
                    f"in the training split, which has {sorted(set(labels.tolist()))}; {loaded.num_labels} classes "
                    f"were assumed from the labels of all splits (largest {loaded.num_labels - 1}); integer labels "
                    "must run 0..C-1, or give label_names"
                )
        bad = sorted(set(labels[(labels < 0) | (labels >= loaded.num_labels)].tolist()))
        if bad:
            raise ValueError(
                f"{source}: split {split!r} has label(s) {bad[:10]} outside 0..{loaded.num_labels - 1} "
                f"(classes {loaded.label_names}); string labels not in label_names map to -1. Rows with a "
                f"label to leave out (e.g. -1 for unlabelled) can be dropped with dataset.source.drop_labels=[-1]"
            )
