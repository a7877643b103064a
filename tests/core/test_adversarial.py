"""Adversarial fine-tuning: the first-order attack's exact choices on an analytic model, real adversarial
examples on a tiny BERT (verified by an independent forward), the augmentation inside the Lightning training
step, its settings and the checkpoint key (changed only when enabled)."""

import math
from pathlib import Path

import pytest
import torch
from conftest import AdditiveModel, TableCandidates, ToyTokenizer, bound
from conftest import training_key_of as training_key
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict

from itermask.core.adversarial import FirstOrderAttack, embedding_gradient
from itermask.core.attack import budget_counts
from itermask.core.candidates import EmbeddingNeighbours, MaskCandidates, word_initial_positions, word_start_vocabulary
from itermask.core.tokens import TokenBatch, class_logits, maskable_positions
from itermask.settings import plain
from itermask.storage.store import results_key
from itermask.training.augmentation import AdversarialAugmentation

ROOT = Path(__file__).resolve().parents[2]
SPECIAL = ToyTokenizer.all_special_ids


class PositionWeightedModel(AdditiveModel):
    """``logits = [0, sum_i v_i * w[id_i] * attention_i]`` with position weights ``v``: the loss gradient with
    respect to the (1-d) word embedding at position ``i`` is ``dL/ds * v_i``, so ``||g_i|| ∝ |v_i|``. Records
    whether it ran in train mode."""

    def __init__(self, weights, position_weights):
        super().__init__(weights)
        self.position_weights = torch.tensor(position_weights)
        self.modes = []

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        self.modes.append(self.training)
        v = self.position_weights[: input_ids.shape[1]]
        score = (self.embedding(input_ids).squeeze(-1) * v * attention_mask).sum(dim=1)
        return torch.stack([torch.zeros_like(score), score], dim=1)


# ids 5..10 with weights 1.0, 0.5, 0.2, -2.0, 0.9, 3.0; candidates: 6 -> [9, 8], 7 -> [10]
WEIGHTS = {5: 1.0, 6: 0.5, 7: 0.2, 8: -2.0, 9: 0.9, 10: 3.0}
TABLE = {6: [9, 8], 7: [10], 5: [8], 9: [10]}
POSITIONS = [1.0, 1.0, 3.0, 2.0, 1.0]


def _clean():
    # row 0: [CLS] 5 6 7 [SEP], label 1: s = 1.0 + 3 * 0.5 + 2 * 0.2 = 2.9
    # row 1: [CLS] 9 6 [SEP] [PAD], label 0: s = 0.9 + 3 * 0.5 = 2.4 (already predicted 1: wrong)
    ids = torch.tensor([[1, 5, 6, 7, 2], [1, 9, 6, 2, 0]])
    return TokenBatch(ids, (ids != 0).long()), torch.tensor([1, 0])


def test_first_order_choice_ranking_and_verification_by_hand():
    model = PositionWeightedModel(WEIGHTS, POSITIONS).train()
    batch, labels = _clean()
    attack = FirstOrderAttack(TableCandidates(TABLE).bind(ToyTokenizer()), SPECIAL, budget=0.5)
    out = attack.generate(model, batch, labels)
    # row 0: n = 3, k_max = floor(1.5 + 0.5) = 2: positions 2 (v = 3) and 3 (v = 2) by |g|. dL/ds = -(1 - p).
    # position 2 (token 6): 9 -> -(1-p)*3*(0.9-0.5) < 0, 8 -> -(1-p)*3*(-2.5) > 0: take 8
    # position 3 (token 7): 10 -> -(1-p)*2*(3.0-0.2) < 0: nothing raises the loss, left
    # row 1: n = 2, k_max = floor(1 + 0.5) = 1: position 2; dL/ds = p1 > 0; 9 -> p1*3*0.4 > 0, 8 < 0: take 9
    assert out.batch.input_ids.tolist() == [[1, 5, 8, 7, 2], [1, 9, 9, 2, 0]]
    p0, p1 = torch.sigmoid(torch.tensor(2.9)), torch.sigmoid(torch.tensor(2.4))
    assert out.estimate.tolist() == pytest.approx([float((1 - p0) * 3 * 2.5), float(p1 * 3 * 0.4)], rel=1e-5)
    # verification: row 0 s = 1 - 6 + 0.4 = -4.6 (flipped), row 1 s = 0.9 + 2.7 = 3.6 (p(0) lower, not a flip:
    # it was already wrong)
    assert out.clean_prob.tolist() == pytest.approx([float(p0), float(1 - p1)], rel=1e-5)
    assert out.adversarial_prob.tolist() == pytest.approx(
        [float(torch.sigmoid(torch.tensor(-4.6))), float(1 - torch.sigmoid(torch.tensor(3.6)))], rel=1e-5
    )
    assert out.accepted.tolist() == [True, True] and out.flipped.tolist() == [True, False]
    assert out.n_substituted.tolist() == [1, 1] == out.n_proposed.tolist()
    assert model.training and set(model.modes) == {False}  # attacked in eval mode, mode restored
    assert out.batch.attention_mask.equal(batch.attention_mask)


