"""Masked fine-tuning: the random-masking augmentation and its checkpoint key."""

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats as scipy_stats

from itermask.core.masking import MaskToken
from itermask.core.schedules import masked_counts
from itermask.core.tokens import TokenBatch, maskable_positions
from itermask.training.augmentation import RandomMaskingAugmentation

TEXTS = ["a fine and funny film", "the plot is thin , but the cast is good and it works", "bad"]


def _batch(tokenizer, texts):
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    return TokenBatch(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))


ROOT = Path(__file__).resolve().parents[2]


# --- masked fine-tuning -------------------------------------------------------------------------------


def test_masking_augmentation_masks_a_uniform_fraction(tokenizer):
    batch = _batch(tokenizer, TEXTS * 4)
    augmentation = RandomMaskingAugmentation(MaskToken(tokenizer), tokenizer.all_special_ids, batch_share=1.0, seed=3)
    maskable = maskable_positions(batch, tokenizer.all_special_ids)
    mask, fractions = augmentation.sample(batch)
    assert not (mask & ~maskable).any()  # special tokens and padding are never masked
    expected = torch.diagonal(masked_counts(maskable.sum(1), fractions))
    assert torch.equal(mask.sum(1), expected)
    masked = augmentation(batch)
    assert (masked.input_ids == tokenizer.mask_token_id).sum() > 0
    assert torch.equal(masked.attention_mask, batch.attention_mask)
    never = RandomMaskingAugmentation(MaskToken(tokenizer), tokenizer.all_special_ids, batch_share=0.0)
    assert never(batch) is batch
    half = RandomMaskingAugmentation(MaskToken(tokenizer), tokenizer.all_special_ids, batch_share=0.5, seed=0)
    share = np.mean([half(batch) is not batch for _ in range(400)])
    assert 0.42 < share < 0.58
    # fractions are uniform on [0, 1]
    draws = torch.cat([augmentation.sample(batch)[1] for _ in range(300)]).numpy()
    assert scipy_stats.kstest(draws, "uniform").pvalue > 0.01
    with pytest.raises(ValueError, match="batch_share"):
        RandomMaskingAugmentation(MaskToken(tokenizer), [], batch_share=1.5)


def test_checkpoint_key_includes_masking_augmentation_only_when_enabled():
    from conftest import training_key_of as training_key
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        standard = compose("evaluate", overrides=["output_dir=/tmp/unused"])
        masked = compose("evaluate", overrides=["output_dir=/tmp/unused", "train.masking_augmentation.enabled=true"])
        masked_delete = compose(
            "evaluate",
            overrides=["output_dir=/tmp/unused", "train.masking_augmentation.enabled=true", "masking=delete"],
        )
        masked_share = compose(
            "evaluate",
            overrides=[
                "output_dir=/tmp/unused",
                "train.masking_augmentation.enabled=true",
                "train.masking_augmentation.batch_share=0.25",
            ],
        )
        standard_delete = compose("evaluate", overrides=["output_dir=/tmp/unused", "masking=delete"])
        experiment = compose(
            "evaluate", overrides=["output_dir=/tmp/unused", "experiment=masked_vs_standard"], return_hydra_config=True
        )
    keys = {
        name: training_key(cfg)[0]
        for name, cfg in [
            ("standard", standard),
            ("masked", masked),
            ("masked_delete", masked_delete),
            ("masked_share", masked_share),
            ("standard_delete", standard_delete),
        ]
    }
    assert len({keys["standard"], keys["masked"], keys["masked_delete"], keys["masked_share"]}) == 4
    assert keys["standard_delete"] == keys["standard"]  # disabled: the strategy does not matter
    # a disabled section leaves the key of standard fine-tuning as it was before the option existed
    legacy = standard.copy()
    with open_dict(legacy):
        del legacy.train.masking_augmentation
    assert training_key(legacy)[0] == keys["standard"]
    payload = training_key(masked)[1]
    # the key holds each component's config name and settings, not its module path (_target_)
    assert payload["train"]["masking_augmentation"]["strategy"] == {"name": "mask_token"}
    assert experiment.ood.level == "full"
    assert experiment.hydra.sweeper.params["train.masking_augmentation.enabled"] == "false,true"
