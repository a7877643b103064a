"""The salience-guided greedy attack: exact substitutions on an analytic model, its budgets, masking as an
attack (the ``mask`` candidates reproduce masking's first flip), embedding neighbours, word-initial
positions, the analysis's link statistics and its bad-input errors."""

import math

import pytest
import torch
from conftest import AdditiveModel, TableCandidates, ToyTokenizer

from itermask.analyses.attack import AttackAnalysis, attack_summary, masking_link
from itermask.core.attack import GreedyAttack, attack_logits, budget_counts
from itermask.core.candidates import (
    MASKED,
    NO_CANDIDATE,
    EmbeddingNeighbours,
    MaskCandidates,
    word_initial_positions,
    word_start_vocabulary,
)
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.masking import Delete, MaskToken
from itermask.core.measures import first_flip_count
from itermask.core.saliency import GradientSaliency, RandomSaliency, SaliencyMethod
from itermask.core.tokens import TokenBatch

SPECIAL = ToyTokenizer.all_special_ids


class WeightSaliency(SaliencyMethod):
    """Saliency = the analytic model's weight of the token at each position (on the input it is given:
    recomputing it after a substitution ranks the new token by its own weight)."""

    name = ""  # not registered
    needs_gradients = False
    needs_embeddings = False

    def __init__(self, model, sign: float = 1.0):
        super().__init__()
        self.model, self.sign = model, sign

    def _scores(self, model, batch, target, example_ids):
        return self.sign * self.model.embedding(batch.input_ids).squeeze(-1).detach()


# words a..e = ids 5..9 with weights 2.0, 1.0, 0.5, 0.3, 0.2 (sum 4.0, class 1); candidates: x=10 (1.0),
# y=11 (-1.5), z=12 (3.0) for a; u=13 (0.8), v=14 (2.0) for b; w=15 (0.9) for c; t=16 (-0.5) for d
WEIGHTS = {
    5: 2.0,
    6: 1.0,
    7: 0.5,
    8: 0.3,
    9: 0.2,
    10: 1.0,
    11: -1.5,
    12: 3.0,
    13: 0.8,
    14: 2.0,
    15: 0.9,
    16: -0.5,
    17: -3.0,
}
TABLE = {5: [10, 11, 12], 6: [13, 14], 7: [15], 8: [16], 9: [16]}
CLEAN = TokenBatch(torch.tensor([[1, 5, 6, 7, 8, 9, 2]]), torch.ones(1, 7, dtype=torch.long))


def _attack(model, budget=1.0, max_queries=None, ranking="one_shot", sign=1.0, source=None, target="predicted"):
    source = (source or TableCandidates(TABLE)).bind(ToyTokenizer())
    return GreedyAttack(
        WeightSaliency(model, sign),
        MaskToken(ToyTokenizer()),
        source,
        SPECIAL,
        ranking=ranking,
        budget=budget,
        max_queries=max_queries,
        target=target,
        token_budget=16,
    )


def test_known_best_candidate_at_each_step_until_the_first_flip():
    model = AdditiveModel(WEIGHTS, vocab_size=20)
    result = _attack(model).attack(model, CLEAN)
    # a -> y (sum 0.5; x and z lower less or raise), b -> u (0.3), c: w raises -> unchanged, d -> t (-0.5): flip
    assert result.substituted_ids.tolist() == [[1, 11, 13, 7, 16, 9, 2]]
    assert result.perturbed.nonzero()[:, 1].tolist() == [1, 2, 4]
    assert result.success.tolist() == [True] and result.attacked.tolist() == [True]
    assert result.n_perturbed.tolist() == [3] and result.queries.tolist() == [3 + 2 + 1 + 1]
    assert result.final_prob.item() == pytest.approx(1 / (1 + math.exp(0.5)))
    assert result.perturbed_fraction.tolist() == [3 / 5]


def test_the_budget_in_tokens_and_in_queries_is_respected():
    model = AdditiveModel(WEIGHTS, vocab_size=20)
    assert budget_counts(torch.tensor([5, 5, 2, 10]), 0.4).tolist() == [2, 2, 1, 4]  # floor(b * n + 0.5)
    capped = _attack(model, budget=0.4).attack(model, CLEAN)  # k_max = 2: stops after a -> y, b -> u
    assert capped.n_perturbed.tolist() == [2] and capped.success.tolist() == [False]
    assert capped.queries.tolist() == [5] and capped.substituted_ids.tolist() == [[1, 11, 13, 7, 8, 9, 2]]
    queries = _attack(model, max_queries=6).attack(model, CLEAN)  # d's candidate would be the 7th query
    assert queries.queries.tolist() == [6] and queries.success.tolist() == [False]
    assert queries.n_perturbed.tolist() == [2]


