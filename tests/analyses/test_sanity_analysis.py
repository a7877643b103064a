"""The degraded-explainer sanity benchmark (itermask.analyses.sanity) end to end on a constructed classifier
whose true importance is known: a bag of words (each token's weight is its additive contribution to the class-1
logit, plus a bias), explained by input x gradient of that logit, which returns each token's weight exactly."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import ToyTokenizer

from itermask.analyses.base import AnalysisInputs, EvaluatedCurves, EvaluationContext
from itermask.analyses.naopc import NAOPCAnalysis
from itermask.analyses.sanity import FLIP_COLUMN, SanityAnalysis
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.masking import MaskToken
from itermask.core.saliency import InputXGradientSaliency, RandomSaliency
from itermask.core.tokens import TokenBatch

VOCAB, LENGTH, EXAMPLES, BIAS = 45, 8, 16, -1.5
FRACTIONS = [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]


class BagOfWords(torch.nn.Module):
    """``logits = [0, sum_i w[id_i] + BIAS]``: a linear read-out of a summed bag of 1-d word embeddings; the
    true importance of a token for class 1 is its weight ``w``. Ids 0-4 are special (weight 0: [MASK] removes a
    token's contribution exactly)."""

    def __init__(self, weights: torch.Tensor) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(VOCAB, 1)
        with torch.no_grad():
            self.embedding.weight.copy_(weights[:, None])

    def get_input_embeddings(self):
        return self.embedding

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        score = (self.embedding(input_ids).squeeze(-1) * attention_mask).sum(dim=1) + BIAS
        return torch.stack([torch.zeros_like(score), score], dim=1)


@pytest.fixture(scope="module")
def setup():
    generator = torch.Generator().manual_seed(0)
    weights = torch.zeros(VOCAB)
    weights[5:] = 0.05 + 0.95 * torch.rand(VOCAB - 5, generator=generator)
    ids = torch.stack([5 + torch.randperm(VOCAB - 5, generator=generator)[:LENGTH] for _ in range(EXAMPLES)])
    ids = torch.cat([torch.full((EXAMPLES, 1), 1), ids, torch.full((EXAMPLES, 1), 2)], dim=1)  # [CLS] .. [SEP]
    batch = TokenBatch(ids, torch.ones_like(ids))
    model = BagOfWords(weights).eval()
    assert bool((model(ids, batch.attention_mask).argmax(dim=1) == 1).all())  # every example explains class 1
    tok = ToyTokenizer()

    def evaluator(method):
        return IterativeMaskingEvaluator(method, MaskToken().bind(tok), FRACTIONS, tok.all_special_ids, ["one_shot"])

    evaluators = {
        "input_x_gradient": evaluator(InputXGradientSaliency(output="logit")),
        "random": evaluator(RandomSaliency()),
    }
    example_ids = torch.arange(100, 100 + EXAMPLES)
    labels = torch.ones(EXAMPLES, dtype=torch.long)
    curves = EvaluatedCurves.of({n: e.evaluate(model, batch, labels, example_ids) for n, e in evaluators.items()})
    loader = [
        {"tokens": batch.index(slice(a, a + 5)), "labels": labels[a : a + 5], "example_ids": example_ids[a : a + 5]}
        for a in range(0, EXAMPLES, 5)
    ]
    data = SimpleNamespace(eval_loader=lambda examples: loader, input_digest=lambda examples: "constructed")
    context = EvaluationContext(data=data, trained=None, model=model, trainer=None, subset=[])  # pyright: ignore[reportArgumentType]
    evaluation = SimpleNamespace(
        features="token",
        quantity="probability",
        aopc_bins=[0.05, 0.1, 0.2, 0.5],
        steps="fraction",
        segments=None,
        token_budget=4096,
        target="predicted",
    )
    sanity, naopc = SanityAnalysis(n_boot=200, seed=0), NAOPCAnalysis(exact_max_features=8)

    def inputs(analyses):
        masking = MaskToken().bind(tok)
        return AnalysisInputs(evaluation, tok, masking, evaluators, "input_x_gradient", "", None, analyses=analyses)  # pyright: ignore[reportArgumentType]

    return sanity, naopc, inputs, context, curves


def test_good_measures_rank_the_known_order_of_a_bag_of_words(setup):
    sanity, naopc, inputs, context, curves = setup
    output = sanity.run(inputs((naopc, sanity)), context, curves)
    section = output.result["sanity"]
    found = section["methods"]["input_x_gradient"]
    assert list(section["methods"]) == ["input_x_gradient"]  # the random explanation is not degraded
    # thresholds: overall rho over (example, level) pairs beyond +-0.6, every per-example mean beyond +-0.8
    for measure in ("aopc_comprehensiveness_prob", "aopc_full_comprehensiveness_prob", "naopc_comprehensiveness_prob"):
        assert found[measure]["rho"] < -0.6 and found[measure]["mean_example_rho"] < -0.8, measure
        assert found[measure]["ranks_known_order"] and found[measure]["ci_high"] < 0
    for measure in ("aopc_sufficiency_prob", "aopc_full_sufficiency_prob", "naopc_sufficiency_prob"):
        assert found[measure]["rho"] > 0.6 and found[measure]["mean_example_rho"] > 0.8, measure
        assert found[measure]["ranks_known_order"] and found[measure]["ci_low"] > 0
    assert found[FLIP_COLUMN]["expected_sign"] == -1 and found["aopc_log_odds_drop"]["expected_sign"] == -1
    # every example flips once all is masked (the bias): never_flip_rate is 0 at every level, constant, named
    never = found["never_flip_rate"]
    assert never["n_constant"] == EXAMPLES and never["reason"] == "constant over every level in every example"
    assert never["rho"] is None and never["ci_low"] is None and never["interval_method"] is None
    assert set(section["cannot_rank"].get("input_x_gradient", [])) == {
        m for m, entry in found.items() if not entry["ranks_known_order"]
    }
    assert section["settings"]["levels"] == [0.0, 0.25, 0.5, 0.75, 1.0] and "sha256" in section["settings"]["seed_rule"]
    # the levels above 0: 4 one-shot evaluations of 16 examples (clean row, 12 steps of masked, keep and
    # least-first rows), no more
    assert 0 < section["cost"]["rows"] <= 4 * EXAMPLES * (1 + 3 * len(FRACTIONS))
    (line,) = SanityAnalysis.summary_lines({"sanity": section})
    assert "never_flip_rate (constant over every level in every example)" in line
    assert f"{len(found) - len(section['cannot_rank']['input_x_gradient'])} of {len(found)} measures rank" in line
    assert (
        output.artifacts.summary["sanity/input_x_gradient/aopc_comprehensiveness_prob/rho"]
        == found["aopc_comprehensiveness_prob"]["rho"]
    )
    rows = SanityAnalysis.report_measures({"sanity": section})
    assert (
        rows[("input_x_gradient", "one_shot", "sanity rho: aopc_sufficiency_prob")]
        == found["aopc_sufficiency_prob"]["rho"]
    )


def test_level_zero_rows_are_the_jobs_own_curves(setup):
    sanity, _, inputs, context, curves = setup
    job = curves["input_x_gradient"]["one_shot"]
    frame = sanity._measures(inputs(()), context, "input_x_gradient", 0.0, job)
    from itermask.core.metrics import per_example

    expected = per_example(job, "probability", [0.05, 0.1, 0.2, 0.5])["aopc_comprehensiveness_prob"]
    assert frame["aopc_comprehensiveness_prob"].tolist() == expected.double().tolist()
    assert frame["example_id"].tolist() == list(range(100, 100 + EXAMPLES))
    # a degraded level of 0 evaluated afresh gives the same rows bit for bit
    again = sanity._degraded(
        inputs(()),
        context,
        inputs(()).evaluators["input_x_gradient"],
        0.0,
        job.example_ids,
        {"rows": 0, "computed": 0, "forwards": 0},
    )
    assert torch.equal(again.logits, job.logits) and torch.equal(again.example_ids, job.example_ids)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"levels": [0.5, 1]}, r"^sanity.levels: must contain 0 \(the undegraded explanation\), got \[0.5, 1.0\]$"),
        ({"levels": [0, 0.5, 0.5, 1]}, r"^sanity.levels: repeated values \[0.5\]$"),
        ({"levels": [0, 1.5]}, r"^sanity.levels: values outside \[0, 1\]: \[1.5\]$"),
        ({"seed": 1.5}, "sanity.seed"),
        ({"n_boot": -1}, "sanity.n_boot"),
        # one resample gave a one-point "interval" that could sit off its rho (the new-user review)
        ({"n_boot": 1}, r"^sanity.n_boot=1: give 0 \(no interval\) or a whole number >= 100"),
        ({"n_boot": 99}, r"^sanity.n_boot=99: give 0"),
        # a string is not read character by character ('01' ran as levels [0, 1])
        ({"levels": "01"}, r"^sanity.levels='01': give a list of numbers in \[0, 1\]$"),
    ],
)
def test_bad_sanity_settings_are_one_line_errors(settings, message):
    with pytest.raises(ValueError, match=message):
        SanityAnalysis(**settings)


