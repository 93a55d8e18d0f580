"""The browser both end-to-end suites drive (`make e2e`, `make e2e-hub`), and what they do when a step fails.

The system's Chromium (tests/chromium.py names it and its flags), never a Playwright download. A failed
step photographs every open page as it was, next to the step screenshots, so a CI log points at a picture.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from chromium import CHROMIUM, CHROMIUM_ARGS

CALL_FAILED = pytest.StashKey[bool]()


@contextmanager
def system_chromium(headless: bool = True) -> Iterator:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        pytest.fail(
            f'Playwright for Python is not installed ({error}); install the course with `pip install -e ".[e2e]"`',
            pytrace=False,
        )
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: install it (`apt-get install -y chromium`) or point "
            "E2E_CHROMIUM at a Chromium or Chrome binary",
            pytrace=False,
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=headless)
        try:
            yield launched
        finally:
            launched.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Marks a test whose call failed (a conftest imports this hook to use it)."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        item.stash[CALL_FAILED] = True


def photograph_after_failure(request, browser, screenshots, suite: str) -> None:
    """After a failed test, a screenshot of every page still open in ``browser``."""
    if not request.node.stash.get(CALL_FAILED, False):
        return
    for context in browser.contexts:
        for page in context.pages:
            try:
                screenshots.take(page, f"FAILED_{request.node.name}")
            except Exception as error:  # the page may be gone; the test's own error matters more
                print(f"[{suite}] could not photograph a page after the failure: {error}", flush=True)
