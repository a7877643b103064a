"""Every saliency method on tiny random BERT, RoBERTa, DistilBERT, ELECTRA and DeBERTa-v2 classifiers
(built from their configs, tokenizers trained locally on the shipped text), alone and inside the
iterative-masking evaluator, plus the methods' checkable properties computed by hand."""

from pathlib import Path

import hydra
import pytest
import torch
from omegaconf import OmegaConf

from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.masking import Delete, MaskToken
from itermask.core.saliency import (
    AttentionRolloutSaliency,
    AttentionSaliency,
    IntegratedGradientsSaliency,
    KernelShapSaliency,
    LimeSaliency,
    OcclusionSaliency,
    attention_rollout,
    prepare_for_saliency,
)
from itermask.core.tokens import TokenBatch, class_logits, maskable_positions

ROOT = Path(__file__).resolve().parents[2]
SALIENCY_CONFIGS = sorted(p.stem for p in (ROOT / "conf" / "saliency").glob("*.yaml"))
# keep the expensive settings small in unit tests
SMALL = {"n_steps": 8, "internal_batch_size": None, "n_samples": 10, "perturbations_per_eval": 10}
TEXTS = ["a great film , funny and sharp", "dull", "the plot is thin but the cast is charming"]


def build_method(name: str, tokenizer, seed: int = 0):
    """The saliency method of ``conf/saliency/<name>.yaml`` (seed interpolated, small settings), bound."""
    spec = OmegaConf.to_container(
        OmegaConf.create({"seed": seed, "saliency": OmegaConf.load(ROOT / "conf" / "saliency" / f"{name}.yaml")}),
        resolve=True,
    )["saliency"]
    spec.pop("name")
    spec.update({key: value for key, value in SMALL.items() if key in spec})
    return hydra.utils.instantiate(spec).bind(tokenizer)


def encode(tokenizer, texts=TEXTS) -> TokenBatch:
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    return TokenBatch(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))


def test_the_five_architectures_are_built_as_specified(tiny_classifier):
    architecture, model, tokenizer = tiny_classifier
    batch = encode(tokenizer)
    assert batch.input_ids[1].tolist().count(tokenizer.pad_token_id) > 0  # the batch is padded
    if architecture == "roberta":
        assert tokenizer.pad_token_id == 1 and tokenizer.mask_token == "<mask>" and batch.token_type_ids is None
        embeddings = model.roberta.embeddings
        assert embeddings.padding_idx == 1
        # position ids start after the pad id and padding keeps the pad position
        from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

        positions = RobertaEmbeddings.create_position_ids_from_input_ids(batch.input_ids, padding_idx=1)
        assert positions[1, :4].tolist() == [2, 3, 4, 5] and (positions[1, 4:] == 1).all()
    elif architecture == "distilbert":
        assert batch.token_type_ids is None
    else:
        assert batch.token_type_ids is not None and tokenizer.mask_token == "[MASK]"
    logits = class_logits(model, batch)
    assert logits.shape == (3, 2) and torch.isfinite(logits).all()


@pytest.mark.parametrize("name", SALIENCY_CONFIGS)
def test_every_saliency_method_runs_alone_and_in_the_evaluator(tiny_classifier, name):
    """Scores ``[B, L]``, finite, 0 at padding; then one-shot and recursive masking with MaskToken and
    Delete (fractions 0, 0.5, 1: the recursive schedule recomputes saliency on a masked input)."""
    architecture, model, tokenizer = tiny_classifier
    method = build_method(name, tokenizer)
    prepare_for_saliency(model, [method])
    batch = encode(tokenizer)
    scores = method.attribute(model, batch, torch.tensor([1, 0, 1]), torch.tensor([10, 11, 12]))
    assert scores.shape == batch.input_ids.shape
    assert torch.isfinite(scores).all()
    assert (scores[batch.attention_mask == 0] == 0).all()
    maskable = maskable_positions(batch, tokenizer.all_special_ids)
    if not method.needs_gradients and name not in ("random", "attention", "attention_rollout"):
        # perturbation methods never perturb special tokens: their score is exactly 0
        assert (scores[~maskable] == 0).all()
    if name != "random":  # the model's output depends on the tokens: some score is non-zero
        assert scores[maskable].abs().max() > 0

    n_maskable = maskable.sum(1)
    for strategy in (MaskToken(tokenizer), Delete(tokenizer)):
        evaluator = IterativeMaskingEvaluator(
            method,
            strategy,
            fractions=[0.0, 0.5, 1.0],
            special_ids=tokenizer.all_special_ids,
            schedules=("one_shot", "recursive"),
        )
        curves = evaluator.evaluate(model, batch, example_ids=torch.arange(3))
        assert set(curves) == {"one_shot", "recursive"}
        for schedule, curve in curves.items():
            assert curve.logits.shape == (3, 3, 2) and torch.isfinite(curve.logits).all(), (strategy, schedule)
            assert curve.k[:, -1].tolist() == n_maskable.tolist()
            # masking nothing reproduces the clean prediction
            assert torch.allclose(curve.logits[:, 0], curve.clean_logits, atol=1e-5)
        assert curves["one_shot"].keep_logits.shape == (3, 3, 2)


