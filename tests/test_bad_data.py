"""Bad data files: missing labels, non-text texts and columns mixing kinds of values are refused with a
message naming the file, the column and the rows, or repaired with a logged note when a documented switch
(dataset.source.drop_missing_labels, dataset.source.convert_texts) says so; never a class of their own."""

import json
import logging

import pandas as pd
import pytest

from itermask.training.sources import FileSource


def _csv(path, labels, texts=None):
    texts = (
        texts
        if texts is not None
        else [f"review number {i} is {'good' if i % 2 else 'bad'}" for i in range(len(labels))]
    )
    path.write_text("text,label\n" + "".join(f"{t},{l}\n" for t, l in zip(texts, labels)))
    return str(path)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


LABELS = ["pos" if i % 2 else "neg" for i in range(40)]


@pytest.mark.parametrize("missing", ["", "NaN", "nan", "NA", "null"])
def test_missing_labels_are_an_error_naming_file_column_and_rows(tmp_path, missing):
    labels = list(LABELS)
    labels[3] = labels[17] = missing
    path = _csv(tmp_path / "d.csv", labels)
    with pytest.raises(ValueError) as error:
        FileSource(path=path).load()
    message = str(error.value)
    assert message.startswith(f"{path}: column 'label' has 2 missing or blank label(s), at data row(s) 3, 17 ")
    assert "dataset.source.drop_missing_labels=true" in message


def test_missing_labels_are_dropped_with_a_logged_count_when_asked(tmp_path, caplog):
    labels = list(LABELS)
    labels[3] = labels[17] = labels[20] = ""
    path = _csv(tmp_path / "d.csv", labels)
    with caplog.at_level(logging.WARNING):
        loaded = FileSource(path=path, drop_missing_labels=True).load()
    assert loaded.label_names == ["neg", "pos"]  # two classes, not three
    assert sum(len(split) for split in loaded.splits.values()) == 37
    assert "dropped 3 row(s) whose label (column 'label') is missing or blank" in caplog.text
    assert "data row(s) 3, 17, 20" in caplog.text


def test_a_label_name_that_looks_missing_is_kept_when_label_names_name_it(tmp_path):
    labels = ["NA" if i % 2 else "EU" for i in range(40)]  # North America / Europe
    loaded = FileSource(path=_csv(tmp_path / "d.csv", labels), label_names=["EU", "NA"]).load()
    assert loaded.label_names == ["EU", "NA"] and sum(loaded.splits["train"]["label"]) > 0


def test_null_labels_in_jsonl(tmp_path):
    rows = [{"text": f"t {i}", "label": None if i == 5 else i % 2} for i in range(40)]
    with pytest.raises(
        ValueError, match=r"d.jsonl: column 'label' has 1 missing or blank label\(s\), at data row\(s\) 5 "
    ):
        FileSource(path=_jsonl(tmp_path / "d.jsonl", rows)).load()


def test_numbers_in_a_text_column_are_an_error_or_converted_with_a_note(tmp_path, caplog):
    path = _csv(tmp_path / "d.csv", LABELS, texts=[str(1000 + i) for i in range(40)])
    with pytest.raises(
        ValueError,
        match=r"text column 'text' holds no text, only integer \(e.g. 1000 at data row 0\), "
        r"at data row\(s\) 0, 1, 2, 3, 4 and 35 more .*convert_texts=true",
    ):
        FileSource(path=path).load()
    with caplog.at_level(logging.WARNING):
        loaded = FileSource(path=path, convert_texts=True).load()
    assert "read 40 number(s) in text column 'text' as text" in caplog.text
    texts = [t for split in loaded.splits.values() for t in split["text"]]
    assert sorted(texts) == [str(1000 + i) for i in range(40)]


def test_a_jsonl_column_mixing_kinds_of_values_names_an_example_of_each(tmp_path):
    rows = [{"text": f"t {i}", "label": "positive" if i == 7 else i % 2} for i in range(40)]
    with pytest.raises(
        ValueError,
        match=r"column 'label' mixes kinds of labels: integer \(e.g. 0 at data row 0\) "
        r"and text \(e.g. 'positive' at data row 7\)",
    ):
        FileSource(path=_jsonl(tmp_path / "d.jsonl", rows)).load()
    rows = [{"text": 12345 if i == 11 else f"t {i}", "label": i % 2} for i in range(40)]
    with pytest.raises(
        ValueError,
        match=r"text column 'text' mixes kinds of values: text \(e.g. 't 0' at data row 0\) "
        r"and integer \(e.g. 12345 at data row 11\), at data row\(s\) 11 ",
    ):
        FileSource(path=_jsonl(tmp_path / "d.jsonl", rows)).load()


def test_a_csv_column_whose_kind_changes_after_the_first_block_is_named(tmp_path):
    """Arrow types a CSV column from its first 10,000 rows; a label column that turns to words later fails
    inside datasets, and the message names the column and an example of each kind instead."""
    frame = pd.DataFrame({"text": [f"t {i}" for i in range(10050)], "label": [i % 2 for i in range(10050)]})
    frame = frame.astype({"label": object})
    frame.loc[10020:, "label"] = "positive"
    frame.to_csv(tmp_path / "big.csv", index=False)
    with pytest.raises(
        ValueError,
        match=r"big.csv: column 'label' mixes kinds of values: integer \(e.g. '0' at data row 0\) "
        r"and text \(e.g. 'positive' at data row 10020\)",
    ):
        FileSource(path=str(tmp_path / "big.csv")).load()


def test_integer_labels_written_as_text_are_integers(tmp_path):
    """Labels 0..10 given as strings (or left as strings after dropping blank ones) keep their numeric order."""
    rows = [{"text": f"t {i}", "label": str(i % 11)} for i in range(110)]
    loaded = FileSource(path=_jsonl(tmp_path / "d.jsonl", rows)).load()
    assert loaded.label_names == [str(i) for i in range(11)] and loaded.label_mapping is None
    train = loaded.splits["train"]
    assert all(label == int(text.split()[1]) % 11 for text, label in zip(train["text"], train["label"]))


@pytest.mark.parametrize("ratio", [0, 1, 1.5, -0.1])
def test_validation_and_test_shares_must_lie_between_0_and_1(tmp_path, ratio):
    path = _csv(tmp_path / "d.csv", LABELS)
    with pytest.raises(ValueError, match=rf"dataset.source.validation_ratio must be a number in \(0, 1\), got {ratio}"):
        FileSource(path=path, validation_ratio=ratio)
    with pytest.raises(ValueError, match=rf"dataset.source.test_ratio must be a number in \(0, 1\), got {ratio}"):
        FileSource(path=path, test_ratio=ratio)
