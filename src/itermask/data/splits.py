"""The splits every data source yields, and the checks of their values: missing and mixed labels, text columns
that hold no text, empty texts (:func:`validate_splits`), and the advice for a file read with the wrong delimiter."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np

__all__ = ["SPLITS", "MISSING_LABELS", "LabelledSplits", "validate_splits", "delimiter_hint"]

SPLITS = ("train", "validation", "test")

#: Label values read as missing (pandas' default NA strings, which ``keep_default_na=False`` keeps as text),
#: unless ``label_names`` names them.
MISSING_LABELS = frozenset(
    {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA"}
    | {"NULL", "NaN", "None", "n/a", "nan", "null"}
)


@dataclass
class LabelledSplits:
    """Loaded data: the three splits, the names of the classes (``label_names[i]`` is class ``i``) and how string
    labels of a file were mapped to ids (``label_mapping``; ``None`` if they were ids)."""

    splits: datasets.DatasetDict
    label_names: list[str]
    label_mapping: dict[str, int] | None = None

    @property
    def num_labels(self) -> int:
        return len(self.label_names)


#: more distinct labels than this, and than half the rows of a split, is taken for a text column named as labels
MAX_DISTINCT_LABELS = 50

#: delimiters a file read as comma-separated may really use, with their names
_OTHER_DELIMITERS = {"\t": "tab", ";": "semicolon", "|": "pipe"}


def delimiter_hint(names: list[str]) -> str | None:
    """Advice when a file read with commas has one column whose name holds another delimiter (a tab-separated
    file named ``.csv``, say), ``None`` otherwise. The names pandas makes up for extra fields
    (``__index_level_<i>__``, ``Unnamed: <i>``) do not count as columns."""
    names = [n for n in names if not (str(n).startswith("__index_level_") or str(n).startswith("Unnamed: "))]
    if len(names) != 1:
        return None
    for delimiter, label in _OTHER_DELIMITERS.items():
        if delimiter in names[0]:
            fix = "name it .tsv" if delimiter == "\t" else "save it comma-separated (or tab-separated, as .tsv)"
            return f"The file was read with commas but its header looks {label}-separated ({names[0]!r}): {fix}."
    return None


SOURCE_ROW = "__itermask_source_row__"

INTEGER = re.compile(r"[+-]?\d+")


def label_form(label: str) -> str:
    """What :attr:`DataSource.merge_label_variants` compares: the label stripped of surrounding whitespace,
    case folded."""
    return label.strip().casefold()


def is_missing_label(value, named: set[str]) -> bool:
    """Whether a raw label value is missing: ``None``, NaN, blank, or an NA string not among ``named``."""
    if value is None or isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and (not value.strip() or value in MISSING_LABELS and value not in named)


def is_plain_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def value_kind(value, label: bool) -> str:
    """What kind of value a cell holds, for type errors: ``text``, ``integer``, ``number``, ``boolean``, or
    the Python type name (lists, dicts). A label written as an integer in text counts as an integer."""
    if isinstance(value, str):
        return "integer" if label and INTEGER.fullmatch(value.strip()) else "text"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return type(value).__name__


def value_kinds(values, source_rows, label: bool = False) -> dict[str, tuple[int, Any]]:
    """``{kind: (data row, value)}`` of the first value of each kind, missing values left out."""
    kinds: dict[str, tuple[int, Any]] = {}
    for value, row in zip(values, source_rows):
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            kinds.setdefault(value_kind(value, label), (row, value))
    return kinds


def kind_examples(kinds: dict[str, tuple[int, Any]]) -> str:
    return " and ".join(f"{kind} (e.g. {value!r} at data row {row})" for kind, (row, value) in kinds.items())


def row_list(data: datasets.Dataset, indices: list[int], shown: int = 5) -> str:
    """The data rows as read (0-based, header line not counted) of ``indices``, the first ``shown`` of them."""
    source_rows = data[SOURCE_ROW]
    rows = ", ".join(str(source_rows[i]) for i in indices[:shown])
    more = f" and {len(indices) - shown} more" if len(indices) > shown else ""
    return f"data row(s) {rows}{more} (0-based, header line not counted)"


def empty_rows(texts) -> list[int]:
    """Indices of missing or blank texts."""
    return [i for i, text in enumerate(texts) if text is None or not str(text).strip()]


def validate_splits(loaded: LabelledSplits, source: str = "dataset") -> None:
    """Check that every split is non-empty and every label in ``[0, C)`` (empty texts are found earlier, in the
    splits as read: :meth:`DataSource._check_columns`).

    Raises:
        ValueError: naming the split and the first offending row or label values."""
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
                names = loaded.label_names
                present = sorted(set(labels.tolist()))
                if list(names) == [str(i) for i in range(loaded.num_labels)]:  # integer labels
                    why = (
                        f"{loaded.num_labels} classes were assumed from the labels of all splits (largest "
                        f"{loaded.num_labels - 1}); integer labels must run 0..C-1, or give label_names"
                    )
                else:
                    why = (
                        "a class only the other splits have cannot be learnt: add training rows of it, or leave it out"
                    )
                raise ValueError(
                    f"{source}: class(es) {[names[i] for i in missing]} (ids {missing}) never occur in the training "
                    f"split, which has {[names[i] for i in present if 0 <= i < len(names)]}; {why}"
                )
        bad = sorted(set(labels[(labels < 0) | (labels >= loaded.num_labels)].tolist()))
        if bad:
            raise ValueError(
                f"{source}: split {split!r} has label(s) {bad[:10]} outside 0..{loaded.num_labels - 1} "
                f"(classes {loaded.label_names}); string labels not in label_names map to -1. Rows with a "
                f"label to leave out (e.g. -1 for unlabelled) can be dropped with dataset.source.drop_labels=[-1]"
            )
