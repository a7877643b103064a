"""The methods that batch their own model calls across examples (integrated gradients' path points,
DeepLift's rows, occlusion's leave-one-out rows, LIME's and Kernel SHAP's samples: sorted by length, in chunks
of a token budget) against the reference: Captum called on each example alone, as before the batching."""

import pytest
import torch
from conftest import tiny_bert_config
from transformers import BertForSequenceClassification

from itermask.core.evaluation import IterativeMaskingEvaluator, saliency_attribution
from itermask.core.masking import MaskToken
from itermask.core.saliency import (
    DeepLiftSaliency,
    IntegratedGradientsSaliency,
    KernelShapSaliency,
    LimeSaliency,
    OcclusionSaliency,
)
from itermask.core.schedules import Recursive, top_k_mask
from itermask.core.tokens import TokenBatch

TEXTS = [
    "a great film , funny and sharp",
    "dull",
    "the plot drags but the actors are wonderful and the ending is sharp",
    "great",
    "funny , sharp and a little long",
    "not good",
    "a film",
    "the actors are wonderful",
]


@pytest.fixture
def batch(tokenizer):
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    return TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])


@pytest.fixture
def model(tokenizer):
    """A 2-layer, hidden-32 BERT with random weights drawn wide enough (initializer range 0.2) that its
    outputs depend on the input (p(class 0) 0.32 to 0.66 on ``TEXTS``): the scores are not rounding noise."""
    torch.manual_seed(0)
    config = tiny_bert_config(tokenizer, initializer_range=0.2)
    return BertForSequenceClassification(config).eval()


def _per_example(method, model, batch, target, example_ids):
    """The reference scores ``[B, L]`` and convergence deltas ``[B]`` (or ``None``): Captum on each example
    alone, trimmed to its own length."""
    scores, deltas = torch.zeros(batch.input_ids.shape), []
    for row in range(len(batch)):
        example = batch.index(slice(row, row + 1)).trim()
        with torch.enable_grad():
            if hasattr(method, "_captum_row"):  # a perturbation method: seeded per example, no delta
                ids = example_ids[row : row + 1]
                part, delta = method.captum_attribution(model, example, target[row : row + 1], ids), None
            else:
                part, delta = method.captum_attribution(model, example, target[row : row + 1])
        scores[row, : part.shape[1]] = part[0].detach()
        deltas.append(None if delta is None else delta.detach().double())
    scores = scores.masked_fill(~batch.attention_mask.bool(), 0.0)
    return scores, None if deltas[0] is None else torch.cat(deltas)


METHODS = {
    "integrated_gradients": lambda budget: IntegratedGradientsSaliency(n_steps=7, token_budget=budget, output="logit"),
    "integrated_gradients_probability_zero": lambda budget: IntegratedGradientsSaliency(
        n_steps=5, baseline="zero", token_budget=budget
    ),
    "deeplift": lambda budget: DeepLiftSaliency(token_budget=budget, output="logit"),
    "occlusion": lambda budget: OcclusionSaliency(token_budget=budget),
    "occlusion_mask": lambda budget: OcclusionSaliency(baseline="mask", token_budget=budget, output="logit"),
    "lime": lambda budget: LimeSaliency(n_samples=40, seed=3, token_budget=budget),
    "kernel_shap": lambda budget: KernelShapSaliency(n_samples=40, seed=3, token_budget=budget),
}


