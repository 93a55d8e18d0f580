"""`course check <id>`: a self-learner's own copy graded with the hidden tests, as in a class.

Run as a learner runs it, the command on a copy in a folder of theirs: the model solution earns every
automatic point; a typical mistake (no division by sqrt(d_k)) loses the cells whose hidden tests catch
it, and the learner reads what failed in words, never the hidden tests' code; the copy itself is not
changed; the feedback page is written to build/check/<id>/.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from grading_support import fixtures

from course_grader.ground import notebooks
from course_grader.ground.layout import CourseLayout

REPOSITORY = Path(__file__).resolve().parents[1]
ASSIGNMENT = "ex1_manual_attention"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(REPOSITORY / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    shutil.copy(REPOSITORY / "nbgrader_config.py", root)
    layout = CourseLayout.from_directory(root, exchange=root / "exchange")
    from course_grader.exchange import pipeline

    pipeline.generate_release(layout, [ASSIGNMENT])
    return layout


def _copy_with(course, tmp_path, answers: dict[str, str]) -> Path:
    assignment = course.assignment(ASSIGNMENT)
    folder = tmp_path / "mine" / ASSIGNMENT
    folder.mkdir(parents=True)
    filled = notebooks.fill_in(fixtures.release_notebook(course, assignment), answers)
    notebooks.save_json(filled, folder / f"{ASSIGNMENT}.ipynb")
    return folder


def _check(course, folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "course_tools.cli",
            "check",
            ASSIGNMENT,
            "--course-dir",
            str(course.root),
            "--path",
            str(folder),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_model_solution_earns_every_automatic_point(course, tmp_path):
    folder = _copy_with(course, tmp_path, fixtures.model_code_answers(course.assignment(ASSIGNMENT)))
    before = hashlib.sha256((folder / f"{ASSIGNMENT}.ipynb").read_bytes()).hexdigest()
    result = _check(course, folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(16 / 16 automatic)" in result.stdout, result.stdout
    assert "FAILED" not in result.stdout, result.stdout
    assert hashlib.sha256((folder / f"{ASSIGNMENT}.ipynb").read_bytes()).hexdigest() == before, "the copy changed"
    assert (course.root / "build" / "check" / ASSIGNMENT / f"{ASSIGNMENT}.html").is_file()


def test_a_typical_mistake_is_named_and_the_hidden_tests_stay_hidden(course, tmp_path):
    assignment = course.assignment(ASSIGNMENT)
    answers = fixtures.base_answers("wrong_no_scaling", assignment, REPOSITORY / "tests" / "submissions")
    result = _check(course, _copy_with(course, tmp_path, answers))
    assert result.returncode == 0, result.stdout + result.stderr
    failed = [line for line in result.stdout.splitlines() if line.strip().startswith("FAILED")]
    assert failed and all(": " in line for line in failed), result.stdout
    assert "sqrt" in result.stdout, "the message should say what to fix (the scaling by sqrt(d_k))"
    shown = result.stdout + (course.root / "build" / "check" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    leaked = [line for line in fixtures.hidden_lines(notebooks.load_json(assignment.main_notebook)) if line in shown]
    assert not leaked, f"hidden test lines shown to the learner: {leaked[:3]}"
