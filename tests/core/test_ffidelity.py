"""F-Fidelity (itermask.core.ffidelity): the stochastic removal's cap on hand-made draws, its reductions (alpha = 1
with a cap that never binds is plain top-k removal, i.e. comprehensiveness / sufficiency at that step; a cap of 0
is NaN, not 0), the complement of FFid-, seeded and batch-independent draws, and the fine-tuning's removal."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from itermask.core.ffidelity import (
    FFidelitySettings,
    ffidelity,
    fine_tune_with_removal,
    removal_masks,
    sample_uniforms,
    training_removal,
)
from itermask.core.masking import MaskToken
from itermask.core.measures import target_output
from itermask.core.subset_outputs import ModelOutputs, token_features
from itermask.core.tokens import TokenBatch, class_logits, maskable_positions

TEXTS = ["a good film , and fun", "it is bad", "the best film is fun and good"]


def _outputs(tokenizer, model, texts=TEXTS):
    encoded = tokenizer(texts, padding=True, return_tensors="pt")
    batch = TokenBatch(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    features = token_features(maskable_positions(batch, tokenizer.all_special_ids))
    target = torch.tensor([1, 0, 1])[: len(texts)]
    return ModelOutputs(model, batch, features, MaskToken().bind(tokenizer), target, "probability", 64), features


def _orders(features: torch.Tensor, seed: int = 3) -> list[np.ndarray]:
    """A fixed arbitrary ranking of each example's features."""
    n = (features.amax(dim=1) + 1).tolist()
    return [np.random.default_rng(seed + i).permutation(k) for i, k in enumerate(n)]


def test_the_removal_draws_candidates_with_probability_alpha_and_caps_them_by_the_smallest_draws():
    order = np.array([2, 0, 1, 3, 4])  # features 2, 0, 1 are the top 3
    uniforms = np.array([[0.5, 0.1, 0.3, 0.05, 0.9], [0.7, 0.65, 0.2, 0.1, 0.3]])
    plus = removal_masks(order, 3, 0.6, 1, uniforms, plus=True)
    # sample 0: all three candidates drawn (u < 0.6), the cap keeps the smallest draw, feature 1; feature 3's
    # 0.05 is no candidate. Sample 1: only feature 2 drawn
    assert plus.tolist() == [[False, True, False, False, False], [False, False, True, False, False]]
    minus = removal_masks(order, 3, 0.6, 1, uniforms, plus=False)
    assert minus.tolist() == [[False, False, False, True, False], [False, False, False, True, False]]
    assert removal_masks(order, 3, 0.6, 2, uniforms, plus=True)[0].tolist() == [False, True, True, False, False]
    assert not removal_masks(order, 3, 0.6, 0, uniforms, plus=True).any()  # floor(beta * n) = 0: nothing


def test_the_cap_holds_on_seeded_draws_and_the_draws_are_reproducible():
    order = np.arange(40)
    uniforms = sample_uniforms(7, 123, 200, 40)
    assert np.array_equal(uniforms, sample_uniforms(7, 123, 200, 40))
    assert not np.array_equal(uniforms, sample_uniforms(8, 123, 200, 40))
    assert np.array_equal(uniforms[5], np.random.default_rng([7, 123, 5]).random(40))  # (seed, example, sample)
    for k in (1, 10, 40):
        masks = removal_masks(order, k, 0.5, 4, uniforms, plus=True)
        assert masks.sum(axis=1).max() <= 4 and not masks[:, k:].any()
    # no cap binding: each candidate removed with probability alpha (200 x 10 draws: 0.5 +- 0.035, 3 sd)
    assert removal_masks(order, 10, 0.5, 40, uniforms, plus=True)[:, :10].mean() == pytest.approx(0.5, abs=0.035)


