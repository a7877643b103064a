"""Data handed over in Python (:func:`itermask.evaluate`): texts (a list, tuple, NumPy array or pandas Series), a
dict of columns, a ``datasets.Dataset``, a ``pandas.DataFrame`` or a CSV/TSV path, evaluated whole, as a data
source of one ``test`` split (:class:`GivenTexts`) whose labels are the *classifier's* classes (ids or names).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pandas as pd

from itermask.data.sources import DataSource
from itermask.data.splits import LabelledSplits, delimiter_hint

__all__ = ["GivenTexts", "read_examples", "label_ids"]


@dataclasses.dataclass(frozen=True)
class _Examples:
    """The texts, second texts of sentence pairs and raw labels, in the order given."""

    texts: list[str]
    pairs: list[str] | None
    labels: list[Any] | None


def _first_undecodable(path: Path) -> str:
    """Where ``path``'s first byte that is not UTF-8 lies (pandas reports offsets within its read blocks)."""
    raw = path.read_bytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        return f"byte {error.start}, line {line}, cannot be decoded"
    return "a byte cannot be decoded"


def _read_table(data: Path):
    """A CSV/TSV file as a DataFrame (every cell as written: ``keep_default_na=False``).

    Raises:
        FileNotFoundError, ValueError: see :func:`read_examples`."""
    path = Path(data)
    if not path.is_file():
        raise FileNotFoundError(f"data={str(data)!r}: no such file (give a CSV/TSV path or a list of texts)")
    try:
        return pd.read_csv(path, sep="\t" if path.suffix == ".tsv" else ",", keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise ValueError(f"data={str(data)!r} is empty: it has no header and no rows") from None
    except UnicodeDecodeError:
        raise ValueError(
            f"data={str(data)!r} is not UTF-8 text ({_first_undecodable(path)}): save it as UTF-8, or "
            "read it yourself (pandas.read_csv(..., encoding=...)) and pass the DataFrame"
        ) from None
    except pd.errors.ParserError as error:
        raise ValueError(f"data={str(data)!r} cannot be read as {path.suffix or 'CSV'}: {error}") from None


def _columns(data, labels, text_column: str, text_pair_column: str | None, label_column: str | None) -> _Examples:
    """The named columns of a DataFrame or a ``datasets.Dataset``.

    Raises:
        ValueError: a named column the data lacks (``label_column``'s default ``"label"`` is optional); labels
            given both as ``labels`` and as the data's label column."""
    columns = list(data.columns) if isinstance(data, pd.DataFrame) else list(data.column_names)
    named = [("text_column", text_column), ("text_pair_column", text_pair_column)]
    named += [("label_column", label_column)] if label_column not in (None, "label") and labels is None else []
    for option, column in named:
        if column is not None and column not in columns:
            hint = delimiter_hint([str(c) for c in columns])
            raise ValueError(
                f"{option}={column!r} is not a column of the data: it has {columns}" + (f". {hint}" if hint else "")
            )
    pairs = None if text_pair_column is None else [str(t) for t in data[text_pair_column]]
    if label_column is not None and label_column in columns:
        if labels is not None:
            raise ValueError(
                f"the data has a label column {label_column!r} and labels= is given too: give the labels once "
                "(drop labels=, or the column, or set label_column=None to use labels=)"
            )
        labels = list(data[label_column])
    return _Examples(list(data[text_column]), pairs, labels)


def _table(data):
    """``data`` as a DataFrame, a ``datasets.Dataset`` or a list of texts.

    Raises:
        ValueError, FileNotFoundError: see :func:`read_examples`."""
    if isinstance(data, str | bytes | os.PathLike):
        path = Path(os.fsdecode(data))
        if path.is_dir():
            raise ValueError(f"data={str(path)!r} is a directory: give a CSV/TSV file (or a list of texts)")
        if isinstance(data, bytes) or (isinstance(data, str) and not path.suffix):
            raise ValueError("data is a single string: give a list of texts (data=[text, ...]) or a CSV/TSV path")
        return _read_table(path)
    if isinstance(data, datasets.DatasetDict):
        raise ValueError(f"data is a datasets.DatasetDict of the splits {list(data)}: give one, e.g. data=data['test']")
    if isinstance(data, Mapping):  # a dict of columns, as pandas.DataFrame and datasets.Dataset.from_dict take it
        if single := [str(k) for k, v in data.items() if isinstance(v, str | bytes) or not hasattr(v, "__len__")]:
            raise ValueError(f"data is a dict whose {single} are single values: give one list per column")
        try:
            return pd.DataFrame(dict(data))
        except ValueError as error:
            raise ValueError(f"data is a dict of columns that pandas cannot read as a table: {error}") from None
    if isinstance(data, pd.DataFrame | datasets.Dataset):
        return data
    if isinstance(data, np.ndarray | pd.Series) and np.ndim(data) == 1:
        return data.tolist()
    if isinstance(data, Sequence) and not isinstance(data, np.ndarray):
        return list(data)
    raise ValueError(
        f"data must be texts (a list, tuple, 1-D NumPy array or pandas.Series), a dict of columns, a pandas.DataFrame, "
        f"a datasets.Dataset or a CSV/TSV path; got {type(data).__name__} {data!r:.60}"
        + (f" of shape {data.shape}" if isinstance(data, np.ndarray) else "")
    )


def _labels(labels, n_texts: int) -> list[Any] | None:
    """``labels`` as a list of Python values (NumPy arrays, tensors and Series through ``tolist()``).

    Raises:
        ValueError: a single value, nested labels, not one label per text, or booleans."""
    if labels is None:
        return None
    if isinstance(labels, Mapping):
        raise ValueError(f"labels is a {type(labels).__name__}: give one label per text, as a list in the texts' order")
    if (
        isinstance(labels, Iterable)
        and not isinstance(labels, str | bytes | Sequence)
        and not hasattr(labels, "tolist")
    ):
        raise ValueError(f"labels is a {type(labels).__name__}: give one label per text as a list in the texts' order")
    if isinstance(labels, str | bytes) or not (isinstance(labels, Sequence) or hasattr(labels, "tolist")):
        raise ValueError(f"labels={labels!r:.60} is a single value: give one label per text (or none)")
    to_list = getattr(labels, "tolist", None)  # NumPy, torch, pandas: Python values, not NumPy scalars
    given = to_list() if callable(to_list) else list(labels)
    if not isinstance(given, list) or any(isinstance(label, list | tuple) for label in given):
        raise ValueError(f"labels must be one label per text (a flat list or 1-D array), got {labels!r:.60}")
    if len(given) != n_texts:
        raise ValueError(f"{len(given)} labels for {n_texts} texts: give one label per text, or none")
    if any(isinstance(label, bool) for label in given):  # True is 1 to Python; that it means class 1 is a guess
        raise ValueError(
            "labels are booleans (True/False): give class ids or the classifier's class names (e.g. "
            "[int(x) for x in labels] if True means class 1)"
        )
    return given


def read_examples(
    data, labels=None, text_column: str = "text", text_pair_column: str | None = None, label_column: str | None = None
) -> _Examples:
    """Texts, text pairs and labels from texts (a list, tuple, 1-D NumPy array or pandas Series), a dict of
    columns, a ``datasets.Dataset``, a DataFrame or a CSV/TSV path; ``labels`` a list, NumPy array, tensor or
    Series.

    Raises:
        ValueError: data of another kind (a number, a directory, a single string, a ``DatasetDict``), no texts, a
            missing column, labels that are a single value or of another length, a text that is not a string; a
            file that is empty, not UTF-8 or not parseable.
        FileNotFoundError: a path that does not exist."""
    data = _table(data)
    if isinstance(data, pd.DataFrame | datasets.Dataset):
        examples = _columns(data, labels, text_column, text_pair_column, label_column)
    else:
        examples = _Examples(data, None, labels)
    if not examples.texts:
        raise ValueError("no texts to evaluate")
    bad = [i for i, t in enumerate(examples.texts) if not isinstance(t, str) or not t.strip()]
    if bad:
        raise ValueError(f"texts {bad[:10]} are empty or not strings (each example needs a non-empty text)")
    return dataclasses.replace(examples, labels=_labels(examples.labels, len(examples.texts)))


def gold_label_problem(labels: Sequence[Any] | None) -> str | None:
    """Why ``labels`` cannot drive ``target="gold"`` (none given, or an example without one: None or NaN), or
    ``None``; such a label crashed in Lightning's test loop, after the model had loaded."""
    if labels is None:
        return "target='gold' explains each example's gold label: give labels= (or a label column)"
    if missing := [i for i, x in enumerate(labels) if _unlabelled(x)]:
        return (
            f"target='gold' explains each example's gold label, but examples {missing[:10]} have none (None or NaN): "
            "give every example a label, or leave them out, or use target='predicted'"
        )
    return None


def _unlabelled(label) -> bool:
    """Whether ``label`` stands for no label (None or NaN): ``-1`` to :func:`label_ids`, refused by
    :func:`gold_label_problem`."""
    return label is None or (isinstance(label, float) and math.isnan(label))


def _label_id(label, by_name: dict[str, int], num_classes: int) -> int | None:
    """The class id of one label (``-1``: unknown), or ``None`` when it is no class."""
    if _unlabelled(label):
        return -1
    if isinstance(label, str) and label.lower() in by_name:
        return by_name[label.lower()]
    if isinstance(label, int | float) and float(label).is_integer() and 0 <= int(label) < num_classes:
        return int(label)
    if isinstance(label, str) and label.strip().lstrip("-").isdigit() and 0 <= int(label) < num_classes:
        return int(label)
    return None


def label_ids(labels: Sequence[Any] | None, class_names: Sequence[str] | None, num_classes: int) -> list[int]:
    """Class ids of the labels (ids, or names matched to the classifier's case-insensitively; ``-1``: unknown;
    ``[]`` without labels).

    Raises:
        ValueError: a label that is no class of the classifier."""
    if labels is None:
        return []
    by_name = {name.lower(): i for i, name in enumerate(class_names or [])}
    ids = [_label_id(label, by_name, num_classes) for label in labels]
    bad = [label for label, i in zip(labels, ids) if i is None]
    if bad:
        raise ValueError(
            f"labels {sorted(set(bad), key=str)[:10]} are not classes of the classifier: give class ids "
            f"0..{num_classes - 1} or its class names {class_names}"
        )
    return [i for i in ids if i is not None]


class GivenTexts(DataSource):
    """The data given to :func:`itermask.evaluate`, evaluated whole as the ``test`` split.

    Args:
        texts, pairs, labels: see :func:`read_examples` (``labels`` as given: the classifier's class ids or names).
        class_names, num_classes: the classifier's class names by id and number of classes (``None`` until
            :meth:`for_classifier`, once the engine has loaded the classifier's config)."""

    def __init__(
        self,
        texts: Sequence[str],
        pairs: Sequence[str] | None = None,
        labels: Sequence[Any] | None = None,
        class_names: Sequence[str] | None = None,
        num_classes: int | None = None,
    ) -> None:
        super().__init__(text_pair_column="text_pair" if pairs is not None else None)
        self.texts, self.pairs = list(texts), None if pairs is None else list(pairs)
        self.labels = None if labels is None else list(labels)
        self.class_names = None if class_names is None else list(class_names)
        self.num_classes = num_classes

    def describe(self) -> str:
        return f"the {len(self.texts)} given texts"

    def for_classifier(self, class_names: Sequence[str] | None, num_classes: int) -> GivenTexts:
        """These texts with their labels read as the classes of a classifier (``class_names``: ``None`` if none)."""
        return GivenTexts(self.texts, self.pairs, self.labels, class_names, num_classes)

    def load(self) -> LabelledSplits:
        """The ``test`` split: ``text`` (and ``text_pair``), ``label`` (``-1``: unknown) and ``example_id`` (the
        position in the given data).

        Raises:
            ValueError: a label that is no class of the classifier; labels before :meth:`for_classifier`."""
        if self.num_classes is None:
            raise ValueError("the given texts' classes are not known yet: call for_classifier() first")
        ids = label_ids(self.labels, self.class_names, self.num_classes) or [-1] * len(self.texts)
        columns: dict[str, list] = {"text": self.texts}
        if self.pairs is not None:
            columns["text_pair"] = self.pairs
        columns.update(label=ids, example_id=list(range(len(self.texts))))
        names = self.class_names or [str(i) for i in range(self.num_classes)]
        return LabelledSplits(datasets.DatasetDict({"test": datasets.Dataset.from_dict(columns)}), names)
