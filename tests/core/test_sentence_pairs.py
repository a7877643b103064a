"""Sentence pairs: token type ids reach the model, segment membership (from the fast tokenizer's
``sequence_ids()``) rides along in ``TokenBatch.segment_ids`` and restricts masking to the chosen
segment(s), for a BERT WordPiece tokenizer and a RoBERTa byte-level BPE one (no token type ids), both
built locally; the hub pair configs (RTE, SNLI) on a stand-in for the hub."""

from pathlib import Path

import datasets
import hydra
import pandas as pd
import pytest
import torch
from conftest import Recorder
from hydra import compose, initialize_config_dir
from reference_forwards import StepMajorEvaluator
from tokenizers import ByteLevelBPETokenizer
from transformers import RobertaConfig, RobertaForSequenceClassification, RobertaTokenizer

from itermask.core.masking import Delete, MaskToken
from itermask.core.saliency import InputXGradientSaliency, RandomSaliency
from itermask.core.tokens import maskable_positions
from itermask.data.datamodule import TextClassificationDataModule
from itermask.data.files import FileSource, shipped_source

ROOT = Path(__file__).resolve().parents[2]
PAIRS = [("a good film", "not bad at all", 1), ("the story is funny", "great", 0), ("a movie", "not good", 1)]


@pytest.fixture(scope="module")
def bpe_tokenizer(tmp_path_factory):
    """A RoBERTa tokenizer (pad id 1, <mask>, no token type ids) on a byte-level BPE trained on the
    shipped text."""
    texts = pd.read_csv(shipped_source().files["train"], keep_default_na=False)["text"].tolist()[:3000]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        texts,
        vocab_size=600,
        min_frequency=2,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        show_progress=False,
    )
    folder = tmp_path_factory.mktemp("bpe")
    bpe.save_model(str(folder))
    tok = RobertaTokenizer(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"))
    assert tok.pad_token_id == 1 and "token_type_ids" not in tok.model_input_names
    return tok


def _pair_batch(tokenizer, tmp_path):
    """The test split of a CSV with a second text column, through the data module and its collator."""
    frame = pd.DataFrame(PAIRS, columns=["premise", "hypothesis", "label"])
    for split in ("train", "validation", "test"):
        frame.to_csv(tmp_path / f"{split}.csv", index=False)
    source = FileSource(
        train=str(tmp_path / "train.csv"),
        validation=str(tmp_path / "validation.csv"),
        test=str(tmp_path / "test.csv"),
        text_column="premise",
        text_pair_column="hypothesis",
    )
    module = TextClassificationDataModule(source, tokenizer, max_length=32, eval_batch_size=8)
    module.setup()
    data = module.tokenized["test"]
    return module.collator([data[i] for i in range(len(data))])["tokens"]


def test_bert_pair_batch_carries_token_types_and_segments(tokenizer, tmp_path):
    batch = _pair_batch(tokenizer, tmp_path)
    # [CLS] a good film [SEP] not bad at all [SEP]
    assert tokenizer.convert_ids_to_tokens(batch.input_ids[0, :10].tolist()) == [
        "[CLS]",
        "a",
        "good",
        "film",
        "[SEP]",
        "not",
        "bad",
        "at",
        "all",
        "[SEP]",
    ]
    assert batch.token_type_ids[0, :10].tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    assert batch.segment_ids[0].tolist() == [-1, 0, 0, 0, -1, 1, 1, 1, 1, -1]
    # the third pair is shorter: padding gets -1 and token type 0
    assert batch.segment_ids[2].tolist() == [-1, 0, 0, -1, 1, 1, -1, -1, -1, -1]
    assert "segment_ids" not in batch.model_inputs() and "token_type_ids" in batch.model_inputs()
    special = tokenizer.all_special_ids
    assert maskable_positions(batch, special, [0])[0].nonzero().flatten().tolist() == [1, 2, 3]
    assert maskable_positions(batch, special, 1)[0].nonzero().flatten().tolist() == [5, 6, 7, 8]
    assert maskable_positions(batch, special, [0, 1])[0].nonzero().flatten().tolist() == [1, 2, 3, 5, 6, 7, 8]
    assert torch.equal(maskable_positions(batch, special, [0, 1]), maskable_positions(batch, special))


def test_roberta_pair_batch_has_segments_without_token_types(bpe_tokenizer, tmp_path):
    batch = _pair_batch(bpe_tokenizer, tmp_path)
    assert batch.token_type_ids is None and set(batch.model_inputs()) == {"input_ids", "attention_mask"}
    for row, (text, pair, _) in enumerate(PAIRS):
        first, second = (len(bpe_tokenizer(t, add_special_tokens=False)["input_ids"]) for t in (text, pair))
        # <s> A </s></s> B </s>, then padding
        expected = [-1] + [0] * first + [-1, -1] + [1] * second + [-1]
        assert batch.segment_ids[row].tolist() == expected + [-1] * (batch.input_ids.shape[1] - len(expected))
        assert maskable_positions(batch, bpe_tokenizer.all_special_ids, [1])[row].sum() == second
    stripped = batch.map(lambda t: t)
    stripped.segment_ids = None
    with pytest.raises(ValueError, match="segment membership"):
        maskable_positions(stripped, bpe_tokenizer.all_special_ids, [1])


def test_bert_masks_only_the_chosen_segment(tokenizer, tiny_bert, tmp_path):
    batch = _pair_batch(tokenizer, tmp_path)
    model = Recorder(tiny_bert)
    evaluator = StepMajorEvaluator(  # the rows below are read in step-major order (test_forwards: the default)
        InputXGradientSaliency(),
        MaskToken(tokenizer),
        [0.0, 0.5, 1.0],
        tokenizer.all_special_ids,
        segments=[1],
    )
    curves = evaluator.evaluate(model, batch)
    assert curves["one_shot"].n_maskable.tolist() == [4, 1, 2]
    full_masks = 0
    for call in model.calls:
        assert set(call) == {"input_ids", "attention_mask", "token_type_ids"}
        length, rows = call["input_ids"].shape[1], call["input_ids"].shape[0]
        if rows % len(batch):
            continue  # recursive saliency on a subset of the examples
        clean = batch.tile(rows // len(batch)).map(lambda t, length=length: t[:, :length])
        assert torch.equal(call["token_type_ids"], clean.token_type_ids)
        unchanged = clean.segment_ids != 1
        # segment 0 and the special tokens are never masked, whatever the step or direction
        assert torch.equal(call["input_ids"][unchanged], clean.input_ids[unchanged])
        masked = call["input_ids"] == tokenizer.mask_token_id
        full_masks += int((masked == (clean.segment_ids == 1)).all(dim=1).sum())
    assert full_masks >= 2 * len(batch)  # fraction 1.0 masks the whole second text (both schedules)


def test_roberta_delete_within_the_first_segment(bpe_tokenizer, tmp_path):
    batch = _pair_batch(bpe_tokenizer, tmp_path)
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=len(bpe_tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=66,
        type_vocab_size=1,
        num_labels=2,
        pad_token_id=bpe_tokenizer.pad_token_id,
    )
    model = Recorder(RobertaForSequenceClassification(config).eval())
    evaluator = StepMajorEvaluator(  # the last call read in step-major order
        RandomSaliency(seed=0),
        Delete(bpe_tokenizer),
        [0.0, 0.5, 1.0],
        bpe_tokenizer.all_special_ids,
        segments=[0],
        sufficiency=False,
    )
    curves = evaluator.evaluate(model, batch)
    assert curves["recursive"].k[:, -1].tolist() == curves["recursive"].n_maskable.tolist()
    last = model.calls[-1]  # the masked forwards of the recursive schedule, step-major
    assert set(last) == {"input_ids", "attention_mask"}  # no token type ids, never segment ids
    final = last["input_ids"][-len(batch) :]  # fraction 1.0: the first text deleted, the second intact
    for row, (_, pair, _) in enumerate(PAIRS):
        second = bpe_tokenizer(pair, add_special_tokens=False)["input_ids"]
        length = int(last["attention_mask"][-len(batch) + row].sum())
        assert final[row, :length].tolist() == [0, 2, 2, *second, 2]


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="evaluate", overrides=["output_dir=/tmp/unused", *overrides])


def _fake_hub(monkeypatch, splits: dict, names: list[str], text: str, pair: str):
    features = datasets.Features(
        {text: datasets.Value("string"), pair: datasets.Value("string"), "label": datasets.ClassLabel(names=names)}
    )
    fake = datasets.DatasetDict(
        {
            split: datasets.Dataset.from_dict(
                {
                    text: [f"{split} premise {i}" for i in range(len(labels))],
                    pair: [f"{split} hypothesis {i}" for i in range(len(labels))],
                    "label": labels,
                },
                features=features,
            )
            for split, labels in splits.items()
        }
    )
    calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda path, name=None, **kw: calls.append((path, name)) or fake)
    return calls


