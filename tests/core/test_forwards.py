"""Length-bucketed, de-duplicated forwards (itermask.core.forwards) and the evaluator's new path against
the old step-major one."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from conftest import AdditiveModel, Recorder, build_tiny_classifier
from reference_forwards import StepMajorEvaluator

from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.forwards import ForwardStats, RowForwards, length_chunks, row_lengths, row_outputs
from itermask.core.masking import AttentionOff, Delete, MaskToken, RandomToken
from itermask.core.representations import capture_representations
from itermask.core.saliency import GradientSaliency, RandomSaliency
from itermask.core.tokens import TokenBatch, class_logits
from itermask.data.files import shipped_source

WEIGHTS = {5: 1.0, 6: -2.0, 7: 0.5, 8: 3.0, 9: -1.0}


def _rows(rows: list[list[int]], width: int | None = None) -> TokenBatch:
    """Right-padded rows of ids (0 = padding), attention 1 on the ids given."""
    width = width or max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    return TokenBatch(ids, attention)


def test_length_chunks_cut_where_padding_costs_least():
    lengths = torch.tensor([5, 3, 3, 9, 2, 2, 2, 9, 1, 30])
    budget_chunks = length_chunks(lengths, 100, forward_overhead=0)
    # no overhead: each length its own chunk, longest first; the 30-token row fits the budget alone
    assert [c.tolist() for c in budget_chunks] == [[9], [3, 7], [0], [1, 2], [4, 5, 6], [8]]
    # a large overhead merges everything that fits the budget into one chunk
    assert [c.tolist() for c in length_chunks(lengths, 100, forward_overhead=1000)] == [
        [9],
        [3, 7, 0, 1, 2, 4, 5, 6, 8],
    ]
    # budget 30, overhead 5: [9, 9, 5] (3 x 9 = 27 tokens) and the six short rows (6 x 3 = 18)
    assert [lengths[c].tolist() for c in length_chunks(lengths, 30, 5)] == [[30], [9, 9, 5], [3, 3, 2, 2, 2, 1]]
    # a tight budget: rows longer than it run alone, every row exactly once, the budget held
    tight = length_chunks(lengths, 8, 16)
    assert sorted(torch.cat(tight).tolist()) == list(range(10))
    assert all(len(c) == 1 or len(c) * int(lengths[c].max()) <= 8 for c in tight)
    with pytest.raises(ValueError, match="token budget must be positive"):
        length_chunks(lengths, 0)


def test_length_chunks_split_a_length_group_larger_than_the_budget():
    lengths = torch.tensor([4] * 10 + [2] * 3)
    chunks = length_chunks(lengths, 16, forward_overhead=0)  # 4 rows of 4 tokens fit
    assert [len(c) for c in chunks] == [4, 4, 2, 3]
    assert [c.tolist() for c in chunks[:2]] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_row_forwards_compute_each_distinct_row_once_and_scatter_back():
    model = Recorder(AdditiveModel(WEIGHTS))
    # rows 0 and 3 are equal; row 4 equals row 1 except for trailing padding (a wider batch)
    batch = _rows([[1, 5, 6, 2], [1, 8, 2], [1, 7, 7, 9, 2], [1, 5, 6, 2], [1, 8, 2]])
    runner = RowForwards(model, token_budget=64)
    out = runner(batch)
    expected = torch.tensor([-1.0, 3.0, 0.0, -1.0, 3.0])  # sum of the weights of each row (specials weigh 0)
    assert torch.equal(out.logits[:, 1], expected) and torch.equal(out.logits[:, 0], torch.zeros(5))
    assert sum(len(call["input_ids"]) for call in model.calls) == 3  # three distinct rows
    assert runner.stats == ForwardStats(
        rows=5,
        computed=3,
        forwards=len(model.calls),
        real_tokens=12,
        padded_tokens=sum(c["input_ids"].numel() for c in model.calls),
    )
    # a later call remembers: the clean row again costs nothing, a new row is computed alone
    again = runner(_rows([[1, 8, 2], [1, 9, 2]], width=6))  # wider padding: the same first row
    assert again.logits[:, 1].tolist() == [3.0, -1.0]
    assert runner.stats.computed == 4 and runner.stats.rows == 7
    # without de-duplication every row runs, still one chunk per length
    plain = RowForwards(Recorder(AdditiveModel(WEIGHTS)), token_budget=64, deduplicate=False)
    assert torch.equal(plain(batch).logits, out.logits) and plain.stats.computed == 5


def test_row_forwards_pad_nothing_when_lengths_are_sorted_into_chunks():
    model = Recorder(AdditiveModel(WEIGHTS))
    batch = _rows([[1, 5, 2], [1, 5, 6, 7, 8, 9, 2], [1, 6, 2], [1, 7, 8, 2]])
    runner = RowForwards(model, token_budget=1000, forward_overhead=0)
    runner(batch)
    for call in model.calls:  # each forward holds rows of one length, trimmed to it
        assert call["attention_mask"].all()
    assert runner.stats.padded_tokens == runner.stats.real_tokens == 3 + 7 + 3 + 4
    # attention zeroed in the middle of a row does not shorten it
    holes = TokenBatch(torch.tensor([[1, 5, 6, 2, 0]]), torch.tensor([[1, 0, 1, 1, 0]]))
    assert row_lengths(holes).tolist() == [4]


def _texts(n: int) -> list[str]:
    return pd.read_csv(shipped_source().files["test"], keep_default_na=False)["text"].head(n).tolist()


def test_row_outputs_match_one_forward_per_row_with_representations(architecture_tokenizers):
    tokenizer = architecture_tokenizers["bert"]
    model = build_tiny_classifier("bert", tokenizer)
    enc = tokenizer(_texts(6) * 2, padding=True, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    out = row_outputs(model, batch, token_budget=40, representations=True)
    assert out.logits.shape == (12, 2) and out.representations.layer_mean.shape == (12, 3, 32)
    assert torch.equal(out.logits[:6], out.logits[6:])  # the repeated texts were computed once
    for row in range(12):
        single = batch.index(slice(row, row + 1)).trim()
        with torch.inference_mode(), capture_representations(model) as records:
            logits = class_logits(model, single)
        torch.testing.assert_close(out.logits[row], logits[0], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(out.representations.features[row], records[0].features[0], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(out.representations.layer_max[row], records[0].layer_max[0], atol=1e-6, rtol=1e-5)
    assert not out.logits.is_inference()


# -- the evaluator: bucketed forwards give the results of plain step-major forwards (the reference) -------

STRATEGIES = {"mask_token": MaskToken, "delete": Delete, "attention_off": AttentionOff, "random_token": RandomToken}
GRID = [0.0, 0.1, 0.2, 0.5, 0.7, 1.0]


_RUNS: dict = {}


def _evaluate(tokenizers, architecture, strategy, forwards):
    """``(curves, forward stats)`` of one evaluation of 10 shipped texts (each run once per session), by the
    evaluator (``forwards="bucketed"``) or the step-major reference (``"step_major"``)."""
    key = (architecture, strategy, forwards)
    if key not in _RUNS:
        tokenizer = tokenizers[architecture]
        model = build_tiny_classifier(architecture, tokenizer)
        # gradient saliency (split into length chunks on the new path) on two cases, random on the others
        gradient = (architecture, strategy) in (("bert", "mask_token"), ("roberta", "delete"))
        saliency = GradientSaliency() if gradient else RandomSaliency(seed=3)
        enc = tokenizer(_texts(10), padding=True, truncation=True, max_length=40, return_tensors="pt")
        batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))
        step_major = {"chunk_size": 16} if forwards == "step_major" else {}
        evaluator = (StepMajorEvaluator if forwards == "step_major" else IterativeMaskingEvaluator)(
            saliency,
            STRATEGIES[strategy](tokenizer),
            GRID,
            tokenizer.all_special_ids,
            token_budget=96,
            collect_representations=True,
            **step_major,
        )
        _RUNS[key] = evaluator.evaluate(model, batch, labels=torch.arange(10) % 2), evaluator.forward_stats
    return _RUNS[key]


def _assert_same_results(old, new, target):
    """Target probabilities within 1e-5; flips equal except within 1e-5 of a tie; representations close."""
    for name in ("clean_logits", "logits", "keep_logits"):
        a, b = getattr(old, name), getattr(new, name)
        if a is None:
            assert b is None
            continue
        pa, pb = a.softmax(-1), b.softmax(-1)
        index = target.view(-1, *[1] * (pa.dim() - 1)).expand(*pa.shape[:-1], 1)
        assert (pa.gather(-1, index) - pb.gather(-1, index)).abs().max() < 1e-5, name
        flips_a, flips_b = pa.argmax(-1) != index[..., 0], pb.argmax(-1) != index[..., 0]
        margin = (pa.gather(-1, index)[..., 0] - pa.scatter(-1, index, -1.0).amax(-1)).abs()
        assert ((flips_a == flips_b) | (margin < 1e-5)).all(), name
    for name in ("features", "layer_mean", "layer_max", "clean_features"):
        torch.testing.assert_close(getattr(old, name), getattr(new, name), atol=1e-4, rtol=1e-4)
    assert torch.equal(old.k, new.k) and torch.equal(old.target, new.target)


@pytest.mark.parametrize(
    "architecture, strategy",
    [
        ("bert", "mask_token"),
        ("bert", "delete"),
        ("bert", "attention_off"),
        ("bert", "random_token"),
        ("roberta", "mask_token"),
        ("roberta", "delete"),
    ],
)
def test_bucketed_forwards_give_the_step_major_results(architecture_tokenizers, architecture, strategy):
    old, old_stats = _evaluate(architecture_tokenizers, architecture, strategy, "step_major")
    new, new_stats = _evaluate(architecture_tokenizers, architecture, strategy, "bucketed")
    for schedule in ("one_shot", "recursive"):
        _assert_same_results(old[schedule], new[schedule], old[schedule].target)
    assert new["one_shot"].keep_logits is not None and new["recursive"].keep_logits is None
    # identical rows are computed once: k = 0 rows are the clean input, the recursive schedule's first
    # step is the one-shot one, ...; and the new path pads (almost) nothing
    assert new_stats.rows == old_stats.rows and new_stats.computed < 0.8 * old_stats.computed
    assert new_stats.padding_ratio < 1.05 < old_stats.padding_ratio


def test_duplicate_rows_share_their_outputs(architecture_tokenizers):
    """Comprehensiveness at k = n and sufficiency at k = 0 are one input (every maskable token masked);
    sufficiency at k = n and every k = 0 row are the clean input: the new path computes them once."""
    curves, _ = _evaluate(architecture_tokenizers, "bert", "mask_token", "bucketed")
    one_shot, recursive = curves["one_shot"], curves["recursive"]
    assert torch.equal(one_shot.logits[:, -1], one_shot.keep_logits[:, 0])
    assert torch.equal(one_shot.keep_logits[:, -1], one_shot.clean_logits)
    assert torch.equal(one_shot.logits[:, 0], one_shot.clean_logits)
    assert torch.equal(recursive.logits[:, 1], one_shot.logits[:, 1])  # the first step ranks the clean input
    assert torch.equal(recursive.features[:, 0], one_shot.clean_features)


def test_a_bad_budget_fails_at_once(tokenizer):
    with pytest.raises(ValueError, match="token_budget must be positive, got 0"):
        IterativeMaskingEvaluator(GradientSaliency(), MaskToken(tokenizer), [0.5], [0], token_budget=0)
    with pytest.raises(ValueError, match="token budget must be positive"):
        RowForwards(torch.nn.Identity(), token_budget=-1)