# -- properties computed by hand ---------------------------------------------------------------------


def _word_embeddings(model, ids):
    return model.get_input_embeddings()(ids)


def _logits_from_embeddings(model, batch: TokenBatch, embeddings):
    inputs = {"inputs_embeds": embeddings, "attention_mask": batch.attention_mask}
    if batch.token_type_ids is not None:
        inputs["token_type_ids"] = batch.token_type_ids
    return model(**inputs).logits


@pytest.mark.parametrize("baseline", ["pad", "zero"])
def test_integrated_gradients_completeness(tiny_classifier, baseline):
    """Scores sum to f(x) - f(baseline) (Sundararajan et al. 2017, Prop. 1), with f(baseline) computed
    by the model from the baseline's word embeddings (inputs_embeds)."""
    architecture, model, tokenizer = tiny_classifier
    # many steps: DistilBERT's ReLU head makes the path integral converge slowly
    method = IntegratedGradientsSaliency(n_steps=300, baseline=baseline, output="logit").bind(tokenizer)
    batch = encode(tokenizer)
    target = torch.tensor([1, 0, 1])
    special = ~maskable_positions(batch, tokenizer.all_special_ids)
    with torch.no_grad():
        if baseline == "pad":
            ids = torch.where(special, batch.input_ids, tokenizer.pad_token_id)
            base_embeddings = _word_embeddings(model, ids)
        else:
            base_embeddings = _word_embeddings(model, batch.input_ids) * special[..., None]
        clean = class_logits(model, batch).gather(1, target[:, None])[:, 0]
        base = _logits_from_embeddings(model, batch, base_embeddings).gather(1, target[:, None])[:, 0]
    scores = method.attribute(model, batch, target)
    assert (clean - base).abs().max() > 5e-2  # a real difference to explain
    assert torch.allclose(scores.sum(1), clean - base, atol=5e-3, rtol=1e-2), (scores.sum(1), clean - base)


@pytest.mark.parametrize("baseline", ["mask", "pad"])
def test_occlusion_is_leave_one_out_by_hand(tiny_classifier, baseline):
    architecture, model, tokenizer = tiny_classifier
    method = OcclusionSaliency(baseline=baseline, perturbations_per_eval=3).bind(tokenizer)
    batch = encode(tokenizer)
    target = torch.tensor([1, 0, 1])
    replacement = tokenizer.mask_token_id if baseline == "mask" else tokenizer.pad_token_id
    maskable = maskable_positions(batch, tokenizer.all_special_ids)
    expected = torch.zeros(batch.input_ids.shape)
    with torch.no_grad():
        clean = class_logits(model, batch).softmax(-1)
        for row, position in maskable.nonzero().tolist():
            ids = batch.input_ids[row : row + 1].clone()
            ids[0, position] = replacement
            one = batch.index(slice(row, row + 1)).with_ids(ids)
            occluded = class_logits(model, one).softmax(-1)[0, target[row]]
            expected[row, position] = clean[row, target[row]] - occluded
    scores = method.attribute(model, batch, target)
    assert expected.abs().max() > 1e-3
    assert torch.allclose(scores, expected, atol=1e-6)


