"""Every trainer option that can change the fine-tuned weights enters the checkpoint key when it is not at its
default; the options listed as unable to (:data:`~itermask.storage.keys.TRAINER_NOT_IN_CHECKPOINT_KEY`) never do.
Keys only: nothing is trained or loaded."""

import pytest
from conftest import compose_config, keys_of

from itermask.storage.keys import trainer_settings

DEFAULT = "04cbdba6d8a7a4a1"  # the default checkpoint key (train.group_by_length), unchanged by trainer options

#: (override, what the key then holds under ``trainer``)
WEIGHT_CHANGING = [
    ("+trainer.gradient_clip_val=1.0", {"gradient_clip_val": 1.0}),
    ("+trainer.gradient_clip_algorithm=value", {"gradient_clip_algorithm": "value"}),
    ("+trainer.max_steps=5", {"max_steps": 5}),
    ("+trainer.min_steps=5", {"min_steps": 5}),
    ("+trainer.max_time=00:00:01:00", {"max_time": "00:00:01:00"}),
    ("trainer.max_epochs=3", {"max_epochs": 3}),  # not model.finetune.max_epochs (1)
    ("+trainer.limit_train_batches=0.5", {"limit_train_batches": 0.5}),
    ("+trainer.limit_val_batches=4", {"limit_val_batches": 4}),  # which checkpoint is the best
    ("+trainer.val_check_interval=0.5", {"val_check_interval": 0.5}),
    ("+trainer.check_val_every_n_epoch=2", {"check_val_every_n_epoch": 2}),
    ("+trainer.deterministic=true", {"deterministic": True}),
    ("+trainer.benchmark=true", {"benchmark": True}),
    ("+trainer.overfit_batches=2", {"overfit_batches": 2}),
    ("+trainer.fast_dev_run=true", {"fast_dev_run": True}),
    ("trainer.num_sanity_val_steps=2", {"num_sanity_val_steps": 2}),  # not shown harmless: keyed off 0
    ("+trainer.an_option_itermask_does_not_know=1", {"an_option_itermask_does_not_know": 1}),  # unknown: keyed
]

HARMLESS = [
    "trainer.log_every_n_steps=1",
    "trainer.enable_model_summary=true",
    "+trainer.enable_progress_bar=false",
    "+trainer.enable_checkpointing=true",
    "+trainer.default_root_dir=/tmp/elsewhere",
    "+trainer.profiler=simple",
    "+trainer.detect_anomaly=true",
    "+trainer.inference_mode=false",
    "+trainer.limit_test_batches=2",
    "+trainer.limit_predict_batches=2",
    "trainer.max_epochs=1",  # = model.finetune.max_epochs, its interpolated default
    "trainer.num_sanity_val_steps=0",
    "trainer.accelerator=cpu",
    "trainer.devices=[0]",
    "+trainer.num_nodes=1",
]


def test_each_weight_changing_trainer_option_has_its_own_checkpoint_and_results_key():
    default = keys_of(compose_config())
    assert default.training == DEFAULT and "trainer" not in default.training_payload
    trainings, results = {default.training}, {default.results}
    for override, keyed in WEIGHT_CHANGING:
        keys = keys_of(compose_config(override))
        assert keys.training_payload["trainer"] == keyed, override
        trainings.add(keys.training)
        results.add(keys.results)
    assert len(trainings) == len(results) == len(WEIGHT_CHANGING) + 1


@pytest.mark.parametrize("override", HARMLESS)
def test_a_trainer_option_that_cannot_change_the_weights_keeps_the_checkpoint_key(override):
    keys = keys_of(compose_config(override))
    assert keys.training == DEFAULT and "trainer" not in keys.training_payload


def test_the_test_loops_limit_changes_the_results_key_only():
    default, limited = keys_of(compose_config()), keys_of(compose_config("+trainer.limit_test_batches=2"))
    assert limited.training == default.training and limited.results != default.results


def test_the_smoke_presets_validation_limit_is_in_its_checkpoint_key():
    """debug=smoke validates on 4 batches, which picks its best checkpoint: its key is not that of full validation
    (before every trainer option was keyed, both were 946abe2cafa63a7c)."""
    smoke = keys_of(compose_config("debug=smoke", "train.group_by_length=false"))  # batches as then
    assert smoke.training == "3c88d285aaf5851f" and smoke.training_payload["trainer"] == {"limit_val_batches": 4}
    full = keys_of(compose_config("debug=smoke", "train.group_by_length=false", "trainer.limit_val_batches=1.0"))
    assert full.training != smoke.training


def test_trainer_settings_leaves_out_the_stage_set_options_and_the_implementation():
    trainer = {"_target_": "pytorch_lightning.Trainer", "max_steps": 9, "gradient_clip_val": 0.5, "logger": True}
    assert trainer_settings(trainer, {}) == {"max_steps": 9, "gradient_clip_val": 0.5}
    assert trainer_settings(trainer, {"gradient_clip_val": 0.5}, set_by_stage=("max_steps",)) == {}


def test_bf16_has_its_own_checkpoint_and_results_key_and_the_default_keeps_its_keys():
    """trainer.precision=bf16-mixed fine-tunes and evaluates under bfloat16 autocast: a bf16 result is never
    read back as a float32 one; the shipped 32-true keeps the pinned key."""
    default, bf16 = keys_of(compose_config()), keys_of(compose_config("trainer.precision=bf16-mixed"))
    assert default.training == DEFAULT and default.training_payload["precision"] == "32-true"
    assert bf16.training_payload["precision"] == "bf16-mixed" and bf16.training != default.training
    assert bf16.results != default.results and bf16.baseline != default.baseline


@pytest.mark.parametrize("value", ["16-mixed", "bf16-true", 64])  # Hydra reads 64 as an integer
def test_a_precision_other_than_32_or_bf16_mixed_is_refused_before_any_work(value):
    from conftest import plan_of, settings_problems

    expected = (
        "trainer.precision must be 32-true (float32; also 32) or bf16-mixed (bfloat16 autocast for fine-tuning, "
        f"saliency and masked forwards; also bf16), got {value!r}: float16 (16-mixed, fp16) needs a gradient scaler "
        "that saliency's backward passes do not have, and the -true casts change the weights"
    )
    assert [p for p in settings_problems(f"trainer.precision={value}") if p.startswith("trainer.precision")] == [
        expected
    ]
    with pytest.raises(ValueError, match=r"trainer.precision must be 32-true"):
        plan_of(compose_config(f"trainer.precision={value}"))  # the plan is built before anything is loaded


@pytest.mark.parametrize(("value", "given"), [("bf16", "bf16-mixed"), ("32", "32-true"), ("bf16-mixed", "bf16-mixed")])
def test_lightning_is_given_the_preferred_name_of_a_precision_alias(value, given):
    """Lightning warns that precision="bf16" "is supported for historical reasons but its usage is discouraged"."""
    from conftest import plan_of

    assert plan_of(compose_config(f"trainer.precision={value}")).trainer.options["precision"] == given