def test_snli_config_drops_pairs_without_gold_label(monkeypatch):
    calls = _fake_hub(
        monkeypatch,
        {"train": [0, -1, 1, 2, 0, -1], "validation": [2, -1, 1], "test": [-1, 0, 1, 2]},
        ["entailment", "neutral", "contradiction"],
        "premise",
        "hypothesis",
    )
    loaded = hydra.utils.instantiate(_compose("dataset=snli").dataset.source).load()
    assert calls == [("stanfordnlp/snli", None)]
    assert loaded.label_names == ["entailment", "neutral", "contradiction"]
    assert {s: loaded.splits[s]["label"] for s in loaded.splits} == {
        "train": [0, 1, 2, 0],
        "validation": [2, 1],
        "test": [0, 1, 2],
    }
    assert loaded.splits["test"]["text_pair"] == ["test hypothesis 1", "test hypothesis 2", "test hypothesis 3"]


def test_rte_config_uses_validation_as_test(monkeypatch):
    calls = _fake_hub(
        monkeypatch,
        {"train": [0, 1] * 10, "validation": [1, 0, 1], "test": [-1, -1]},
        ["entailment", "not_entailment"],
        "sentence1",
        "sentence2",
    )
    loaded = hydra.utils.instantiate(_compose("dataset=rte").dataset.source).load()
    assert calls == [("nyu-mll/glue", "rte")]
    assert loaded.splits["test"]["label"] == [1, 0, 1]  # GLUE's test labels are hidden (-1)
    assert len(loaded.splits["train"]) == 18 and len(loaded.splits["validation"]) == 2  # 10 % carved
    assert loaded.splits["test"]["text"][0] == "validation premise 0"
    assert loaded.splits["test"]["text_pair"][0] == "validation hypothesis 0"
