"""Which files `course test` runs, and in which order its two workers take them: the longest first, from
recorded durations.

`course test` runs each part of the suite with this plugin (``pytest -p tests.suite_order``). The workers take
whole files (``--dist loadfile``: a test module or a notebook) in collection order, so a long file that starts
last keeps one worker busy while the other sits idle: the grading pipeline once started last, alphabetically,
and the first part took 20 minutes instead of 13. So the files are handed out longest first, by how long each
took when it last ran in full (its tests' setup, call and teardown, summed); a file never recorded goes last.
Within a file the order is its own.

The durations are written by the test command, never by hand: a full `course test` (every part, nothing
selected out) records each file's seconds in ``build/test-durations.json``, and the next run on this machine
orders by them. A fresh clone has no ``build/``: it orders by ``tests/test-durations.json``, a full run's record
kept with the tests; ``python tests/suite_order.py --keep`` copies this machine's record there (a new test
module or chapter needs it: tests/test_suite_order.py checks that the kept record names every file).
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
# (The suite's own test of the recording points it at a file of its own: COURSE_TEST_DURATIONS_FILE.)
RECORDED = Path(os.environ.get("COURSE_TEST_DURATIONS_FILE") or REPOSITORY / "build" / "test-durations.json")
KEPT = REPOSITORY / "tests" / "test-durations.json"
# Set by `course test` for the parts of a full run, where every collected file runs whole: a run of a few
# tests (-k, -m, one file's tests) must not record a long file as short.
RECORD_ENV = "COURSE_RECORD_DURATIONS"
# What `course test --fast` (``--library-only``) leaves out: the integration tests (nbgrader cycles, the
# sandbox, JupyterLab, the book, the learner's checkout) and the browser tests. The rest is the library, in
# under a minute.
FULL_SUITE_ONLY = (
    "e2e",
    "e2e_hub",
    "test_grading_pipeline.py",
    "test_grading_attacks.py",
    "test_grading_units.py",
    "test_grading_sandbox.py",
    "test_lab.py",
    "test_html.py",
    "test_learner_path.py",
    "test_devices_chapters.py",
    "test_course_check.py",
)


def recorded_seconds(*paths: Path) -> dict[str, float]:
    """Seconds per file (its path from the repository): the kept record, updated by this machine's."""
    seconds = {}
    for path in paths or (KEPT, RECORDED):
        try:
            seconds.update({str(name): float(value) for name, value in json.loads(path.read_text()).items()})
        except (OSError, ValueError, AttributeError):
            continue
    return seconds


def longest_first(items: list, seconds: dict[str, float]) -> list:
    """The test items by their file's recorded seconds, longest first, then the files never recorded; the items
    of one file stay together and in their order (the sort is stable)."""
    return sorted(items, key=lambda item: -seconds.get(item.location[0], -1.0))


# -- the plugin ------------------------------------------------------------------------------------------
_ran: dict[str, float] = defaultdict(float)


def pytest_addoption(parser):
    parser.addoption("--library-only", action="store_true", help="leave out the files of FULL_SUITE_ONLY")


def pytest_ignore_collect(collection_path, config):
    if config.getoption("library_only") and collection_path.parent == REPOSITORY / "tests":
        return collection_path.name in FULL_SUITE_ONLY or None
    return None


def pytest_collection_modifyitems(session, config, items):
    items[:] = longest_first(items, recorded_seconds())


def pytest_runtest_logreport(report):  # on the controller, xdist passes on every worker's reports
    _ran[report.location[0]] += report.duration


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput") or os.environ.get(RECORD_ENV) != "1" or not _ran:
        return
    record = recorded_seconds(RECORDED)
    record.update({name: round(seconds, 1) for name, seconds in _ran.items()})
    RECORDED.parent.mkdir(parents=True, exist_ok=True)
    RECORDED.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n", encoding="utf-8")


def keep() -> int:
    """Copy this machine's record to tests/, where a fresh clone finds it."""
    if not RECORDED.is_file():
        print(f"no record yet: a full `course test` writes {RECORDED.relative_to(REPOSITORY)}", file=sys.stderr)
        return 1
    KEPT.write_text(RECORDED.read_text(encoding="utf-8"), encoding="utf-8")
    print(f"{KEPT.relative_to(REPOSITORY)}: {len(recorded_seconds(KEPT))} files")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["--keep"]:
        sys.exit("usage: python tests/suite_order.py --keep")
    sys.exit(keep())
