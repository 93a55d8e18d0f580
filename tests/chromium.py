"""Chromium and Playwright for the tests that open pages in a real browser (the offline book test).

Found, or installed the way `make e2e` installs them: Debian's Chromium with apt-get (as root, or
with sudo without a password) and Playwright for Python from the `e2e` extra of pyproject.toml.
Playwright never downloads a browser here; it drives the system's. Where neither can be had (no
apt-get, no root), the test is skipped with a reason that says what did not run and why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")
# No sandbox: CI containers run as root. No background traffic of the browser's own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
INSTALL_TIMEOUT_S = 900


def _not_run(what: str) -> None:
    message = f"NOT RUN, the browser test needs {what}"
    print(f"\n[chromium] {message}", file=sys.stderr, flush=True)
    pytest.skip(message)


def ensure_playwright() -> None:
    try:
        import playwright.sync_api  # noqa: F401

        return
    except ImportError:
        pass
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["e2e"]
    print(f"\n[chromium] installing {' '.join(extra)} (the e2e extra) ...", file=sys.stderr, flush=True)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", *extra],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    if result.returncode != 0:
        _not_run(f"Playwright for Python, and `pip install {' '.join(extra)}` failed:\n{result.stderr[-2000:]}")


def ensure_chromium() -> str:
    if Path(CHROMIUM).is_file():
        return CHROMIUM
    if CHROMIUM != "/usr/bin/chromium":
        _not_run(f"the Chromium named by E2E_CHROMIUM, and {CHROMIUM} does not exist")
    apt = shutil.which("apt-get")
    if apt is None:
        _not_run(
            "Chromium at /usr/bin/chromium (no apt-get here to install it; point E2E_CHROMIUM at a Chromium "
            "or Chrome binary)"
        )
    prefix = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
    if prefix is None:
        _not_run("Chromium, and installing it with apt-get needs root or sudo")
    print("\n[chromium] installing Debian's chromium with apt-get ...", file=sys.stderr, flush=True)
    for command in ([*prefix, apt, "update", "-q"], [*prefix, apt, "install", "-y", "-q", "chromium"]):
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        if result.returncode != 0:
            _not_run(f"Chromium, and `{' '.join(command)}` failed:\n{result.stderr[-2000:]}")
    if not Path(CHROMIUM).is_file():
        _not_run("Chromium, and apt-get installed no /usr/bin/chromium")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium for this test module (the system's own browser)."""
    executable = ensure_chromium()
    ensure_playwright()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()
