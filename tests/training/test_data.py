"""Data sources, validation errors and the data module."""

import json

import numpy as np
import pandas as pd
import pytest

from itermask.data.datamodule import TextClassificationDataModule
from itermask.data.files import FileSource, shipped_source


def _write(path, rows, columns=("review", "sentiment")):
    pd.DataFrame(rows, columns=list(columns)).to_csv(path, index=False)
    return str(path)


ROWS = [(f"review number {i} is {'good' if i % 3 else 'bad'}", "pos" if i % 3 else "neg") for i in range(40)]


def test_shipped_rt_snippets_splits():
    loaded = shipped_source().load()
    sizes = {split: len(data) for split, data in loaded.splits.items()}
    assert sizes == {"train": 10008, "validation": 1402, "test": 1342}
    assert loaded.label_names == ["negative", "positive"]
    with open(shipped_source().files["train"].rsplit("/", 1)[0] + "/stats.json") as handle:
        stats = json.load(handle)
    assert sum(stats["splits"][s]["rows"] for s in ("train", "validation", "test")) == 12752
    assert loaded.splits["test"]["example_id"][:3] == [0, 1, 2]


def test_csv_with_other_columns_and_string_labels(tmp_path):
    source = FileSource(path=_write(tmp_path / "mine.csv", ROWS), text_column="review", label_column="sentiment")
    loaded = source.load()
    assert loaded.label_names == ["neg", "pos"]
    assert loaded.label_mapping == {"neg": 0, "pos": 1}
    assert sum(len(d) for d in loaded.splits.values()) == 40
    train = loaded.splits["train"]
    assert set(train.column_names) == {"text", "label", "example_id"}
    for text, label in zip(train["text"], train["label"]):
        assert label == (1 if "good" in text else 0)


def test_label_names_order_and_unknown_labels(tmp_path):
    path = _write(tmp_path / "mine.csv", ROWS)
    loaded = FileSource(path=path, text_column="review", label_column="sentiment", label_names=["pos", "neg"]).load()
    assert loaded.label_mapping == {"pos": 0, "neg": 1}
    with pytest.raises(ValueError, match=r"labels \['pos'\] are not among the expected label_names"):
        FileSource(path=path, text_column="review", label_column="sentiment", label_names=["neg", "neutral"]).load()


def test_missing_column_is_named(tmp_path):
    path = _write(tmp_path / "mine.csv", ROWS)
    with pytest.raises(ValueError, match=r"no column\(s\) \['text'\].*review"):
        FileSource(path=path, label_column="sentiment").load()


def test_integer_label_out_of_range(tmp_path):
    rows = [(f"text {i}", i % 2) for i in range(20)] + [("odd one", 5)]
    path = _write(tmp_path / "train.csv", rows, columns=("text", "label"))
    with pytest.raises(ValueError, match=r"label\(s\) \[5\] outside 0..1"):
        FileSource(train=path, label_names=["a", "b"]).load()


def test_empty_split_and_empty_text(tmp_path):
    train = _write(tmp_path / "train.csv", [(f"text {i}", i % 2) for i in range(20)], columns=("text", "label"))
    empty = _write(tmp_path / "test.csv", [], columns=("text", "label"))
    with pytest.raises(ValueError, match="split 'test' is empty"):
        FileSource(train=train, test=empty).load()
    blank = _write(tmp_path / "blank.csv", [("fine", 0), ("  ", 1), ("ok", 1)] * 5, columns=("text", "label"))
    with pytest.raises(ValueError, match="empty 'text' value"):
        FileSource(train=blank).load()


def test_empty_text_error_names_the_row_of_the_file(tmp_path):
    rows = [(f"text {i}", i % 2) for i in range(30)]
    rows[17] = ("   ", 1)
    path = _write(tmp_path / "one.csv", rows, columns=("text", "label"))
    # validation and test are carved out of the shuffled file: the error still names data row 17
    with pytest.raises(ValueError, match=r"1 empty 'text' value\(s\), the first at data row 17 of the 'train' data"):
        FileSource(path=path).load()
    with pytest.raises(ValueError) as info:
        FileSource(path=path, text_column="review").load()
    assert "its columns are ['text', 'label']" in str(info.value)  # no internal columns in the message