def test_no_substitution_and_rejected_proposals_keep_the_clean_input():
    model = PositionWeightedModel(WEIGHTS, POSITIONS).eval()
    batch, labels = _clean()
    raising_only = TableCandidates({6: [10], 7: [10], 5: [10], 9: [10]}).bind(ToyTokenizer())
    out = FirstOrderAttack(raising_only, SPECIAL, budget=1.0).generate(model, batch, labels.new_tensor([1, 1]))
    # for label 1 every candidate raises the score: the estimate is never positive, nothing proposed
    assert out.batch.input_ids.equal(batch.input_ids)
    assert out.n_proposed.tolist() == [0, 0] and not out.accepted.any() and out.estimate.tolist() == [0.0, 0.0]
    assert not model.training


def test_embedding_gradient_is_each_examples_own_loss_gradient():
    model = PositionWeightedModel(WEIGHTS, POSITIONS)
    batch, labels = _clean()
    grad, logits = embedding_gradient(model, batch, labels)
    p = torch.sigmoid(logits[:, 1] - logits[:, 0])
    ds = torch.stack([-(1 - p[0]), p[1]])  # dL/ds of each row's own cross-entropy
    expected = ds[:, None] * torch.tensor(POSITIONS) * batch.attention_mask
    assert grad.squeeze(-1) == pytest.approx(expected, abs=1e-6)
    assert all(p.grad is None for p in model.parameters())  # parameter gradients untouched


def _predicted(model, batch):
    with torch.no_grad():
        return class_logits(model, batch).argmax(dim=-1)


def test_adversarial_examples_really_lower_the_target_probability_on_a_tiny_bert(tiny_bert, tokenizer):
    texts = [
        "a good film with a great story",
        "the worst movie of the year",
        "not funny and too long",
        "one of the best films",
        "it is a bad film",
        "a very good and funny movie",
        "the story is too long",
        "the acting is great but the film is not",
    ]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    labels = _predicted(tiny_bert, batch)  # attack the model's own decisions
    source = EmbeddingNeighbours(k=10, min_similarity=-1.0).bind(tokenizer)
    starts = word_start_vocabulary(tokenizer)
    out = FirstOrderAttack(source, tokenizer.all_special_ids, starts, budget=0.3).generate(tiny_bert, batch, labels)
    with torch.no_grad():  # an independent forward of what the augmentation returns
        probs = class_logits(tiny_bert, out.batch).softmax(-1).gather(1, labels[:, None]).squeeze(1)
        clean = class_logits(tiny_bert, batch).softmax(-1).gather(1, labels[:, None]).squeeze(1)
    assert out.accepted.sum() >= 4
    assert (probs[out.accepted] < clean[out.accepted]).all()
    assert probs[out.accepted] == pytest.approx(out.adversarial_prob[out.accepted].tolist(), abs=1e-5)
    assert out.batch.input_ids[~out.accepted].equal(batch.input_ids[~out.accepted])
    assert out.flipped.equal(out.accepted & (_predicted(tiny_bert, out.batch) != labels))
    changed = out.batch.input_ids != batch.input_ids
    maskable = maskable_positions(batch, tokenizer.all_special_ids)
    assert not (changed & ~word_initial_positions(batch, starts, maskable)).any()
    assert (changed.sum(1) <= budget_counts(maskable.sum(1), 0.3)).all()
    source.prepare(tiny_bert)
    for row, position in torch.nonzero(changed).tolist():  # every substitute is a neighbour of the original
        original = int(batch.input_ids[row, position])
        assert int(out.batch.input_ids[row, position]) in source.neighbours([original])[original]


