"""Local CSV, TSV and JSON-lines files as a data source (:class:`FileSource`), the checks of a file's header and
cells, and the shipped movie-review snippets (:func:`shipped_source`)."""

from __future__ import annotations

import codecs
import csv
import json
import os
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import datasets

from itermask.data.sources import DataSource
from itermask.data.splits import INTEGER, SPLITS, delimiter_hint, kind_examples, value_kind

__all__ = ["DATA_SUFFIXES", "FileSource", "shipped_source"]

#: the file types a :class:`FileSource` reads
DATA_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json")
#: the end of the messages about a file that cannot be decoded
_LATIN1_HINT = (
    "If the file is Latin-1 (ISO-8859-1), set dataset.source.encoding=latin-1 (Windows-1252: cp1252), or save it as "
    "UTF-8"
)


class FileSource(DataSource):
    """Local CSV, TSV or JSON-lines files. String labels are mapped to ids (sorted, or in the order of
    ``label_names``) and the mapping recorded.

    Args:
        path: one file holding every row (split by ``validation_ratio``/``test_ratio``).
        train, validation, test: per-split files instead (``train`` required; the others carved from it when
            absent).
        encoding: the files' text encoding (Python codec name: ``"utf-8"``, ``"latin-1"``, ``"cp1252"``, ...).
        **kwargs: see :class:`DataSource`.

    Raises:
        FileNotFoundError, IsADirectoryError: a named file does not exist, or is a directory.
        ValueError: no file named, or an unknown encoding; when loading (:meth:`load`): an unknown extension,
            a header naming a column twice, or a file that cannot be decoded with ``encoding``."""

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
                where = "" if Path(file).is_absolute() else f" (relative to {Path.cwd()})"
                raise FileNotFoundError(f"{setting}={file}: no such file{where}")

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
        sep = str(options.get("sep", ","))
        loaded = {}
        for split, file in self.files.items():
            self._check_decodable(file)
            if duplicated := _duplicated_columns(file, sep, self.encoding):
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
                if mixed := _mixed_columns(file, sep, self.encoding):
                    raise ValueError(
                        f"{file}: {'; '.join(mixed)}. Give each column one kind of value (labels all class ids or "
                        "all class names)"
                    ) from error
                cause = f"{error}: {error.__cause__}" if error.__cause__ is not None else str(error)
                # a tab-separated file named .csv whose texts hold commas fails to parse (rather than reading as
                # one column, which the source's column check explains): say so from its header
                hint = delimiter_hint(_header_names(file, sep, self.encoding))
                raise ValueError(
                    f"{self.describe()}: cannot read {split} file {file}: {cause}" + (f" {hint}" if hint else "")
                ) from error
        return datasets.DatasetDict(loaded)

    def _check_decodable(self, file: str) -> None:
        """Decode ``file`` with :attr:`encoding` in 1 MiB blocks.

        Raises:
            ValueError: naming the file, the byte offset and line of the first undecodable byte, and the
                setting that reads a Latin-1 file; or naming the UTF-16/32 byte-order mark a file starts with
                when :attr:`encoding` is not that codec (Latin-1 would decode it into garbled column names)."""
        with open(file, "rb") as handle:
            start = handle.read(4)
        codec = codecs.lookup(self.encoding).name
        for name, mark in (("utf-32", codecs.BOM_UTF32_LE), ("utf-32", codecs.BOM_UTF32_BE), ("utf-16", b"\xff\xfe"),
                           ("utf-16", b"\xfe\xff")):  # fmt: skip
            if start.startswith(mark) and not codec.startswith(name):
                raise ValueError(
                    f"{file} starts with a {name.upper()} byte-order mark ({mark.hex(' ')}), so it is {name.upper()} "
                    f"text: set dataset.source.encoding={name}, or save it as UTF-8"
                )
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
                        f"{line}) are not valid {self.encoding} ({error.reason}). {_LATIN1_HINT}"
                    ) from None
                offset += len(block)
                lines += block.count(b"\n")
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"{file} cannot be read as {self.encoding}: it ends inside a character ({error.reason}) at byte "
                    f"offset {offset - (len(error.object) - error.start)}. {_LATIN1_HINT}"
                ) from None


def _directory_message(setting: str, folder: str, single_file: bool) -> str:
    """Why a directory cannot be a data file, with the data files it holds as the settings to give them."""
    data = sorted(p.name for p in Path(folder).iterdir() if p.is_file() and p.suffix.lower() in DATA_SUFFIXES)
    message = f"{setting}={folder} is a directory; it must name a data file (.csv, .tsv or .jsonl)"
    splits = sorted(
        (name for name in data if Path(name).stem in SPLITS), key=lambda name: SPLITS.index(Path(name).stem)
    )
    if splits and any(Path(name).stem == "train" for name in splits):
        given = " ".join(f"dataset.source.{Path(name).stem}={Path(folder) / name}" for name in splits)
        given += " dataset.source.path=null" if single_file else ""
        return f"{message}; it holds {splits}: give them as {given}"
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
    """Column names given more than once in a CSV/TSV header (blank names not counted), or in one row of a
    JSON-lines file; empty when there are none or the file cannot be read line by line."""
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
    return {name for name, count in Counter(names).items() if count > 1}


def _cell_kind(value) -> str:
    """The kind of a cell of a file as read by Python (:func:`_mixed_columns`): a CSV cell is text, named
    ``integer`` or ``number`` when it is written as one."""
    if not isinstance(value, str):
        return value_kind(value, label=False)
    try:
        float(value)
    except ValueError:
        return "text"
    return "integer" if INTEGER.fullmatch(value.strip()) else "number"


def _mixed_columns(file: str, sep: str = ",", encoding: str = "utf-8") -> list[str]:
    """Columns of a CSV/TSV or JSON-lines file whose cells hold more than one kind of value, each named with its
    first example of each kind; empty when there is none or the file cannot be read line by line."""
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
        f"column {column!r} mixes kinds of values: {kind_examples(found)}"
        for column, found in kinds.items()
        if len(found) > 1
    ]


def shipped_source(name: str = "rt_snippets") -> FileSource:
    """The dataset shipped with itermask (``itermask/resources/<name>``), with its fixed splits: ``rt_snippets``,
    Rotten Tomatoes review snippets (Pang & Lee), labels ``negative``/``positive`` (provenance and licence in
    ``itermask/resources/rt_snippets/README.md``).

    Raises:
        ValueError: for an unknown name."""
    root = resources.files("itermask") / "resources" / name
    if not root.is_dir():
        shipped = sorted(
            p.name for p in (resources.files("itermask") / "resources").iterdir() if (p / "train.csv").is_file()
        )
        raise ValueError(f"name must be a dataset shipped with itermask ({', '.join(shipped)}), got {name!r}")
    return FileSource(
        train=str(root / "train.csv"),
        validation=str(root / "validation.csv"),
        test=str(root / "test.csv"),
        label_names=["negative", "positive"],
    )