def test_missing_file_and_bad_extension(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match=rf"^dataset\.source\.path={tmp_path}/nope\.csv: no such file$"):
        FileSource(path=str(tmp_path / "nope.csv"))
    monkeypatch.chdir(tmp_path)  # a relative path is named with the folder it was looked for in
    with pytest.raises(
        FileNotFoundError, match=rf"^dataset\.source\.test=t\.csv: no such file \(relative to {tmp_path}\)$"
    ):
        FileSource(train=_write(tmp_path / "train.csv", ROWS), test="t.csv")
    (tmp_path / "data.parquet").write_text("x")
    with pytest.raises(ValueError, match="unsupported file type"):
        FileSource(path=str(tmp_path / "data.parquet")).load()
    with pytest.raises(ValueError, match="needs dataset.source.path"):
        FileSource()


def test_jsonl_source(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps({"t": t, "y": y}) for t, y in ROWS))
    loaded = FileSource(path=str(path), text_column="t", label_column="y").load()
    assert loaded.label_names == ["neg", "pos"]


def test_evaluation_subset_is_fixed_and_length_sorted(tokenizer):
    modules = []
    for seed in (0, 1):
        dm = TextClassificationDataModule(shipped_source(), tokenizer, max_length=32, max_train_examples=50, seed=seed)
        dm.setup()
        modules.append(dm)
    subsets = [dm.evaluation_subset(30, subset_seed=0) for dm in modules]
    assert sorted(subsets[0]["example_id"]) == sorted(subsets[1]["example_id"])  # same for every seed
    assert len(subsets[0]) == 30
    lengths = subsets[0]["length"]
    assert lengths == sorted(lengths)
    assert sorted(modules[0].evaluation_subset(30, subset_seed=1)["example_id"]) != sorted(subsets[0]["example_id"])
    assert len(modules[0].tokenized["train"]) == 50
    assert modules[0].tokenized["train"]["example_id"] != modules[1].tokenized["train"]["example_id"]
    batch = next(iter(modules[0].evaluation_dataloader(8)))
    assert batch["tokens"].input_ids.shape[0] == 8 and batch["labels"].shape == (8,)
    with pytest.raises(ValueError, match="n_examples"):
        modules[0].evaluation_subset(0)


def test_integer_classes_that_never_occur_are_refused(tmp_path):
    path = _write(tmp_path / "ones.csv", [(f"text {i}", 1) for i in range(30)], columns=("text", "label"))
    with pytest.raises(ValueError, match=r"never occur in the training split.*integer labels must run 0..C-1"):
        FileSource(path=path).load()


def test_a_string_class_only_in_the_test_file_is_named_without_the_integer_advice(tmp_path):
    train = _write(tmp_path / "train.csv", [(f"text {i}", ["good", "bad"][i % 2]) for i in range(30)])
    test = _write(tmp_path / "test.csv", [(f"test {i}", ["good", "meh"][i % 2]) for i in range(10)])
    with pytest.raises(ValueError) as error:
        FileSource(train=train, test=test, text_column="review", label_column="sentiment").load()
    message = str(error.value)
    assert (
        "class(es) ['meh'] (ids [2]) never occur in the training split, which has ['bad', 'good']; a class" in message
    )
    assert "integer labels" not in message