def test_sanity_off_by_default_keeps_the_results_key_and_bad_levels_fail_in_the_settings_stage():
    from conftest import compose_config, keys_of, plan_of

    off = keys_of(compose_config())
    assert (
        off.results == keys_of(compose_config("sanity=none")).results == "3a6ddacaff271266"
    )  # schema 5, train.group_by_length
    assert off.results != keys_of(compose_config("sanity=on")).results
    # the settings stage builds the analysis: the error comes before any data, tokenizer or model is read
    with pytest.raises(ValueError, match=r"sanity.levels: must contain 0"):
        plan_of(compose_config("sanity=on", "sanity.levels=[0.5,1.0]"))
    built = plan_of(compose_config("sanity=on", "seed=3")).analyses[-1]
    assert isinstance(built, SanityAnalysis) and built.seed == 3  # the job's seed


def test_the_headline_names_measures_whose_mean_rho_has_the_wrong_sign_and_random_alone_is_refused():
    import pandas as pd

    summary = pd.DataFrame(
        {
            "explanation": ["gradient"] * 4,
            "schedule": ["one_shot"] * 4,
            "score": [
                "sanity rho: aopc_comprehensiveness_prob",  # higher is more faithful: rho should be < 0
                "sanity rho: aopc_sufficiency_prob",  # lower is more faithful: rho should be > 0
                "sanity rho: decision_flip_fraction",
                "aopc_comprehensiveness_prob",  # not a sanity row
            ],
            "mean": [-0.7, -0.1, float("nan"), 0.3],
        }
    )
    (line,) = SanityAnalysis.headline_lines(summary)
    assert line == (
        "- Sanity benchmark, gradient: mean rho over seeds on the wrong side of 0 or undefined (cannot rank a "
        "known order): aopc_sufficiency_prob (rho -0.100), decision_flip_fraction (rho n/a)"
    )
    assert "aopc_comprehensiveness_prob" not in line
    only_random = SimpleNamespace(evaluators={"random": None})
    with pytest.raises(ValueError, match="only with random"):
        SanityAnalysis().check(only_random)  # pyright: ignore[reportArgumentType]


