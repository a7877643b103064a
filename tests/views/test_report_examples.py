"""The report's examples section and first screen on a tiny multirun with real per-example files: the
chosen examples with their reasons, the per-example views inline, the empty AOPC bin note, and bad input
(markup, right-to-left text, emoji, very long texts) rendered safely in ``report.html``."""

import html
import re

import pandas as pd
import pytest
from tiny_sweep import BAD_TOKENS, write_tiny_sweep

from itermask.reporting import build_report, write_report


@pytest.fixture
def tiny_report(tmp_path, tokenizer):
    root = write_tiny_sweep(tmp_path / "sweep", tokenizer, bad_tokens=True)
    report = build_report(root)
    write_report(report)
    return root, report


def test_examples_section_shows_each_pick_with_its_reason(tiny_report):
    from itermask.reporting.examples import OOD_NOTE, pick_examples

    root, report = tiny_report
    picks, notes = pick_examples(report)
    kinds = {p.kind for p in picks}
    assert {"beats_random_most", "beats_random_least", "seed_disagreement"} <= kinds
    # by hand: the example where input_x_gradient beats random most, on the seed-mean AOPC comprehensiveness
    frames = [pd.read_parquet(root / str(i) / "per_example" / "scores.parquet") for i in (0, 1)]
    gain = sum(
        f[(f.saliency == "input_x_gradient") & (f.schedule == "one_shot")].set_index("example_id")[
            "aopc_comprehensiveness_prob"
        ]
        - f[(f.saliency == "random") & (f.schedule == "one_shot")].set_index("example_id")[
            "aopc_comprehensiveness_prob"
        ]
        for f in frames
    )
    best = next(p for p in picks if p.kind == "beats_random_most")
    assert best.example_id == int(gain.idxmax()) and "beats random most" in best.reason
    page = (root / "report.html").read_text()
    section = page[page.index('id="examples"') :]
    assert section.count('<section class="imx"') == len(picks)
    for pick in picks:
        assert html.escape(pick.reason) in section
    assert html.escape(OOD_NOTE) in section  # no per-example OOD scores stored: said so, no OOD pick
    assert "most_ood" not in kinds
    md = (root / "report.md").read_text()
    assert "## Examples" in md and f"example {best.example_id} (job 0): method beats random most" in md


def test_most_out_of_distribution_example_is_picked_from_the_stored_ood_scores(tmp_path, tokenizer):
    from itermask.reporting.examples import OOD_NOTE, pick_examples

    root = write_tiny_sweep(tmp_path / "sweep", tokenizer, ood=True)
    report = build_report(root)
    picks, notes = pick_examples(report)
    ood = [p for p in picks if p.kind == "most_ood"]
    # example 101 scores highest at the last step only; 102 has the largest mean over the 4 steps:
    # seed 0 (1 + 8 + 8 + 8) / 4 = 6.25, seed 1 6.75, mean 6.5; random half of it; clean 1
    assert len(ood) == 1 and ood[0].example_id == 102
    assert ood[0].reason == (
        "most out-of-distribution masked inputs: final-layer Mahalanobis score 6.500 averaged over the 4 "
        "masking steps (one_shot, random 3.250; clean input 1.000; mean over 2 seed(s))"
    )
    assert not any(OOD_NOTE in note for note in notes)
    write_report(report)
    section = (root / "report.html").read_text().split('id="examples"', 1)[1]
    assert html.escape(ood[0].reason) in section and html.escape(OOD_NOTE) not in section


def test_empty_aopc_bin_is_noted_next_to_the_score(tiny_report):
    from itermask.reporting.empty_bins import empty_bins

    root, report = tiny_report
    found = [e for e in empty_bins(report) if e.score == "aopc_comprehensiveness_prob"]
    assert len(found) == 1 and found[0].bin == 0.01 and (found[0].n_empty, found[0].n_examples) == (4, 4)
    # the 1 % bin masks nothing, so its comprehensiveness is 0 and it halves the mean over the two bins
    assert found[0].with_bin == pytest.approx(found[0].without_bin / 2)
    mean = report.headline
    row = mean[(mean.schedule == "one_shot") & (mean.score == "aopc_comprehensiveness_prob")].iloc[0]
    assert found[0].with_bin == pytest.approx(row["mean"])  # the reported AOPC is the one with the empty bin
    page = (root / "report.html").read_text()
    first = page[page.index('id="first-screen"') : page.index('id="examples"')]
    assert "the 1 % AOPC bin masks 0 tokens in 4 of 4 examples" in first
    assert f"{found[0].with_bin:.4f} with it, {found[0].without_bin:.4f} without it" in first
    assert "†" in first  # marked in the method table next to the score


def test_bad_input_is_escaped_isolated_and_cut_in_the_report(tmp_path, tokenizer, monkeypatch):
    from itermask.reporting.render import examples

    root = write_tiny_sweep(tmp_path / "sweep", tokenizer, bad_tokens=True)
    monkeypatch.setattr(examples, "MAX_TOKENS", 4)  # every example is longer: each is cut with a marker
    write_report(build_report(root))
    page = (root / "report.html").read_text()
    section = page[page.index('id="examples"') :]
    assert "<script" not in page  # markup from the data never reaches the page as markup
    assert html.escape(BAD_TOKENS[0]) in section
    assert "שלום" in section and "😀&amp;&#34;q&#34;" in section  # right-to-left text and emoji, escaped
    assert re.search(r'<div class="imx-text" dir="auto"><bdi', section)  # each token isolated, direction auto
    assert section.count("more tokens not shown") >= section.count('<section class="imx"') > 0
