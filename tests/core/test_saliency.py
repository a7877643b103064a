"""Saliency methods on a tiny random BERT with a locally built tokenizer."""

from pathlib import Path

import pytest
import torch
from conftest import AdditiveModel

from itermask.core.saliency import (
    AttentionRolloutSaliency,
    AttentionSaliency,
    DeepLiftSaliency,
    GradientSaliency,
    InputXGradientSaliency,
    IntegratedGradientsSaliency,
    KernelShapSaliency,
    LimeSaliency,
    OcclusionSaliency,
    RandomSaliency,
    ZeroSaliencyWarning,
    example_seed,
    prepare_for_saliency,
)
from itermask.core.tokens import TokenBatch, class_logits


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


# -- the full set of methods: exact values on the analytic additive model --------------------------------


# AdditiveModel: logit of class 1 = sum of the token weights; ToyTokenizer ids [PAD]=0 .. [UNK]=4 special
WEIGHTS = {1: 0.5, 2: -0.25, 3: 0.75, 5: 1.0, 6: -2.0, 7: 0.5, 8: 3.0}
#                 [CLS] a     b   c   [SEP] [PAD]
ADDITIVE_IDS = [[1, 5, 6, 7, 2, 0], [1, 8, 5, 2, 0, 0]]


@pytest.fixture
def additive():
    ids = torch.tensor(ADDITIVE_IDS)
    return AdditiveModel(WEIGHTS), TokenBatch(ids, (ids != 0).long())


def _expected(ids, baseline_id):
    """Attribution of each non-special token to the class-1 logit of the additive model, with the token
    replaced by ``baseline_id`` as reference: w[id] - w[baseline]; 0 at special tokens."""
    weights = torch.tensor([WEIGHTS.get(i, 0.0) for i in range(16)])
    special = torch.isin(ids, torch.tensor([0, 1, 2, 3, 4]))
    return torch.where(special, torch.zeros(()), weights[ids] - weights[baseline_id])


@pytest.mark.parametrize(
    "method",
    [
        IntegratedGradientsSaliency(n_steps=5, output="logit"),
        IntegratedGradientsSaliency(n_steps=5, output="logit", baseline="mask"),
        DeepLiftSaliency(output="logit"),
        DeepLiftSaliency(output="logit", baseline="mask"),
        OcclusionSaliency(output="logit", perturbations_per_eval=2),
        OcclusionSaliency(output="logit", baseline="mask"),
        KernelShapSaliency(output="logit", n_samples=40),
        LimeSaliency(output="logit", n_samples=40, alpha=1e-9),
    ],
    ids=repr,
)
def test_reference_methods_recover_the_additive_weights(method, additive, toy_tokenizer):
    """On a model linear in the word embeddings every reference method gives w[token] - w[baseline]:
    IG and DeepLIFT exactly (the gradient is constant), occlusion by definition, Kernel SHAP because
    Shapley values of an additive game are its terms, LIME because the weighted least-squares fit of an
    additive function is exact (ridge penalty ~ 0)."""
    model, batch = additive
    method.bind(toy_tokenizer)
    baseline_id = toy_tokenizer.mask_token_id if method.baseline == "mask" else toy_tokenizer.pad_token_id
    scores = method.attribute(model, batch, torch.tensor([1, 1]))
    assert torch.allclose(scores, _expected(batch.input_ids, baseline_id), atol=1e-5), scores


def test_zero_baseline_is_the_zero_word_embedding(additive, toy_tokenizer):
    """With the zero vector as baseline, IG and DeepLIFT on the additive model give w[token] (the
    embedding is the weight); the pad baseline gives the same here because w[PAD] = 0."""
    model, batch = additive
    expected = _expected(batch.input_ids, baseline_id=0)
    for method in (
        IntegratedGradientsSaliency(n_steps=3, output="logit", baseline="zero"),
        DeepLiftSaliency(output="logit", baseline="zero"),
    ):
        scores = method.bind(toy_tokenizer).attribute(model, batch, torch.tensor([1, 1]))
        assert torch.allclose(scores, expected, atol=1e-6)
    with pytest.raises(ValueError, match="no token ids"):
        IntegratedGradientsSaliency(baseline="zero").bind(toy_tokenizer).baseline_ids(batch)


def test_kernel_shap_with_one_token_is_the_difference_to_the_baseline(toy_tokenizer):
    model = AdditiveModel(WEIGHTS)
    ids = torch.tensor([[1, 8, 2]])
    scores = (
        KernelShapSaliency(output="logit")
        .bind(toy_tokenizer)
        .attribute(model, TokenBatch(ids, torch.ones_like(ids)), torch.tensor([1]))
    )
    assert scores.tolist() == [[0.0, 3.0, 0.0]]