@pytest.mark.parametrize("name", sorted(METHODS))
@pytest.mark.parametrize("budget", [64, 100_000])
def test_batched_scores_equal_captum_per_example(name, budget, model, batch, tokenizer):
    """Every example's scores (and the completeness gap) equal Captum's on that example alone, whether the
    rows run in many small chunks (budget 64 tokens) or all at once."""
    method = METHODS[name](budget).bind(tokenizer)
    target = torch.tensor([0, 1] * (len(batch) // 2))
    example_ids = torch.arange(10, 10 + len(batch))
    expected, deltas = _per_example(method, model, batch, target, example_ids)
    got = saliency_attribution(method, model, batch, target, example_ids)
    assert expected.abs().max() > 0.01
    torch.testing.assert_close(got.scores, expected, rtol=1e-4, atol=1e-6)
    if deltas is not None:
        torch.testing.assert_close(got.completeness_gap, deltas, rtol=1e-4, atol=1e-6)


def test_integrated_gradients_path_points_are_cut_by_the_token_budget(model, batch, tokenizer, monkeypatch):
    """Each forward and backward of integrated gradients holds at most ``token_budget`` padded tokens (a
    path point longer than the budget alone), and the path points of different examples share forwards."""
    method = IntegratedGradientsSaliency(n_steps=4, token_budget=120).bind(tokenizer)
    shapes = []
    forward = type(model).forward

    def spy(self, *args, **kwargs):
        shapes.append(tuple(kwargs["input_ids"].shape))
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(type(model), "forward", spy)
    saliency_attribution(method, model, batch, torch.zeros(len(batch), dtype=torch.long), torch.arange(len(batch)))
    assert all(rows * length <= 120 or rows == 1 for rows, length in shapes)
    lengths = batch.attention_mask.sum(dim=1)
    assert sum(rows * length for rows, length in shapes) < 1.5 * (4 + 2) * int(lengths.sum())  # some padding
    assert len(shapes) < (4 + 2) * len(batch)  # fewer calls than one per example and step


def test_occlusion_computes_identical_rows_once(model, tokenizer):
    """Two identical examples: their leave-one-out rows are computed once (and score alike)."""
    enc = tokenizer(["funny and sharp", "funny and sharp"], padding=True, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    method = OcclusionSaliency().bind(tokenizer)
    scores = method.attribute(model, batch, torch.tensor([1, 1]))
    n = int((~method.kept(batch)[0]).sum())
    assert n >= 2
    assert method.forward_stats.rows == 2 * (n + 1)
    assert method.forward_stats.computed == n + 1
    torch.testing.assert_close(scores[0], scores[1], rtol=0, atol=0)


def _reference_recursive_masks(self, clean_saliency, maskable, k, saliency_fn):
    """The recursive schedule re-explaining every example that gains tokens and has some masked already
    (also those that take every token left, whose ranking decides nothing)."""
    state, steps, scores = torch.zeros_like(maskable), [], clean_saliency
    for k_s in k:
        need = (k_s - state.sum(dim=1)).clamp(min=0)
        rows = torch.nonzero((need > 0) & state.any(dim=1)).flatten()
        if len(rows):
            scores = scores.clone()
            scores[rows] = saliency_fn(state[rows], rows).to(scores.dtype)
        state = state | top_k_mask(scores, maskable & ~state, need)
        steps.append(state)
    return torch.stack(steps)


@pytest.mark.parametrize("name", ["occlusion", "integrated_gradients"])
def test_recursive_schedule_re_explains_less_with_the_same_curves(name, model, batch, tokenizer, monkeypatch):
    """The recursive curves equal those of re-explaining every example that gains tokens, with fewer
    re-explained rows (an example taking every token left needs no ranking)."""
    method = METHODS[name](100_000).bind(tokenizer)
    evaluator = IterativeMaskingEvaluator(
        method, MaskToken(tokenizer), [0.0, 0.1, 0.3, 0.5, 0.8, 1.0], tokenizer.all_special_ids, ["recursive"]
    )
    explained = []
    explain = type(method).explain

    def counting(self, model, batch, *args, **kwargs):
        explained.append(len(batch))
        return explain(self, model, batch, *args, **kwargs)

    monkeypatch.setattr(type(method), "explain", counting)
    new = evaluator.evaluate(model, batch)["recursive"]
    new_rows = sum(explained)
    explained.clear()
    with monkeypatch.context() as patch:
        patch.setattr(Recursive, "masks", _reference_recursive_masks)
        old = evaluator.evaluate(model, batch)["recursive"]
    assert torch.equal(new.k, old.k)
    torch.testing.assert_close(new.logits, old.logits, rtol=0, atol=0)
    assert new_rows < sum(explained)
    assert explained[0] == len(batch)  # the clean input, once