class RecordingSaliency(WeightSaliency):
    def __init__(self, model):
        super().__init__(model)
        self.seen = []

    def _scores(self, model, batch, target, example_ids):
        self.seen.append(batch.input_ids.tolist())
        return super()._scores(model, batch, target, example_ids)


@pytest.mark.parametrize("ranking", ["one_shot", "recursive"])
def test_recursive_ranking_recomputes_saliency_on_the_perturbed_input_after_each_substitution(ranking):
    model = AdditiveModel(WEIGHTS, vocab_size=20)
    saliency = RecordingSaliency(model)
    attack = GreedyAttack(
        saliency,
        MaskToken(ToyTokenizer()),
        TableCandidates(TABLE).bind(ToyTokenizer()),
        SPECIAL,
        ranking=ranking,
        budget=1.0,
    )
    result = attack.attack(model, CLEAN)
    assert result.substituted_ids.tolist() == [[1, 11, 13, 7, 16, 9, 2]]  # the same path as one-shot here
    expected = [[[1, 5, 6, 7, 8, 9, 2]]]
    if ranking == "recursive":  # after a -> y and b -> u; not after c (unchanged) nor after the flip
        expected += [[[1, 11, 6, 7, 8, 9, 2]], [[1, 11, 13, 7, 8, 9, 2]]]
    assert saliency.seen == expected


def test_examples_whose_clean_prediction_is_not_the_target_are_skipped():
    model = AdditiveModel(WEIGHTS, vocab_size=20)
    batch = TokenBatch(torch.tensor([[1, 5, 6, 2], [1, 17, 6, 2]]), torch.ones(2, 4, dtype=torch.long))
    result = _attack(model, target="gold").attack(model, batch, labels=torch.tensor([1, 1]))
    assert result.attacked.tolist() == [True, False]  # sum -2.0: predicted 0, gold 1
    assert result.queries[1].item() == 0 and result.n_perturbed[1].item() == 0 and not result.success[1]


def _counts_curves(model, batch, saliency, n):
    evaluator = IterativeMaskingEvaluator(
        saliency,
        MaskToken(ToyTokenizer()),
        None,
        SPECIAL,
        schedules=["one_shot"],
        steps="count",
        counts=list(range(n + 1)),
    )
    return evaluator.evaluate(model, batch)["one_shot"]


def _random_batch(n_examples=40, length=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 20, (n_examples, length), generator=generator)
    ids[:, 0], ids[:, -1] = 1, 2
    return TokenBatch(ids, torch.ones_like(ids))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_mask_candidates_reproduce_masking_first_flip_count_exactly_when_each_step_lowers_the_target(sign):
    generator = torch.Generator().manual_seed(1)
    weights = {i: float(w) for i, w in zip(range(5, 20), torch.randn(15, generator=generator) + 0.3)}
    model = AdditiveModel(weights, vocab_size=20)
    batch = _random_batch()
    saliency = WeightSaliency(model, sign)
    curves = _counts_curves(model, batch, saliency, n=6)
    attack = GreedyAttack(
        saliency, MaskToken(ToyTokenizer()), MaskCandidates().bind(ToyTokenizer()), SPECIAL, budget=1.0, token_budget=64
    )
    result = attack.attack(model, batch)
    probs = torch.softmax(torch.cat([curves.clean_logits[:, None], curves.logits], 1), -1)
    target = curves.target
    p = probs.gather(2, target[:, None, None].expand(-1, probs.shape[1], 1)).squeeze(-1)  # [B, 1 + S]
    flip = first_flip_count(curves)
    equal = differ = 0
    for b in range(len(batch)):
        stop = 6 if math.isnan(flip[b]) else int(flip[b])
        lowers = all(p[b, j + 2] < p[b, j + 1] for j in range(stop))  # p(top-(j+1)) < p(top-j), j < flip
        attack_count = float(result.n_perturbed[b]) if result.success[b] else math.nan
        if lowers:  # the stated condition: exactly equal (both NaN when masking never flips)
            assert (math.isnan(flip[b]) and math.isnan(attack_count)) or attack_count == flip[b]
            equal += 1
        elif not (attack_count == flip[b] or (math.isnan(flip[b]) and math.isnan(attack_count))):
            differ += 1
    assert equal >= 10
    if sign < 0:  # ranking the lowest weights first: masking often raises the target, and the two differ
        assert differ >= 3