def test_empty_texts_are_counted_in_every_row_of_the_file_even_those_carved_into_validation_and_test(tmp_path):
    # 300 rows, every 10th text blank (rows 0, 10, ..., 290): the carved validation and test splits get
    # some of them, but the error counts all 30 and names row 0
    rows = [("" if i % 10 == 0 else f"text {i}", i % 2) for i in range(300)]
    path = _write(tmp_path / "blanks.csv", rows, columns=("text", "label"))
    with pytest.raises(ValueError, match=r"split 'train' has 30 empty 'text' value\(s\), the first at data row 0 "):
        FileSource(path=path).load()


def test_an_evaluation_subset_larger_than_the_split_says_so(tokenizer, caplog):
    dm = TextClassificationDataModule(shipped_source(), tokenizer, max_length=32, max_train_examples=50, seed=0)
    dm.setup()
    n = len(dm.tokenized["test"])
    with caplog.at_level("WARNING"):
        assert len(dm.evaluation_subset(n + 100)) == n
        assert len(dm.evaluation_subset(n + 100)) == n  # asked again (resources, then the evaluator): said once
    assert caplog.text.count(f"evaluation.n_examples={n + 100}, but split 'test' has only {n} examples") == 1
    # the OOD analysis's fit subset names its own option (it blamed evaluation.n_examples; new-user review)
    caplog.clear()
    train = len(dm.tokenized["train"])
    with caplog.at_level("WARNING"):
        assert len(dm.evaluation_subset(train + 1, 0, "train", "ood.n_fit_examples")) == train
    assert f"ood.n_fit_examples={train + 1}, but split 'train' has only {train} examples" in caplog.text
    assert "evaluation.n_examples" not in caplog.text


def _split_files(folder, test_texts):
    """Per-split CSV files: train and validation of real words, ``test`` of ``test_texts``."""
    files = {}
    for split, texts in (
        ("train", [f"a good film {i}" if i % 2 else f"a bad film {i}" for i in range(20)]),
        ("validation", ["a good film", "a bad film"] * 3),
        ("test", test_texts),
    ):
        rows = [{"text": t, "label": i % 2} for i, t in enumerate(texts)]
        files[split] = str(folder / f"{split}.csv")
        pd.DataFrame(rows).to_csv(files[split], index=False)
    return FileSource(**files)


def test_an_evaluation_split_without_a_maskable_token_is_refused_before_fine_tuning(tmp_path, tokenizer):
    """Emoji tokenize to [UNK], special tokens written in the text to themselves: nothing to mask."""
    texts = ["\U0001f600\U0001f600", "[CLS] [SEP]", "\U0001f44d", "[UNK] \u2764"]
    dm = TextClassificationDataModule(_split_files(tmp_path, texts), tokenizer, max_length=16, eval_batch_size=3)
    dm.setup()
    with pytest.raises(ValueError) as error:
        dm.check_maskable("test", None, 0)
    message = str(error.value)
    assert message.startswith(
        "no example of the evaluation subset of split 'test' has a maskable token: all 4 tokenize to special "
        "tokens or [UNK] only, which are never masked (e.g. example_id "
    )
    assert "(e.g. example_id 0, '\U0001f600\U0001f600', tokenizes to ['[CLS]', '[UNK]', '[SEP]'])" in message
    assert dm.check_maskable("validation", None, 0) == 6


def test_most_examples_without_a_maskable_token_are_counted_in_a_warning(tmp_path, tokenizer, caplog):
    texts = ["\U0001f600", "\U0001f44d \U0001f44d", "a good film", "\u2764", "[SEP]"]
    dm = TextClassificationDataModule(_split_files(tmp_path, texts), tokenizer, max_length=16)
    dm.setup()
    with caplog.at_level("WARNING"):
        assert dm.check_maskable("test", None, 0) == 1
    assert "4 of 5 examples of the evaluation subset of split 'test' have no maskable token" in caplog.text
    assert "the evaluation skips them and scores the other 1" in caplog.text


