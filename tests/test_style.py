"""The house style, as tooling: ruff's linter and formatter over the package, the tests and the
notebooks' code cells (settings in pyproject.toml). To fix what this reports: `.venv/bin/ruff format`
and `.venv/bin/ruff check --fix`, then the rest by hand."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ["course_utils", "course_grader", "course_tools", "tests", "notebooks", "solutions", "benchmarks", "deploy"]


def _ruff() -> list[str]:
    beside = Path(sys.executable).with_name("ruff")  # the ruff of this environment (the test extra)
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: it comes with the test extra (pip install -e '.[test]')")
    return [found]


def test_ruff_lint_passes():
    result = subprocess.run(_ruff() + ["check", "--no-cache", *CHECKED], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check found problems:\n{result.stdout[-6000:]}{result.stderr[-2000:]}"


def test_ruff_format_is_applied():
    result = subprocess.run(
        _ruff() + ["format", "--check", "--no-cache", *CHECKED], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, (
        f"files not in the house format (run `.venv/bin/ruff format`):\n{result.stdout[-6000:]}{result.stderr[-2000:]}"
    )