def test_alpha_one_without_a_binding_cap_is_plain_top_k_removal(tokenizer, tiny_bert):
    outputs, features = _outputs(tokenizer, tiny_bert)
    orders = _orders(features)
    ids, labels = torch.tensor([10, 11, 12]), torch.tensor([1, 0, 0])
    settings = FFidelitySettings(alpha=1.0, beta=1.0, n_samples=3, sizes=(0.5,), seed=0)
    values = ffidelity(outputs, orders, ids, outputs.target, labels, settings)
    width = features.shape[1]
    for e, order in enumerate(orders):
        n = len(order)
        k = math.floor(0.5 * n + 0.5)
        top = np.zeros((1, width), dtype=bool)
        top[0, order[:k]] = True
        rest = np.zeros((1, width), dtype=bool)
        rest[0, order[k:n]] = True
        clean, comp, suff = (outputs(np.array([e]), m)[0] for m in (np.zeros_like(top), top, rest))
        assert values["ffid_plus_prob"][e].item() == pytest.approx(clean - comp, abs=1e-6)  # comprehensiveness
        assert values["ffid_minus_prob"][e].item() == pytest.approx(clean - suff, abs=1e-6)  # sufficiency at k
    # accuracy: 1[argmax = gold] on the clean input minus on the masked one
    logits = class_logits(tiny_bert, outputs.batch)
    clean_correct = (logits.argmax(dim=-1) == labels).double()
    assert values["ffid_clean_correct"].tolist() == clean_correct.tolist()
    assert set(values["ffid_plus_accuracy"].tolist()) <= {-1.0, 0.0, 1.0}


def test_texts_with_fewer_than_one_over_beta_features_are_nan_and_unknown_labels_no_accuracy(tokenizer, tiny_bert):
    # 6, 3 and 7 tokens; beta 0.2: caps floor(1.2) = 1, floor(0.6) = 0, floor(1.4) = 1
    outputs, features = _outputs(tokenizer, tiny_bert)
    settings = FFidelitySettings(alpha=1.0, beta=0.2, n_samples=4, sizes=(0.2, 0.8), seed=1)
    values = ffidelity(outputs, _orders(features), torch.arange(3), outputs.target, torch.tensor([1, 0, -1]), settings)
    assert values["ffid_cap"].tolist() == [1.0, 0.0, 1.0]
    for column in ("ffid_plus_prob", "ffid_minus_prob", "ffid_plus_accuracy", "ffid_minus_accuracy"):
        assert math.isnan(values[column][1].item())  # cap 0: nothing removed, not a measured 0
    assert values["ffid_removed"].tolist() == [1.0, 0.0, 1.0]  # alpha 1: the cap binds, one feature per sample
    assert math.isfinite(values["ffid_plus_prob"][2].item()) and math.isnan(values["ffid_plus_accuracy"][2].item())


def test_values_are_seeded_per_example_and_do_not_depend_on_the_batch(tokenizer, tiny_bert):
    settings = FFidelitySettings(alpha=0.5, beta=0.4, n_samples=6, sizes=(0.3, 0.6), seed=5)
    outputs, features = _outputs(tokenizer, tiny_bert)
    orders, ids, labels = _orders(features), torch.tensor([7, 8, 9]), torch.tensor([1, 0, 1])
    together = ffidelity(outputs, orders, ids, outputs.target, labels, settings)
    again = ffidelity(outputs, orders, ids, outputs.target, labels, settings)
    assert all(torch.equal(together[c], again[c]) for c in together)
    alone_outputs, _ = _outputs(tokenizer, tiny_bert, TEXTS[2:])
    alone_outputs.target = outputs.target[2:]
    alone = ffidelity(alone_outputs, orders[2:], ids[2:], outputs.target[2:], labels[2:], settings)
    for column in ("ffid_plus_prob", "ffid_minus_prob", "ffid_plus_accuracy", "ffid_removed"):
        # float32 forwards of differently padded batches: equal up to rounding
        assert alone[column][0].item() == pytest.approx(together[column][2].item(), abs=1e-5)
    other = ffidelity(outputs, orders, ids, outputs.target, labels, FFidelitySettings(0.5, 0.4, 6, (0.3, 0.6), 6))
    assert not torch.equal(other["ffid_removed"], together["ffid_removed"])  # another seed, other draws
    # at most floor(0.4 n) features removed per sample, so at most that on average
    n = torch.tensor([len(o) for o in orders], dtype=torch.float64)
    assert (together["ffid_removed"] <= torch.floor(0.4 * n)).all()