def test_delete_strategy_as_the_mask_candidate_removes_the_token():
    model = AdditiveModel(WEIGHTS, vocab_size=20)
    attack = GreedyAttack(
        WeightSaliency(model), Delete(ToyTokenizer()), MaskCandidates().bind(ToyTokenizer()), SPECIAL, budget=1.0
    )
    batch = TokenBatch(torch.tensor([[1, 11, 5, 9, 2]]), torch.ones(1, 5, dtype=torch.long))  # sum 0.7
    result = attack.attack(model, batch)  # deleting a (2.0, the most salient) leaves -1.3: a flip
    assert result.n_perturbed.item() == 1 and result.success.item() and result.perturbed[0].tolist()[2]
    assert result.adversarial.input_ids.tolist() == [[1, 11, 9, 2, 0]]
    assert result.adversarial.attention_mask.tolist() == [[1, 1, 1, 1, 0]]


# -- candidates and word-initial positions -----------------------------------------------------------


def test_word_start_vocabulary_per_tokenizer_family(architecture_tokenizers):
    bert, roberta = architecture_tokenizers["bert"], architecture_tokenizers["roberta"]
    for tok, continuation in ((bert, lambda t: t.startswith("##")), (roberta, lambda t: not t.startswith("Ġ"))):
        starts = word_start_vocabulary(tok)
        tokens = tok.convert_ids_to_tokens(list(range(len(tok))))
        assert starts.tolist() == [not continuation(t) for t in tokens]
        assert 0 < int(starts.sum()) < len(tok)


