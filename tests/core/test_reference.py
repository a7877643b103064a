"""Our batched, padded implementation against the published definitions, computed naively.

ERASER (DeYoung et al. 2020, arXiv 1911.03429, Sec. 4): comprehensiveness = m(x)_j - m(x \\ r)_j,
sufficiency = m(x)_j - m(r)_j, AOPC = mean over the bins of the per-bin score. Here each example is run
through the model on its own, unpadded, with the rationale removed or replaced in a plain Python list,
from the same attribution scores our evaluator used.
"""

import math

import pytest
import torch

from itermask.core import measures
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.masking import Delete, MaskToken
from itermask.core.saliency import GradientSaliency
from itermask.core.tokens import TokenBatch

TEXTS = ["a great film , funny and sharp", "bad film", "the plot is a mess but the cast is good", "not bad at all"]
BINS = [0.01, 0.05, 0.1, 0.2, 0.5]


def _prob(model, ids, target):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long)).logits
    return logits.softmax(-1)[0, target].item()


@pytest.mark.parametrize("strategy_name", ["mask_token", "delete"])
def test_eraser_definitions_match_naive_reference(tiny_bert, tokenizer, strategy_name):
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], None)
    strategy = MaskToken(tokenizer) if strategy_name == "mask_token" else Delete(tokenizer)
    saliency = GradientSaliency()
    evaluator = IterativeMaskingEvaluator(
        saliency, strategy, [0.0, *BINS, 1.0], tokenizer.all_special_ids, schedules=["one_shot"]
    )
    curves = evaluator.evaluate(tiny_bert, batch)["one_shot"]
    scores = saliency.attribute(tiny_bert, batch, curves.target)
    ours_comp = measures.aopc(measures.comprehensiveness(curves), curves.fractions, BINS)
    ours_suff = measures.aopc(measures.sufficiency(curves), curves.fractions, BINS)

    special = set(tokenizer.all_special_ids)
    for i in range(len(TEXTS)):
        ids = enc["input_ids"][i][enc["attention_mask"][i].bool()].tolist()
        target = int(curves.target[i])
        words = [p for p, t in enumerate(ids) if t not in special]
        ranked = sorted(words, key=lambda p: (-scores[i, p].item(), p))
        clean = _prob(model=tiny_bert, ids=ids, target=target)

        def edit(drop, ids=ids):
            if strategy_name == "delete":
                return [t for p, t in enumerate(ids) if p not in drop]
            return [tokenizer.mask_token_id if p in drop else t for p, t in enumerate(ids)]

        comp, suff = [], []
        for fraction in BINS:
            top = set(ranked[: math.floor(fraction * len(words) + 0.5)])
            comp.append(clean - _prob(tiny_bert, edit(top), target))
            suff.append(clean - _prob(tiny_bert, edit(set(words) - top), target))
        assert ours_comp[i].item() == pytest.approx(sum(comp) / len(BINS), abs=1e-5)
        assert ours_suff[i].item() == pytest.approx(sum(suff) / len(BINS), abs=1e-5)
