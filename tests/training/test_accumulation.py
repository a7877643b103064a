"""Gradient accumulation, the documented way to bound fine-tuning memory on long texts
(``model.finetune.batch_size=4 trainer.accumulate_grad_batches=4``): batches of 4, an optimizer step per 16
examples, the weights of batches of 16 (without dropout, up to float32 rounding), its own checkpoint and
results keys, and a bad value refused before any work (fast: a 2-layer BERT, 32 training examples)."""

from pathlib import Path

import pandas as pd
import pytest
import pytorch_lightning as pl
import torch
from conftest import bound, compose_config, keys_of, save_tiny_bert, settings_problems
from hydra import compose, initialize_config_dir

from itermask.engine import prepare
from itermask.training.finetune import get_or_train

ROOT = Path(__file__).resolve().parents[2]


def test_the_checkpoint_and_results_keys_count_accumulation_only_when_not_one():
    default = keys_of(compose_config())
    at_one = keys_of(compose_config("trainer.accumulate_grad_batches=1"))
    assert (at_one.training, at_one.results) == (default.training, default.results)
    # the default key since train.group_by_length (which changed the weights, so the key); unchanged by the option
    # in conf/trainer
    assert default.training == "04cbdba6d8a7a4a1"
    assert default.training_payload["train"]["group_by_length"] is True
    assert "accumulate_grad_batches" not in default.training_payload
    bounded = keys_of(compose_config("model.finetune.batch_size=4", "trainer.accumulate_grad_batches=4"))
    small = keys_of(compose_config("model.finetune.batch_size=4"))
    assert bounded.training_payload["accumulate_grad_batches"] == 4
    assert len({default.training, small.training, bounded.training}) == 3
    assert len({default.results, small.results, bounded.results}) == 3


def test_a_bad_accumulation_is_named_with_its_range():
    assert settings_problems("trainer.accumulate_grad_batches=0") == [
        "trainer.accumulate_grad_batches must be an integer >= 1, got 0"
    ]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, vocab_file):
    """A tiny random BERT classifier without dropout (so batch composition alone decides the gradients) and
    its tokenizer, saved as a local ``model.pretrained`` folder."""
    return save_tiny_bert(
        tmp_path_factory.mktemp("tiny-bert"), vocab_file, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )


@pytest.fixture(scope="module")
def small_csvs(tmp_path_factory):
    """32 training, 8 validation and 8 test snippets of the shipped data, as per-split files."""
    rows = pd.read_csv(ROOT / "src/itermask/resources/rt_snippets/validation.csv", keep_default_na=False)
    folder = tmp_path_factory.mktemp("data")
    for name, part in (("train", rows[:32]), ("validation", rows[32:40]), ("test", rows[40:48])):
        part.to_csv(folder / f"{name}.csv", index=False)
    return folder


class Record(pl.Callback):
    """The rows of every training batch, the optimizer steps the scheduler was built for, and the weights at
    the end of training."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.planned_steps = self.steps = 0
        self.weights: dict = {}

    def on_train_start(self, trainer, pl_module):
        self.planned_steps = int(trainer.estimated_stepping_batches)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.rows.append(len(batch["labels"]))

    def on_train_end(self, trainer, pl_module):
        self.steps = trainer.global_step
        self.weights = {name: value.detach().clone() for name, value in pl_module.state_dict().items()}


def _fine_tune(cache: Path, model_dir: Path, data: Path, batch: int, accumulate: int) -> tuple[Record, str]:
    """One epoch of fine-tuning at ``batch`` x ``accumulate`` through the real stage; what it did and its key."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                "output_dir=/tmp/unused",
                f"cache_dir={cache}",
                f"model.pretrained={model_dir}",
                "model.max_length=32",
                f"model.finetune.batch_size={batch}",
                f"trainer.accumulate_grad_batches={accumulate}",
                "model.finetune.optimizer.learning_rate=1e-3",
                "dataset=csv",
                *(f"dataset.source.{split}={data / f'{split}.csv'}" for split in ("train", "validation", "test")),
                "train.checkpoint_every_n_steps=null",
                "~logger",
                "+trainer.enable_progress_bar=false",
                "trainer.accelerator=cpu",
            ],
        )
    plan, resources = bound(cfg)
    record, make_trainer = Record(), resources.make_trainer
    resources.make_trainer = lambda **kw: make_trainer(**{**kw, "callbacks": [*kw.get("callbacks", []), record]})
    prepare.load_data(plan, resources)
    get_or_train(prepare.fine_tuning(plan, resources), resources.loaded_data)
    assert resources.keys is not None
    return record, resources.keys.training


def test_batches_of_4_accumulated_over_4_step_as_batches_of_16(tmp_path, tiny_model_dir, small_csvs):
    torch.set_num_threads(1)  # one summation order per batch; threads would add their own rounding
    whole, whole_key = _fine_tune(tmp_path / "a", tiny_model_dir, small_csvs, 16, 1)
    bounded, bounded_key = _fine_tune(tmp_path / "b", tiny_model_dir, small_csvs, 4, 4)
    small, small_key = _fine_tune(tmp_path / "c", tiny_model_dir, small_csvs, 4, 1)
    assert whole.rows == [16, 16] and (whole.planned_steps, whole.steps) == (2, 2)
    assert bounded.rows == [4] * 8 and (bounded.planned_steps, bounded.steps) == (2, 2)
    assert small.rows == [4] * 8 and (small.planned_steps, small.steps) == (8, 8)
    assert len({whole_key, bounded_key, small_key}) == 3

    def largest_difference(a: dict, b: dict) -> float:
        return max(float((a[name] - b[name]).abs().max()) for name in a)

    # the same 16 examples per step: the weights of batches of 16 up to float32 rounding (the mean loss summed
    # in another order, 1e-5); batches of 4 without accumulation take 8 steps and end elsewhere
    assert largest_difference(bounded.weights, whole.weights) < 1e-5
    assert largest_difference(small.weights, whole.weights) > 1e-3


def test_uniformly_shuffled_batches_keep_the_checkpoint_key_of_before_the_option():
    """train.group_by_length=false trains as itermask did before the option: its key is the one pinned then."""
    assert keys_of(compose_config("train.group_by_length=false")).training == "a5156e850c501ac0"
