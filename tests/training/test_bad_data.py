"""Bad data files: missing labels, non-text texts and columns mixing kinds of values are refused with a
message naming the file, the column and the rows, or repaired with a logged note when a documented switch
(dataset.source.drop_missing_labels, dataset.source.convert_texts) says so; never a class of their own."""

import json
import logging

import pandas as pd
import pytest

from itermask.data.files import FileSource


def _csv(path, labels, texts=None):
    texts = (
        texts
        if texts is not None
        else [f"review number {i} is {'good' if i % 2 else 'bad'}" for i in range(len(labels))]
    )
    path.write_text("text,label\n" + "".join(f"{t},{label}\n" for t, label in zip(texts, labels)))
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


VARIANTS = ["pos", "pos ", "Pos", "neg", " neg", "NEG"]


def _variant_csv(path):
    """60 rows whose labels are the 6 spellings of two classes (the label cell written as is, unquoted)."""
    return _csv(path, [VARIANTS[i % 6] for i in range(60)])


@pytest.mark.parametrize(
    "columns, message",
    [
        (
            {"text_column": "label"},
            "dataset.source.text_column and dataset.source.label_column both name the column 'label'",
        ),
        (
            {"label_column": "text"},
            "dataset.source.text_column and dataset.source.label_column both name the column 'text'",
        ),
        ({"text_pair_column": "text"}, "dataset.source.text_column and dataset.source.text_pair_column both name"),
    ],
)
def test_one_column_for_two_roles_is_refused_before_reading(columns, message):
    # a new user's text_column=label gave datasets' raw IndexError after reading the file
    with pytest.raises(ValueError, match=message):
        FileSource(path="never-read.csv", **columns)


def test_labels_differing_only_in_case_or_whitespace_are_an_error_naming_them(tmp_path):
    with pytest.raises(ValueError) as error:
        FileSource(path=_variant_csv(tmp_path / "d.csv")).load()
    message = str(error.value)
    assert (
        "labels that differ only in case or surrounding whitespace would be separate classes (6 classes instead of "
        "2): [' neg', 'NEG', 'neg']; ['Pos', 'pos', 'pos ']" in message
    )
    assert "dataset.source.merge_label_variants=true" in message and "named ['neg', 'pos']" in message


def test_label_variants_are_merged_when_asked(tmp_path, caplog):
    path = _variant_csv(tmp_path / "d.csv")
    with caplog.at_level(logging.WARNING):
        loaded = FileSource(path=path, merge_label_variants=True).load()
    assert loaded.label_names == ["neg", "pos"]
    assert loaded.label_mapping == {" neg": 0, "NEG": 0, "neg": 0, "Pos": 1, "pos": 1, "pos ": 1}
    texts = pd.read_csv(path, keep_default_na=False)
    expected = {t: int(lab.strip().casefold() == "pos") for t, lab in zip(texts["text"], texts["label"])}
    for split in loaded.splits.values():
        assert [expected[t] for t in split["text"]] == split["label"]
    assert "[' neg', 'NEG', 'neg'] -> 'neg'; ['Pos', 'pos', 'pos '] -> 'pos'" in caplog.text


def test_label_variants_of_label_names_are_an_error_or_take_their_class(tmp_path):
    path = _variant_csv(tmp_path / "d.csv")
    with pytest.raises(ValueError, match=r"labels \[' neg', 'NEG', 'Pos', 'pos '\] differ from label_names"):
        FileSource(path=path, label_names=["pos", "neg"]).load()
    loaded = FileSource(path=path, label_names=["pos", "neg"], merge_label_variants=True).load()
    assert loaded.label_names == ["pos", "neg"]
    assert loaded.label_mapping == {"pos": 0, "neg": 1, " neg": 1, "NEG": 1, "Pos": 0, "pos ": 0}


def test_merging_label_variants_changes_nothing_without_variants(tmp_path):
    """The switch only repairs data that fail without it (a REPAIR_SWITCH, out of the keys): labels with no
    variant load the same either way, kept as written (``Neutral`` stays capitalised)."""
    from itermask.storage.keys import REPAIR_SWITCHES

    path = _csv(tmp_path / "d.csv", [["neg", "Neutral", "pos "][i % 3] for i in range(60)])
    off, on = FileSource(path=path).load(), FileSource(path=path, merge_label_variants=True).load()
    assert off.label_names == on.label_names == ["Neutral", "neg", "pos "]
    assert off.label_mapping == on.label_mapping
    assert all(off.splits[s]["label"] == on.splits[s]["label"] for s in off.splits)
    assert "merge_label_variants" in REPAIR_SWITCHES


