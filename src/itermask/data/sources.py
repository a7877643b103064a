"""Data sources of labelled text: shipped, Hugging Face hub, local files.

Every source yields the splits ``train``, ``validation`` and ``test`` with the columns ``text`` (str),
optionally ``text_pair`` (str), ``label`` (int in ``[0, C)``) and ``example_id`` (the row's index in its split,
stable across runs), plus the label names. A new source is one :class:`DataSource` subclass (implementing
``_raw``, and :meth:`DataSource.local_files` for local files) plus one ``conf/dataset/<name>.yaml``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import datasets
import numpy as np

from itermask.data.splits import (
    MAX_DISTINCT_LABELS,
    SOURCE_ROW,
    SPLITS,
    LabelledSplits,
    delimiter_hint,
    empty_rows,
    is_missing_label,
    is_plain_number,
    kind_examples,
    label_form,
    row_list,
    validate_splits,
    value_kinds,
)
from itermask.formatting import hub_hint

log = logging.getLogger(__name__)

__all__ = ["DataSource", "HubSource"]


class DataSource:
    """Base class of the data sources: :meth:`load` returns validated :class:`LabelledSplits`.

    Args:
        text_column: column holding the text.
        label_column: column holding the label (ids or strings).
        text_pair_column: second text column for sentence-pair tasks, or ``None``.
        label_names: class names in id order; read from the data when ``None``.
        validation_ratio, test_ratio: share of ``train`` carved off as validation / test when the source has
            no such split; ``seed`` seeds the carving (fixed, independent of the experiment seed).
        drop_labels: raw label values whose rows are dropped from every split before anything else
            (e.g. ``[-1]`` for SNLI's pairs without a gold label).
        drop_missing_labels: drop rows whose label is missing or blank (``None``, NaN, ``""``, ``"NaN"``,
            ``"NA"``, ...), logging how many per split; off (default), such rows are an error naming them.
        convert_texts: read numbers in a text column as text (``5`` -> ``"5"``), with a logged note; off
            (default), a text column holding anything but strings is an error naming the rows.
        merge_label_variants: string labels equal up to surrounding whitespace and case (``"pos "``, ``"Pos"``)
            become one class, named by their ``str.strip().casefold()`` form or by the ``label_names`` entry
            they match, with a logged note; off (default), such variants are an error naming them."""

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
        if validation_ratio + test_ratio >= 1:  # carved one after the other, they left a handful of rows to train on
            raise ValueError(
                f"dataset.source.validation_ratio={validation_ratio} and test_ratio={test_ratio} add up to "
                f"{validation_ratio + test_ratio:g}: together they must leave rows to train on (a sum below 1)"
            )
        roles = {"text_column": text_column, "label_column": label_column, "text_pair_column": text_pair_column}
        named = [(role, column) for role, column in roles.items() if column is not None]
        for (role, column), (other, other_column) in itertools.combinations(named, 2):
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

    def for_classifier(self, class_names: Sequence[str] | None, num_classes: int) -> DataSource:
        """This source for a classifier evaluated as it is, with class names ``class_names`` by id: unchanged
        (the classes are matched afterwards, :func:`itermask.models.loading.class_mapping`)."""
        return self

    def load(self) -> LabelledSplits:
        """Load, carve missing splits, normalise columns and validate.

        Raises:
            ValueError: missing column, empty text (:meth:`_check_columns`), string labels that differ only in
                case or surrounding whitespace without ``merge_label_variants``, empty split, label out of range
                (:func:`validate_splits`)."""
        raw = self._raw()
        if "train" not in raw:
            raise ValueError(f"{self.describe()}: no 'train' split (found {sorted(raw)})")
        # each row's index in the split as read, so errors name the row of the file, not of a carved split
        raw = datasets.DatasetDict({s: d.add_column(SOURCE_ROW, list(range(len(d)))) for s, d in raw.items()})
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
            ValueError: naming the split, the column and, for empty texts, their count and first data row."""
        for split, data in raw.items():
            missing = [c for c in columns if c not in data.column_names]
            if missing:
                names = [c for c in data.column_names if c != SOURCE_ROW]
                raise ValueError(
                    f"{self.describe()}: split {split!r} has no column(s) {missing}; its columns are {names}. "
                    + (
                        delimiter_hint(names)
                        or "Name its columns on the command line: dataset.source.text_column=<column> "
                        "dataset.source.label_column=<column> (and dataset.source.text_pair_column for pairs)."
                    )
                )
            labels = data[self.label_column]
            distinct = len(set(map(str, labels)))
            if distinct > max(MAX_DISTINCT_LABELS, len(labels) // 2):
                raise ValueError(
                    f"{self.describe()}: the label column {self.label_column!r} has {distinct} distinct values in "
                    f"the {len(labels)} rows of split {split!r}, not a few classes: is it a text column? "
                    f"(text_column={self.text_column!r}, label_column={self.label_column!r}; swap them if so)"
                )
            for column in [c for c in columns if c != self.label_column]:
                if empty := empty_rows(data[column]):
                    source_rows = data[SOURCE_ROW]
                    empty = [source_rows[i] for i in empty]
                    raise ValueError(
                        f"{self.describe()}: split {split!r} has {len(empty)} empty {column!r} value(s), the first "
                        f"at data row {min(empty)} of the {split!r} data as read (0-based, header line not counted)"
                    )

    def _checked(self, split: str, data: datasets.Dataset) -> datasets.Dataset:
        """One split as read, its values checked: rows with a missing label dropped (``drop_missing_labels``)
        or refused, numbers in a text column converted (``convert_texts``) or refused, mixed kinds of values
        refused; integer labels written as text become integers.

        Raises:
            ValueError: naming the file (or source and split), the column and the first offending rows."""
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
        missing = [i for i, v in enumerate(values) if is_missing_label(v, named)]
        if missing:
            rows = row_list(data, missing)
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
        kinds = value_kinds(values, data[SOURCE_ROW], label=True)
        if len(kinds) > 1 and not (named and {str(v) for v in values} <= named):
            raise ValueError(
                f"{where}: column {column!r} mixes kinds of labels: {kind_examples(kinds)}; give every label as a "
                "class id (integer) or every label as a class name"
            )
        if set(kinds) == {"integer"} and any(isinstance(v, str) for v in values):
            data = data.remove_columns(column).add_column(column, [int(v) for v in values])
        return data

    def _checked_texts(self, where: str, data: datasets.Dataset, column: str) -> datasets.Dataset:
        values = data[column]
        others = [i for i, v in enumerate(values) if v is not None and not isinstance(v, str)]
        if not others:
            return data
        numbers = all(is_plain_number(values[i]) for i in others)
        kinds = value_kinds(values, data[SOURCE_ROW])
        if numbers and self.convert_texts:
            log.warning(
                "%s: read %d number(s) in text column %r as text (dataset.source.convert_texts=true), at %s",
                where,
                len(others),
                column,
                row_list(data, others),
            )
            texts = [v if v is None or isinstance(v, str) else str(v) for v in values]
            return data.remove_columns(column).add_column(column, texts)
        found = "mixes kinds of values:" if len(kinds) > 1 else "holds no text, only"
        hint = "; read its numbers as text with dataset.source.convert_texts=true" if numbers else ""
        raise ValueError(
            f"{where}: text column {column!r} {found} {kind_examples(kinds)}, at {row_list(data, others)}{hint}"
        )

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
            ValueError: a file too small to carve from (naming its row count, the shares and the lost classes)."""
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
                by_form.setdefault(label_form(name), []).append(name)
            unknown = [v for v in strings if v not in mapping]
            variants = {v: by_form[label_form(v)][0] for v in unknown if len(by_form.get(label_form(v), ())) == 1}
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
            groups.setdefault(label_form(value), []).append(value)
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
        splits: which hub split serves as ``train``/``validation``/``test`` (e.g. ``test: validation`` for SST-2,
            whose test labels are hidden); splits not named are carved from ``train``."""

    def __init__(self, path: str, name: str | None = None, splits: Mapping[str, str] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.path = path
        self.name = name
        self.splits = dict(splits or {"train": "train", "validation": "validation", "test": "test"})

    def describe(self) -> str:
        return f"hub dataset {self.path}" + (f"/{self.name}" if self.name else "")

    def _raw(self) -> datasets.DatasetDict:
        try:
            loaded = datasets.load_dataset(self.path, self.name)
        except ConnectionError as error:
            hint = hub_hint(error, "the shipped dataset=rt_snippets")
            raise ConnectionError(f"dataset.source: {self.describe()} cannot be loaded: {error}.{hint}") from None
        missing = [hub for hub in self.splits.values() if hub not in loaded]
        if missing:
            raise ValueError(f"{self.describe()}: no split(s) {missing}; it has {sorted(loaded)}")
        return datasets.DatasetDict({ours: loaded[hub] for ours, hub in self.splits.items()})
