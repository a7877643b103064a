"""The per-example view (itermask.views): built from a tiny model's masking curves, rendered to
self-contained HTML, and safe on bad input (escaping, right-to-left text, emoji, very long texts)."""

import html
import math
import re
from html.parser import HTMLParser

import pytest
import torch

from itermask.core.evaluation import IterativeMaskingEvaluator, saliency_scores
from itermask.core.masking import MaskToken
from itermask.core.saliency import GradientSaliency, RandomSaliency
from itermask.core.tokens import TokenBatch
from itermask.views import (
    MAX_TOKENS,
    ExampleView,
    ExampleViews,
    MethodView,
    Trajectory,
    masking_ranks,
    render_example,
    render_page,
    views_from_curves,
)


def make_view(tokens, reason="", class_names=("negative", "positive"), flip_step=2, segments=None):
    n = len(tokens)
    scores = [math.nan] + [((i * 7) % 5 - 2) / 2 for i in range(1, n - 1)] + [math.nan]
    ranks = [None] + list(range(1, n - 1)) + [None]
    x = [0.0, 0.25, 0.5, 0.75, 1.0]
    masked = [list(range(1, 1 + round(f * (n - 2)))) for f in x]
    trajectories = {
        "one_shot": Trajectory("one_shot", "fraction", x, masked, [0.9, 0.8, 0.4, 0.3, 0.2], flip_step),
        "recursive": Trajectory("recursive", "fraction", x, None, [0.9, 0.7, 0.6, 0.55, 0.5], None),
    }
    return ExampleView(
        example_id=7,
        tokens=tokens,
        token_ids=list(range(n)),
        segments=segments or [-1] + [0] * (n - 2) + [-1],
        methods={"gradient": MethodView("gradient", scores, ranks, trajectories)},
        target=1,
        prediction=1,
        label=0,
        clean_probability=0.9,
        class_names=list(class_names),
        reason=reason,
        special=[True] + [False] * (n - 2) + [True],
    )


class _Collector(HTMLParser):
    """Tags, attributes and text of a page, as a browser's parser sees them."""

    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> _Collector:
    parser = _Collector()
    parser.feed(page)
    return parser


def test_render_has_heatmap_trajectory_and_flip():
    view = make_view(["[CLS]", "a", "good", "film", "##s", "[SEP]"], reason="largest decision flip")
    out = render_example(view)
    parsed = parse(out)
    tokens = [a for t, a in parsed.tags if t == "bdi" and "imx-heat" in a.get("class", "")]
    assert len(tokens) == 6  # one heatmap token per token
    coloured = [a["style"] for a in tokens if "rgba(" in a.get("style", "")]
    assert len(coloured) == 4  # the maskable ones; special tokens are not scored
    assert any("rgba(220,40,40" in s for s in coloured) and any("rgba(40,90,220" in s for s in coloured)
    assert "<svg" in out and 'class="imx-flip-point"' in out and "decision flips at step 2" in out
    assert "the decision never flips" in out and "positions not recorded" in out  # recursive without positions
    assert "largest decision flip" in out and "label <b>negative</b>" in out and "prediction <b>positive</b>" in out
    assert "<script" not in out.lower() and "http" not in out.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "films" in "".join(parsed.text).replace(" ", "") or "film" in out  # ## pieces join the word
    # the newly masked tokens of a step are outlined
    assert 'class="imx-tok imx-m imx-new"' in out


def test_escaping_of_markup_ampersands_and_quotes():
    nasty = ["[CLS]", "<script>alert(1)</script>", "&amp;", '"quoted"', "it's", "<img src=x onerror=alert(1)>", "[SEP]"]
    view = make_view(nasty, reason='<b onmouseover="x">', class_names=("<neg>", 'p"os'))
    out = render_example(view)
    assert "<script>" not in out and "<img" not in out and "<b onmouseover" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out and "&amp;amp;" in out
    # Jinja2's autoescape (markupsafe) writes quotes as numeric references: &#34; for " and &#39; for '
    assert "&#34;quoted&#34;" in out and "it&#39;s" in out and "&lt;neg&gt;" in out and "p&#34;os" in out
    parsed = parse(render_page([view], title="<title>&"))
    assert not any(t in ("script", "img") for t, _ in parsed.tags)
    text = "".join(parsed.text)
    assert "<script>alert(1)</script>" in text and '"quoted"' in text  # displayed as text, intact
    # attribute values cannot be broken out of: every title is a whole attribute
    assert all(set(a) <= {"class", "style", "title", "data-pos"} for t, a in parsed.tags if t == "bdi")