def test_the_augmentation_attacks_a_share_of_batches(tiny_bert, tokenizer):
    enc = tokenizer(["a good film", "a bad film"], padding=True, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    attack = FirstOrderAttack(EmbeddingNeighbours(k=5, min_similarity=-1.0).bind(tokenizer), tokenizer.all_special_ids)
    never = AdversarialAugmentation(attack, batch_share=0.0)
    assert never(tiny_bert, batch, torch.tensor([1, 0])) == (batch, {})
    always = AdversarialAugmentation(attack, batch_share=1.0)
    out, stats = always(tiny_bert, batch, torch.tensor([1, 0]))
    assert set(stats) == {"adv_accepted", "adv_flipped", "adv_substituted"} and 0 <= stats["adv_accepted"] <= 1
    half = AdversarialAugmentation(attack, batch_share=0.5, seed=1)
    share = sum(bool(half(tiny_bert, batch, torch.tensor([1, 0]))[1]) for _ in range(200)) / 200
    assert 0.38 < share < 0.62
    with pytest.raises(
        ValueError, match=r"train.adversarial_augmentation.batch_share must be a number in \[0, 1\], got 1.5"
    ):
        AdversarialAugmentation(attack, batch_share=1.5)
    with pytest.raises(ValueError, match="proposes no token ids"):
        FirstOrderAttack(MaskCandidates().bind(tokenizer), tokenizer.all_special_ids)
    with pytest.raises(ValueError, match=r"train.adversarial_augmentation.budget must lie in \(0, 1\]"):
        FirstOrderAttack(EmbeddingNeighbours().bind(tokenizer), tokenizer.all_special_ids, budget=0)


def test_the_training_step_trains_on_the_adversarial_batch(tiny_bert, tokenizer, tmp_path):
    from itermask.training.classifier import SequenceClassifier

    tiny_bert.config.hidden_dropout_prob = tiny_bert.config.attention_probs_dropout_prob = 0.0
    tiny_bert.save_pretrained(tmp_path / "clf")
    tokenizer.save_pretrained(tmp_path / "clf")
    attack = FirstOrderAttack(
        EmbeddingNeighbours(k=10, min_similarity=-1.0).bind(tokenizer),
        tokenizer.all_special_ids,
        word_start_vocabulary(tokenizer),
        budget=0.5,
    )
    module = SequenceClassifier(
        str(tmp_path / "clf"), num_labels=2, adversarial_augmentation=AdversarialAugmentation(attack, batch_share=1.0)
    )
    logged = {}
    module.log = lambda name, value, **kwargs: logged.__setitem__(name, value)
    enc = tokenizer(
        ["a good film with a great story", "the worst movie of the year"], padding=True, return_tensors="pt"
    )
    tokens = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    labels = _predicted(module.model.eval(), tokens)
    module.model.train()
    loss = module.training_step({"tokens": tokens, "labels": labels}, 0)
    expected = attack.generate(module.model, tokens, labels)  # deterministic: the same adversarial batch
    assert module.model.training
    assert float(loss) == pytest.approx(
        float(torch.nn.functional.cross_entropy(module(expected.batch), labels)), rel=1e-5
    )
    assert float(logged["adv_accepted"]) == pytest.approx(expected.accepted.float().mean().item())
    assert expected.accepted.any() and not expected.batch.input_ids.equal(tokens.input_ids)


def _compose(*overrides, name="evaluate"):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name=name, overrides=["output_dir=/tmp/unused", *overrides], return_hydra_config=False)


def test_checkpoint_key_changes_only_when_adversarial_training_is_enabled():
    on = "train.adversarial_augmentation.enabled=true"
    standard = _compose()
    key = training_key(standard)[0]
    assert training_key(_compose("train.adversarial_augmentation.budget=0.5"))[0] == key  # disabled: ignored
    assert (
        training_key(_compose("attack=embedding_neighbors", "attack.budget=0.5"))[0] == key
    )  # the evaluation's attack
    legacy = standard.copy()
    with open_dict(legacy):
        del legacy.train.adversarial_augmentation
    assert training_key(legacy)[0] == key  # as before the option existed
    keys = {
        training_key(_compose(on, *extra))[0]
        for extra in (
            [],
            ["train.adversarial_augmentation.budget=0.5"],
            ["train.adversarial_augmentation.batch_share=1.0"],
            ["train.adversarial_augmentation.candidates.k=5"],
        )
    }
    assert len(keys) == 4 and key not in keys
    assert training_key(_compose(on, "attack=embedding_neighbors"))[0] == training_key(_compose(on))[0]
    payload = training_key(_compose(on))[1]["train"]["adversarial_augmentation"]
    assert payload["candidates"] == {"name": "embedding_neighbors", "k": 20, "min_similarity": 0.4}
    # the results key likewise: a disabled section stays out of it
    resolved = OmegaConf.to_container(standard, resolve=True)
    without = OmegaConf.to_container(legacy, resolve=True)
    assert results_key(resolved) == results_key(without)
    assert results_key(OmegaConf.to_container(_compose(on), resolve=True)) != results_key(resolved)


