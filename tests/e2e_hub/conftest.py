"""The class on JupyterHub, end to end (`make e2e-hub`, i.e. `pytest tests/e2e_hub`).

It needs root (it makes Unix accounts), the shared environment of deploy/install.sh (COURSE_PREFIX,
default /opt/transformers-course-hubtest), Playwright for Python and Debian's Chromium, so `make test`
leaves it out: this folder is only collected when the run names it (or asks for `-m e2e_hub`), except
test_deploy_config.py, which is fast and needs nothing installed.

Environment:
    COURSE_PREFIX     the shared environment (see hub.py)
    E2E_SCREENSHOTS   folder for the numbered screenshots (default: .e2e/hub-screenshots in the repository)
    E2E_CHROMIUM      the browser to drive (default: /usr/bin/chromium)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(REPOSITORY / "tests" / "e2e"))  # lab_ui.py and the learner's answers, shared


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e_hub: the class on a real JupyterHub (run with `make e2e-hub`)")
    config.addinivalue_line("markers", "e2e: drives JupyterLab in a real browser")
    if _requested(config):
        import hub

        hub.stop_on_sigterm()


def _requested(config) -> bool:
    markexpr = (config.getoption("markexpr", "") or "").replace(" ", "")
    if "e2e_hub" in markexpr and "note2e_hub" not in markexpr:
        return True
    for argument in config.args:
        path = Path(argument.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    # test_deploy_config.py is fast and needs nothing installed: `make test` runs it; the rest only on request.
    if (
        collection_path.suffix == ".py"
        and collection_path.name.startswith("test_")
        and collection_path.name != "test_deploy_config.py"
    ):
        return None if _requested(config) else True
    return None


def screenshot_folder() -> Path:
    return Path(os.environ.get("E2E_SCREENSHOTS") or REPOSITORY / ".e2e" / "hub-screenshots").resolve()


@pytest.fixture(scope="session")
def screenshots():
    from lab_ui import Screenshots

    shots = Screenshots(screenshot_folder())
    print(f"\n[e2e-hub] screenshots: {shots.folder}", flush=True)
    yield shots
    print(f"\n[e2e-hub] {len(shots.taken)} screenshots in {shots.folder}", flush=True)


@pytest.fixture(scope="session")
def browser():
    if os.geteuid() != 0:
        pytest.fail("the hub test makes Unix accounts and starts JupyterHub as root: run it as root", pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        pytest.fail(f'Playwright for Python is not installed ({error}): `pip install -e ".[e2e]"`', pytrace=False)
    from lab_ui import CHROMIUM, CHROMIUM_ARGS

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: `apt-get install -y chromium`", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        item.stash[FAILED] = True


@pytest.fixture(autouse=True)
def screenshot_on_failure(request):
    """A failed browser step photographs every open page, next to the step screenshots."""
    yield
    if not request.node.stash.get(FAILED, False) or request.node.get_closest_marker("e2e_hub") is None:
        return
    browser, screenshots = request.getfixturevalue("browser"), request.getfixturevalue("screenshots")
    for context in browser.contexts:
        for page in context.pages:
            try:
                screenshots.take(page, f"FAILED_{request.node.name}")
            except Exception as error:
                print(f"[e2e-hub] could not photograph a page after the failure: {error}", flush=True)