def test_word_initial_positions_skip_continuations_but_keep_a_segments_first_piece(architecture_tokenizers):
    roberta = architecture_tokenizers["roberta"]
    enc = roberta(["unbelievably boring"], return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"])
    tokens = roberta.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    maskable = torch.ones_like(batch.input_ids, dtype=torch.bool)
    maskable[:, 0] = maskable[:, -1] = False
    initial = word_initial_positions(batch, word_start_vocabulary(roberta), maskable)[0].tolist()
    expected = [False] + [i == 1 or t.startswith("Ġ") for i, t in enumerate(tokens[1:-1], start=1)] + [False]
    assert initial == expected and initial[1]  # the first piece has no Ġ but starts the text
    assert sum(initial) == 2 < len(tokens) - 2  # "unbelievably" is several pieces, only its first attacked


@pytest.mark.parametrize("architecture", ["bert", "roberta"])
def test_embedding_neighbours_are_the_nearest_word_initial_non_special_tokens(architecture, architecture_tokenizers):
    from conftest import build_tiny_classifier

    tok = architecture_tokenizers[architecture]
    model = build_tiny_classifier(architecture, tok)
    source = EmbeddingNeighbours(k=8, min_similarity=0.1).bind(tok)
    source.prepare(model)
    starts = word_start_vocabulary(tok)
    unit = torch.nn.functional.normalize(model.get_input_embeddings().weight.detach()[: len(tok)], dim=1)
    for token in [i for i in range(len(tok)) if starts[i] and i not in tok.all_special_ids][:30]:
        found = source.neighbours([token])[token]
        allowed = [i for i in range(len(tok)) if starts[i] and i not in tok.all_special_ids and i != token]
        sims = {i: float(unit[token] @ unit[i]) for i in allowed}
        expected = [i for i in sorted(allowed, key=lambda i: -sims[i])[:8] if sims[i] >= 0.1]
        assert found == expected
        assert not set(found) & set(tok.all_special_ids) and all(starts[i] for i in found)


def test_candidates_pad_with_no_candidate_and_mask_marks_masked(tokenizer, tiny_bert):
    enc = tokenizer(["a good movie"], return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"])
    assert MaskCandidates().bind(tokenizer).candidates(batch, torch.tensor([1])).tolist() == [[MASKED]]
    source = EmbeddingNeighbours(k=5, min_similarity=0.99).bind(tokenizer)
    source.prepare(tiny_bert)
    assert source.candidates(batch, torch.tensor([2])).tolist() == [[NO_CANDIDATE] * 5]  # none that similar


def test_bad_attack_settings_fail_with_clear_errors(tokenizer):
    with pytest.raises(ValueError, match=r"candidates.k must be an integer >= 1, got 0"):
        EmbeddingNeighbours(k=0)
    for budget in (0, 1.5, -0.2):
        with pytest.raises(ValueError, match=r"attack.budget must lie in \(0, 1\]"):
            AttackAnalysis(MaskCandidates(), budget=budget)
    with pytest.raises(ValueError, match="unknown attack.ranking 'sometimes'"):
        AttackAnalysis(MaskCandidates(), ranking="sometimes")
    with pytest.raises(ValueError, match="attack.max_queries must be a positive integer"):
        AttackAnalysis(MaskCandidates(), max_queries=0)

    class NoEmbeddings(torch.nn.Module):
        def forward(self, input_ids, attention_mask):
            return torch.zeros(len(input_ids), 2)

    with pytest.raises(ValueError, match="has no input-embedding matrix"):
        EmbeddingNeighbours().bind(tokenizer).check(NoEmbeddings())


def test_attack_logits_keep_the_order_of_rows_of_different_lengths(tiny_bert, tokenizer):
    enc = tokenizer(["a good movie that is long and fun .", "bad", "it is ok"], padding=True, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    with torch.no_grad():
        expected = torch.cat([tiny_bert(**batch.index(slice(i, i + 1)).trim().model_inputs()).logits for i in range(3)])
    assert torch.allclose(attack_logits(tiny_bert, batch, token_budget=16), expected, atol=1e-5)


# -- the analysis's statistics ----------------------------------------------------------------------


def _examples(success, n_perturbed, k_max, attacked=None):
    n = len(success)
    return {
        "example_id": list(range(n)),
        "attacked": attacked or [True] * n,
        "success": success,
        "n_perturbed": n_perturbed,
        "k_max": k_max,
        "queries": [10 * (i + 1) for i in range(n)],
        "perturbed_fraction": [c / 10 for c in n_perturbed],
    }


def test_examples_whose_budget_allows_no_token_are_not_counted_as_failed_attacks():
    # k_max = 0 (e.g. attack.budget=0.01 on a text of 10 maskable tokens): not attacked, not a failure
    examples = _examples([False, True, False], [0, 1, 0], [0, 2, 0])
    summary = attack_summary(examples)
    assert summary["n_attacked"] == 1 and summary["n_skipped_no_budget"] == 2
    assert summary["success_rate"] == 1.0 and summary["median_queries"] == 20.0
    none = attack_summary(_examples([False, False], [0, 0], [0, 0]))
    assert none["n_attacked"] == 0 and none["n_skipped_no_budget"] == 2 and math.isnan(none["success_rate"])


def test_summary_and_link_on_constructed_examples():
    from itermask.core.curves import MaskingCurves

    examples = _examples(
        [True, True, False, True, False], [1, 2, 2, 3, 2], [2, 2, 2, 3, 2], attacked=[True, True, True, True, False]
    )
    summary = attack_summary(examples)
    assert summary["n_attacked"] == 4 and summary["n_skipped_clean_prediction"] == 1
    assert summary["success_rate"] == 0.75
    assert summary["perturbed_fraction"] == pytest.approx((0.1 + 0.2 + 0.3) / 3)
    assert summary["median_queries"] == 20.0  # lower median of 10, 20, 30, 40
    # masking first flips at k = 1, 3 (> k_max 2), 2, none, 1 (one step per token, n = 10)
    k = torch.arange(5)[None].expand(5, 5)
    flip_at = [1, 3, 2, None, 1]
    logits = torch.zeros(5, 5, 2)
    logits[..., 1] = 1.0
    for b, s in enumerate(flip_at):
        if s is not None:
            logits[b, s:, 0] = 2.0
    curves = MaskingCurves(
        "one_shot",
        "count",
        torch.arange(5.0),
        torch.arange(5),
        torch.full((5,), 10),
        k,
        torch.ones(5, dtype=torch.long),
        torch.ones(5, dtype=torch.long),
        torch.tensor([[0.0, 1.0]] * 5),
        logits,
    )
    link = masking_link(examples, curves)
    assert link["n_examples"] == 4 and link["masking_flip_rate_at_budget"] == 0.5  # examples 0 and 2
    assert link["masking_first_flip_fraction_at_budget"] == pytest.approx((0.1 + 0.2) / 2)
    assert link["attack_success_rate"] == 0.75 and link["n_both_flipped"] == 1  # example 0
    # masking tokens (1, inf, 2, inf) vs attack tokens (1, 2, inf, 3): ranks (1, 3.5, 2, 3.5) vs (1, 2, 4, 3)
    from scipy import stats

    assert link["spearman_tokens_to_flip"] == pytest.approx(stats.spearmanr([1, 3.5, 2, 3.5], [1, 2, 4, 3]).statistic)
    constant = masking_link(_examples([False] * 4, [2] * 4, [2] * 4), curves.select(torch.arange(4)))
    assert (
        math.isnan(constant["spearman_tokens_to_flip"]) and "constant" in constant["missing"]["spearman_tokens_to_flip"]
    )


def test_report_measures_name_the_ranking_and_keep_missing_values_nan():
    result = {
        "attack": {
            "settings": {"ranking": "one_shot"},
            "methods": {
                "gradient": {
                    "summary": {"success_rate": 0.5, "perturbed_fraction": None, "median_queries": 12.0},
                    "link": {
                        "masking_flip_rate_at_budget": 0.25,
                        "masking_first_flip_fraction_at_budget": 0.1,
                        "spearman_tokens_to_flip": 0.3,
                    },
                }
            },
        }
    }
    rows = AttackAnalysis.report_measures(result)
    assert rows[("gradient", "one_shot", "attack success_rate")] == 0.5
    assert math.isnan(rows[("gradient", "one_shot", "attack perturbed_fraction")])
    assert rows[("gradient", "one_shot", "attack spearman_tokens_to_flip")] == 0.3


def test_random_saliency_ranks_the_same_positions_every_time():
    model = AdditiveModel(WEIGHTS, vocab_size=20)
    attack = GreedyAttack(
        RandomSaliency(seed=3),
        MaskToken(ToyTokenizer()),
        TableCandidates(TABLE).bind(ToyTokenizer()),
        SPECIAL,
        budget=1.0,
    )
    first, second = (
        attack.attack(model, CLEAN, example_ids=torch.tensor([7])),
        attack.attack(model, CLEAN, example_ids=torch.tensor([7])),
    )
    assert torch.equal(first.substituted_ids, second.substituted_ids) and first.queries.item() == second.queries.item()


def test_the_analysis_attacks_every_method_on_the_masking_subset_and_links_the_curves(tiny_bert, tokenizer, tmp_path):
    from types import SimpleNamespace

    from itermask.analyses import AnalysisInputs, EvaluatedCurves, EvaluationContext
    from itermask.core.curves import MaskingCurves
    from itermask.core.evaluation_settings import EvaluationSettings
    from itermask.data.datamodule import TokenCollator

    texts = ["a good movie", "the story is lame and the acting worse .", "fun , fun , fun", "[SEP]"]
    features = [{**tokenizer(t), "label": i % 2, "example_id": 10 + i} for i, t in enumerate(texts)]
    loader = [TokenCollator(tokenizer)(features)]
    strategy = MaskToken(tokenizer)
    evaluators = {
        name: IterativeMaskingEvaluator(
            method, strategy, [0.0, 0.2, 0.5, 1.0], tokenizer.all_special_ids, schedules=["one_shot"]
        )
        for name, method in (("gradient", GradientSaliency()), ("random", RandomSaliency(seed=0)))
    }
    evaluation = EvaluationSettings(
        "test",
        None,
        0,
        "fraction",
        (0.0, 0.2, 0.5, 1.0),
        (),
        (0.2, 0.5),
        None,
        ("one_shot",),
        "predicted",
        "probability",
        True,
        64,
    )
    inputs = AnalysisInputs(evaluation, tokenizer, strategy, evaluators, "gradient", "unused", tmp_path)
    batch = loader[0]
    keep = evaluators["gradient"].maskable(batch["tokens"]).any(1)
    curves = {
        name: {
            "one_shot": MaskingCurves.concat(
                [
                    ev.evaluate(
                        tiny_bert, batch["tokens"].index(keep).trim(), batch["labels"][keep], batch["example_ids"][keep]
                    )["one_shot"]
                ]
            )
        }
        for name, ev in evaluators.items()
    }
    analysis = AttackAnalysis(EmbeddingNeighbours(k=3, min_similarity=-1.0), budget=1.0)
    analysis.source.bind(tokenizer)
    analysis.word_start = word_start_vocabulary(tokenizer)
    data = SimpleNamespace(eval_loader=lambda subset: loader)
    context = EvaluationContext(data, None, tiny_bert, None, subset=features)  # pyright: ignore[reportArgumentType]
    output = analysis.run(inputs, context, EvaluatedCurves.of(curves))
    section = output.result["attack"]
    assert set(section["methods"]) == {"gradient", "random"}
    for entry in section["methods"].values():
        examples = entry["examples"]
        assert examples["example_id"] == [10, 11, 12]  # "[SEP]" alone has no maskable token, as in masking
        assert all(q <= 3 * n for q, n in zip(examples["queries"], examples["n_maskable"]))
        assert all(len(s) == c for s, c in zip(examples["substitutions"], examples["n_perturbed"]))
        assert examples["original_text"][0] == "a good movie"
        assert entry["link"]["n_examples"] == entry["summary"]["n_attacked"] == 3
    columns, rows = output.artifacts.tables["attack_examples"]
    assert len(rows) == 6 and columns[:3] == ["saliency", "example_id", "attacked"]
    assert "attack/gradient/success_rate" in output.artifacts.summary
    assert analysis.artifacts_from(output.result, None).tables["attack_examples"][1] == rows
    # the per-example outcomes also join the job's per-example tables, by saliency method and example id
    import pandas as pd

    table = pd.read_parquet(output.artifacts.files["per_example/attack.parquet"])
    assert len(table) == 6 and table[table.saliency == "gradient"].example_id.tolist() == [10, 11, 12]
    assert table.success.tolist() == [s for e in section["methods"].values() for s in e["examples"]["success"]]
    assert [list(p) for p in table.perturbed_positions] == [
        p for e in section["methods"].values() for p in e["examples"]["perturbed_positions"]
    ]


# -- the report: attack rows and the rank correlation across saliency methods ------------------------


def test_report_rank_correlation_of_faithfulness_and_attack_efficiency(tmp_path):
    from results_helpers import make_result, write_sweep

    from itermask.reporting import build_report, write_report

    # four methods, three seeds; AOPC 0.1, 0.2, 0.3, 0.4 and success rates in the same order except the last two
    aopc = {"random": 0.1, "gradient": 0.2, "integrated_gradients": 0.3, "occlusion": 0.4}
    success = {"random": 0.5, "gradient": 0.6, "integrated_gradients": 0.9, "occlusion": 0.8}
    results, overrides = [], []
    for method in aopc:
        for seed in range(3):
            result = make_result(seed, saliency=method, aopc=aopc[method] + 0.01 * seed, random_aopc=0.1)
            entry = {
                "summary": {
                    "success_rate": success[method] + 0.01 * seed,
                    "perturbed_fraction": 0.5 - aopc[method],
                    "median_queries": 10.0,
                },
                "link": {
                    "masking_flip_rate_at_budget": 0.2,
                    "masking_first_flip_fraction_at_budget": 0.1,
                    "spearman_tokens_to_flip": 0.4,
                },
            }
            result["attack"] = {"settings": {"ranking": "one_shot"}, "methods": {method: entry}}
            results.append(result)
            overrides.append([f"seed={seed}", f"saliency={method}"])
    report = build_report(write_sweep(tmp_path / "sweep", results, overrides))
    rows = report.summary[report.summary.score == "attack success_rate"]
    assert sorted(rows.explanation) == sorted(aopc) and rows[rows.explanation == "gradient"][
        "mean"
    ].item() == pytest.approx(0.61)
    links = report.attack_links.set_index("efficiency")
    assert links.loc["attack success_rate", "methods"] == sorted(aopc)
    assert links.loc["attack success_rate", "spearman_rho"] == pytest.approx(0.8)  # ranks 1 2 3 4 vs 1 2 4 3
    # |rho| >= 0.8 iff the sum of squared rank differences is <= 2 or >= 18: 1 + 3 + 3 + 1 of the 24 orders
    assert links.loc["attack success_rate", "p_value"] == pytest.approx(8 / 24)
    assert links.loc["attack perturbed_fraction", "spearman_rho"] == pytest.approx(-1.0)
    assert links.loc["attack perturbed_fraction", "p_value"] == pytest.approx(2 / 24)
    written = write_report(report)
    markdown = written["report.md"].read_text()
    assert "## Faithfulness vs attack efficiency" in markdown and "2/4! = 0.0833: a weak test" in markdown
    assert (tmp_path / "sweep/report_files/attack_links.csv").is_file()


# -- bad input through the config: refused in the settings stage, before any data or fine-tuning -------


def _compose(*overrides):
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    root = Path(__file__).resolve().parents[2]
    with initialize_config_dir(config_dir=str(root / "conf"), version_base="1.3"):
        return compose(config_name="evaluate", overrides=["output_dir=/tmp/unused", *overrides])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["attack=embedding_neighbors", "attack.candidates.name=thesaurus"],
            r"unknown attack candidate source 'thesaurus': choose from \['embedding_neighbors', 'mask'",
        ),
        (["attack=mask", "attack.budget=0"], r"attack.budget must lie in \(0, 1\]"),
        (["attack=mask", "attack.budget=1.2"], r"attack.budget must lie in \(0, 1\]"),
        (["attack=embedding_neighbors", "attack.candidates.k=0"], "attack.candidates.k must be an integer >= 1, got 0"),
        (
            ["attack=mask", "attack.ranking=recursive", "evaluation.schedules=[one_shot]"],
            r"attack.ranking=recursive is compared with the masking curves of that schedule",
        ),
    ],
)
def test_bad_attack_settings_are_refused_before_any_work(overrides, message, monkeypatch, tmp_path):
    from itermask import pipeline
    from itermask.engine import prepare

    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(prepare, "load_data", lambda *a, **k: pytest.fail("data were loaded"))
    with pytest.raises(ValueError, match=message):
        pipeline.run_evaluate(_compose(*overrides))


