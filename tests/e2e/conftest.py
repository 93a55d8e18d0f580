"""Browser tests of the learner's and the instructor's path (`course e2e`, i.e. `pytest -m e2e tests/e2e`).

They need Playwright for Python and a Chromium (`pip install -e ".[e2e]"`, `apt-get install chromium`),
and take a few minutes, so `make test` leaves them out: this folder is only collected when the run
asks for it, with `-m e2e` or by naming tests/e2e. Nothing here imports Playwright at collection
time of the ordinary suite.

Environment variables:
    E2E_SCREENSHOTS   folder for the numbered screenshots (default: .e2e/screenshots in the repository)
    E2E_CHROMIUM      the browser to drive (default: /usr/bin/chromium)
    E2E_CHAPTER       the chapter notebook the learner runs (default: 02_self_attention.ipynb)
    E2E_HEADED=1      show the browser window (needs a display)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parents[1]
sys.path.insert(0, str(HERE))  # the helper modules next to this file


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: drives JupyterLab in a real browser (run with `course e2e`)")


def _e2e_requested(config) -> bool:
    markexpr = (config.getoption("markexpr", "") or "").replace(" ", "")
    if "e2e" in markexpr and "note2e" not in markexpr:
        return True
    for argument in config.args:
        path = Path(argument.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    # `make test` runs `pytest tests ...`: leave the browser tests (and their Playwright import) out.
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return None if _e2e_requested(config) else True
    return None


def pytest_report_header(config):
    if not _e2e_requested(config):
        return "e2e browser tests: not requested (run them with `course e2e` or `make e2e`)"
    return f"e2e browser tests: screenshots in {screenshot_folder()}"


def screenshot_folder() -> Path:
    return Path(os.environ.get("E2E_SCREENSHOTS") or REPOSITORY / ".e2e" / "screenshots").resolve()


@pytest.fixture(scope="session")
def e2e_work(tmp_path_factory) -> Path:
    """One folder for the course copy, the exchange, the learner and both servers' private homes."""
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def screenshots():
    from lab_ui import Screenshots

    shots = Screenshots(screenshot_folder())
    print(f"\n[e2e] screenshots: {shots.folder}", flush=True)
    yield shots
    print(f"\n[e2e] {len(shots.taken)} screenshots in {shots.folder}", flush=True)


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        pytest.fail(
            f'Playwright for Python is not installed ({error}); install the course with `pip install -e ".[e2e]"`',
            pytrace=False,
        )
    from lab_ui import CHROMIUM, CHROMIUM_ARGS

    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: install it (`apt-get install -y chromium`) or point "
            "E2E_CHROMIUM at a Chromium or Chrome binary",
            pytrace=False,
        )
    with sync_playwright() as playwright:
        # The system browser, never a Playwright download (CI machines have no network for it).
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=os.environ.get("E2E_HEADED") != "1"
        )
        try:
            yield launched
        finally:
            launched.close()


CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        item.stash[CALL_FAILED] = True


@pytest.fixture(autouse=True)
def screenshot_on_failure(request, browser, screenshots):
    """When a step fails, every open page is photographed as it was, next to the step screenshots."""
    yield
    if not request.node.stash.get(CALL_FAILED, False):
        return
    for context in browser.contexts:
        for page in context.pages:
            try:
                screenshots.take(page, f"FAILED_{request.node.name}")
            except Exception as error:  # the page may be gone; the test's own error matters more
                print(f"[e2e] could not photograph the page after the failure: {error}", flush=True)
