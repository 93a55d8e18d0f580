"""The nbgrader pipeline end to end, for every assignment found in solutions/.

One temporary course is prepared per module (copy of solutions/, release generated once); every
submission below is graded in a single `grade` run with two workers, then each test reads its row:

- the source notebook itself, graded as a submission, runs from top to bottom without an error, passes
  every test, hidden ones included, and autogrades to full marks without being flagged (it is the
  model solution; `make test` runs the source notebooks here only, not again under nbval);
- the release has no solution code and no hidden test (line by line against the source);
- the untouched release fails every test and scores 0 (nbgrader's `validate --invert` semantics);
- fixture submissions (tests/submissions/<assignment>/<name>/) score what their expected.json says;
- two learners go through the whole cycle (release, fetch, submit, collect, grade, feedback, CSV) for the
  first and the last assignment: one types the model solution into the fetched release, the other hands
  it in untouched;
- re-running is idempotent; manual grades survive a forced re-autograde.
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest
from grading_support import fixtures

from course_grader.autograde import grade
from course_grader.exchange import pipeline
from course_grader.ground import notebooks
from course_grader.ground.layout import CourseLayout, discover_assignments

REPOSITORY = Path(__file__).resolve().parents[1]
SUBMISSIONS = REPOSITORY / "tests" / "submissions"
# COURSE_GRADING_ASSIGNMENTS=ex1_manual_attention,ex3_positional_encoding limits a run to some assignments
# (while writing one); by default every assignment in solutions/ is covered.
ONLY = [name for name in os.environ.get("COURSE_GRADING_ASSIGNMENTS", "").split(",") if name]
ASSIGNMENTS = [
    assignment for assignment in discover_assignments(REPOSITORY / "solutions") if not ONLY or assignment.id in ONLY
]
ASSIGNMENT_IDS = [assignment.id for assignment in ASSIGNMENTS]
FIXTURES = [
    (assignment.id, fixture)
    for assignment in ASSIGNMENTS
    for fixture in fixtures.discover_fixtures(SUBMISSIONS, assignment.id)
]
CYCLE_ASSIGNMENT = ASSIGNMENT_IDS[0] if ASSIGNMENT_IDS else None
# Through the exchange (release, fetch, submit, collect): the first assignment and the last, the optional
# Triton exercise whose learner kernel runs in Triton's interpreter inside the sandbox. The other assignments'
# submissions are placed in submitted/ directly (the same grading, without the exchange's round trip).
CYCLE_ASSIGNMENTS = list(dict.fromkeys(ASSIGNMENT_IDS[:1] + ASSIGNMENT_IDS[-1:]))

pytestmark = pytest.mark.slow


def _row(run, student: str, assignment_id: str):
    rows = [record for record in run.records if record.student == student and record.assignment == assignment_id]
    assert len(rows) == 1, f"expected exactly one grade row for {student}/{assignment_id}, found {len(rows)}"
    return rows[0]


def _explain(record) -> str:
    return (
        f"{record.student}/{record.assignment}: status {record.status}, auto {record.auto_score}/{record.auto_max}, "
        f"failed {record.failed_cells}, reasons {record.reasons}, log {record.log}"
    )


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> CourseLayout:
    root = tmp_path_factory.mktemp("course")
    for assignment in ASSIGNMENTS:
        shutil.copytree(assignment.source_dir, root / "solutions" / assignment.id)
    shutil.copy(REPOSITORY / "nbgrader_config.py", root)
    layout = CourseLayout.from_directory(root, exchange=root / "exchange")
    pipeline.generate_release(layout)
    return layout


@pytest.fixture(scope="module")
def cycle_learners(course, tmp_path_factory) -> dict[str, str]:
    """Two learners fetch each cycle assignment from the exchange, work on it and submit it."""
    home = tmp_path_factory.mktemp("learners")
    for assignment_id in CYCLE_ASSIGNMENTS:
        assignment = course.assignment(assignment_id)
        pipeline.release_assignment(course, assignment.id)
        plans = {"ada": fixtures.model_answers(assignment), "grace": {}}
        for learner, answers in plans.items():
            folder = pipeline.fetch_assignment(course, assignment.id, home / learner)
            notebook_path = folder / f"{assignment.main_notebook.stem}.ipynb"
            notebooks.save_json(notebooks.fill_in(notebooks.load_json(notebook_path), answers), notebook_path)
            pipeline.submit(course, assignment.id, learner, home / learner)
        collected = pipeline.collect(course, assignment.id)
        assert sorted(collected) == ["ada", "grace"], (
            f"collect should bring both learners' {assignment_id}, got {collected}"
        )
    return {"ada": "solution", "grace": "untouched release"}


@pytest.fixture(scope="module")
def graded(course, cycle_learners):
    """Everything graded in one run, two workers."""
    for assignment in ASSIGNMENTS:
        release = fixtures.release_notebook(course, assignment)
        source_files = {path.name: path.read_bytes() for path in assignment.source_dir.glob("*.ipynb")}
        fixtures.place_submission(course, "source", assignment, source_files)
        fixtures.place_submission(course, "blank", assignment, fixtures.notebook_files(assignment, release))
    for assignment_id, fixture in FIXTURES:
        assignment = course.assignment(assignment_id)
        fixtures.place_submission(course, f"fixture-{fixture.name}", assignment, fixture.files(course, assignment))
    return grade(course, workers=2, log=print)


def test_assignments_are_discovered():
    assert ASSIGNMENT_IDS, "no assignment found in solutions/ (expected solutions/<id>/<id>.ipynb)"
    if not ONLY:
        assert "ex1_manual_attention" in ASSIGNMENT_IDS, f"ex1_manual_attention missing from {ASSIGNMENT_IDS}"


@pytest.mark.parametrize("assignment_id", ASSIGNMENT_IDS)
def test_release_has_no_solution_and_no_hidden_test(course, assignment_id):
    assignment = course.assignment(assignment_id)
    for name in assignment.notebooks:
        source = notebooks.load_json(assignment.source_dir / f"{name}.ipynb")
        release = notebooks.load_json(course.release_dir / assignment_id / f"{name}.ipynb")
        release_cells = notebooks.graded_cells(release)
        release_text = "\n".join(notebooks.source_text(cell) for cell in release["cells"])
        for marker in (notebooks.BEGIN_SOLUTION, notebooks.END_SOLUTION, notebooks.BEGIN_HIDDEN, notebooks.END_HIDDEN):
            assert marker not in release_text, f"release/{assignment_id}/{name}.ipynb still contains '{marker}'"
        # A secret line is one that appears only inside solution or hidden-test regions of the source.
        public, secret = set(), set()
        for cell in source["cells"]:
            inside, outside = notebooks.split_secret(notebooks.source_text(cell))
            if notebooks.is_solution(cell) and not inside:
                inside, outside = outside, []  # a whole-cell answer (written answers) is secret as a whole
            secret |= {line.strip() for line in inside}
            public |= {line.strip() for line in outside}
        secret = {line for line in secret - public if len(line) > 3}
        for cell in release["cells"]:
            for number, line in enumerate(notebooks.source_text(cell).splitlines(), start=1):
                assert line.strip() not in secret, (
                    f"release/{assignment_id}/{name}.ipynb, cell {notebooks.grade_id(cell) or cell.get('id')}, "
                    f"line {number} gives away the solution or a hidden test: {line.strip()!r}"
                )
            assert not cell.get("outputs"), f"release/{assignment_id}/{name}.ipynb carries outputs"
        for grade_id in notebooks.graded_cells(source):
            assert grade_id in release_cells, f"graded cell {grade_id} of the source is missing from the release"


@pytest.mark.parametrize("assignment_id", ASSIGNMENT_IDS)
def test_source_notebook_passes_all_its_tests_and_autogrades_to_full_marks(graded, course, assignment_id):
    record = _row(graded, "source", assignment_id)
    assert record.status == "graded", _explain(record)
    assert record.auto_score == record.auto_max > 0, _explain(record)
    assert record.failed_cells == [], _explain(record)
    assert not record.needs_review, f"the model solution must not be flagged: {_explain(record)}"
    # The source notebooks run here from top to bottom, in the grader's kernel (`make test` does not run
    # them a second time under nbval): no cell of theirs may raise, graded or not.
    for name in course.assignment(assignment_id).notebooks:
        executed = notebooks.load_json(course.autograded_dir / "source" / assignment_id / f"{name}.ipynb")
        for cell in executed["cells"]:
            errors = [output for output in cell.get("outputs", []) if output.get("output_type") == "error"]
            assert not errors, (
                f"solutions/{assignment_id}/{name}.ipynb, cell {notebooks.grade_id(cell) or cell.get('id')} raised "
                f"{errors[0].get('ename')}: {errors[0].get('evalue')}"
            )
    release = fixtures.release_notebook(course, course.assignment(assignment_id))
    manual_points = sum(
        float(notebooks.nbgrader_meta(cell)["points"])
        for cell in release["cells"]
        if notebooks.is_grade(cell) and not notebooks.is_autograded_test(cell)
    )
    assert record.manual_pending == manual_points, f"manual answers wait for the instructor: {_explain(record)}"


@pytest.mark.parametrize("assignment_id", ASSIGNMENT_IDS)
def test_untouched_release_fails_every_test_and_scores_zero(graded, assignment_id):
    record = _row(graded, "blank", assignment_id)
    assert record.status == "graded", _explain(record)
    assert record.score == 0 and record.auto_score == 0, _explain(record)
    assert record.passed_cells == [] and record.failed_cells, (
        f"every autograded test must fail on the untouched release: {_explain(record)}"
    )


@pytest.mark.parametrize("assignment_id,fixture", FIXTURES, ids=[f"{a}-{f.name}" for a, f in FIXTURES])
def test_fixture_submission_scores_as_expected(graded, assignment_id, fixture):
    record = _row(graded, f"fixture-{fixture.name}", assignment_id)
    expected = fixture.expected
    assert record.status == "graded", _explain(record)
    assert record.auto_score == expected["auto_score"], f"{fixture.expected['description']}: {_explain(record)}"
    assert set(expected.get("failing", [])) <= set(record.failed_cells), _explain(record)
    assert set(expected.get("passing", [])) <= set(record.passed_cells), _explain(record)
    if expected["auto_score"] == record.auto_max:
        assert not record.needs_review, f"a correct alternative must not be flagged: {_explain(record)}"


@pytest.mark.parametrize("assignment_id", CYCLE_ASSIGNMENTS)
def test_whole_cycle_two_learners_end_in_the_csv(graded, course, assignment_id):
    ada, grace = _row(graded, "ada", assignment_id), _row(graded, "grace", assignment_id)
    assert ada.auto_score == ada.auto_max > 0, _explain(ada)
    assert grace.auto_score == 0, _explain(grace)
    with open(graded.csv_path, newline="") as handle:
        rows = {(row["student"], row["assignment"]): row for row in csv.DictReader(handle)}
    assert ("ada", assignment_id) in rows and ("grace", assignment_id) in rows, f"CSV rows: {sorted(rows)}"
    assert float(rows[("ada", assignment_id)]["auto_score"]) == ada.auto_max
    nbgrader_csv = pipeline.export_nbgrader_csv(course, course.output_dir / "nbgrader_grades.csv")
    with open(nbgrader_csv, newline="") as handle:
        learners = {row["student_id"] for row in csv.DictReader(handle) if row["assignment"] == assignment_id}
    assert {"ada", "grace"} <= learners, f"nbgrader's own export lacks a learner: {sorted(learners)}"
    for learner in ("ada", "grace"):
        pages = list((course.feedback_dir / learner / assignment_id).glob("*.html"))
        assert pages, f"no feedback generated for {learner}"
        html = pages[0].read_text(encoding="utf-8")
        assert "BEGIN HIDDEN TESTS" not in html, f"feedback for {learner} reveals the hidden tests"


def test_every_collected_submission_has_one_row(graded, course):
    folders = {(path.parent.name, path.name) for path in course.submitted_dir.glob("*/*") if path.is_dir()}
    rows = {(record.student, record.assignment) for record in graded.records}
    assert rows == folders, f"rows without a submission: {rows - folders}; submissions without a row: {folders - rows}"
    assert len(graded.records) == len(folders), "a submission has more than one row"


def test_rerun_is_idempotent_and_skips_unchanged_work(graded, course):
    again = grade(course, workers=2, log=print)
    assert not any(record.executed for record in again.records), "unchanged submissions were executed again"
    before = {
        (r.student, r.assignment): (r.status, r.score, r.auto_score, tuple(r.failed_cells)) for r in graded.records
    }
    after = {(r.student, r.assignment): (r.status, r.score, r.auto_score, tuple(r.failed_cells)) for r in again.records}
    assert after == before, "a second grading run changed the grades"


def test_manual_grade_survives_forced_regrade(graded, course):
    from nbgrader.api import Gradebook

    assignment = course.assignment(CYCLE_ASSIGNMENT)
    release = fixtures.release_notebook(course, assignment)
    manual_cells = [
        notebooks.grade_id(cell)
        for cell in release["cells"]
        if notebooks.is_grade(cell) and not notebooks.is_autograded_test(cell)
    ]
    if not manual_cells:
        pytest.skip(f"{CYCLE_ASSIGNMENT} has no manually graded cell")
    with Gradebook(course.db_url, course.course_id) as gradebook:
        grade_entry = gradebook.find_grade(manual_cells[0], assignment.main_notebook.stem, assignment.id, "ada")
        grade_entry.manual_score = 1.0
        gradebook.db.commit()
    again = grade(course, workers=1, force=True, students=["ada"], assignment_ids=[CYCLE_ASSIGNMENT], log=print)
    ada = _row(again, "ada", CYCLE_ASSIGNMENT)
    assert ada.executed, "--force should run ada's notebook again"
    assert ada.score == ada.auto_max + 1.0, f"the manual point was lost: {_explain(ada)}"
    with Gradebook(course.db_url, course.course_id) as gradebook:
        kept = gradebook.find_grade(manual_cells[0], assignment.main_notebook.stem, assignment.id, "ada").manual_score
    assert kept == 1.0, f"manual score after re-autograde: {kept}"


def test_collect_leaves_links_and_fifos_in_the_exchange_and_grading_reports_them(graded, course):
    """The exchange's inbound folder is writable by every learner: links placed there must not bring the
    instructor's files into submitted/ (nbgrader's own collect copies through them)."""
    assignment = course.assignment(CYCLE_ASSIGNMENT)
    notebook = assignment.main_notebook
    inbound = course.exchange_dir / course.course_id / "inbound"
    stamp = "2030-01-01 00:00:00.000000 UTC"
    whole = inbound / f"eve+{assignment.id}+{stamp}"
    whole.symlink_to(assignment.source_dir, target_is_directory=True)  # the whole submission a link
    inside = inbound / f"mallory+{assignment.id}+{stamp}"
    inside.mkdir()
    (inside / notebook.name).symlink_to(notebook)  # absolute link to the source
    (inside / "timestamp.txt").write_text(stamp)
    (inside / "solutions").symlink_to("../../../../solutions", target_is_directory=True)  # relative
    os.mkfifo(inside / "notes.txt")
    hard = inbound / f"trudy+{assignment.id}+{stamp}"
    hard.mkdir()
    os.link(notebook, hard / notebook.name)  # hard link to the source
    left = []
    collected = pipeline.collect(course, assignment.id, log=left.append)
    assert {"eve", "mallory", "trudy"} <= set(collected), collected
    assert len(left) == 5, f"each thing left in the exchange is reported once: {left}"
    secret = notebook.read_bytes()
    for learner in ("eve", "mallory", "trudy"):
        folder = course.submitted_dir / learner / assignment.id
        for path in folder.rglob("*"):
            assert not path.is_symlink() and (path.is_dir() or path.is_file()), f"collect copied {path} as it was"
            assert not path.is_file() or path.read_bytes() != secret, f"the source notebook reached {path}"
        assert (folder / "collect_refused.json").is_file(), f"{learner}: no list of what was left in the exchange"
    run = grade(course, workers=1, students=["eve", "mallory", "trudy"], log=print)
    for learner in ("eve", "mallory", "trudy"):
        record = _row(run, learner, assignment.id)
        assert record.status == "error" and record.auto_score == 0 and not record.executed, _explain(record)
        assert "refused-at-collect" in {finding["code"] for finding in record.findings}, _explain(record)
    assert any("symbolic link" in reason for reason in _row(run, "mallory", assignment.id).reasons)
    assert _row(run, "ada", assignment.id).note.startswith("kept"), "learners not selected keep their row"


def test_a_row_that_ended_in_an_error_is_run_again_without_force(graded, course, monkeypatch):
    """A machine problem (here: a grading worker that crashes) must not stick to an unchanged submission."""
    from course_grader.stages import run

    assignment = course.assignment(CYCLE_ASSIGNMENT)
    release = fixtures.release_notebook(course, assignment)
    solved = notebooks.fill_in(release, fixtures.model_answers(assignment))
    fixtures.place_submission(course, "unlucky", assignment, fixtures.notebook_files(assignment, solved))

    def crash(*args, **kwargs):
        raise MemoryError("the machine, not the submission")

    with monkeypatch.context() as patch:
        patch.setattr(run, "_worker", crash)
        first = _row(
            grade(course, workers=1, students=["unlucky"], feedback=False, log=print), "unlucky", assignment.id
        )
    assert first.status == "error" and "crashed" in " ".join(first.reasons), _explain(first)
    second_run = grade(course, workers=1, students=["unlucky"], feedback=False, log=print)
    second = _row(second_run, "unlucky", assignment.id)
    assert second.executed and second.status == "graded" and second.auto_score == second.auto_max, _explain(second)
    assert second.note.startswith("run again: the last run ended in an error"), second.note
    report = second_run.report_path.read_text(encoding="utf-8")
    assert "unlucky / " + assignment.id + ": run again" in report, "the report must say what ran again and why"
    third_run = grade(course, workers=1, students=["unlucky"], feedback=False, log=print)
    third = _row(third_run, "unlucky", assignment.id)
    assert not third.executed and third.auto_score == second.auto_score, _explain(third)
    assert third.note.startswith("not run again"), third.note
    assert "not run again" in third_run.report_path.read_text(encoding="utf-8")
