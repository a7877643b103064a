"""Headless Chromium for the tests of web pages (the per-example views, the report, the docs site): Debian's
``chromium`` package driven by Playwright over the DevTools protocol. A test calls :func:`require_browser`
first: it skips, saying what is missing, without Chromium or Playwright, and fails instead where
``ITERMASK_REQUIRE_BROWSER`` is set (``.ci/run`` sets it, so CI cannot skip the tests silently)."""

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest


def _chromium() -> str | None:
    """The Chromium binary: ``$ITERMASK_CHROMIUM``, else ``chromium``/``chromium-browser`` on the PATH."""
    return os.environ.get("ITERMASK_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


CHROMIUM = _chromium()
try:
    import playwright.sync_api  # noqa: F401

    PLAYWRIGHT = True
except ImportError:
    PLAYWRIGHT = False

MISSING = (
    None
    if CHROMIUM is not None and PLAYWRIGHT
    else "headless-browser test needs Debian's chromium (apt-get install chromium) and playwright "
    f"(pip install playwright); found chromium={CHROMIUM}, playwright={PLAYWRIGHT}"
)


def require_browser() -> None:
    """Skip, saying what is missing, without Chromium or Playwright; fail instead under
    ``ITERMASK_REQUIRE_BROWSER``."""
    if MISSING is not None:
        if os.environ.get("ITERMASK_REQUIRE_BROWSER"):
            pytest.fail(MISSING)
        pytest.skip(MISSING)


@contextmanager
def opened(page: Path | str, width: int, wait_until: str = "load"):
    """``page`` (a file, or a URL) loaded in headless Chromium at ``width`` x 900: yields the page, the
    console/page errors and failed requests seen while loading, and every URL requested."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            tab = browser.new_page(viewport={"width": width, "height": 900})
            problems, requests = [], []
            tab.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            tab.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            tab.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
            tab.on("request", lambda r: requests.append(r.url))
            tab.goto(page.as_uri() if isinstance(page, Path) else page, wait_until=wait_until)  # type: ignore[arg-type]
            yield tab, problems, requests
        finally:
            browser.close()