def test_with_adversarial_training_off_every_checkpoint_key_is_the_one_from_before_it_existed():
    """Keys computed by main at a974b20, before train.adversarial_augmentation existed (standard, masked
    fine-tuning, another seed and epochs); the evaluation's attack choice changes no checkpoint key."""
    for overrides, key in [
        ((), "a5156e850c501ac0"),
        (("attack=embedding_neighbors",), "a5156e850c501ac0"),
        (("train.masking_augmentation.enabled=true",), "6629ccc7941488ee"),
        (("seed=2", "experiment=masked_vs_standard"), "7c9937dcff9b3ba2"),
        (("attack=mask", "model.finetune.max_epochs=2"), "d675924c53e65f8d"),
    ]:
        old = (*overrides, "train.group_by_length=false")  # uniformly shuffled batches, as then
        assert training_key(_compose(*old))[0] == key, overrides
        assert "adversarial_augmentation" not in training_key(_compose(*old))[1]["train"]
    for overrides, key in [
        ((), "a5156e850c501ac0"),
        (("train.masking_augmentation.enabled=true",), "6629ccc7941488ee"),
    ]:
        old = (*overrides, "train.group_by_length=false")
        assert training_key(_compose(*old, name="train"))[0] == key, overrides  # train.py: the same keys


def test_adversarial_settings_build_and_bad_ones_fail_before_any_work():
    _, resources = bound(
        _compose(
            "train.adversarial_augmentation.enabled=true", "train.adversarial_augmentation.budget=0.3", name="train"
        )
    )
    augmentation = resources.adversarial_fine_tuning
    assert augmentation.batch_share == 0.5 and augmentation.attack.budget == 0.3
    assert augmentation.attack.word_start is not None and augmentation.attack.candidates.k == 20
    assert bound(_compose(name="train"))[1].adversarial_fine_tuning is None
    for overrides, message in [
        (
            ["train.adversarial_augmentation.batch_share=2"],
            r"train.adversarial_augmentation.batch_share must be a number in \[0, 1\], got 2",
        ),
        (
            ["train.adversarial_augmentation.budget=0"],
            r"train.adversarial_augmentation.budget must lie in \(0, 1\] \(a share of the maskable tokens\), got 0",
        ),
        (
            ["train.adversarial_augmentation.candidates.k=0"],
            "train.adversarial_augmentation.candidates.k must be an integer >= 1, got 0",
        ),
        (
            [
                "train.adversarial_augmentation.candidates.name=mask",
                "train.adversarial_augmentation.candidates._target_=itermask.core.candidates.MaskCandidates",
                "~train.adversarial_augmentation.candidates.k",
                "~train.adversarial_augmentation.candidates.min_similarity",
            ],
            "proposes no token ids",
        ),
        (["train.adversarial_augmentation.candidates.name=thesaurus"], "unknown attack candidate source 'thesaurus'"),
        (
            ["+train.adversarial_augmentation.steps=3"],
            r"unknown train.adversarial_augmentation setting\(s\) \['steps'\]",
        ),
    ]:
        with pytest.raises(ValueError, match=message):
            bound(_compose("train.adversarial_augmentation.enabled=true", *overrides, name="train"))


def test_the_experiment_sweeps_adversarial_training_with_an_evaluation_attack():
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "evaluate",
            overrides=["output_dir=/tmp/unused", "experiment=adversarial_vs_standard"],
            return_hydra_config=True,
        )
    assert cfg.hydra.sweeper.params["train.adversarial_augmentation.enabled"] == "false,true"
    assert cfg.hydra.sweeper.params["seed"] == "0,1,2"
    assert cfg.attack.name == "embedding_neighbors" and cfg.attack.candidates.k == 20
    schedules = plain(cfg.evaluation)["schedules"]
    assert schedules == ["one_shot"] and cfg.evaluation.n_examples == 50
    assert cfg.attack.ranking in schedules
    assert not math.isnan(cfg.train.adversarial_augmentation.batch_share)