def _removal_sets(orders, ids, settings: FFidelitySettings) -> set[tuple[int, bytes]]:
    """By hand: every ``(example row, removed features)`` F-Fidelity asks for, the clean rows included."""
    wanted = set()
    for e, order in enumerate(orders):
        n = len(order)
        uniforms = sample_uniforms(settings.seed, int(ids[e]), settings.n_samples, n)
        cap = math.floor(settings.beta * n + 1e-9)
        wanted.add((e, np.flatnonzero(np.zeros(n)).tobytes()))
        for k in (math.floor(size * n + 0.5) for size in settings.sizes):
            for plus in (True, False):
                for row in removal_masks(order, k, settings.alpha, cap, uniforms, plus):
                    wanted.add((e, np.flatnonzero(row).tobytes()))
    return wanted


def test_a_shared_row_engine_runs_each_removal_set_once_across_explanations(tokenizer, tiny_bert):
    """The analyses keep one row engine per tuned model for the job: a second explanation of the same examples
    runs only the removal sets the first did not ask for (counted by hand), with the values it gets alone."""
    settings = FFidelitySettings(alpha=0.5, beta=0.4, n_samples=6, sizes=(0.3, 0.6), seed=5)
    first, features = _outputs(tokenizer, tiny_bert)
    ids, labels = torch.tensor([7, 8, 9]), torch.tensor([1, 0, 1])
    second = ModelOutputs(tiny_bert, first.batch, features, first.strategy, first.target, forwards=first.forwards)
    seen, new = set(), []
    for outputs, orders in ((first, _orders(features, 3)), (second, _orders(features, 11))):
        before = outputs.forwards.stats.computed
        values = ffidelity(outputs, orders, ids, outputs.target, labels, settings)
        wanted = _removal_sets(orders, ids, settings)
        new.append(len(wanted - seen))
        assert outputs.forwards.stats.computed - before == new[-1]
        seen |= wanted
        alone = ffidelity(_outputs(tokenizer, tiny_bert)[0], orders, ids, first.target, labels, settings)
        for column in ("ffid_plus_prob", "ffid_minus_prob"):  # float32 rows run in other chunks: a few ulps
            assert values[column].numpy() == pytest.approx(alone[column].numpy(), abs=1e-6)
    assert 0 < new[1] < len(_removal_sets(_orders(features, 11), ids, settings))  # partly run already
    with pytest.raises(ValueError, match="runs another model"):
        engine = first.forwards
        ModelOutputs(torch.nn.Linear(1, 1), first.batch, features, first.strategy, first.target, forwards=engine)


def test_settings_are_checked():
    for bad in ({"alpha": 1.5}, {"beta": -0.1}, {"n_samples": 0}, {"sizes": ()}, {"sizes": (0.5, 2.0)}):
        with pytest.raises(ValueError, match="ffidelity\\."):
            FFidelitySettings(**bad)  # pyright: ignore[reportArgumentType]
    # 0 would give FFid 0 by construction: refused, saying why
    with pytest.raises(ValueError, match=re.escape("ffidelity.beta=0.0: choose a number in (0, 1] (at 0 the cap")):
        FFidelitySettings(beta=0.0)
    with pytest.raises(ValueError, match=re.escape("ffidelity.alpha=0: choose a number in (0, 1] (at 0 nothing")):
        FFidelitySettings(alpha=0)


