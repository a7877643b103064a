"""Hostile strings from data and config (class names, a model name, a config value, a path, an error message)
in ``report.md``, ``report.html`` and the per-example view pages: every one shown as text, none run or turned
into a tag, a link or Markdown structure. The HTML is checked in headless Chromium (as in
``test_views_browser.py``: skipped, saying why, without Chromium or Playwright unless
``ITERMASK_REQUIRE_BROWSER`` is set); ``report.md`` as text."""

import html
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from browser_helpers import opened, require_browser
from test_views import make_view
from tiny_sweep import write_tiny_sweep

from itermask.formatting import md_escape, md_table
from itermask.reporting import build_report, write_report
from itermask.storage.failures import write_failure
from itermask.views import ExampleViews

ROOT = Path(__file__).resolve().parents[2]

IMG = '<img src=x onerror="window.__pwned=1">'
SCRIPT = "<script>window.__pwned=1</script>"
SVG = '"><svg onload="window.__pwned=1">'
#: Markdown structure: a table cell's end, a code span, a link with a script URL, a heading on a new line
MARKDOWN = "a|b `c` [x](javascript:window.__pwned=1)\n# h"

#: what a page must not hold: injected tags, event-handler attributes, script links (run in the page)
INJECTED = """() => ({
    pwned: typeof window.__pwned,
    scripts: document.querySelectorAll('script').length,
    svgs: [...document.querySelectorAll('svg')].filter(e => !e.closest('section.imx')).length,
    images: [...document.images].filter(i => !i.src.startsWith('data:image/png;base64,')).length,
    handlers: [...document.querySelectorAll('*')]
        .filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
    links: [...document.querySelectorAll('a')].filter(a => !a.getAttribute('href').startsWith('#')).length,
    headings: [...document.querySelectorAll('h1, h2, h3, h4')].filter(h => h.textContent.trim() === 'h').length,
})"""
CLEAN = {"pwned": "undefined", "scripts": 0, "svgs": 0, "images": 0, "handlers": 0, "links": 0, "headings": 0}


def test_md_escape_leaves_text_that_commonmark_shows_as_it_was():
    from markdown_it import MarkdownIt

    assert md_escape("a|b") == "a\\|b"
    assert md_escape("`x`") == "\\`x\\`"
    assert md_escape('<img src=x onerror="y">') == '&lt;img src=x onerror="y"&gt;'
    assert md_escape("R&D") == "R&amp;D"
    assert md_escape("C:\\tmp\\<b>") == "C:\\\\tmp\\\\&lt;b&gt;"
    assert md_escape("[x](javascript:y)") == "[x\\](javascript:y)"
    assert md_escape("one\r\ntwo\nthree\u2028four") == "one two three four"
    assert md_escape(3) == "3" and md_escape("rt_snippets [0.1, 0.2] (a) *b*") == "rt_snippets [0.1, 0.2] (a) *b*"
    markdown = MarkdownIt("commonmark", {"html": True}).enable("table")
    for text in (IMG, SCRIPT, SVG, "a|b `c` [x](javascript:y) \\ & <b>"):
        rendered = markdown.render(f"- {md_escape(text)}")
        shown = html.escape(text, quote=False).replace('"', "&quot;")  # as markdown-it escapes text
        assert rendered == f"<ul>\n<li>{shown}</li>\n</ul>\n"
    table = markdown.render(md_table(["name", "n"], [[MARKDOWN, 1]]))
    assert table.count("<td>") == 2 and "<a" not in table and "<code>" not in table and "<h1>" not in table


