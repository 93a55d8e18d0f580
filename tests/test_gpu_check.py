"""`make gpu-check` (benchmarks/gpu_check.py) on the CPU: it refuses without CUDA, finds a failing cell's
number and error in a real executed notebook, reads pytest's JUnit file, and writes the summary from a
fake set of results. What needs a GPU (the run itself) is done by an instructor on a GPU server."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_check = _module()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU: the check would run")
def test_refuses_without_a_gpu(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert proc.returncode == 2, f"expected exit 2 without CUDA, got {proc.returncode}: {proc.stdout}{proc.stderr}"
    assert "refused" in proc.stdout and "CUDA" in proc.stdout, f"unclear message: {proc.stdout!r}"
    assert not out.exists(), "the refusal must come before anything is run or written"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU: the check would run")
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_gpu_check_refuses_without_a_gpu():
    proc = subprocess.run(
        ["make", "gpu-check", f"GPU_PYTHON={sys.executable}"], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert proc.returncode != 0, "make gpu-check succeeded on a machine without CUDA"
    assert "refused" in proc.stdout, f"make gpu-check did not say why: {proc.stdout}{proc.stderr}"


def test_every_chapter_and_exercise_is_listed_longest_first():
    paths = gpu_check.ordered_notebooks()
    names = [str(p.relative_to(REPO)) for p in paths]
    expected = sorted(REPO.glob("notebooks/*.ipynb")) + sorted(REPO.glob("solutions/*/*.ipynb"))
    assert sorted(names) == sorted(str(p.relative_to(REPO)) for p in expected), "a notebook is missing or extra"
    assert paths[0].stem == gpu_check.LONGEST_FIRST[0], f"the longest notebook should start first, not {names[0]}"


def test_a_failing_cell_is_reported_with_its_number_and_last_line(tmp_path):
    """A real kernel runs a three-cell notebook from its own folder; cell 2 raises."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import os\nassert os.path.exists('data.txt'), 'not run from its own folder'"),
        nbformat.v4.new_markdown_cell("Some prose."),
        nbformat.v4.new_code_cell("raise RuntimeError('Expected all tensors to be on the same device\\nfound cpu')"),
        nbformat.v4.new_code_cell("print('never')"),
    ]
    folder = tmp_path / "chapter"
    folder.mkdir()
    (folder / "data.txt").write_text("x")
    path = folder / "broken.ipynb"
    nbformat.write(nb, path)
    result = gpu_check.execute_notebook(path, timeout=120)
    assert result["status"] == "error" and result["cell"] == 2, f"got {result}"
    assert result["error"] == "RuntimeError: found cpu", f"the exception's last line should be kept: {result}"


def test_junit_results_are_read(tmp_path):
    junit = tmp_path / "tests.xml"
    junit.write_text(
        """<?xml version="1.0"?><testsuites><testsuite>
        <testcase classname="tests.test_flash" name="test_a" file="tests/test_flash.py">
          <properties><property name="error_over_bound" value="0.41"/></properties></testcase>
        <testcase classname="tests.test_flash" name="test_b"><failure message="AssertionError: off by 2.00">x</failure></testcase>
        <testcase classname="tests.test_bench" name="test_c"><skipped message="needs a CUDA GPU"/></testcase>
        </testsuite></testsuites>"""
    )
    parsed = gpu_check.parse_junit(junit)
    assert parsed["counts"] == {"passed": 1, "failed": 1, "skipped": 1}, parsed
    assert parsed["failures"] == [("test_flash::test_b", "AssertionError: off by 2.00")], parsed
    assert parsed["properties"] == [("test_flash::test_a", {"error_over_bound": "0.41"})], parsed
    missing = gpu_check.parse_junit(tmp_path / "absent.xml")
    assert missing["failures"], "a missing result file must count as a failure"


def _fake(gpu_check, tmp_path, notebooks, grids_exit=0):
    tests = {
        "exit": 0,
        "seconds": 61,
        "tail": "53 passed in 60.1s",
        "counts": {"passed": 53, "failed": 0, "skipped": 0},
        "failures": [],
        "properties": [("test_flash::test_triton_kernel_on_gpu[bf16]", {"error_over_bound": "0.31"})],
    }
    grids = [
        {
            "grid": "gpu",
            "exit": 0,
            "seconds": 58,
            "limit": 150,
            "table": "# Benchmark `gpu`\n\n| a | b |\n|---|---|\n| 1 | 2 |",
        },
        {"grid": "memory", "exit": 0, "seconds": 37, "limit": 90, "table": "| n | MiB |\n|---|---|\n| 8 | 3 |"},
        {"grid": "decode", "exit": grids_exit, "seconds": 75, "limit": 75, "table": ""},
    ]
    meta = {"gpu": "NVIDIA H200", "date": "2026-12-04 10:00 UTC", "commit": "abc1234", "versions": "torch 2.11"}
    path = tmp_path / "summary.md"
    ok = gpu_check.write_summary(path, {**meta, "wall_s": 512}, notebooks, tests, grids)
    return ok, path.read_text()


def test_summary_of_a_run_with_problems(tmp_path):
    notebooks = [
        {"notebook": "notebooks/02_self_attention.ipynb", "status": "ok", "cell": None, "error": "", "seconds": 22},
        {
            "notebook": "notebooks/04_positional_encoding.ipynb",
            "status": "error",
            "cell": 36,
            "error": "RuntimeError: Expected all tensors to be on the same device | cpu",
            "seconds": 70,
        },
    ]
    ok, text = _fake(gpu_check, tmp_path, notebooks, grids_exit=124)
    assert not ok, "a failing notebook and a cut-off grid must not count as a pass"
    assert "PROBLEMS" in text and "notebooks 1/2 ok" in text, text
    assert "| notebooks/02_self_attention.ipynb | ok | 22 |  |" in text, text
    assert "RuntimeError: Expected all tensors to be on the same device \\| cpu (cell 36)" in text, text
    assert "53 passed, 0 failed, 0 skipped" in text and "error_over_bound = 0.31" in text, text
    assert "| decode | TIME LIMIT: partial rows | 75 | 75 |" in text, text
    assert "### Grid `gpu`" in text and "### Benchmark `gpu`" in text and "| 1 | 2 |" in text, text
    assert "(no table was written)" in text, "the decode grid wrote no table and the summary should say so"


def test_summary_of_a_clean_run(tmp_path):
    notebooks = [{"notebook": "solutions/ex1/ex1.ipynb", "status": "ok", "cell": None, "error": "", "seconds": 13}]
    ok, text = _fake(gpu_check, tmp_path, notebooks)
    assert ok and "everything passed" in text, text