def test_lime_and_kernel_shap_examples_without_tokens_get_zeros(toy_tokenizer):
    ids = torch.tensor([[1, 2, 0], [1, 5, 2]])
    batch = TokenBatch(ids, (ids != 0).long())
    for method in (LimeSaliency(n_samples=8), KernelShapSaliency(n_samples=8)):
        with pytest.warns(ZeroSaliencyWarning, match="1 of 2 examples"):  # flagged, never silent
            scores = method.bind(toy_tokenizer).attribute(AdditiveModel(WEIGHTS), batch, torch.tensor([1, 1]))
        assert (scores[0] == 0).all() and scores[1, 1] > 0


def test_gradient_signed_matches_autograd(tiny_bert, batch):
    target = torch.tensor([1, 0])
    grad, _ = _embedding_gradient(tiny_bert, batch, target)
    method = GradientSaliency(reduction="sum")
    assert method.name == "gradient_signed" and GradientSaliency().name == "gradient"
    scores = method.attribute(tiny_bert, batch, target)
    assert torch.allclose(scores, grad.sum(-1) * batch.attention_mask, atol=1e-7)
    with pytest.raises(ValueError, match="reduction"):
        GradientSaliency(reduction="max")


def test_example_seed_is_stable():
    import hashlib

    assert example_seed(0, 7) == int.from_bytes(hashlib.sha256(b"0:7").digest()[:8], "little")
    assert example_seed(0, 7) != example_seed(1, 7) != example_seed(1, 8)


class _NoEmbeddings(torch.nn.Module):
    """A classifier that hides its word-embedding layer."""

    def __init__(self, model):
        super().__init__()
        self.inner = model

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        return self.inner(input_ids, attention_mask)


def test_methods_that_cannot_run_fail_in_check_with_what_to_choose(additive, toy_tokenizer):
    model, batch = additive
    for method in (AttentionSaliency(), AttentionRolloutSaliency()):
        with pytest.raises(ValueError, match="no attention weights.*choose gradient"):
            prepare_for_saliency(model, [method])
    hidden = _NoEmbeddings(model)
    for method in (
        GradientSaliency(),
        IntegratedGradientsSaliency().bind(toy_tokenizer),
        DeepLiftSaliency().bind(toy_tokenizer),
    ):
        with pytest.raises(ValueError, match="word-embedding layer.*choose occlusion"):
            method.check(hidden)
    # perturbation methods need only forwards
    occlusion = OcclusionSaliency(output="logit").bind(toy_tokenizer)
    prepare_for_saliency(hidden, [occlusion, RandomSaliency()])
    assert torch.allclose(occlusion.attribute(hidden, batch, torch.tensor([1, 1])), _expected(batch.input_ids, 0))
    with pytest.raises(ValueError, match="bind"):
        OcclusionSaliency().check(model)


def test_baseline_options_are_validated(toy_tokenizer):
    with pytest.raises(ValueError, match="baseline"):
        OcclusionSaliency(baseline="zero")
    with pytest.raises(ValueError, match="baseline"):
        IntegratedGradientsSaliency(baseline="unk")

    class NoMask:
        pad_token_id, mask_token_id, all_special_ids = 0, None, [0, 1, 2]

    with pytest.raises(ValueError, match="mask token"):
        LimeSaliency(baseline="mask").bind(NoMask())
    with pytest.raises(ValueError, match="n_samples"):
        KernelShapSaliency(n_samples=0)
    with pytest.raises(ValueError, match="perturbations_per_eval"):
        OcclusionSaliency(perturbations_per_eval=0)
    described = LimeSaliency(n_samples=7, seed=3).bind(toy_tokenizer).describe()
    assert described == {
        "name": "lime",
        "output": "probability",
        "absolute": False,
        "baseline": "pad",
        "perturbations_per_eval": 100,
        "n_samples": 7,
        "seed": 3,
        "kernel_width": 25.0,
        "alpha": 1.0,
    }


def test_lime_kernel_weights_follow_lime_text():
    """sqrt(exp(-d^2 / 25^2)) with d = 100 * cosine distance to all ones (lime_text's defaults)."""
    method = LimeSaliency()
    z = torch.tensor([[1, 1, 0, 0]])
    distance = 100 * (1 - (2 / 4) ** 0.5)  # cos(z, 1) = |z| / (sqrt(|z|) sqrt(n)) = sqrt(2 / 4)
    assert method.similarity(None, None, z).item() == pytest.approx(
        (torch.exp(torch.tensor(-(distance**2) / 625.0)) ** 0.5).item()
    )
    assert method.similarity(None, None, torch.ones(1, 4)).item() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "config", sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "conf" / "saliency").glob("*.yaml"))
)
def test_every_saliency_config_builds_with_its_name(config, tokenizer):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    root = Path(__file__).resolve().parents[2]
    spec = OmegaConf.to_container(
        OmegaConf.create({"seed": 4, "s": OmegaConf.load(root / "conf" / "saliency" / f"{config}.yaml")}), resolve=True
    )["s"]
    name = spec.pop("name")
    method = instantiate(spec).bind(tokenizer)
    assert method.name == name == config == method.describe()["name"]
    if "seed" in spec:
        assert method.describe()["seed"] == 4