def test_attention_is_the_mean_head_cls_row_of_the_last_layer(tiny_classifier):
    architecture, model, tokenizer = tiny_classifier
    batch = encode(tokenizer)
    prepare_for_saliency(model, [AttentionSaliency()])
    with torch.no_grad():
        attentions = model(**batch.model_inputs(), output_attentions=True).attentions
    last = attentions[-1]  # [B, H, L, L]
    expected = sum(last[:, h, 0, :] for h in range(last.shape[1])) / last.shape[1]
    expected = expected * batch.attention_mask
    scores = AttentionSaliency().attribute(model, batch, torch.tensor([0, 0, 0]))
    assert torch.allclose(scores, expected, atol=1e-6)
    assert torch.allclose(scores.sum(1), torch.ones(3), atol=1e-5)  # padding keys get no attention
    rollout = AttentionRolloutSaliency().attribute(model, batch, torch.tensor([0, 0, 0]))
    assert torch.allclose(rollout, attention_rollout(attentions)[:, 0, :] * batch.attention_mask, atol=1e-6)
    assert torch.allclose(rollout.sum(1), torch.ones(3), atol=1e-5)


def test_attention_rollout_on_a_hand_made_stack():
    """Two layers, two tokens (Abnar & Zuidema 2020, Eq. 1), computed on paper:
    layer 1 heads mean [[.5, .5], [0, 1]] -> (+I, rows normalised) [[.75, .25], [0, 1]];
    layer 2 heads [[0, 1], [1, 0]] and [[.5, .5], [0, 1]] -> mean [[.25, .75], [.5, .5]]
    -> [[.625, .375], [.25, .75]]; rollout = A2 @ A1 = [[.46875, .53125], [.1875, .8125]]."""
    layer1 = torch.tensor([[[0.5, 0.5], [0.0, 1.0]], [[0.5, 0.5], [0.0, 1.0]]])[None]
    layer2 = torch.tensor([[[0.0, 1.0], [1.0, 0.0]], [[0.5, 0.5], [0.0, 1.0]]])[None]
    rollout = attention_rollout([layer1, layer2])
    assert torch.allclose(rollout, torch.tensor([[[0.46875, 0.53125], [0.1875, 0.8125]]]))
    assert torch.allclose(attention_rollout([layer1]), torch.tensor([[[0.75, 0.25], [0.0, 1.0]]]))
    with pytest.raises(ValueError, match="at least one layer"):
        attention_rollout([])
    with pytest.raises(ValueError, match=r"\[B, H, L, L\]"):
        attention_rollout([layer1, layer2[:, :, :1]])


def test_attention_methods_fail_before_any_work_without_attention_weights(architecture_tokenizers):
    """transformers 5 loads SDPA attention, which returns no weights; prepare_for_saliency switches to
    eager, and check() names the problem otherwise."""
    from conftest import build_tiny_classifier

    model = build_tiny_classifier("bert", architecture_tokenizers["bert"])
    assert model.config._attn_implementation == "sdpa"
    for method in (AttentionSaliency(), AttentionRolloutSaliency()):
        with pytest.raises(ValueError, match="eager"):
            method.check(model)
    prepare_for_saliency(model, [AttentionSaliency()])
    assert model.config._attn_implementation == "eager"
    AttentionSaliency().check(model)


@pytest.mark.parametrize("method_class", [LimeSaliency, KernelShapSaliency])
def test_lime_and_kernel_shap_are_seeded_per_example(tiny_classifier, method_class):
    architecture, model, tokenizer = tiny_classifier
    batch = encode(tokenizer)
    target, ids = torch.tensor([1, 0, 1]), torch.tensor([5, 6, 7])

    def run(seed, rows=slice(None)):
        method = method_class(n_samples=24, seed=seed, perturbations_per_eval=5).bind(tokenizer)
        return method.attribute(model, batch.index(rows), target[rows], ids[rows])

    torch.manual_seed(123)
    first = run(0)
    after = torch.rand(1)
    torch.manual_seed(123)
    assert torch.equal(run(0), first)
    assert torch.equal(torch.rand(1), after)  # the global random state is left as it was
    # independent of the batch it is in: the same perturbations and surrogate fit, but the model's forwards run
    # in batches of another shape (one example's rows alone vs three examples' rows padded together), so BLAS
    # may sum in another order (and on fewer threads on a loaded machine): equal up to float32 rounding of the
    # outputs (about 1e-7 relative) carried through the surrogate's least-squares fit
    torch.testing.assert_close(run(0, slice(2, 3))[0], first[2], rtol=1e-4, atol=1e-5)
    assert not torch.equal(run(1), first)
