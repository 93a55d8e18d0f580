"""The lab's Validate button in this course (course_grader/exchange/validate.py): a syntax error is named with its
cell and line instead of the NameErrors that follow it, and a graded cell deleted outside the lab is missed
before the learner submits. The release is made as `course release` makes it, from ex1's source."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from grading_support import fixtures

from course_grader.exchange import pipeline
from course_grader.exchange.validate import GRADED_CELLS, CourseValidator
from course_grader.ground import notebooks
from course_grader.ground.layout import CourseLayout

REPOSITORY = Path(__file__).resolve().parents[1]
ASSIGNMENT = "ex1_manual_attention"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("validated-course")
    shutil.copytree(REPOSITORY / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    shutil.copy(REPOSITORY / "nbgrader_config.py", root)
    layout = CourseLayout.from_directory(root, exchange=root / "exchange")
    pipeline.generate_release(layout, [ASSIGNMENT])
    assignment = layout.assignment(ASSIGNMENT)
    return layout, assignment, fixtures.release_notebook(layout, assignment)


def _validate(notebook: dict, folder: Path, layout: CourseLayout) -> dict:
    path = folder / f"{ASSIGNMENT}.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    return CourseValidator(config=layout.nbgrader_config()).validate(str(path))


def test_the_release_lists_its_graded_cells(release):
    _, _, notebook = release
    listed = notebook["metadata"]["course_grading"][GRADED_CELLS]
    assert "test_scores" in listed and "explain_attention_pattern" in listed and len(listed) == len(set(listed))


def test_a_syntax_error_is_named_with_its_cell_and_line(release, tmp_path):
    layout, assignment, notebook = release
    answers = fixtures.model_answers(assignment)
    answers["self_attention"] = "def self_attention(X, W_q, W_k, W_v):\n    Q = X @ W_q\n    return Q, (Q\n"
    results = _validate(notebooks.fill_in(notebook, answers), tmp_path, layout)
    (failure,) = results["failed"]
    assert failure["error"].startswith("SyntaxError in the cell that starts with `def self_attention(") and (
        "(line 3)" in failure["error"]
    ), failure


def test_a_deleted_test_cell_is_missed_before_submitting(release, tmp_path):
    layout, assignment, notebook = release
    filled = notebooks.fill_in(notebook, fixtures.model_answers(assignment))
    filled["cells"] = [cell for cell in filled["cells"] if notebooks.grade_id(cell) != "test_self_attention_stability"]
    results = _validate(filled, tmp_path, layout)
    missing = [failure for failure in results.get("failed", []) if "test_self_attention_stability" in failure["error"]]
    assert missing and "is missing from this notebook" in missing[0]["error"], results
    assert len(results["failed"]) == 1, "the model solution fails nothing else"


def test_the_validate_extension_puts_the_course_validator_in_nbgraders_handler():
    from nbgrader.server_extensions.validate_assignment import handlers

    from course_grader.exchange import validate_extension

    class Server:
        class log:
            info = staticmethod(lambda *args: None)

    original = handlers.Validator
    try:
        validate_extension._load_jupyter_server_extension(Server())
        assert handlers.Validator is CourseValidator
    finally:
        handlers.Validator = original
