"""The suite's own order (tests/suite_order.py): the longest files first, from durations a full run records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import suite_order

REPOSITORY = Path(__file__).resolve().parents[1]


def _item(path: str, name: str):
    return types.SimpleNamespace(location=(path, 0, name))


def test_files_go_longest_first_and_never_recorded_files_last_each_file_whole_and_in_its_order():
    items = [
        _item("tests/test_a.py", "a1"),
        _item("tests/test_a.py", "a2"),
        _item("tests/test_new.py", "n1"),
        _item("tests/test_b.py", "b1"),
        _item("notebooks/01.ipynb", "cell 1"),
        _item("tests/test_b.py", "b2"),
    ]
    seconds = {"tests/test_a.py": 3.0, "tests/test_b.py": 700.0, "notebooks/01.ipynb": 36.0}
    ordered = [item.location[2] for item in suite_order.longest_first(items, seconds)]
    assert ordered == ["b1", "b2", "cell 1", "a1", "a2", "n1"], ordered


def test_this_machines_record_updates_the_kept_one(tmp_path):
    kept, recorded = tmp_path / "kept.json", tmp_path / "recorded.json"
    kept.write_text(json.dumps({"tests/test_a.py": 5.0, "tests/test_b.py": 9.0}))
    recorded.write_text(json.dumps({"tests/test_b.py": 2.5}))
    assert suite_order.recorded_seconds(kept, recorded) == {"tests/test_a.py": 5.0, "tests/test_b.py": 2.5}
    (tmp_path / "broken.json").write_text("{not json")
    assert suite_order.recorded_seconds(tmp_path / "broken.json", tmp_path / "missing.json") == {}


def test_a_full_run_records_each_files_seconds_and_a_partial_run_records_nothing(tmp_path):
    (tmp_path / "test_quick.py").write_text("def test_one():\n    pass\n")
    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_one():\n    time.sleep(0.3)\n")
    record = tmp_path / "durations.json"

    def run(full: bool) -> None:
        env = {**os.environ, "COURSE_TEST_DURATIONS_FILE": str(record), "PYTHONPATH": str(REPOSITORY)}
        env.pop("COURSE_RECORD_DURATIONS", None)
        if full:
            env["COURSE_RECORD_DURATIONS"] = "1"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.suite_order"]
        result = subprocess.run(
            [*command, "--rootdir", str(tmp_path), str(tmp_path)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr

    run(full=False)
    assert not record.exists(), "a run that was not a full `course test` recorded durations"
    run(full=True)
    seconds = json.loads(record.read_text())
    assert set(seconds) == {"test_quick.py", "test_slow.py"}, seconds
    assert seconds["test_slow.py"] >= 0.3 > seconds["test_quick.py"], seconds


def test_the_kept_record_names_every_test_module_and_chapter():
    """A fresh clone orders by tests/test-durations.json: a file it does not name would run last (after a full
    run, `python tests/suite_order.py --keep` brings the record up to date)."""
    kept = suite_order.recorded_seconds(suite_order.KEPT)
    files = [
        str(path.relative_to(REPOSITORY))
        for path in [*REPOSITORY.glob("tests/test_*.py"), *REPOSITORY.glob("notebooks/*.ipynb")]
    ]
    missing = sorted(name for name in files if name not in kept)
    assert not missing, f"tests/test-durations.json has no duration for {missing}"
    gone = sorted(name for name in kept if not (REPOSITORY / name).is_file())
    assert not gone, f"tests/test-durations.json names files that are gone: {gone}"


def test_a_full_run_writes_each_parts_time_and_its_longest_files(tmp_path):
    """`course test` writes how long it took into build/ (test-times.md), so that no document keeps it by hand."""
    from course_tools import cli

    durations = tmp_path / "test-durations.json"
    durations.write_text(json.dumps({f"tests/test_{i}.py": float(i) for i in range(12)}), encoding="utf-8")
    written = tmp_path / "test-times.md"
    seconds = {"the library and the grading pipeline": 700.4, "the chapters that use every core, one at a time": 90.0}
    cli.write_test_times(written, seconds, ["the chapters that use every core, one at a time"], durations)
    text = written.read_text(encoding="utf-8")
    assert "| the library and the grading pipeline | 700 | passed |" in text, text
    assert "| the chapters that use every core, one at a time | 90 | failed |" in text, text
    assert "| in all | 790 | failed |" in text, text
    longest = [line for line in text.splitlines() if line.startswith("- tests/")]
    assert longest == [f"- tests/test_{i}.py: {i} s" for i in range(11, 1, -1)], longest
    assert f"{os.cpu_count()} cores" in text and "torch " in text
