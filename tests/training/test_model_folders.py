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


def test_a_hub_model_that_cannot_be_loaded_names_the_setting():
    # offline (as the tests run) the hub is not asked; online it answers that the repository does not exist
    with pytest.raises(OSError, match=r"^model\.pretrained='nonexistent-org/nonexistent-model' cannot be loaded: "):
        load_tokenizer("nonexistent-org/nonexistent-model")


def test_the_hub_hint_says_why_the_hub_was_not_reached_and_what_needs_none(monkeypatch):
    from itermask.formatting import hub_hint

    offline = OSError("We couldn't connect to 'https://huggingface.co' to load the files")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    assert hub_hint(offline, "model=minilm") == (
        " It is not in the local Hugging Face cache and the hub was not reached (HF_HUB_OFFLINE set): download it "
        "once with internet access, or give a local copy; model=minilm needs no hub."
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert "(no connection to huggingface.co)" in hub_hint(ConnectionError("Couldn't reach 'x/y' on the Hub"), "d")
    assert hub_hint(OSError("401 Client Error: Repository Not Found"), "model=minilm") == ""


def test_a_hub_dataset_that_cannot_be_reached_names_the_setting_and_its_configuration(monkeypatch):
    import datasets

    from itermask.data.sources import HubSource

    def unreachable(path, name):
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    source = HubSource("nyu-mll/glue", "sst2", text_column="sentence", label_column="label")
    with pytest.raises(ConnectionError) as error:
        source.load()
    assert str(error.value).startswith(
        "dataset.source: hub dataset nyu-mll/glue/sst2 cannot be loaded: Couldn't reach 'nyu-mll/glue' on the Hub "
        "(OfflineModeIsEnabled). It is not in the local Hugging Face cache"
    )
    assert str(error.value).endswith("the shipped dataset=rt_snippets needs no hub.")