def _hostile_sweep(tmp_path, tokenizer):
    """A tiny two-seed multirun in a folder named :data:`SVG`: model :data:`IMG`, classes :data:`SCRIPT` and
    :data:`MARKDOWN`, a failed model check naming a class, a failed job whose error is :data:`IMG` and a job
    never finished whose override sets a config value to :data:`SCRIPT`."""
    check = {"meaningful": False, "problems": [f"the classifier predicts class {SCRIPT!r} for all 4 examples"]}
    root = write_tiny_sweep(
        tmp_path / SVG, tokenizer, model_name=IMG, class_names=(SCRIPT, MARKDOWN), extra={"model_check": check}
    )
    for job, overrides in (("2", ["seed=2"]), ("3", ["seed=3", f"model.name={SCRIPT}"])):
        (root / job / ".hydra").mkdir(parents=True)
        (root / job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    write_failure(root / "2", RuntimeError(f"bad label {IMG}\n{MARKDOWN}"), ["seed=2"], "2")
    return root


def test_hostile_strings_in_report_md_are_escaped(tokenizer, tmp_path):
    root = _hostile_sweep(tmp_path, tokenizer)
    write_report(build_report(root))
    text = (root / "report.md").read_text()
    assert "<img" not in text and "<script" not in text and "<svg" not in text
    assert "](javascript:" not in text.replace("\\](", "")  # the link's ``](`` escaped
    assert f"# itermask report: {md_escape(root)}\n" in text  # the path
    assert f"**{md_escape(IMG)} / d / input_x_gradient / mask_token**" in text  # the model in the headline
    assert f"## {md_escape(IMG)} / d / input_x_gradient / mask_token\n" in text  # ... and a heading
    warning = (
        f"> **Warning** (seed 0): these faithfulness scores mean nothing: the classifier predicts class "
        f"{md_escape(repr(SCRIPT))}"
    )
    assert warning in text  # the class name in the model check's warning (the bug of issue 36)
    # ... and the warning opens the verdict box, before any finding
    found = text.split("## What this run found\n\n", 1)[1]
    assert found.startswith(f"- {md_escape(IMG)} / d / input_x_gradient / mask_token, seed(s) 0") and (
        "these faithfulness scores mean nothing: the classifier predicts class" in found.split("\n", 1)[0]
    )
    assert f"job 2 failed (overrides: seed=2): RuntimeError: bad label {IMG}" not in text
    assert md_escape(f"job 2 failed (overrides: seed=2): RuntimeError: bad label {IMG} {MARKDOWN}") in text
    assert md_escape(f"job folder 3 has no results.json (overrides: seed=3 model.name={SCRIPT})") in text


def test_hostile_strings_in_report_html_run_nothing_in_headless_chromium(tokenizer, tmp_path):
    require_browser()
    root = _hostile_sweep(tmp_path, tokenizer)
    write_report(build_report(root))
    page_path = root / "report.html"
    with opened(page_path, 1280) as (page, problems, requests):
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.wait_for_timeout(200)
        assert problems == [] and dialogs == []
        assert page.evaluate(INJECTED) == CLEAN
        body = page.inner_text("body")
        assert page.title() == f"itermask report {root}"
        for shown in (IMG, SCRIPT, SVG, MARKDOWN.replace("\n", " ")):
            assert shown in body, shown
        assert f"predicts class {SCRIPT!r}" in body  # the warning, as text
        assert page.locator("#first-screen").inner_text().count(IMG) >= 1  # the first screen's table
        views = page.locator("#examples ~ section.imx .imx-meta").all_inner_texts()
        assert any(SCRIPT in v for v in views) and any(MARKDOWN.split("\n")[0] in v for v in views)  # class names


def test_hostile_strings_in_a_view_page_run_nothing_in_headless_chromium(tmp_path):
    require_browser()
    view = make_view(["[CLS]", IMG, SVG, "[SEP]"], reason=SCRIPT)
    view.class_names = [IMG, SVG]
    view.methods = {SVG: next(iter(view.methods.values()))}
    view.methods[SVG].method = SVG
    page_path = ExampleViews([view]).save(tmp_path / "views.html", title=SCRIPT)
    with opened(page_path, 1200) as (page, problems, _):
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.wait_for_timeout(200)
        assert problems == [] and dialogs == []
        assert page.evaluate(INJECTED) == {**CLEAN, "svgs": 0}
        body = page.inner_text("body")
        assert page.title() == SCRIPT and all(s in body for s in (IMG, SVG, SCRIPT))


@pytest.mark.slow
def test_a_multirun_on_a_csv_with_hostile_labels_writes_a_report_that_runs_nothing(tmp_path):
    """The bug of issue 36 through the real entry point: ``evaluate.py -m`` on a CSV whose labels are
    :data:`IMG` and :data:`SCRIPT`, fine-tuned into a classifier that predicts one class (learning rate 1000),
    so that the report's "these faithfulness scores mean nothing" warning names a hostile class."""
    rows = pd.read_csv(ROOT / "src/itermask/resources/rt_snippets/validation.csv", keep_default_na=False).head(120)
    rows["label"] = rows["label"].map({0: IMG, 1: SCRIPT})
    rows.to_csv(tmp_path / "hostile.csv", index=False)
    args = ["dataset=csv", f"dataset.source.path={tmp_path}/hostile.csv", "train.max_train_examples=16"]
    args += ["model.finetune.optimizer.learning_rate=1000", "logger=csv"]
    args += ["evaluation.n_examples=4", "ood=none", f"hydra.sweep.dir={tmp_path}/multi"]
    env = {**os.environ, "ITERMASK_CACHE": str(tmp_path / "cache"), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    out = subprocess.run(
        [sys.executable, "evaluate.py", "-m", "seed=0", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = (tmp_path / "multi" / "report.md").read_text()
    assert "these faithfulness scores mean nothing: the classifier predicts class '&lt;" in text
    assert "<img" not in text and "<script" not in text
    require_browser()
    with opened(tmp_path / "multi" / "report.html", 1280) as (page, problems, _):
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.wait_for_timeout(200)
        assert problems == [] and dialogs == [] and page.evaluate(INJECTED) == CLEAN
        assert "predicts class '<" in page.inner_text("body")


def test_the_failures_only_report_escapes_the_path_and_the_errors(tmp_path):
    from itermask.callbacks import _failures_only_report

    root = tmp_path / SVG
    (root / "0" / ".hydra").mkdir(parents=True)
    write_failure(root / "0", ValueError(f"labels {IMG} and {SCRIPT}"), [f"model.name={MARKDOWN}"], "0")
    text = _failures_only_report(root).read_text()
    assert text.startswith(f"# itermask report: {md_escape(root)}\n")
    assert (
        f"- {md_escape(f'job 0 failed (overrides: model.name={MARKDOWN}): ValueError: labels {IMG} and {SCRIPT}')}"
        in text
    )
    assert "<img" not in text and "<script" not in text and "<svg" not in text
