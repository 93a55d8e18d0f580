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
sys.path.insert(1, str(HERE.parent))  # tests/chromium.py

from browser_session import (  # noqa: E402
    photograph_after_failure,
    pytest_runtest_makereport,  # noqa: F401  (the hook that marks a failed step)
    system_chromium,
)


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
    with system_chromium(headless=os.environ.get("E2E_HEADED") != "1") as launched:
        yield launched


@pytest.fixture(autouse=True)
def screenshot_on_failure(request, browser, screenshots):
    yield
    photograph_after_failure(request, browser, screenshots, "e2e")
