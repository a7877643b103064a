"""Shared fixtures: a WordPiece tokenizer built locally from the shipped text, tiny random BERT
classifiers built from a config (as Hugging Face tests itself), and an analytic model whose outputs can be
computed by hand. No network access is needed."""

from __future__ import annotations

import collections
import os
import re

import pandas as pd
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

from itermask.data import shipped_source

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")

def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="also run the end-to-end tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow end-to-end test: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory) -> str:
    """A vocabulary of the 400 commonest lower-cased words of the shipped training text."""
    texts = pd.read_csv(shipped_source().files["train"], keep_default_na=False)["text"]
    counts = collections.Counter(w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower()))
    words = [w for w, _ in counts.most_common(400)]
    path = tmp_path_factory.mktemp("tok") / "vocab.txt"
    path.write_text("\n".join(SPECIALS + words) + "\n")
    return str(path)


@pytest.fixture(scope="session")
def tokenizer(vocab_file):
    tok = BertTokenizer(vocab=vocab_file)
    assert len(tok) == len(SPECIALS) + 400, "the tokenizer did not read the vocabulary"
    return tok


@pytest.fixture
def tiny_bert(tokenizer):
    """A 2-layer, hidden-32 BERT classifier with random weights, in eval mode."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=2,
        pad_token_id=tokenizer.pad_token_id,
    )
    return BertForSequenceClassification(config).eval()


class AdditiveModel(torch.nn.Module):
    """Analytic classifier: each token id has a scalar weight ``w`` (its 1-d word embedding);
    ``logits = [0, sum_i w[id_i] * attention_i]``, so ``p(class 1) = sigmoid(sum of weights)``."""

    def __init__(self, weights: dict[int, float], vocab_size: int = 16) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab_size, 1)
        with torch.no_grad():
            self.embedding.weight.zero_()
            for token, weight in weights.items():
                self.embedding.weight[token, 0] = weight

    def get_input_embeddings(self):
        return self.embedding

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        score = (self.embedding(input_ids).squeeze(-1) * attention_mask).sum(dim=1)
        return torch.stack([torch.zeros_like(score), score], dim=1)


class ToyTokenizer:
    """Just the ids the masking strategies read: [PAD]=0, [CLS]=1, [SEP]=2, [MASK]=3, [UNK]=4."""

    pad_token_id = 0
    mask_token_id = 3
    all_special_ids = [0, 1, 2, 3, 4]


@pytest.fixture
def toy_tokenizer():
    return ToyTokenizer()
