"""The bf16 path (issue 34): ``trainer.precision=bf16-mixed`` runs the evaluation's forwards and Captum's
backward under CPU bfloat16 autocast, through the facade as through evaluate.py, and refuses other values."""

from __future__ import annotations

import pytest
import torch

import itermask
from itermask.core.precision import autocast, autocast_dtype

TEXTS = ["the film is good", "a bad , bad movie", "it is not what it is"]
GRID = {"fractions": [0.0, 0.5, 1.0], "aopc_bins": [0.5], "schedules": ["one_shot"]}


def test_autocast_is_bf16_only_under_a_bf16_precision():
    linear = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    with autocast("bf16-mixed", "cpu"):
        assert linear(x).dtype == torch.bfloat16
    with autocast("32-true", "cpu"):
        assert linear(x).dtype == torch.float32
    assert autocast_dtype("bf16") is torch.bfloat16 and autocast_dtype(32) is None


@pytest.mark.parametrize("value", ["16-mixed", "bf16-true", "64-true", "fp16", True])
def test_other_precisions_are_refused_with_the_accepted_values(value):
    with pytest.raises(ValueError, match=r"trainer.precision must be 32-true \(float32; also 32\) or bf16-mixed"):
        autocast_dtype(value)


def test_the_aliases_are_given_to_lightning_and_the_keys_by_their_preferred_names():
    from itermask.core.precision import canonical_precision

    # Lightning warns that "bf16" "is supported for historical reasons but its usage is discouraged"
    assert [canonical_precision(v) for v in ("bf16", "bf16-mixed", 32, "32", "32-true")] == [
        "bf16-mixed",
        "bf16-mixed",
        "32-true",
        "32-true",
        "32-true",
    ]
    assert canonical_precision("16-mixed") == "16-mixed" and canonical_precision(True) == "True"  # refused elsewhere


def _matmul_dtypes(model) -> tuple[list, list]:
    """Record the output dtypes of every ``nn.Linear`` of ``model`` in the returned list while hooked."""
    seen: list[torch.dtype] = []
    handles = [
        m.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
        for m in model.modules()
        if isinstance(m, torch.nn.Linear)
    ]
    return seen, handles


@pytest.mark.parametrize("method", ["gradient", "integrated_gradients"])
def test_the_facade_evaluates_under_bf16_autocast_and_scores_in_float32(tiny_bert, tokenizer, method):
    runs = {}
    for precision in ("32-true", "bf16-mixed"):
        seen, handles = _matmul_dtypes(tiny_bert)
        try:
            runs[precision] = itermask.evaluate(
                tiny_bert, TEXTS, tokenizer=tokenizer, saliency=method, precision=precision, **GRID
            )
        finally:
            for handle in handles:
                handle.remove()
        # every matrix product of saliency and of the masked forwards ran in bfloat16 (none in float32)
        assert set(seen) == ({torch.bfloat16} if precision == "bf16-mixed" else {torch.float32})
    fp32, bf16 = (runs[p].curves[method]["one_shot"] for p in ("32-true", "bf16-mixed"))
    assert bf16.logits.dtype == torch.float32  # what feeds the softmax and the measures
    assert runs["bf16-mixed"].result["precision"] == "bf16-mixed" and runs["32-true"].result["precision"] == "32-true"
    # bfloat16 keeps 8 bits of mantissa: logits of this random 2-layer model move by ~1e-2, never bit-identical
    assert not torch.equal(fp32.logits, bf16.logits)
    torch.testing.assert_close(bf16.logits, fp32.logits, atol=5e-2, rtol=0)


def test_the_facade_refuses_a_bad_precision_before_loading_anything(tokenizer):
    with pytest.raises(ValueError, match=r"trainer.precision must be 32-true .*got '16-mixed'"):
        itermask.evaluate("/no/such/model", TEXTS, tokenizer=tokenizer, precision="16-mixed")
