"""A local ``model.pretrained`` folder that is empty or holds no model (or no tokenizer) is refused before
``transformers`` loads it, with a message naming the folder and what it should hold."""

import re

import pytest
from conftest import tiny_mlm_config
from transformers import BertForSequenceClassification

from itermask.models.loading import load_classifier, load_model_config, load_tokenizer

SHOULD_HOLD = (
    "it should hold the save_pretrained() output of a model and its tokenizer: config.json, the weights "
    "(model.safetensors or pytorch_model.bin) and the tokenizer's files"
)


def test_an_empty_model_folder_is_named_with_what_it_should_hold(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    with pytest.raises(FileNotFoundError) as error:
        load_tokenizer(str(folder))
    assert str(error.value).startswith(
        f"model.pretrained={folder} is a folder without a model: it has no config.json (it is empty); {SHOULD_HOLD}"
    )
    with pytest.raises(ValueError, match=re.escape(f"model.pretrained={folder} is a folder without a model")):
        load_model_config(str(folder))


def test_a_folder_of_other_files_lists_them(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "notes.txt").write_text("weights to come")
    with pytest.raises(FileNotFoundError, match=re.escape("no config.json (it holds ['notes.txt'])")):
        load_tokenizer(str(folder))


def test_a_model_folder_without_its_tokenizer_is_refused_for_the_tokenizer(tmp_path, tokenizer):
    """The model loads (a classifier saved alone), but its tokenizer does not: transformers would otherwise
    build a tokenizer of a few special tokens that maps every word to [UNK]."""
    folder = tmp_path / "model"
    BertForSequenceClassification(tiny_mlm_config(tokenizer)).save_pretrained(folder)
    with pytest.raises(FileNotFoundError) as error:
        load_tokenizer(str(folder))
    assert str(error.value).startswith(
        f"model.pretrained={folder} holds a model but no tokenizer: none of ['tokenizer.json', 'tokenizer_config.json'"
    )
    assert "it holds ['config.json', 'model.safetensors']" in str(error.value)
    assert load_classifier(str(folder), 2).config.num_labels == 2
    tokenizer.save_pretrained(folder)
    assert len(load_tokenizer(str(folder))) == len(tokenizer)


def test_a_truncated_weights_file_is_named_as_damaged(tmp_path, tokenizer):
    folder = tmp_path / "model"
    BertForSequenceClassification(tiny_mlm_config(tokenizer)).save_pretrained(folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ValueError) as error:
        load_classifier(str(folder), num_labels=2)
    message = str(error.value)
    assert message.startswith(f"model.pretrained={folder}: its weights cannot be read (")
    assert "is damaged or incomplete: save or download it again" in message