def test_right_to_left_text_is_isolated():
    view = make_view(["[CLS]", "שלום", "עולם", "مرحبا", "ok", "[SEP]"])
    out = render_example(view)
    assert out.count('dir="auto"') >= 2  # the heatmap and every trajectory row
    assert "<bdi" in out and "שלום" in out and "مرحبا" in out


def test_emoji_survive():
    view = make_view(["[CLS]", "great", "😀", "👍🏽", "🏳️‍🌈", "[SEP]"])
    page = render_page([view])
    assert "😀" in page and "👍🏽" in page and "🏳️‍🌈" in page and '<meta charset="utf-8">' in page
    page.encode("utf-8")  # no lone surrogates


def test_very_long_texts_are_cut_with_a_marker():
    n = MAX_TOKENS * 4
    view = make_view(["[CLS]"] + [f"w{i}" for i in range(n - 2)] + ["[SEP]"])
    out = render_example(view)
    heat = re.findall(r'<bdi class="imx-tok imx-heat', out)
    assert len(heat) == MAX_TOKENS
    assert f"… {n - MAX_TOKENS} more tokens not shown" in out
    short = render_example(view, max_tokens=10)
    assert len(re.findall(r'<bdi class="imx-tok imx-heat', short)) == 10 and f"{n - 10} more tokens" in short
    assert len(short) < len(out) / 10
    with pytest.raises(ValueError):
        render_example(view, max_tokens=0)
    assert "more tokens not shown" not in render_example(make_view(["[CLS]", "a", "[SEP]"]))


def test_sentence_pairs_show_the_segment_boundary():
    view = make_view(["[CLS]", "a", "b", "[SEP]", "c", "d", "[SEP]"], segments=[-1, 0, 0, -1, 1, 1, -1])
    # one marker in the heatmap and one in each of the 5 recorded trajectory rows
    assert render_example(view).count('class="imx-seg"') == 1 + 5


def test_views_reject_inconsistent_lengths():
    with pytest.raises(ValueError, match="token_ids"):
        ExampleView(1, ["a", "b"], [1], [0, 0], {}, 0, 0)
    with pytest.raises(ValueError, match="one per token"):
        ExampleView(1, ["a"], [1], [0], {"m": MethodView("m", [0.1, 0.2], [1, 2])}, 0, 0)


def test_masking_ranks_follow_top_k_order():
    scores = torch.tensor([[0.0, 0.5, 0.9, 0.5, float("nan")]])
    maskable = torch.tensor([[False, True, True, True, True]])
    assert masking_ranks(scores, maskable) == [[None, 2, 1, 3, 4]]