@pytest.mark.parametrize(
    ("header", "suffix", "duplicated"),
    [("text,text,label", ".csv", "['text']"), ("text\tlabel\tlabel", ".tsv", "['label']")],
)
def test_a_header_naming_a_column_twice_is_refused(tmp_path, header, suffix, duplicated):
    sep = "\t" if suffix == ".tsv" else ","
    path = tmp_path / f"d{suffix}"
    path.write_text(header + "\n" + "".join(sep.join([f"a {i}", f"b {i}", str(i % 2)]) + "\n" for i in range(30)))
    with pytest.raises(ValueError) as error:
        FileSource(path=str(path)).load()
    assert str(error.value) == (
        f"{path}: the header names column(s) {duplicated} more than once, so which of them is meant is ambiguous "
        "(the first would be read, the others renamed); give every column a distinct name"
    )


def test_a_jsonl_row_naming_a_key_twice_is_refused(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"text": "a {i}", "text": "b {i}", "label": {i % 2}}}\n' for i in range(30)))
    with pytest.raises(ValueError, match=r"d.jsonl: the header names column\(s\) \['text'\] more than once"):
        FileSource(path=str(path)).load()


def test_blank_header_names_are_not_duplicates(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(",text,label,\n" + "".join(f"{i},t {i},{i % 2},\n" for i in range(30)))
    assert FileSource(path=str(path)).load().num_labels == 2


def test_a_data_path_that_is_a_directory_says_so_and_names_its_data_files(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    for name in ("test.csv", "train.csv", "notes.txt"):
        (folder / name).write_text("text,label\n")
    with pytest.raises(IsADirectoryError) as error:
        FileSource(path=str(folder))
    assert str(error.value) == (
        f"dataset.source.path={folder} is a directory; it must name a data file (.csv, .tsv or .jsonl); it holds "
        f"['train.csv', 'test.csv']: give them as dataset.source.train={folder}/train.csv "
        f"dataset.source.test={folder}/test.csv dataset.source.path=null"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(IsADirectoryError, match=r"^dataset.source.validation=.*empty is a directory; .*holds no such"):
        FileSource(train=str(folder / "train.csv"), validation=str(empty))


def test_a_latin_1_file_is_an_error_naming_offset_and_setting_and_reads_with_the_encoding(tmp_path):
    path = tmp_path / "d.csv"
    texts = [f"caf\u00e9 number {i} is nice" if i == 3 else f"plain {i}" for i in range(30)]
    path.write_bytes(("text,label\n" + "".join(f"{t},{i % 2}\n" for i, t in enumerate(texts))).encode("latin-1"))
    offset = path.read_bytes().index(b"\xe9")
    with pytest.raises(ValueError) as error:
        FileSource(path=str(path)).load()
    assert str(error.value) == (
        f"{path} cannot be read as utf-8: byte(s) e9 at byte offset {offset} (line 5) are not valid utf-8 (invalid "
        "continuation byte). If the file is Latin-1 (ISO-8859-1), set dataset.source.encoding=latin-1 "
        "(Windows-1252: cp1252), or save it as UTF-8"
    )
    loaded = FileSource(path=str(path), encoding="latin-1").load()
    assert "caf\u00e9 number 3 is nice" in [t for s in loaded.splits.values() for t in s["text"]]
    with pytest.raises(ValueError, match=r"dataset.source.encoding='latin-9x' is not a text encoding"):
        FileSource(path=str(path), encoding="latin-9x")


def test_a_utf_16_file_is_named_by_its_byte_order_mark_and_reads_with_that_encoding(tmp_path):
    """A UTF-16 file (as Excel's "Unicode text" writes it) is not advised to be Latin-1, under which its byte-order
    mark and NUL bytes decode into garbled column names."""
    path = tmp_path / "d.csv"
    path.write_bytes(("text,label\n" + "".join(f"t\u00e9xt {i},{i % 2}\n" for i in range(30))).encode("utf-16"))
    message = f"{path} starts with a UTF-16 byte-order mark (ff fe), so it is UTF-16 text: set "
    for encoding in ("utf-8", "latin-1"):
        with pytest.raises(ValueError) as error:
            FileSource(path=str(path), encoding=encoding).load()
        assert str(error.value) == message + "dataset.source.encoding=utf-16, or save it as UTF-8"
    loaded = FileSource(path=str(path), encoding="utf-16").load()
    assert sorted(t for s in loaded.splits.values() for t in s["text"]) == sorted(f"t\u00e9xt {i}" for i in range(30))


def test_an_undecodable_byte_after_the_first_block_has_its_file_offset(tmp_path):
    """The file is decoded in 1 MiB blocks: the offset counts from the start of the file, not of the block,
    also when a UTF-8 character spans two blocks."""
    path = tmp_path / "d.csv"
    head = "text,label\n" + "".join(f"r\u00e9view {i:07d},{i % 2}\n" for i in range(60000))
    data = head.encode("utf-8") + b"bad \xff,0\n"
    path.write_bytes(data)
    assert len(data) > 1 << 20
    offset = data.index(b"\xff")
    with pytest.raises(ValueError, match=rf"byte\(s\) ff at byte offset {offset} \(line 60002\)"):
        FileSource(path=str(path)).load()


def test_the_new_source_settings_keep_the_keys_of_csv_jobs_at_their_defaults():
    """``merge_label_variants`` (a repair switch) and ``encoding`` at ``utf-8`` leave the checkpoint and result
    keys of a CSV job as they were before the settings existed."""
    from pathlib import Path

    from conftest import training_key_of as training_key
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    from itermask.data.files import shipped_source
    from itermask.storage.store import results_key

    root = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(root), version_base="1.3"):
        cfg = compose(
            config_name="evaluate",
            overrides=[
                "output_dir=/tmp/unused",
                "dataset=csv",
                f"dataset.source.path={shipped_source().files['test']}",
            ],
        )
    before = cfg.copy()
    with open_dict(before):
        del before.dataset.source["merge_label_variants"], before.dataset.source["encoding"]
    assert training_key(cfg)[0] == training_key(before)[0]
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert results_key(resolved) == results_key(OmegaConf.to_container(before, resolve=True))


@pytest.mark.parametrize(
    ("separator", "advice"),
    [("\t", "looks tab-separated ('text\\tlabel'): name it .tsv"), (";", "looks semicolon-separated")],
)
def test_a_file_with_another_delimiter_named_csv_gets_the_delimiter_advice(tmp_path, separator, advice):
    file = tmp_path / "data.csv"
    file.write_text(f"text{separator}label\n" + "".join(f"film {i}{separator}{i % 2}\n" for i in range(6)))
    with pytest.raises(ValueError) as error:
        FileSource(path=str(file)).load()
    assert "has no column(s) ['text', 'label']" in str(error.value)
    assert advice in str(error.value) and "Set text_column" not in str(error.value)


@pytest.mark.parametrize("varying", [False, True])
def test_a_tab_separated_file_named_csv_whose_texts_hold_commas_gets_the_delimiter_advice(tmp_path, varying):
    """Commas in the texts make pandas read extra index columns (as many in every row) or fail to parse the
    rows (a varying number): the delimiter advice comes either way."""
    file = tmp_path / "reviews.csv"
    commas = [", fine" * ((i % 3) if varying else 1) for i in range(40)]
    file.write_text("text\tlabel\n" + "".join(f"a film{c}\t{i % 2}\n" for i, c in enumerate(commas)))
    with pytest.raises(ValueError) as error:
        FileSource(path=str(file)).load()
    assert "looks tab-separated ('text\\tlabel'): name it .tsv" in str(error.value)


def test_a_missing_column_in_a_comma_separated_file_keeps_the_column_advice(tmp_path):
    file = tmp_path / "data.csv"
    file.write_text("review,label\n" + "".join(f"film {i},{i % 2}\n" for i in range(6)))
    with pytest.raises(
        ValueError,
        match=r"its columns are \['review', 'label'\]\. Name its columns on the command line: "
        r"dataset\.source\.text_column=<column> dataset\.source\.label_column=<column>",
    ):
        FileSource(path=str(file)).load()


def test_a_file_too_small_to_carve_splits_from_says_so(tmp_path):
    file = tmp_path / "three.csv"
    file.write_text("text,label\nGood film,1\nBad film,0\nOk film,1\n")
    with pytest.raises(ValueError) as error:
        FileSource(path=str(file)).load()
    message = str(error.value)
    # seed 0 carves test, then validation, off the 3 rows: 1 row is left, of class 0
    assert "too small to carve test and validation split(s) from: its 3 training rows leave 1" in message
    assert "no example of class(es) ['1']" in message and "never occur" not in message


def test_swapped_text_and_label_columns_are_named_before_any_carving(tmp_path):
    file = tmp_path / "data.csv"
    labels = ["negative", "positive"]
    file.write_text("review,sentiment\n" + "".join(f"review number {i},{labels[i % 2]}\n" for i in range(120)))
    source = FileSource(path=str(file), text_column="sentiment", label_column="review")
    with pytest.raises(ValueError) as error:
        source.load()
    message = str(error.value)
    assert "the label column 'review' has 120 distinct values in the 120 rows of split 'train'" in message
    assert "swap them if so" in message and len(message) < 400
    # the right way round loads (2 classes)
    assert FileSource(path=str(file), text_column="review", label_column="sentiment").load().num_labels == 2
