"""The documentation: the generated configuration reference covers every YAML file under conf/ and every key
in it, the README stays short and in step with CI, and the site builds with ``mkdocs build --strict``."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _reference_module():
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "scripts" / "config_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


reference = _reference_module()


def _leaf_keys(node, prefix: str = "") -> list[str]:
    if not isinstance(node, dict) or not node:
        return [prefix]
    return [key for k, v in node.items() for key in _leaf_keys(v, f"{prefix}.{k}" if prefix else str(k))]


def test_the_reference_lists_every_yaml_file_and_every_key_in_it():
    text = reference.render(ROOT / "conf")
    files = reference.yaml_files(ROOT / "conf")
    assert len(files) >= 50 and (ROOT / "conf" / "evaluate.yaml") in files
    for path in files:
        relative = path.relative_to(ROOT / "conf").as_posix()
        assert f"`{relative}`" in text, f"conf/{relative} is missing from the configuration reference"
        for key in _leaf_keys(yaml.safe_load(path.read_text()) or {}):
            assert f"| `{key}` |" in text.split(f"`{relative}`", 1)[1], f"conf/{relative}: key {key} is not listed"
    for group in ("attack", "dataset", "debug", "experiment", "hparams_search", "hydra/help", "logger", "masking"):
        assert f"| `{group}` |" in text
    assert "| `saliency` |" in text and "| `model` |" in text and "| `ood` |" in text and "| `trainer` |" in text


def test_the_reference_lists_every_field_of_the_evaluation_schema_with_its_type_and_default():
    from itermask.validation import EvaluationSchema

    text = reference.render(ROOT / "conf")
    for field in dataclasses.fields(EvaluationSchema):
        assert f"| `evaluation.{field.name}` |" in text
    assert "| `evaluation.quantity` | one of `probability`, `logit` | <code>probability</code> |" in text
    assert "| `evaluation.n_examples` | int or null | <code>100</code> |" in text


def test_default_options_come_from_the_primary_configs():
    choices = reference.default_choices(ROOT / "conf")
    assert choices["saliency"]["evaluate.yaml"] == "gradient" and "train.yaml" not in choices["saliency"]
    # evaluate.yaml includes train.yaml: its model is train.yaml's
    assert choices["model"]["train.yaml"] == choices["model"]["evaluate.yaml"] == "minilm"
    assert choices["hydra/help"]["evaluate.yaml"] == "evaluate" and choices["hydra/help"]["train.yaml"] == "train"
    assert choices["debug"]["evaluate.yaml"] is None


def test_every_primary_config_is_listed_with_the_defaults_it_includes(tmp_path):
    conf = tmp_path / "conf"
    for folder in ("model", "saliency"):
        (conf / folder).mkdir(parents=True)
    (conf / "model" / "a.yaml").write_text("name: a\n")
    (conf / "model" / "b.yaml").write_text("name: b\n")
    (conf / "saliency" / "g.yaml").write_text("name: g\n")
    (conf / "train.yaml").write_text("defaults:\n  - model: a\n  - _self_\nseed: 0\n")
    (conf / "evaluate.yaml").write_text("defaults:\n  - train\n  - saliency: g\n  - _self_\n")
    (conf / "pretrain.yaml").write_text(
        "# Pretrain.\ndefaults:\n  - train\n  - override model: b\n  - _self_\nsteps: 5\n"
    )
    assert reference.primary_configs(conf) == ["evaluate.yaml", "train.yaml", "pretrain.yaml"]
    assert reference.default_choices(conf) == {
        "model": {"evaluate.yaml": "a", "train.yaml": "a", "pretrain.yaml": "b"},
        "saliency": {"evaluate.yaml": "g"},
    }
    text = reference.render(conf)
    assert (
        "| `model` | [`a`](#conf-model-a), [`b`](#conf-model-b) | "
        "`a` (evaluate.py), `a` (train.py), `b` (pretrain.py) |" in text
    )
    assert "### `pretrain.yaml`" in text and "| `steps` | <code>5</code> |" in text
    assert "#### `model/a.yaml` (default)" in text and "#### `model/b.yaml` (default)" in text


def test_parse_reads_the_header_the_comments_and_nested_keys(tmp_path):
    path = tmp_path / "example.yaml"
    path.write_text(
        "# @package _global_\n"
        "# The header,\n"
        "# two lines.\n"
        "defaults:\n"
        "  - mask\n"
        "  # a comment inside the list is no key's\n"
        "  - _self_\n"
        "\n"
        "# the name\n"
        "name: x\n"
        "node:\n"
        "  # the depth\n"
        "  depth: 3  \n"
        "  inner:\n"
        "    flag: true\n"
        "text: |\n"
        "  looks: like a key\n"
        "  but is text\n"
        "after: [1, 2]\n"
    )
    header, directives, entries = reference.parse(path)
    assert header == "The header,\ntwo lines." and directives == ["@package _global_"]
    assert [(e.key, e.value, e.comment) for e in entries] == [
        ("defaults", ["mask", "_self_"], ""),
        ("name", "x", "the name"),
        ("node.depth", 3, "the depth"),
        ("node.inner.flag", True, ""),
        ("text", "looks: like a key\nbut is text\n", ""),
        ("after", [1, 2], ""),
    ]


def test_comments_cannot_break_the_markdown():
    assert reference._escape("a <name> | *b* [x] [y]") == r"a &lt;name&gt; \| \*b\* \[x\] \[y\]"
    assert reference._value([0.1, 0.5]) == "<code>[0.1, 0.5]</code>"
    assert reference._value(None) == "<code>null</code>"
    assert reference._value("a\nb\n") == "(text, 2 lines)"


def test_the_readme_is_short_and_runs_the_tests_as_ci_does():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 10 * 1024
    ci = (ROOT / ".ci" / "run").read_text()
    command = re.search(r"^(HF_HUB_OFFLINE=1 .*python -m pytest.*)$", readme, flags=re.MULTILINE)
    assert command is not None, "the README's test command"
    words = shlex.split(command.group(1))
    settings = [w for w in words if re.fullmatch(r"[A-Z_]+=\S*", w)]
    exported = re.search(r"^export (.*)$", ci, flags=re.MULTILINE)
    assert exported is not None and set(settings) <= set(shlex.split(exported.group(1)))
    assert " ".join(w for w in words if w not in settings) in ci.splitlines()
    for link in re.findall(r"\]\(((?:docs/)?[^)#]+\.md)(?:#[^)]*)?\)", readme):
        assert (ROOT / link).is_file(), f"README links to {link}, which does not exist"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The docs site built as CI builds it (``mkdocs build --strict``), once for this module's tests."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    folder = tmp_path_factory.mktemp("docs") / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


def test_the_site_builds_strictly(site):
    configuration = (site / "configuration" / "index.html").read_text()
    assert "conf-saliency-integrated-gradients" in configuration and "EvaluationSchema" in configuration
    assert (site / "docs-assets" / "example_view.png").is_file()
    # written as GitHub resolves it from docs/ (../docs-assets/), pointed at the site's copy
    assert 'src="../docs-assets/example_view.png"' in (site / "results" / "index.html").read_text()


def test_the_site_renders_its_formulas_and_fetches_nothing_from_the_network(site):
    """Served from a local HTTP server (as ``mkdocs serve`` does), in headless Chromium: every request stays on
    that server (no CDN, no Google Fonts), nothing fails to load, and every formula of the Concepts page is
    typeset by the bundled MathJax into an SVG, none as a MathJax error."""
    import functools
    import http.server
    import threading

    from browser_helpers import opened, require_browser

    require_browser()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        for name, least in (("concepts/", 150), ("experiments/paper/", 1), ("", 0)):
            with opened(base + name, 1280, wait_until="networkidle") as (page, problems, requests):
                page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
                page.evaluate("() => MathJax.startup.promise")
                formulas = page.evaluate("() => document.querySelectorAll('.arithmatex').length")
                typeset = page.evaluate("() => document.querySelectorAll('.arithmatex mjx-container svg').length")
                errors = page.evaluate("() => document.querySelectorAll('mjx-merror, [data-mjx-error]').length")
            assert [url for url in requests if not url.startswith(base)] == [], name
            assert problems == [], name
            assert formulas >= least and typeset == formulas and errors == 0, (name, formulas, typeset, errors)
    finally:
        server.shutdown()


def test_the_extension_diffs_still_apply():
    """docs/extending.md's diffs were run end to end when written; here they must still apply to the code."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    text = (ROOT / "docs" / "extending.md").read_text()
    blocks = re.findall(r"```diff\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) == 7
    result = subprocess.run(
        ["git", "apply", "--check", "-"], cwd=ROOT, input="".join(blocks), capture_output=True, text=True
    )
    assert result.returncode == 0, f"docs/extending.md's diffs no longer apply; update them:\n{result.stderr}"


def test_the_docs_hold_no_raw_html():
    """A page's Markdown renders no tag of its own (comments aside): the bad-input table quotes hostile labels
    (``<img src=x onerror=...>``) and placeholders (``<out>``), which must stay text in the site."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark").enable("table")
    raw = []

    def walk(tokens, page):
        for token in tokens:
            if token.type in ("html_inline", "html_block") and not token.content.lstrip().startswith("<!--"):
                raw.append(f"{page.relative_to(ROOT)}:{(token.map or ['?'])[0]}: {token.content[:60]}")
            walk(token.children or [], page)

    for page in sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]:
        walk(parser.parse(page.read_text()), page)
    assert raw == []


def test_the_python_api_example_loads_the_smoke_runs_checkpoint():
    """docs/python-api.md's example loads ``<cache_dir>/<key>/model`` of ``debug=smoke``: the key it names is the
    one the smoke run makes (it named the key of the old ``train.group_by_length=false`` default, a missing folder)."""
    from conftest import compose_config, keys_of

    page = (ROOT / "docs" / "python-api.md").read_text()
    named = set(re.findall(r"<cache_dir>/([0-9a-f]{16})/model|\{cache\}/([0-9a-f]{16})/model", page))
    keys = {key for pair in named for key in pair if key}
    assert keys == {keys_of(compose_config("debug=smoke")).training}
