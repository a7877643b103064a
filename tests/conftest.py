"""Shared fixtures: a WordPiece tokenizer built locally from the shipped text, tiny random BERT
classifiers built from a config (as Hugging Face tests itself), and an analytic model whose outputs can be
computed by hand. No network access is needed."""

from __future__ import annotations

import collections
import os
import re
from pathlib import Path

import pandas as pd
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertTokenizer

import itermask.settings  # noqa: F401  registers the evaluation schema that conf/evaluate.yaml names
from itermask.core.candidates import NO_CANDIDATE, CandidateSource
from itermask.data.files import shipped_source

CONF = Path(__file__).resolve().parents[1] / "conf"


def compose_config(*overrides: str, name: str = "evaluate"):
    """``conf/<name>.yaml`` composed with ``overrides`` (and a placeholder ``output_dir``), as Hydra would."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=name, overrides=["output_dir=/tmp/unused", *overrides])


def settings_problems(*overrides: str) -> list[str]:
    """The problems :func:`itermask.validation.check_config` reports for ``conf/evaluate.yaml`` with
    ``overrides`` (it must report some)."""
    from itermask.settings import plain
    from itermask.validation import SettingsError, check_config

    with pytest.raises(SettingsError) as error:
        check_config(plain(compose_config(*overrides)))
    return error.value.problems


def plan_of(cfg):
    """The plan of a composed config: an evaluation's (``evaluate.yaml``) or a fine-tuning job's."""
    from itermask.settings import evaluation_plan, training_plan

    return evaluation_plan(cfg) if "saliency" in cfg else training_plan(cfg)


def keys_of(cfg):
    """The cache keys of a composed config (:func:`itermask.engine.keys.job_keys`): nothing is loaded."""
    from itermask.engine.keys import job_keys

    return job_keys(plan_of(cfg))


def training_key_of(cfg) -> tuple[str, dict]:
    """The checkpoint key of a composed config and what it hashes."""
    keys = keys_of(cfg)
    return keys.training, keys.training_payload


def bound(cfg):
    """``(plan, resources)`` of a composed config after the steps of :func:`itermask.engine.prepare` that come
    before the data: tokenizer and keys, continued pretraining (cached), components bound and evaluators built."""
    from itermask.engine.prepare import bind, components, pretrain

    plan = plan_of(cfg)
    resources = bind(plan)
    pretrain(plan, resources)
    components(plan, resources)
    return plan, resources


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


@pytest.fixture(autouse=True)
def _wandb_reachable_again(monkeypatch):
    """Each test starts with no memory of an unreachable W&B server (itermask.tracking falls back to
    offline for the rest of a process once an online start failed)."""
    from itermask import tracking

    monkeypatch.setattr(tracking, "_unreachable", {})


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


def tiny_mlm_config(tokenizer) -> BertConfig:
    """A 1-layer, hidden-32 BERT config over ``tokenizer``'s vocabulary (for masked-language models)."""
    return BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
    )


@pytest.fixture
def mlm_dir(tokenizer, tmp_path):
    """A tiny random BertForMaskedLM and its tokenizer (the shared WordPiece one) in a directory."""
    torch.manual_seed(0)
    model = BertForMaskedLM(tiny_mlm_config(tokenizer)).eval()
    model.save_pretrained(tmp_path / "mlm")
    tokenizer.save_pretrained(tmp_path / "mlm")
    return tmp_path / "mlm"


def tiny_bert_config(tokenizer, **overrides) -> BertConfig:
    """The config of a 2-layer, hidden-32 BERT classifier over ``tokenizer``'s vocabulary (``overrides``:
    other config fields, e.g. ``initializer_range``)."""
    return BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=2,
        pad_token_id=tokenizer.pad_token_id,
        **overrides,
    )


@pytest.fixture
def tiny_bert(tokenizer):
    """A 2-layer, hidden-32 BERT classifier with random weights, in eval mode."""
    torch.manual_seed(0)
    config = tiny_bert_config(tokenizer)
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
    SPECIAL = ("[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]")

    def convert_ids_to_tokens(self, ids):
        """``[CLS]``... for the special ids, ``w<id>`` for the others."""
        return [self.SPECIAL[i] if 0 <= i < len(self.SPECIAL) else f"w{i}" for i in ids]


@pytest.fixture
def toy_tokenizer():
    return ToyTokenizer()