def test_every_measure_with_a_direction_is_in_the_section_with_a_verdict_or_a_reason():
    import numpy as np
    import pandas as pd

    sanity = SanityAnalysis(levels=[0.0, 0.5, 1.0], n_boot=200)
    rows = []
    for level in (0.0, 0.5, 1.0):
        for e in range(6):
            rows.append(
                {
                    "saliency": "gradient",
                    "level": level,
                    "example_id": e,
                    "aopc_comprehensiveness_prob": 10.0 * e - level,  # falls in every example, far apart
                    "never_flip_rate": float(e == 0),  # constant over the levels, differs between examples
                    "first_flip_fraction": np.nan if level == 1.0 else 0.5,  # no example flips at level 1
                    "clean_prob": 0.9,  # no direction: not a measure the benchmark considers
                }
            )
    section = sanity._section(pd.DataFrame(rows))
    found = section["methods"]["gradient"]
    assert set(found) == {"aopc_comprehensiveness_prob", "never_flip_rate", "first_flip_fraction"}
    comp = found["aopc_comprehensiveness_prob"]
    assert comp["ranks_known_order"] and comp["reason"] is None and comp["ci_high"] < 0 and comp["n_pairs"] == 18
    assert found["never_flip_rate"]["reason"] == "constant over every level in every example"
    assert found["first_flip_fraction"]["reason"] == "undefined (NaN) for every example at level(s) [1.0]"
    assert found["first_flip_fraction"]["rho"] is None and found["first_flip_fraction"]["n_missing"] == 6
    assert section["cannot_rank"] == {"gradient": ["never_flip_rate", "first_flip_fraction"]}
    (line,) = SanityAnalysis.summary_lines({"sanity": section})
    assert line.endswith(
        "1 of 3 measures rank the known order (95 % bootstrap interval of rho over examples on the expected side "
        "of 0); cannot rank a known order: never_flip_rate (constant over every level in every example); "
        "first_flip_fraction (undefined (NaN) for every example at level(s) [1.0])"
    )


