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
sys.path.insert(2, str(REPOSITORY / "tests"))  # tests/chromium.py

from browser_session import (  # noqa: E402
    CALL_FAILED,
    photograph_after_failure,
    pytest_runtest_makereport,  # noqa: F401  (the hook that marks a failed step)
    system_chromium,
)


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
    with system_chromium() as launched:
        yield launched


@pytest.fixture(autouse=True)
def screenshot_on_failure(request):
    yield
    # Only a failed browser test (marked e2e_hub) asks for the browser: the others never start one.
    if request.node.stash.get(CALL_FAILED, False) and request.node.get_closest_marker("e2e_hub") is not None:
        browser, screenshots = request.getfixturevalue("browser"), request.getfixturevalue("screenshots")
        photograph_after_failure(request, browser, screenshots, "e2e-hub")