def test_half_the_examples_without_a_maskable_token_pass_without_a_warning(tmp_path, tokenizer, caplog):
    texts = ["\U0001f600", "a good film", "\u2764", "a bad film"]
    dm = TextClassificationDataModule(_split_files(tmp_path, texts), tokenizer, max_length=16)
    dm.setup()
    with caplog.at_level("WARNING"):
        assert dm.check_maskable("test", None, 0) == 2
    assert "maskable" not in caplog.text


def test_examples_cut_at_max_length_are_warned_about(tokenizer, caplog):
    # texts of ~10k words were cut to model.max_length with no word (new-user review)
    dm = TextClassificationDataModule(shipped_source(), tokenizer, max_length=8, max_train_examples=50, seed=0)
    with caplog.at_level("WARNING"):
        dm.setup()
    lengths = np.asarray(dm.tokenized["test"]["length"])
    expected = f"model.max_length=8: {int((lengths >= 8).sum())} of the {len(lengths)} test examples reach it"
    assert (lengths >= 8).sum() > 0 and expected in caplog.text
    caplog.clear()
    roomy = TextClassificationDataModule(shipped_source(), tokenizer, max_length=512, max_train_examples=50, seed=0)
    with caplog.at_level("WARNING"):
        roomy.setup()
    assert "reach it and may be cut" not in caplog.text


def _padding_share(loader) -> float:
    """Share of the padded positions of a training loader's batches that are padding."""
    padded = real = 0
    for batch in loader:
        mask = batch["tokens"].attention_mask
        padded += mask.numel()
        real += int(mask.sum())
    return 1 - real / padded


def test_grouped_training_batches_hold_every_example_once_and_little_padding(tokenizer):
    def module(grouped: bool) -> TextClassificationDataModule:
        dm = TextClassificationDataModule(
            shipped_source(), tokenizer, max_length=64, batch_size=8, max_train_examples=400, group_by_length=grouped
        )
        dm.setup()
        return dm

    grouped, shuffled = module(True), module(False)
    ids = [i for batch in grouped.train_dataloader() for i in batch["example_ids"].tolist()]
    assert sorted(ids) == sorted(grouped.tokenized["train"]["example_id"])  # one epoch: every example once
    again = [i for batch in module(True).train_dataloader() for i in batch["example_ids"].tolist()]
    assert again == ids  # seeded
    lengths = dict(zip(grouped.tokenized["train"]["example_id"], grouped.tokenized["train"]["length"]))
    # a mega-batch (min(400 // (8 * 4), 50) = 12 batches of 8) is sorted by length, longest first, but for its
    # first example: transformers swaps the longest example of all to the very front of the epoch
    for start in range(0, len(ids), 96):
        chunk = [lengths[i] for i in ids[start : start + 96]]
        assert chunk[1:] == sorted(chunk[1:], reverse=True)
    assert lengths[ids[0]] == max(lengths.values())
    share_grouped = _padding_share(grouped.train_dataloader())
    share_shuffled = _padding_share(shuffled.train_dataloader())
    assert share_grouped < share_shuffled / 3, (share_grouped, share_shuffled)


def test_a_training_subset_of_one_class_is_refused_and_the_majority_is_the_whole_splits(tokenizer):
    """``train.max_train_examples=2`` with seed 2 draws two examples of class 0 (a new user's review: one example
    fine-tuned without a warning, judged against that one example's class as the "majority"). The subset is
    refused; a subset of both classes keeps the whole training split's labels (5,757 of class 1 in 10,008) for
    the majority-class baseline."""
    with pytest.raises(ValueError, match=r"^train.max_train_examples=2 keeps examples of 1 class only \(seed 2\), of"):
        TextClassificationDataModule(shipped_source(), tokenizer, max_length=32, max_train_examples=2, seed=2).setup()
    dm = TextClassificationDataModule(shipped_source(), tokenizer, max_length=32, max_train_examples=2, seed=5)
    dm.setup()
    assert sorted(dm.splits["train"]["label"]) == [0, 1]
    labels = dm.training_labels()
    assert (len(labels), labels.count(1)) == (10008, 5757)