def test_a_model_without_input_embeddings_is_refused_before_fine_tuning(monkeypatch, tmp_path):
    from itermask import pipeline
    from itermask.engine import prepare
    from itermask.models import loading
    from itermask.settings import evaluation_plan

    class NoEmbeddings(torch.nn.Module):
        def forward(self, input_ids, attention_mask):
            return torch.zeros(len(input_ids), 2)

    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loading, "classifier_architecture", lambda pretrained: NoEmbeddings())
    monkeypatch.setattr(prepare, "load_data", lambda *a, **k: pytest.fail("data were loaded"))
    with pytest.raises(ValueError, match="NoEmbeddings has no input-embedding matrix .* choose attack=mask"):
        pipeline.run_evaluate(_compose("attack=embedding_neighbors"))
    plan = evaluation_plan(_compose("attack=mask"))  # the mask source needs no embeddings
    assert [a.name for a in plan.analyses] == ["per_example", "ood", "attack"]  # ood.level=final is on by default


def test_attack_none_leaves_the_results_key_of_runs_without_it():
    from omegaconf import OmegaConf

    from itermask.storage.store import results_config, results_key

    config = OmegaConf.to_container(_compose(), resolve=True)
    assert config["attack"] is None and config["analyses"] == [
        "ood",
        "attack",
        "naopc",
        "ffidelity",
        "removal_reference",
        "sanity",
    ]
    before = {**config, "analyses": ["ood"]}
    before.pop("attack")  # the config as it was before the attack and naopc groups existed
    before.pop("naopc")
    for group in ("ffidelity", "removal_reference", "sanity"):
        before.pop(group)
    assert results_key(config) == results_key(before) and "attack" not in results_config(config)
    assert results_key(OmegaConf.to_container(_compose("attack=mask"), resolve=True)) != results_key(config)


def test_neighbours_are_kept_until_the_embeddings_change(tiny_bert, tokenizer):
    source = EmbeddingNeighbours(k=3, min_similarity=-1.0).bind(tokenizer)
    source.prepare(tiny_bert)
    token = tokenizer.convert_tokens_to_ids("good")
    before = source.neighbours([token])[token]
    source.prepare(tiny_bert)
    assert source._neighbours  # the same weights: the table is kept
    with torch.no_grad():  # an in-place update (as an optimizer step) moves "good" onto its last neighbour
        weight = tiny_bert.get_input_embeddings().weight
        weight[token] = weight[before[-1]] * 2
    source.prepare(tiny_bert)
    assert source.neighbours([token])[token][0] == before[-1]