def test_max_examples_measures_the_naopc_subset_and_reads_naopc_bounds_without_a_new_search(setup, monkeypatch):
    """sanity.max_examples=6 of the 16 examples: exactly the 6 that naopc.max_examples=6 would bound (the
    smallest sha256('naopc:<id>')); NAOPC's values on them come from the setup of its run over all 16 (no
    second bound search) and equal that run's rows; the section and the console say 6 of 16."""
    from itermask.analyses import naopc as naopc_module
    from itermask.core.aopc_bounds import SUBSET_RULE, bounded_subset

    _, _, inputs, context, curves = setup
    subset_sanity, naopc = SanityAnalysis(n_boot=200, seed=0, max_examples=6), NAOPCAnalysis(exact_max_features=8)
    both = inputs((naopc, subset_sanity))
    job = curves["input_x_gradient"]["one_shot"]
    full = naopc.explanation_measures(both, context, job)  # the bounds of all 16, as NAOPC's own run builds them
    monkeypatch.setattr(naopc_module.NAOPCAnalysis, "_bounds", lambda *a, **k: pytest.fail("bounds searched again"))
    section = subset_sanity.run(both, context, curves).result["sanity"]
    assert section["examples"] == {"measured": 6, "evaluated": EXAMPLES, "rule": SUBSET_RULE}
    ids = job.example_ids.numpy()
    chosen = bounded_subset(ids, 6)
    # level 0 of the subset is the job's own curves restricted: its NAOPC equals the full setup's rows
    sub = subset_sanity._measures(both, context, "input_x_gradient", 0.0, job.select(torch.from_numpy(chosen)))
    assert sub["example_id"].tolist() == ids[chosen].tolist()
    for column in ("naopc_comprehensiveness_prob", "naopc_sufficiency_prob"):
        assert sub[column].tolist() == full[column][torch.from_numpy(chosen)].tolist()
    lines = SanityAnalysis.summary_lines({"sanity": section})
    assert lines[-1] == f"  measured on 6 of the {EXAMPLES} evaluated examples (sanity.max_examples; {SUBSET_RULE})"


def test_bad_max_examples_of_every_measure_is_a_one_line_error():
    from itermask.analyses.ffidelity import FFidelityAnalysis
    from itermask.analyses.removal_reference import RemovalReferenceAnalysis

    for make, option in (
        (lambda v: SanityAnalysis(max_examples=v), "sanity.max_examples"),
        (lambda v: FFidelityAnalysis(max_examples=v), "ffidelity.max_examples"),
        (lambda v: RemovalReferenceAnalysis(max_examples=v), "removal_reference.max_examples"),
    ):
        for value in (0, -3, 2.5, True, "10"):
            with pytest.raises(ValueError, match=rf"^{option}={value!r}: give a whole number >= 1"):
                make(value)
        assert make(None).max_examples is None and make(np.int64(7)).max_examples == 7