def test_views_from_a_tiny_models_curves(tiny_bert, tokenizer):
    texts = ["the film is good", "a bad , bad movie", "it is not what it is"]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    methods = {"gradient": GradientSaliency(), "random": RandomSaliency(seed=0)}
    curves, scores = {}, {}
    for name, method in methods.items():
        evaluator = IterativeMaskingEvaluator(
            method, MaskToken(tokenizer), [0.0, 0.25, 0.5, 0.75, 1.0], tokenizer.all_special_ids
        )
        curves[name] = evaluator.evaluate(tiny_bert, batch, labels=torch.tensor([1, 0, 1]))
        c = curves[name]["one_shot"]
        scores[name] = saliency_scores(method, tiny_bert, batch, c.target, c.example_ids)
    views = views_from_curves(curves, batch, tokenizer, scores, class_names=["neg", "pos"], reasons={1: "picked"})
    assert isinstance(views, ExampleViews) and len(views) == 3
    for row, view in enumerate(views):
        n_real = int(batch.attention_mask[row].sum())
        assert view.tokens[0] == "[CLS]" and view.tokens[-1] == "[SEP]" and len(view.tokens) == n_real
        assert view.token_ids == batch.input_ids[row, :n_real].tolist()
        c = curves["gradient"]["one_shot"]
        assert view.prediction == int(c.clean_logits[row].argmax()) and view.label == [1, 0, 1][row]
        for name in methods:
            mv = view.methods[name]
            assert (
                math.isnan(mv.scores[0])
                and mv.ranks[0] is None
                and sorted(r for r in mv.ranks if r) == list(range(1, n_real - 1))
            )
            one = mv.trajectories["one_shot"]
            k = curves[name]["one_shot"].k[row].tolist()
            assert [len(m) for m in one.masked] == k  # recomputed one-shot masks mask k tokens per step
            # the first masked token at the first non-zero step is the rank-1 token
            step = next(i for i, v in enumerate(k) if v == 1) if 1 in k else None
            if step is not None:
                assert mv.ranks[one.masked[step][0]] == 1
            prob = curves[name]["one_shot"].logits[row].softmax(-1)[:, c.target[row]]
            assert one.probability == pytest.approx(prob.tolist())
            flips = (curves[name]["one_shot"].logits[row].argmax(-1) != c.clean_logits[row].argmax()).tolist()
            assert one.flip_step == (flips.index(True) if True in flips else None)
            recursive = mv.trajectories["recursive"].masked  # recorded by the evaluator (masked_step)
            assert [len(m) for m in recursive] == curves[name]["recursive"].k[row].tolist()
    assert views[1].reason == "picked"
    page = views.page()
    assert page.count('<section class="imx"') == 3 and views._repr_html_() == views.html()
    assert html.escape("[CLS]") in page