class TableCandidates(CandidateSource):
    """Fixed candidate ids per original id (a test source; unnamed, so not registered)."""

    def __init__(self, table):
        self.table = table

    @property
    def size(self):
        return max(len(v) for v in self.table.values())

    def candidates(self, batch, positions):
        out = torch.full((len(positions), self.size), NO_CANDIDATE)
        for row, token in enumerate(batch.input_ids[torch.arange(len(positions)), positions].tolist()):
            ids = self.table.get(token, [])
            out[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return out


# -- five architectures: tiny random classifiers and tokenizers trained locally on the shipped text -----

ARCHITECTURES = ("bert", "roberta", "distilbert", "electra", "deberta_v2")


def _shipped_texts() -> list[str]:
    return list(pd.read_csv(shipped_source().files["train"], keep_default_na=False)["text"])


@pytest.fixture(scope="session")
def wordpiece_backend():
    """A lower-casing WordPiece tokenizer (``tokenizers`` library) trained on the shipped training text,
    with BERT's special tokens and ``[CLS] A [SEP] (B [SEP])`` post-processing."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    trained = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    trained.normalizer = normalizers.BertNormalizer(lowercase=True)
    trained.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trained.train_from_iterator(_shipped_texts(), trainers.WordPieceTrainer(vocab_size=1000, special_tokens=SPECIALS))
    # the trainer learns the same vocabulary every time but numbers equal-count pieces in hash order:
    # renumber it (specials first, then sorted) so that ids are the same in every test session
    pieces = sorted(set(trained.get_vocab()) - set(SPECIALS))
    vocab = {piece: i for i, piece in enumerate(SPECIALS + pieces)}
    backend = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    backend.normalizer = trained.normalizer
    backend.pre_tokenizer = trained.pre_tokenizer
    cls, sep = backend.token_to_id("[CLS]"), backend.token_to_id("[SEP]")
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    backend.decoder = decoders.WordPiece()
    return backend


@pytest.fixture(scope="session")
def bpe_backend():
    """A byte-level BPE tokenizer trained on the shipped training text with RoBERTa's special tokens in
    RoBERTa's order (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, ``<mask>`` 4) and its post-processing."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=1000,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator(_shipped_texts(), trainer)
    backend.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    backend.decoder = decoders.ByteLevel()
    return backend


@pytest.fixture(scope="session")
def architecture_tokenizers(wordpiece_backend, bpe_backend) -> dict:
    """``{architecture: transformers fast tokenizer}``; DistilBERT and RoBERTa return no token type ids."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    bert_like = dict(unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    with_types = ["input_ids", "token_type_ids", "attention_mask"]
    without_types = ["input_ids", "attention_mask"]
    roberta = PreTrainedTokenizerFast(
        tokenizer_object=bpe_backend,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        cls_token="<s>",
        sep_token="</s>",
        mask_token="<mask>",
        model_input_names=without_types,
    )
    tokenizers = {"roberta": roberta}
    for name in ("bert", "distilbert", "electra", "deberta_v2"):
        names = without_types if name == "distilbert" else with_types
        backend = Tokenizer.from_str(wordpiece_backend.to_str())  # each wrapper sets padding on its own copy
        tokenizers[name] = PreTrainedTokenizerFast(tokenizer_object=backend, model_input_names=names, **bert_like)
    return tokenizers


def build_tiny_classifier(architecture: str, tokenizer, seed: int = 0) -> torch.nn.Module:
    """A 2-layer, hidden-32, 4-head classifier of ``architecture`` with random weights (initialiser range
    0.2, so that outputs vary visibly between inputs; the pad token's word embedding is non-zero, as in
    pretrained models), loaded with the library's default attention implementation, in eval mode."""
    import transformers as tf

    torch.manual_seed(seed)
    common = dict(vocab_size=len(tokenizer), num_labels=2, pad_token_id=tokenizer.pad_token_id, initializer_range=0.2)
    layers = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    if architecture == "bert":
        config = tf.BertConfig(max_position_embeddings=128, **layers, **common)
        model_class = tf.BertForSequenceClassification
    elif architecture == "roberta":
        # position ids start after the pad id: max_position_embeddings = max length + pad id + 1
        config = tf.RobertaConfig(
            max_position_embeddings=130, type_vocab_size=1, bos_token_id=0, eos_token_id=2, **layers, **common
        )
        model_class = tf.RobertaForSequenceClassification
    elif architecture == "distilbert":
        config = tf.DistilBertConfig(
            dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=128, **common
        )
        model_class = tf.DistilBertForSequenceClassification
    elif architecture == "electra":
        config = tf.ElectraConfig(embedding_size=16, max_position_embeddings=128, **layers, **common)
        model_class = tf.ElectraForSequenceClassification
    elif architecture == "deberta_v2":
        config = tf.DebertaV2Config(
            relative_attention=True,
            pos_att_type=["p2c", "c2p"],
            position_buckets=16,
            max_position_embeddings=128,
            **layers,
            **common,
        )
        model_class = tf.DebertaV2ForSequenceClassification
    else:
        raise ValueError(f"unknown architecture {architecture!r}")
    model = model_class(config).eval()
    with torch.no_grad():  # initialisation zeroes the pad row (padding_idx); pretrained models have none
        model.get_input_embeddings().weight[tokenizer.pad_token_id].normal_(0.0, 0.2)
    return model


@pytest.fixture(params=ARCHITECTURES)
def tiny_classifier(request, architecture_tokenizers):
    """``(architecture, tiny random classifier, its tokenizer)`` for each of the five architectures."""
    tokenizer = architecture_tokenizers[request.param]
    return request.param, build_tiny_classifier(request.param, tokenizer), tokenizer


class Recorder(torch.nn.Module):
    """Wraps a classifier and records every input it is called with."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.calls = []

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def forward(self, **inputs):
        self.calls.append({k: v.detach().clone() for k, v in inputs.items()})
        return self.model(**inputs)


#: the modules of the ``sweeps`` extra (pip install -e '.[sweeps]'; .ci/run installs it in a step of its own)
SWEEPS_EXTRA = (
    "hydra_plugins.hydra_optuna_sweeper",
    "hydra_plugins.hydra_joblib_launcher",
    "hydra_plugins.hydra_submitit_launcher",
)


@pytest.fixture
def sweeps_extra():
    """Skip a test of the Optuna sweeper or the joblib/submitit launchers when the ``sweeps`` extra is not
    installed, unless ``ITERMASK_REQUIRE_EXTRAS`` is set (``.ci/run`` sets it, so CI cannot skip them silently):
    then the test fails."""
    import importlib.util

    missing = [name for name in SWEEPS_EXTRA if importlib.util.find_spec(name) is None]
    if missing:
        message = f"the sweeps extra is not installed ({', '.join(missing)}): pip install -e '.[sweeps]'"
        if os.environ.get("ITERMASK_REQUIRE_EXTRAS"):
            pytest.fail(message)
        pytest.skip(message)


def save_tiny_bert(folder, vocab_file: str, **config):
    """A tiny random BERT classifier (2 layers of width 32, 64 positions; ``config`` overrides, e.g. dropout) and
    its tokenizer saved into ``folder`` as a local ``model.pretrained`` folder; returns ``folder``."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    tokenizer = BertTokenizer(vocab=vocab_file)
    torch.manual_seed(0)
    settings = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    settings.update(max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id, **config)
    BertForSequenceClassification(BertConfig(vocab_size=len(tokenizer), **settings)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def tiny_bert_dir(tmp_path, tokenizer, monkeypatch) -> Path:
    """A tiny BERT sequence classifier (:func:`tiny_bert_config`, seed 0) and the ``tokenizer`` fixture saved in
    ``tmp_path/tiny``, with ``ITERMASK_CACHE`` under ``tmp_path``; returns the folder."""
    from transformers import BertForSequenceClassification

    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    torch.manual_seed(0)
    BertForSequenceClassification(tiny_bert_config(tokenizer)).save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    return tmp_path / "tiny"


def run_tiny_job(folder: Path, job: Path, *overrides: str) -> dict:
    """One ``evaluate.py`` job, composed from ``conf/`` and run in this process, of the classifier in ``folder``
    without fine-tuning (4 test examples, 16 tokens, no OOD analysis, CSV logger) into ``job``, with
    ``overrides`` after those; returns its ``results.json``."""
    import json

    from hydra import compose, initialize_config_dir

    from itermask import pipeline

    args = [
        f"model.pretrained={folder}",
        "train.enabled=false",
        "ood=none",
        "logger=csv",
        "evaluation.n_examples=4",
        "+trainer.enable_progress_bar=false",
        "model.max_length=16",
        f"output_dir={job}",
        *overrides,
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        pipeline.run_evaluate(compose(config_name="evaluate", overrides=args))
    return json.loads((job / "results.json").read_text())


class Killed(Exception):
    """Stands for the job being killed (the resume tests)."""


def killer(step: int):
    """A Lightning callback that interrupts training (raises :class:`Killed`) just before the optimizer step
    ``step`` (0-based) would run."""
    import pytorch_lightning as pl

    class KillAt(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if trainer.global_step == step:
                raise Killed(f"killed before step {step}")

    return KillAt()


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module's tiny models: a 32-wide model gains nothing from intra-op threads, and on a
    busy 2-core machine they cost 10x."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
