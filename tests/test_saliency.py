"""Saliency methods on a tiny random BERT with a locally built tokenizer."""

import pytest
import torch

from itermask.saliency import (
    GradientSaliency,
    InputXGradientSaliency,
    IntegratedGradientsSaliency,
    RandomSaliency,
)
from itermask.tokens import TokenBatch, class_logits


@pytest.fixture
def batch(tokenizer):
    enc = tokenizer(["a great film , funny and sharp", "dull"], padding=True, return_tensors="pt")
    return TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])


def _embedding_gradient(model, batch, target):
    """d p(target) / d word-embedding output, by plain autograd."""
    captured = {}

    def hook(module, inputs, output):
        output.retain_grad()
        captured["out"] = output

    handle = model.get_input_embeddings().register_forward_hook(hook)
    probs = class_logits(model, batch).softmax(-1)
    probs.gather(1, target[:, None]).sum().backward()
    handle.remove()
    return captured["out"].grad, captured["out"].detach()


def test_gradient_norm_matches_autograd(tiny_bert, batch):
    target = torch.tensor([1, 0])
    grad, _ = _embedding_gradient(tiny_bert, batch, target)
    scores = GradientSaliency().attribute(tiny_bert, batch, target)
    expected = grad.norm(dim=-1) * batch.attention_mask
    assert scores.shape == batch.input_ids.shape
    assert torch.allclose(scores, expected, atol=1e-7)
    assert (scores[1, batch.attention_mask[1] == 0] == 0).all()  # padding gets 0


def test_input_x_gradient_matches_autograd(tiny_bert, batch):
    target = torch.tensor([0, 1])
    grad, embeddings = _embedding_gradient(tiny_bert, batch, target)
    scores = InputXGradientSaliency().attribute(tiny_bert, batch, target)
    assert torch.allclose(scores, (grad * embeddings).sum(-1) * batch.attention_mask, atol=1e-7)
    absolute = InputXGradientSaliency(absolute=True).attribute(tiny_bert, batch, target)
    assert torch.allclose(absolute, scores.abs())


def test_integrated_gradients_completeness(tiny_bert, batch, tokenizer):
    """Sum of IG attributions = f(x) - f(baseline) (Sundararajan et al. 2017, Prop. 1)."""
    method = IntegratedGradientsSaliency(n_steps=200, output="logit").bind(tokenizer)
    target = torch.tensor([1, 1])
    baseline = method.baseline_ids(batch)
    special = torch.isin(batch.input_ids, torch.tensor(tokenizer.all_special_ids))
    assert torch.equal(baseline[special], batch.input_ids[special])
    assert (baseline[~special] == tokenizer.pad_token_id).all()
    scores = method.attribute(tiny_bert, batch, target)
    with torch.no_grad():
        diff = class_logits(tiny_bert, batch)[:, 1] - class_logits(tiny_bert, batch.with_ids(baseline))[:, 1]
    assert torch.allclose(scores.sum(-1), diff, atol=2e-3)


def test_integrated_gradients_needs_binding(tiny_bert, batch):
    with pytest.raises(ValueError, match="bind"):
        IntegratedGradientsSaliency().attribute(tiny_bert, batch, torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="n_steps"):
        IntegratedGradientsSaliency(n_steps=0)


def test_random_saliency_is_seeded_per_example(tiny_bert, batch):
    method = RandomSaliency(seed=3)
    ids = torch.tensor([7, 8])
    first = method.attribute(tiny_bert, batch, torch.tensor([0, 0]), ids)
    # the same example gives the same scores in another batch composition
    alone = method.attribute(tiny_bert, batch.index(torch.tensor([1])), torch.tensor([0]), ids[1:])
    assert torch.equal(first[1], alone[0])
    assert not torch.equal(first, RandomSaliency(seed=4).attribute(tiny_bert, batch, torch.tensor([0, 0]), ids))
    assert (first[batch.attention_mask == 0] == 0).all()


def test_unknown_output_is_rejected():
    with pytest.raises(ValueError, match="output"):
        GradientSaliency(output="odds")