def test_given_masks_are_used(tiny_bert, tokenizer):
    enc = tokenizer(["the film is good"], return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    evaluator = IterativeMaskingEvaluator(
        GradientSaliency(), MaskToken(tokenizer), [0.0, 0.5, 1.0], tokenizer.all_special_ids, schedules=["recursive"]
    )
    curves = {"gradient": evaluator.evaluate(tiny_bert, batch)}
    c = curves["gradient"]["recursive"]
    scores = {"gradient": saliency_scores(GradientSaliency(), tiny_bert, batch, c.target, c.example_ids)}
    masks = torch.zeros(3, 1, batch.input_ids.shape[1], dtype=torch.bool)
    masks[1, 0, 2] = masks[2, 0, 1:-1] = True
    views = views_from_curves(curves, batch, tokenizer, scores, masks={"gradient": {"recursive": masks}})
    traj = views[0].methods["gradient"].trajectories["recursive"]
    assert traj.masked == [[], [2], list(range(1, batch.input_ids.shape[1] - 1))]
    with pytest.raises(ValueError, match="methods"):
        views_from_curves(curves, batch, tokenizer, {})


def test_views_from_stored_tables_match_the_views_from_curves(tiny_bert, tokenizer, tmp_path):
    """The per-example files a job writes hold everything a view needs: the view loaded from them equals
    the one built from the curves in memory (tokens, scores, ranks, both schedules' masks, probabilities)."""
    import pandas as pd

    from itermask.analyses.per_example import score_frame, step_frame, token_frame
    from itermask.storage.per_example import load_per_example, write_per_example
    from itermask.views import load

    texts = ["the film is good", "a bad , bad movie"]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    methods = {"gradient": GradientSaliency(), "random": RandomSaliency(seed=0)}
    curves = {}
    for name, method in methods.items():
        evaluator = IterativeMaskingEvaluator(
            method, MaskToken(tokenizer), [0.0, 0.25, 0.5, 1.0], tokenizer.all_special_ids
        )
        curves[name] = evaluator.evaluate(tiny_bert, batch, torch.tensor([1, 0]), torch.tensor([10, 11]))
    scores = {name: by_schedule["one_shot"].scores for name, by_schedule in curves.items()}
    expected = views_from_curves(curves, batch, tokenizer, scores, class_names=["negative", "positive"])
    parts = [(m, c) for m, by_schedule in curves.items() for c in by_schedule.values()]
    write_per_example(
        tmp_path,
        {
            "steps": pd.concat([step_frame(m, c, "probability", None) for m, c in parts], ignore_index=True),
            "scores": pd.concat([score_frame(m, c, "probability", None) for m, c in parts], ignore_index=True),
            "examples": pd.DataFrame(
                {"example_id": [10, 11], "text": texts, "label": [1, 0], "label_name": ["positive", "negative"]}
            ),
            "tokens": token_frame(curves, "gradient", tokenizer),
        },
    )
    loaded = load(tmp_path)
    assert [v.example_id for v in loaded] == [10, 11]
    for want, got in zip(expected, loaded):
        assert got.tokens == want.tokens and got.token_ids == want.token_ids and got.label == want.label
        assert got.prediction == want.prediction and got.target == want.target
        assert got.clean_probability == pytest.approx(want.clean_probability)
        assert got.class_name(got.label) == want.class_name(want.label)
        for name in methods:
            a, b = want.methods[name], got.methods[name]
            assert b.ranks == a.ranks
            assert b.scores == pytest.approx(a.scores, nan_ok=True)
            for schedule in ("one_shot", "recursive"):
                ta, tb = a.trajectories[schedule], b.trajectories[schedule]
                assert tb.masked == ta.masked and tb.flip_step == ta.flip_step and tb.x == ta.x
                assert tb.probability == pytest.approx(ta.probability)
    picked = load(tmp_path, example_ids=[11], methods=["gradient"], reasons={11: "largest flip"})
    assert len(picked) == 1 and list(picked[0].methods) == ["gradient"] and picked[0].reason == "largest flip"
    with pytest.raises(ValueError, match="no example"):
        load(tmp_path, example_ids=[99])
    tables = load_per_example(tmp_path)
    tables.tokens = None
    from itermask.views import views_from_tables

    with pytest.raises(ValueError, match="tokens.parquet"):
        views_from_tables(tables)


def test_recorded_ranks_and_padding_of_joined_batches():
    """The evaluator's ranks follow the views' (and top_k_mask's) order; curves of batches with different
    padded lengths join with their per-token fields padded (ids -1, scores NaN, ranks and steps -1)."""
    from itermask.core.curves import MaskingCurves
    from itermask.core.evaluation import first_masked_step
    from itermask.core.schedules import masking_ranks as recorded_ranks

    scores = torch.tensor([[0.0, 0.5, 0.9, 0.5, float("nan")]])
    maskable = torch.tensor([[False, True, True, True, True]])
    assert recorded_ranks(scores, maskable).tolist() == [[-1, 2, 1, 3, 4]]
    assert [[r if r is not None else -1 for r in row] for row in masking_ranks(scores, maskable)] == [[-1, 2, 1, 3, 4]]
    masks = torch.tensor([[[False, False, True]], [[True, False, True]]])  # [S=2, B=1, L=3]
    assert first_masked_step(masks).tolist() == [[1, -1, 0]]

    def curves(length, fill):
        n = 1
        return MaskingCurves(
            schedule="one_shot",
            steps="fraction",
            grid=torch.tensor([0.0, 1.0], dtype=torch.float64),
            example_ids=torch.tensor([fill]),
            n_maskable=torch.tensor([1]),
            k=torch.zeros(n, 2, dtype=torch.long),
            target=torch.zeros(n, dtype=torch.long),
            labels=torch.zeros(n, dtype=torch.long),
            clean_logits=torch.zeros(n, 2),
            logits=torch.zeros(n, 2, 2),
            token_ids=torch.full((n, length), fill),
            token_segments=torch.zeros(n, length, dtype=torch.long),
            scores=torch.ones(n, length),
            rank=torch.ones(n, length, dtype=torch.int16),
            masked_step=torch.zeros(n, length, dtype=torch.int16),
        )

    joined = MaskingCurves.concat([curves(3, 7), curves(5, 8)])
    assert joined.token_ids.tolist() == [[7, 7, 7, -1, -1], [8] * 5]
    assert joined.scores[0, 3:].isnan().all() and joined.rank[0].tolist() == [1, 1, 1, -1, -1]
    assert joined.masked_step[0].tolist() == [0, 0, 0, -1, -1] and joined.select(torch.tensor([1])).token_ids.shape == (
        1,
        5,
    )