def test_fine_tuning_removes_a_share_within_beta_and_leaves_the_model_unchanged(tokenizer, tiny_bert):
    encoded = tokenizer(TEXTS, padding=True, return_tensors="pt")
    tokens = TokenBatch(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    generator = torch.Generator().manual_seed(0)
    mask, shares = training_removal(tokens, tokenizer.all_special_ids, 0.3, generator)
    n = maskable_positions(tokens, tokenizer.all_special_ids).sum(dim=1)
    assert ((shares >= 0) & (shares <= 0.3)).all()
    assert mask.sum(dim=1).tolist() == torch.floor(shares * n + 0.5).long().tolist()  # k = floor(f n + 1/2)
    assert not (mask & ~maskable_positions(tokens, tokenizer.all_special_ids)).any()
    before = {k: v.clone() for k, v in tiny_bert.state_dict().items()}
    batches = [{"tokens": tokens, "labels": torch.tensor([1, 0, 1])}]
    strategy = MaskToken().bind(tokenizer)
    tuned, drawn = fine_tune_with_removal(tiny_bert, batches, strategy, tokenizer.all_special_ids, 0.3, 3, 1e-3, 0)
    assert len(drawn) == 9 and max(drawn) <= 0.3 and not tuned.training  # 3 steps over the one batch (cycled)
    assert all(torch.equal(v, tiny_bert.state_dict()[k]) for k, v in before.items())
    assert any(not torch.equal(v, tuned.state_dict()[k]) for k, v in before.items())
    again, _ = fine_tune_with_removal(tiny_bert, batches, strategy, tokenizer.all_special_ids, 0.3, 3, 1e-3, 0)
    assert all(torch.allclose(v, again.state_dict()[k]) for k, v in tuned.state_dict().items())  # seeded
    with pytest.raises(ValueError, match="ffidelity.steps=0"):
        fine_tune_with_removal(tiny_bert, batches, strategy, tokenizer.all_special_ids, 0.3, 0, 1e-3, 0)
    assert target_output(class_logits(tuned, tokens), torch.tensor([1, 0, 1])).shape == (3,)


def test_recorded_features_are_each_rows_final_layer_input_split_by_side(tokenizer, tiny_bert):
    """With a row engine that records the final layer's input, ffidelity returns it for the clean rows and the
    sampled FFid+ / FFid- rows: one per sample of each (example, size), rows of examples with cap 0 left out,
    and the head applied to a clean row's features gives its logits."""
    encoded = tokenizer(TEXTS, padding=True, return_tensors="pt")
    batch = TokenBatch(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    features = token_features(maskable_positions(batch, tokenizer.all_special_ids))
    target = torch.tensor([1, 0, 1])
    outputs = ModelOutputs(tiny_bert, batch, features, MaskToken().bind(tokenizer), target, "probability", 64, "final")
    orders, ids, labels = _orders(features), torch.tensor([10, 11, 12]), torch.tensor([1, 0, 0])
    # n = 6, 3, 7 features; beta 0.2: caps 1, 0, 1: the second example's rows are left out
    settings = FFidelitySettings(alpha=0.5, beta=0.2, n_samples=4, sizes=(0.25, 0.5, 0.75), seed=0)
    values = ffidelity(outputs, orders, ids, target, labels, settings)
    assert [len(o) for o in orders] == [6, 3, 7] and values["ffid_cap"].tolist() == [1.0, 0.0, 1.0]
    found = values["ffid_features"]
    hidden = tiny_bert.config.hidden_size
    assert found["clean"].shape == (3, hidden)
    assert found["plus"].shape == found["minus"].shape == (2 * 3 * 4, hidden)  # 2 examples x 3 sizes x 4 samples
    with torch.inference_mode():
        assert torch.allclose(tiny_bert.classifier(found["clean"]), class_logits(tiny_bert, batch), atol=1e-5)
    plain, _ = _outputs(tokenizer, tiny_bert)  # without recording: the same values, no features
    again = ffidelity(plain, orders, ids, target, labels, settings)
    assert "ffid_features" not in again
    assert torch.allclose(again["ffid_plus_prob"], values["ffid_plus_prob"], equal_nan=True)


def test_fine_tuning_under_autocast_trains_on_each_steps_weights(tokenizer, tiny_bert):
    """Under the evaluation's bf16 autocast (one long region), each step's forward sees the weights the step
    before updated: the result is that of a region without the weight-cast cache, whose stale bfloat16 weights
    of the first step had every later forward run on the initial model (the preset's copies lost up to 40
    points of accuracy). The forward does run in bfloat16: the copy differs from the float32 one."""
    encoded = tokenizer(TEXTS, padding=True, return_tensors="pt")
    tokens = TokenBatch(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    batches = [{"tokens": tokens, "labels": torch.tensor([1, 0, 1])}]
    strategy, special = MaskToken().bind(tokenizer), tokenizer.all_special_ids

    def tuned(**autocast):
        with torch.autocast("cpu", dtype=torch.bfloat16, **autocast):
            return fine_tune_with_removal(tiny_bert, batches, strategy, special, 0.3, 4, 1e-2, 0)[0].state_dict()

    cached, uncached = tuned(), tuned(cache_enabled=False)
    float32 = fine_tune_with_removal(tiny_bert, batches, strategy, special, 0.3, 4, 1e-2, 0)[0].state_dict()
    assert all(torch.equal(cached[k], uncached[k]) for k in cached)
    assert any(not torch.allclose(cached[k], float32[k], atol=1e-6) for k in cached)
    assert not torch.is_autocast_enabled("cpu")  # every region closed
