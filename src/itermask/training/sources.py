"""Data sources of labelled text: shipped, Hugging Face hub, local files.

Every source yields a :class:`datasets.DatasetDict` with the splits ``train``, ``validation`` and ``test``
and the columns ``text`` (str), optionally ``text_pair`` (str), ``label`` (int in ``[0, C)``) and
``example_id`` (the row's index in its split, stable across runs), plus the label names. A new source is
one :class:`DataSource` subclass (implementing ``_raw``, and :meth:`DataSource.local_files` when it reads
local files, so that editing them changes the cache keys) plus one ``conf/dataset/<name>.yaml``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

import datasets
import numpy as np

__all__ = [
    "LabelledSplits",
    "DataSource",
    "HubSource",
    "FileSource",
    "shipped_source",
    "validate_splits",
    "SPLITS",
]

SPLITS = ("train", "validation", "test")


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
    ) -> None:
        self.text_column = text_column
        self.label_column = label_column
        self.text_pair_column = text_pair_column
        self.label_names = list(label_names) if label_names is not None else None
        self.validation_ratio = validation_ratio
        self.test_ratio = test_ratio
        self.seed = seed
        self.drop_labels = list(drop_labels) if drop_labels is not None else []

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

    def local_files(self) -> dict[str, str]:
        """``{name: path}`` of the local files the source reads (none for a hub dataset); their contents
        are hashed into the checkpoint and result keys."""
        return {}

    def load(self) -> LabelledSplits:
        """Load, carve missing splits, normalise columns and validate.

        Raises:
            ValueError: missing column, empty split, empty text, label out of range (see
                :func:`validate_splits`).
        """
        raw = self._raw()
        if "train" not in raw:
            raise ValueError(f"{self.describe()}: no 'train' split (found {sorted(raw)})")
        # each row's index in the split as read, so errors name the row of the file, not of a carved split
        raw = datasets.DatasetDict({s: d.add_column(_SOURCE_ROW, list(range(len(d)))) for s, d in raw.items()})
        origin = {split: split for split in raw}
        raw = self._carve(self._drop(raw))
        columns = {self.text_column: "text", self.label_column: "label"}
        if self.text_pair_column:
            columns[self.text_pair_column] = "text_pair"
        for split, data in raw.items():
            missing = [c for c in columns if c not in data.column_names]
            if missing:
                raise ValueError(
                    f"{self.describe()}: split {split!r} has no column(s) {missing}; "
                    f"its columns are {[c for c in data.column_names if c != _SOURCE_ROW]}. "
                    "Set text_column/label_column accordingly."
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
                        f"at data row {min(empty)} of the {origin.get(split, 'train')!r} data as read "
                        "(0-based, header line not counted)"
                    )
        names, mapping = self._label_names(raw)
        out = {}
        for split in SPLITS:
            data = raw[split].select_columns(list(columns)).rename_columns(
                {k: v for k, v in columns.items() if k != v}
            )
            if mapping is not None:
                labels = [mapping.get(str(v), -1) for v in data["label"]]
                data = data.remove_columns("label").add_column("label", labels)
            data = data.add_column("example_id", list(range(len(data))))
            out[split] = data
        loaded = LabelledSplits(datasets.DatasetDict(out), names, mapping)
        validate_splits(loaded, source=self.describe())
        return loaded

    def _carve(self, raw: datasets.DatasetDict) -> datasets.DatasetDict:
        raw = datasets.DatasetDict(dict(raw))
        for split, ratio in (("test", self.test_ratio), ("validation", self.validation_ratio)):
            if split in raw:
                continue
            if len(raw["train"]) < 2:
                raise ValueError(f"{self.describe()}: too few training rows to carve a {split} split")
            parts = raw["train"].train_test_split(test_size=ratio, seed=self.seed, shuffle=True)
            raw["train"], raw[split] = parts["train"], parts["test"]
        return raw

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
        names = list(self.label_names) if self.label_names is not None else strings
        unknown = [v for v in strings if v not in names]
        if unknown:
            raise ValueError(
                f"{self.describe()}: labels {unknown} are not among the expected label_names {names}"
            )
        return names, {name: i for i, name in enumerate(names)}


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

    Raises:
        FileNotFoundError: a named file does not exist.
        ValueError: no file named, or an unknown extension.
    """

    def __init__(
        self,
        path: str | None = None,
        train: str | None = None,
        validation: str | None = None,
        test: str | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if path is None and train is None:
            raise ValueError("dataset=csv needs dataset.source.path (one file) or dataset.source.train")
        if path is not None and train is not None:
            raise ValueError("give either dataset.source.path or per-split files, not both")
        files = {"train": path or train, "validation": validation, "test": test}
        self.files = {k: os.fspath(v) for k, v in files.items() if v is not None}
        self.single_file = path is not None
        for split, file in self.files.items():
            if not Path(file).is_file():
                raise FileNotFoundError(f"{split} file not found: {file}")

    def local_files(self) -> dict[str, str]:
        """``{"path": file}`` for a single file, else ``{split: file}``."""
        return {"path": self.files["train"]} if self.single_file else dict(self.files)

    def describe(self) -> str:
        if self.single_file:
            return f"file {self.files['train']} (its rows are the 'train' data; missing splits are carved from it)"
        return f"files {self.files}"

    def _raw(self) -> datasets.DatasetDict:
        suffixes = {Path(f).suffix.lower() for f in self.files.values()}
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
        loaded = {}
        for split, file in self.files.items():
            try:
                loaded[split] = datasets.load_dataset(builder, data_files={split: file}, split=split, **options)
            except Exception as error:  # datasets raises for an empty file
                if Path(file).stat().st_size == 0 or "corresponds to no data" in str(error):
                    raise ValueError(f"{self.describe()}: split {split!r} is empty ({file})") from error
                raise ValueError(f"{self.describe()}: cannot read {split} file {file}: {error}") from error
        return datasets.DatasetDict(loaded)


_SOURCE_ROW = "__itermask_source_row__"


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
    """Check that every split is non-empty, every text non-empty and every label in ``[0, C)``.

    Raises:
        ValueError: naming the split and the first offending row or label values.
    """
    if loaded.num_labels < 2:
        raise ValueError(f"{source}: a classifier needs at least 2 classes, found {loaded.label_names}")
    for split in SPLITS:
        data = loaded.splits[split]
        if len(data) == 0:
            raise ValueError(f"{source}: split {split!r} is empty")
        for column in ("text", "text_pair"):
            if column not in data.column_names:
                continue
            texts = data[column]
            empty = _empty_rows(texts)
            if empty:
                raise ValueError(
                    f"{source}: split {split!r} has {len(empty)} empty {column!r} value(s), first at row {empty[0]}"
                )
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
