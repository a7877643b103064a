"""The per-example views in a real browser: headless Chromium (Debian's ``chromium`` package, driven by
Playwright over the DevTools protocol) loads a page of views from a tiny model plus bad-input views, with no
console errors and no request leaving the file; the token elements are there with their colours, and the
screenshot is not blank.

Skipped, saying why, only when Chromium or Playwright is missing (``tests/browser_helpers.py``; ``.ci/run``
installs both and sets ``ITERMASK_REQUIRE_BROWSER=1``, under which a missing browser fails the test instead). Set
``ITERMASK_VIEW_ARTIFACTS=<dir>`` to keep the page and the screenshot there.
"""

import io
import os
import time
from pathlib import Path

import torch
from browser_helpers import opened, require_browser
from test_views import make_view

from itermask.core.evaluation import IterativeMaskingEvaluator, saliency_scores
from itermask.core.masking import MaskToken
from itermask.core.saliency import InputXGradientSaliency, RandomSaliency
from itermask.core.tokens import TokenBatch
from itermask.views import ExampleViews, views_from_curves


def _tiny_views(model, tokenizer) -> ExampleViews:
    texts = ["the film is good and the story is not bad", "a bad , bad movie", "what it is"]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    curves, scores = {}, {}
    for name, method in {"input_x_gradient": InputXGradientSaliency(), "random": RandomSaliency(seed=0)}.items():
        evaluator = IterativeMaskingEvaluator(
            method, MaskToken(tokenizer), [0.0, 0.2, 0.4, 0.6, 0.8, 1.0], tokenizer.all_special_ids
        )
        curves[name] = evaluator.evaluate(model, batch, labels=torch.tensor([1, 0, 1]))
        c = curves[name]["one_shot"]
        scores[name] = saliency_scores(method, model, batch, c.target, c.example_ids)
    return views_from_curves(curves, batch, tokenizer, scores, class_names=["negative", "positive"])


def test_views_render_in_headless_chromium(tiny_bert, tokenizer, tmp_path):
    require_browser()
    from PIL import Image

    views = list(_tiny_views(tiny_bert, tokenizer))
    views += [
        make_view(["[CLS]", "<script>alert(1)</script>", "&", '"x"', "[SEP]"], reason="bad input"),
        make_view(["[CLS]", "שלום", "עולם", "😀", "👍🏽", "[SEP]"], reason="right-to-left and emoji"),
        make_view(["[CLS]"] + [f"w{i}" for i in range(400)] + ["[SEP]"], reason="long"),
    ]
    out = Path(os.environ.get("ITERMASK_VIEW_ARTIFACTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    page_path = ExampleViews(views).save(out / "example_views.html")
    start = time.perf_counter()
    with opened(page_path, 1200) as (page, problems, requests):
        assert problems == []
        assert requests == [page_path.as_uri()]  # self-contained: nothing else is fetched
        assert page.evaluate("() => document.querySelectorAll('script').length") == 0
        assert page.locator("section.imx").count() == len(views)
        tokens = page.locator("bdi.imx-heat")
        assert tokens.count() >= 20
        colours = page.evaluate(
            "() => [...document.querySelectorAll('bdi.imx-heat')].map(e => getComputedStyle(e).backgroundColor)"
        )
        painted = [c for c in colours if c not in ("rgba(0, 0, 0, 0)", "transparent")]
        assert len(painted) >= 10 and len(set(painted)) >= 5  # a heatmap, not one flat colour
        assert any(c.startswith("rgba(220, 40, 40") for c in painted)
        assert page.locator("svg polyline").count() >= 3 and page.locator("circle.imx-flip-point").count() >= 1
        assert "<script>alert(1)</script>" in page.inner_text("body")  # shown as text, not run
        assert "more tokens not shown" in page.inner_text("body")
        # the trajectories are folded: a view is its heatmaps plus one summary line per method and schedule
        heights = "() => [...document.querySelectorAll('section.imx')].map(s => s.getBoundingClientRect().height)"
        folded = page.evaluate(heights)
        summaries = page.locator("details.imx-fold > summary")
        assert summaries.count() >= 2 and "decision" in summaries.first.inner_text()
        page.evaluate("() => document.querySelectorAll('details.imx-fold').forEach(d => { d.open = true; })")
        unfolded = page.evaluate(heights)
        tiny = len(views) - 3  # the views of the tiny model have trajectories; the three made-up ones do not
        assert all(f < 0.6 * u for f, u in zip(folded[:tiny], unfolded[:tiny])), (folded, unfolded)
        png = page.screenshot(full_page=True)
    elapsed = time.perf_counter() - start
    (out / "example_views.png").write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.width >= 1000 and image.height >= 900
    distinct = len(image.getcolors(image.width * image.height))  # [(count, colour)] of every colour used
    assert distinct > 50, f"screenshot looks blank: {distinct} distinct colours"
    assert elapsed < 60, f"the browser took {elapsed:.1f} s"


def test_a_tiny_multiruns_report_renders_in_headless_chromium(tokenizer, tmp_path):
    """``report.html`` of a tiny multirun (two seeds, real per-example files, bad-input token strings): it
    loads with no console errors and fetches nothing but itself; the first screen holds the findings, the
    forest plot (an embedded image that decoded) and the method table; the per-example views' token elements
    are there with their heatmap colours; the screenshot is not blank."""
    require_browser()
    from PIL import Image
    from tiny_sweep import BAD_TOKENS, write_tiny_sweep

    from itermask.reporting import build_report, write_report

    out = Path(os.environ.get("ITERMASK_VIEW_ARTIFACTS") or tmp_path)
    root = write_tiny_sweep(tmp_path / "sweep", tokenizer, bad_tokens=True)
    write_report(build_report(root))
    page_path = root / "report.html"
    with opened(page_path, 1280) as (page, problems, requests):
        assert problems == []
        # self-contained: the page itself and its embedded data: images, nothing else
        assert [u for u in requests if not u.startswith("data:")] == [page_path.as_uri()]
        assert page.evaluate("() => document.querySelectorAll('script').length") == 0
        images = page.evaluate("() => [...document.images].map(i => [i.className, i.complete && i.naturalWidth > 0])")
        assert images and all(ok for _, ok in images) and images[0][0] == "imx-forest"
        first = page.locator("#first-screen")
        assert (
            "What this run found" in first.inner_text() and "AOPC comprehensiveness (probability)" in first.inner_text()
        )
        assert first.locator("img.imx-forest").bounding_box()["y"] < 900  # the forest plot is on the first screen
        tokens = page.locator("#examples ~ section.imx bdi.imx-heat")
        assert tokens.count() >= 10
        colours = page.evaluate(
            "() => [...document.querySelectorAll('section.imx bdi.imx-heat')]"
            ".map(e => getComputedStyle(e).backgroundColor)"
        )
        painted = [c for c in colours if c not in ("rgba(0, 0, 0, 0)", "transparent")]
        assert len(painted) >= 5 and len(set(painted)) >= 3  # a heatmap, not one flat colour
        assert BAD_TOKENS[0] in page.inner_text("#examples ~ section.imx")  # shown as text, not run
        png = page.screenshot(full_page=False)
    (out / "report_first_screen.png").write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    distinct = len(image.getcolors(image.width * image.height))
    assert distinct > 50, f"screenshot looks blank: {distinct} distinct colours"
