"""The learner's and the instructor's path through the course, in a real browser.

Learner (JupyterLab in a learner's folder):
  1. runs a chapter with Run -> Run All Cells: every cell runs, no error, the figures are drawn;
  2. opens Nbgrader -> Assignment List, fetches ex1_manual_attention, validates the untouched
     notebook (it must fail), validates a copy whose test cell was deleted outside the lab (Validate
     must name the missing cell), saves an answer with a syntax error (Validate must name it by its
     cell and line), types the answers into the solution cells, restarts and runs it, saves, validates
     again (it must pass), renames the notebook (File -> Rename Notebook, as a learner who keeps a
     copy of their own) and submits.
Instructor (JupyterLab in a temporary copy of the course):
  3. collects and grades with the course's own tools (`course grade`; the report names the renamed
     notebook), opens Nbgrader -> Formgrader, finds the submission in Manage Submissions and Manual
     Grading, types a score for the written answer, and checks that nbgrader's CSV export carries it;
  4. writes the feedback again with the manual grade (`course grade`) and releases it
     (`nbgrader release_feedback`); the learner presses Fetch Feedback in the Assignment List and gets
     the feedback under the name they handed in, with the manual score.

Each step leaves a numbered screenshot (folder printed at the start; see conftest.py).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import jupyter_servers as servers
import lab_ui as ui
import pytest

pytestmark = pytest.mark.e2e

ASSIGNMENT = "ex1_manual_attention"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
RENAMED = f"{ASSIGNMENT}-Copy1.ipynb"  # the learner's own name for the notebook they hand in
CHAPTER = os.environ.get("E2E_CHAPTER", "02_self_attention.ipynb")
MANUAL_SCORE = 1.5  # not a whole number, so that it cannot be mistaken for a default
WRITTEN_ANSWER = (
    "x_3 = [1, 1] has the largest dot product with itself (2, against 1 with x_1 and with x_2), "
    "so its own score is the highest and the softmax gives it the largest weight. "
    "x_1 scores 1 with x_1 and 1 with x_3, so it splits its attention equally between them."
)
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


@dataclass
class Course:
    """The temporary course, the learner's folder, and what the steps learn on the way."""

    work: Path
    root: Path
    exchange: Path
    learner_dir: Path
    student_id: str
    answers: dict[int, str]  # cell index -> what the learner types there
    written_cell_index: int  # the manually graded Markdown answer: its index ...
    written_cell_id: str  # ... and its grade_id
    auto_points: float
    manual_points: float
    submitted: bool = False
    graded_by_hand: bool = False
    timings: dict[str, float] = field(default_factory=dict)

    def instructor_env(self) -> dict:
        env = servers.private_environment(self.work / "home-instructor")
        env["COURSE_EXCHANGE"] = str(self.exchange)  # read by the course's nbgrader_config.py
        return env


class Timer:
    def __init__(self, course: Course, step: str):
        self.course, self.step = course, step

    def __enter__(self):
        self.started = time.monotonic()
        print(f"[e2e] {self.step} ...", flush=True)

    def __exit__(self, *exc):
        seconds = time.monotonic() - self.started
        self.course.timings[self.step] = seconds
        print(f"[e2e] {self.step}: {seconds:.1f} s", flush=True)


def _learner_answers(source_notebook: Path) -> tuple[dict[int, str], int, str, float, float]:
    """What a correct learner types into each solution cell, read from the assignment's source.

    Code cells get the instructor's solution without the markers; the written answer gets a
    learner's own words. Also returns the written cell's index and grade_id, and the automatic and
    manual points.
    """
    notebook = json.loads(source_notebook.read_text(encoding="utf-8"))
    answers, written, written_index, auto_points, manual_points = {}, None, -1, 0.0, 0.0
    for index, cell in enumerate(notebook["cells"]):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        text = "".join(cell["source"])
        if meta.get("grade") and not meta.get("solution"):
            auto_points += float(meta.get("points", 0))
        if meta.get("grade") and meta.get("solution"):
            manual_points += float(meta.get("points", 0))
        if not meta.get("solution"):
            continue
        if cell["cell_type"] == "markdown":
            answers[index], written, written_index = WRITTEN_ANSWER, meta["grade_id"], index
        else:
            answers[index] = "\n".join(line for line in text.splitlines() if line.strip() not in SOLUTION_MARKERS)
    assert answers, f"{source_notebook} has no solution cells: is it still an nbgrader assignment?"
    assert written, f"{source_notebook} has no manually graded written answer; the instructor step needs one"
    return answers, written_index, written, auto_points, manual_points


def _cell_count(notebook: Path) -> int:
    return len(json.loads(notebook.read_text(encoding="utf-8"))["cells"])


def _course_command(course: Course, *arguments: str, module: str = "course_tools.cli", timeout_s: float = 900) -> str:
    return servers.run_checked(
        [
            sys.executable,
            "-m",
            module,
            *arguments,
            "--course-dir",
            str(course.root),
            "--exchange",
            str(course.exchange),
        ],
        cwd=course.root,
        env=course.instructor_env(),
        what=f"course {arguments[0]}",
        timeout_s=timeout_s,
    )


def _export_row(course: Course, name: str) -> dict:
    """nbgrader's CSV export of the gradebook, the row of our learner and assignment."""
    destination = course.work / name
    servers.run_checked(
        [sys.executable, "-m", "nbgrader", "export", "--to", str(destination)],
        cwd=course.root,
        env=course.instructor_env(),
        what="nbgrader export",
    )
    with open(destination, newline="") as handle:
        rows = [
            row
            for row in csv.DictReader(handle)
            if row["student_id"] == course.student_id and row["assignment"] == ASSIGNMENT
        ]
    assert len(rows) == 1, f"expected one row for {course.student_id}/{ASSIGNMENT} in {destination}, got {rows}"
    return rows[0]


# ------------------------------------------------------------------------------------------------
# Fixtures: the course, the two servers, one browser context per person.
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def course(e2e_work) -> Course:
    from nbgrader.utils import get_username

    root, exchange = servers.make_course(e2e_work, ASSIGNMENT)
    answers, written_index, written, auto_points, manual_points = _learner_answers(
        root / "solutions" / ASSIGNMENT / NOTEBOOK
    )
    learner_dir = e2e_work / "learner"
    learner_dir.mkdir()
    course = Course(
        e2e_work,
        root,
        exchange,
        learner_dir,
        get_username(),
        answers,
        written_index,
        written,
        auto_points,
        manual_points,
    )
    with Timer(course, "release (course release --publish)"):
        _course_command(course, "release", "--assignment", ASSIGNMENT, "--publish")
    released = exchange / servers.COURSE_ID / "outbound" / ASSIGNMENT / NOTEBOOK
    assert released.is_file(), f"`course release --publish` did not put {NOTEBOOK} into the exchange ({released})"
    yield course
    print(
        "\n[e2e] wall time per step:\n"
        + "\n".join(f"  {seconds:7.1f} s  {step}" for step, seconds in course.timings.items()),
        flush=True,
    )


@pytest.fixture(scope="module")
def learner_lab(course):
    servers.write_nbgrader_config(course.learner_dir, course.exchange)
    chapter = servers.REPOSITORY / "notebooks" / CHAPTER
    assert chapter.is_file(), f"chapter notebook {chapter} not found (set E2E_CHAPTER to one in notebooks/)"
    shutil.copy(chapter, course.learner_dir / CHAPTER)
    env = servers.private_environment(course.work / "home-learner")
    servers.enable_course_validate(env)
    lab = servers.JupyterLab("learner", course.learner_dir, env, log_dir=course.work / "logs")
    with Timer(course, "start the learner's JupyterLab"):
        lab.start()
    yield lab
    lab.stop()


@pytest.fixture(scope="module")
def instructor_lab(course):
    lab = servers.JupyterLab("instructor", course.root, course.instructor_env(), log_dir=course.work / "logs")
    with Timer(course, "start the instructor's JupyterLab"):
        lab.start()
    yield lab
    lab.stop()


@pytest.fixture(scope="module")
def learner_page(browser, learner_lab):
    yield from ui.lab_page(browser, learner_lab.url("lab"))


@pytest.fixture(scope="module")
def instructor_page(browser, instructor_lab):
    yield from ui.lab_page(browser, instructor_lab.url("lab"))


# ------------------------------------------------------------------------------------------------
# 1. The learner runs a chapter.
# ------------------------------------------------------------------------------------------------
def test_learner_runs_a_chapter_with_run_all(course, learner_page, screenshots):
    page = learner_page
    page.locator(".jp-DirListing-content .jp-DirListing-itemText").get_by_text(CHAPTER, exact=True).wait_for()
    screenshots.take(page, "learner_lab_opened")

    panel = ui.open_in_file_browser(page, CHAPTER, _cell_count(course.learner_dir / CHAPTER))
    screenshots.take(page, "chapter_opened")

    with Timer(course, f"run {CHAPTER} (Run -> Run All Cells)"):
        ui.menu(page, "Run", "Run All Cells")
        ui.wait_until_every_cell_ran(panel)

    errors = ui.error_outputs_text(panel)
    assert not errors, f"{CHAPTER}: cells raised errors when run in JupyterLab:\n{errors}"
    warnings = ui.stderr_texts(panel)
    if warnings:
        print(f"[e2e] {CHAPTER} wrote to stderr (no traceback):\n" + "\n---\n".join(warnings), flush=True)

    images = ui.rendered_images(panel)
    assert images, f"{CHAPTER} ran but no figure appeared in its outputs"
    blank = [image for image in images if not (image["complete"] and image["width"] > 0 and image["height"] > 0)]
    assert not blank, f"{CHAPTER}: {len(blank)} of {len(images)} figures did not render in the browser: {blank}"
    print(
        f"[e2e] {CHAPTER}: {len(images)} figures rendered, sizes "
        f"{[(image['width'], image['height']) for image in images]}",
        flush=True,
    )

    panel.locator(".jp-OutputArea-output img").first.scroll_into_view_if_needed()
    screenshots.take(page, "chapter_ran_first_figure")
    panel.locator(".jp-OutputArea-output img").last.scroll_into_view_if_needed()
    screenshots.take(page, "chapter_ran_last_figure")


# ------------------------------------------------------------------------------------------------
# 2. The learner fetches, works on, validates and submits the exercise.
# ------------------------------------------------------------------------------------------------
def _validate_from_assignment_list(page, course: Course, label: str) -> tuple[str, str]:
    """Press Validate next to the notebook in the Assignment List; returns (result class, dialog text)."""
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").filter(has=page.get_by_text("Assignments", exact=True)).click()
    notebooks = page.locator(f"#nbgrader-{servers.COURSE_ID}-{ASSIGNMENT}")
    if not notebooks.is_visible():
        page.locator("#fetched_assignments_list a.assignment-notebooks-link").click()
    with Timer(course, f"validate {label} (Assignment List)"):
        notebooks.locator(".nested_list_item").get_by_role("button", name="Validate").click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(timeout=ui.CELL_RUN_TIMEOUT_S * 1000)
        result = dialog.locator(".validation-success, .validation-failed, .validation-changed, .validation-passed")
        result.first.wait_for()
    return result.first.get_attribute("class"), dialog.inner_text()


def test_learner_fetches_validates_and_submits_the_exercise(course, learner_page, screenshots):
    page = learner_page
    ui.menu(page, "Nbgrader", "Assignment List")
    released = page.locator("#released_assignments_list .list_item").filter(
        has=page.get_by_text(ASSIGNMENT, exact=True)
    )
    released.wait_for()
    screenshots.take(page, "assignment_list_released")

    with Timer(course, "fetch (Assignment List)"):
        released.get_by_role("button", name="Fetch").click()
        page.locator("#fetched_assignments_list a.assignment-notebooks-link").filter(has_text=ASSIGNMENT).wait_for()
    fetched = course.learner_dir / ASSIGNMENT / NOTEBOOK
    assert fetched.is_file(), f"Fetch did not create {fetched}"
    page.locator("#fetched_assignments_list a.assignment-notebooks-link").click()
    screenshots.take(page, "assignment_fetched")

    # The untouched notebook must fail validation, or a pass below would prove nothing.
    result, text = _validate_from_assignment_list(page, course, "the untouched exercise")
    screenshots.take(page, "validate_untouched_fails")
    assert "validation-failed" in result and "NotImplementedError" in text, (
        f"validating the untouched exercise should fail on NotImplementedError, the dialog said:\n{text}"
    )
    ui.dismiss_dialog(page, "Ok")

    # A test cell deleted outside the lab (the lab itself refuses to delete one): Validate names it.
    untouched = fetched.read_bytes()
    notebook = json.loads(untouched)
    tests = [
        cell
        for cell in notebook["cells"]
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade")
        and not cell["metadata"]["nbgrader"].get("solution")
    ]
    deleted = tests[0]["metadata"]["nbgrader"]["grade_id"]
    notebook["cells"] = [cell for cell in notebook["cells"] if cell is not tests[0]]
    fetched.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    result, text = _validate_from_assignment_list(page, course, "a copy whose test cell was deleted")
    screenshots.take(page, "validate_deleted_test_cell_named")
    assert "validation-failed" in result and f"The graded cell {deleted!r} is missing" in text, (
        f"validating a copy without its test cell {deleted!r} should name the missing cell, the dialog said:\n{text}"
    )
    ui.dismiss_dialog(page, "Ok")
    fetched.write_bytes(untouched)

    page.locator(f"#nbgrader-{servers.COURSE_ID}-{ASSIGNMENT} .nested_list_item a").get_by_text(
        ASSIGNMENT, exact=True
    ).click()
    panel = ui.current_notebook(page, NOTEBOOK, _cell_count(fetched))
    screenshots.take(page, "exercise_opened")

    # A syntax error in an answer: Validate names it by its cell and line (nbgrader's own would show a
    # NameError for every test below it).
    first_answer = min(course.answers)
    ui.replace_cell_text(page, panel, first_answer, course.answers[first_answer] + "\n    return (X\n")
    page.keyboard.press("Escape")
    page.keyboard.press("ControlOrMeta+s")
    ui.wait_until_saved(page, NOTEBOOK)
    result, text = _validate_from_assignment_list(page, course, "an answer with a syntax error")
    screenshots.take(page, "validate_syntax_error_named")
    assert "validation-failed" in result and "SyntaxError in the cell that starts with" in text, (
        f"validating an answer with a syntax error should name it, the dialog said:\n{text}"
    )
    assert "NameError" not in text, f"the syntax error should not show as NameErrors:\n{text}"
    ui.dismiss_dialog(page, "Ok")
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").filter(has=page.get_by_text(NOTEBOOK, exact=True)).click()

    with Timer(course, f"type the answers into {len(course.answers)} solution cells"):
        for index, text in course.answers.items():
            ui.replace_cell_text(page, panel, index, text)
        page.keyboard.press("Escape")
    ui.cell(panel, max(course.answers)).scroll_into_view_if_needed()
    screenshots.take(page, "exercise_answers_typed")

    with Timer(course, "Kernel -> Restart Kernel and Run All Cells"):
        ui.menu(page, "Kernel", re.compile(r"^Restart Kernel and Run All Cells"))
        page.locator(".jp-Dialog .jp-mod-accept").click()
        page.locator(".jp-Dialog").wait_for(state="detached")
        ui.wait_until_every_cell_ran(panel)
    errors = ui.error_outputs_text(panel)
    assert not errors, f"the solved exercise raised errors when run in JupyterLab:\n{errors}"
    written = ui.cell(panel, course.written_cell_index)
    written.scroll_into_view_if_needed()
    assert WRITTEN_ANSWER in written.locator(".jp-RenderedMarkdown").inner_text(), (
        "the written answer typed into the Markdown cell is not shown once the cell is rendered"
    )
    screenshots.take(page, "exercise_written_answer_rendered")
    panel.locator(".jp-CodeCell").last.scroll_into_view_if_needed()  # the last test cell and its output
    screenshots.take(page, "exercise_ran_visible_tests_pass")

    page.keyboard.press("ControlOrMeta+s")
    ui.wait_until_saved(page, NOTEBOOK)
    saved = json.loads(fetched.read_text(encoding="utf-8"))["cells"]
    for index, text in course.answers.items():
        got = "".join(saved[index]["source"])
        assert got == text, (
            f"cell {index} on disk differs from what was typed into it "
            f"(the editor changed the text?):\n--- typed\n{text}\n--- saved\n{got}"
        )

    result, text = _validate_from_assignment_list(page, course, "the solved exercise")
    screenshots.take(page, "validate_solved_passes")
    assert "validation-success" in result and "Success! Your notebook passes all the tests." in text, (
        f"validating the solved exercise should pass, the dialog said:\n{text}"
    )
    ui.dismiss_dialog(page, "Ok")

    # The learner keeps a copy under a name of their own and hands that in: its feedback must still reach them.
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").filter(has=page.get_by_text(NOTEBOOK, exact=True)).click()
    ui.menu(page, "File", re.compile(r"^Rename Notebook"))
    name_box = page.locator(".jp-Dialog input")
    name_box.fill(RENAMED)
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").filter(has=page.get_by_text(RENAMED, exact=True)).wait_for()
    renamed = fetched.with_name(RENAMED)
    assert renamed.is_file() and not fetched.exists(), f"Rename Notebook should leave {renamed} alone in its folder"
    screenshots.take(page, "exercise_renamed")

    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").filter(has=page.get_by_text("Assignments", exact=True)).click()
    with Timer(course, "submit (Assignment List)"):
        page.locator("#fetched_assignments_list > .list_item").filter(
            has=page.get_by_text(ASSIGNMENT, exact=True)
        ).get_by_role("button", name="Submit").click()
        submitted = page.locator("#submitted_assignments_list .list_item").filter(
            has=page.get_by_text(ASSIGNMENT, exact=True)
        )
        submitted.first.wait_for()
    timestamp = page.locator("#submitted_assignments_list .nested_list_item .item_name").first.inner_text()
    screenshots.take(page, "submitted")
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", timestamp), (
        f"the Submitted list should show the submission's time, it shows {timestamp!r}"
    )
    inbound = list((course.exchange / servers.COURSE_ID / "inbound").glob(f"{course.student_id}+{ASSIGNMENT}+*"))
    assert len(inbound) == 1 and (inbound[0] / RENAMED).is_file(), (
        f"Submit should leave one submission of {course.student_id} in the exchange, found {inbound}"
    )
    course.submitted = True


# ------------------------------------------------------------------------------------------------
# 3. The instructor collects, grades, grades the written answer by hand in the Formgrader, exports.
# ------------------------------------------------------------------------------------------------
def test_instructor_grades_in_the_formgrader_and_exports(course, screenshots, request):
    assert course.submitted, "no submission to grade: the learner's test above failed or did not run"
    with Timer(course, "collect (course collect)"):
        _course_command(course, "collect", "--assignment", ASSIGNMENT, module="course_grader.cli")
    assert (course.root / "submitted" / course.student_id / ASSIGNMENT / RENAMED).is_file(), (
        "collect did not put the submission into submitted/"
    )

    # Kernels of a confined grading run use their own uids, which the grader sweeps afterwards; a
    # range of our own keeps this run and any other grading run on the machine out of each other's way.
    uid_base = 1_700_000 + (os.getpid() % 20_000) * 8
    with Timer(course, "autograde (course grade)"):
        output = _course_command(
            course, "grade", "--assignment", ASSIGNMENT, "--workers", "1", "--strict", "--uid-base", str(uid_base)
        )
    print(output, flush=True)
    report = (course.root / "build" / "grading" / "report.md").read_text(encoding="utf-8")
    assert RENAMED in report, f"the grading report should say that {RENAMED} was graded as {NOTEBOOK}:\n{report}"
    before = _export_row(course, "grades-before-manual.csv")
    assert float(before["score"]) == course.auto_points and float(before["max_score"]) == (
        course.auto_points + course.manual_points
    ), (
        f"after autograding, a correct submission should have all {course.auto_points:g} automatic points "
        f"out of {course.auto_points + course.manual_points:g}; the export says {before}.\ncourse grade said:\n{output}"
    )

    page = request.getfixturevalue("instructor_page")
    ui.menu(page, "Nbgrader", "Formgrader")
    formgrader = page.frame_locator('iframe[src*="formgrader"]')
    assignment_row = formgrader.locator(f'tr:has(td.name[data-order="{ASSIGNMENT}"])')
    assignment_row.locator("td.num-submissions a").wait_for()
    screenshots.take(page, "formgrader_manage_assignments")

    assignment_row.locator("td.num-submissions a").click()
    learner_row = formgrader.locator("#main-table tr").filter(
        has=formgrader.locator(f'td.student-id[data-order="{course.student_id}"]')
    )
    learner_row.wait_for()
    status, score = learner_row.locator("td.status").inner_text(), learner_row.locator("td.score").inner_text()
    screenshots.take(page, "formgrader_manage_submissions")
    total = course.auto_points + course.manual_points
    assert "needs manual grading" in status and score.split() == [f"{course.auto_points:g}", "/", f"{total:g}"], (
        f"Manage Submissions should list {course.student_id} as 'needs manual grading' with "
        f"{course.auto_points:g} / {total:g}, it shows status {status!r} and score {score!r}"
    )

    formgrader.get_by_role("link", name="Manual Grading", exact=True).first.click()
    formgrader.locator(f'a[href$="/formgrader/gradebook/{ASSIGNMENT}"]').click()
    formgrader.locator(f'a[href$="/formgrader/gradebook/{ASSIGNMENT}/{ASSIGNMENT}"]').click()
    formgrader.get_by_role("link", name="Submission #1").click()
    score_box = formgrader.locator(f"input.score#{course.written_cell_id}")
    score_box.wait_for()
    score_box.scroll_into_view_if_needed()
    screenshots.take(page, "formgrader_written_answer_before")

    with page.expect_response(
        lambda response: "/formgrader/api/grade/" in response.url and response.request.method == "PUT"
    ) as saved:
        score_box.click()
        score_box.fill("")
        page.keyboard.type(f"{MANUAL_SCORE:g}")
        page.keyboard.press("Tab")  # the formgrader saves a score when the field loses focus
    response = saved.value
    assert response.ok and response.json().get("manual_score") == MANUAL_SCORE, (
        f"the formgrader did not store the manual score {MANUAL_SCORE:g}: HTTP {response.status}, {response.text()}"
    )
    score_box.scroll_into_view_if_needed()
    screenshots.take(page, "formgrader_written_answer_graded")

    formgrader.get_by_role("link", name="Manual Grading", exact=True).first.click()
    formgrader.locator(f'a[href$="/formgrader/gradebook/{ASSIGNMENT}"]').click()
    formgrader.locator(f'a[href$="/formgrader/gradebook/{ASSIGNMENT}/{ASSIGNMENT}"]').click()
    graded_row = formgrader.locator("#main-table tr").first
    graded_row.locator("td.score").wait_for()
    shown = graded_row.locator("td.score").inner_text()
    screenshots.take(page, "formgrader_submission_list_after_manual_grade")
    assert shown.split() == [f"{course.auto_points + MANUAL_SCORE:g}", "/", f"{total:g}"], (
        f"after the manual grade the formgrader should show {course.auto_points + MANUAL_SCORE:g} / {total:g}, "
        f"it shows {shown!r}"
    )

    after = _export_row(course, "grades.csv")
    assert float(after["score"]) == course.auto_points + MANUAL_SCORE, (
        f"nbgrader's CSV export should carry the manual score: expected {course.auto_points:g} automatic + "
        f"{MANUAL_SCORE:g} by hand = {course.auto_points + MANUAL_SCORE:g}, the row is {after}"
    )
    print(f"[e2e] exported row: {after}", flush=True)
    course.graded_by_hand = True


# ------------------------------------------------------------------------------------------------
# 4. The instructor releases the feedback; the learner fetches it under the name they handed in.
# ------------------------------------------------------------------------------------------------
def test_learner_fetches_the_feedback_of_the_renamed_notebook(course, learner_page, screenshots):
    assert course.graded_by_hand, "no graded submission: the instructor's test above failed or did not run"
    uid_base = 1_700_000 + (os.getpid() % 20_000) * 8
    with Timer(course, "feedback with the manual grade (course grade), released (nbgrader release_feedback)"):
        _course_command(course, "grade", "--assignment", ASSIGNMENT, "--workers", "1", "--uid-base", str(uid_base))
        servers.run_checked(
            [sys.executable, "-m", "nbgrader", "release_feedback", ASSIGNMENT],
            cwd=course.root,
            env=course.instructor_env(),
            what="nbgrader release_feedback",
        )

    page = learner_page
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").filter(has=page.get_by_text("Assignments", exact=True)).click()
    page.locator("#refresh_assignments_list").click()
    submitted = page.locator("#submitted_assignments_list .list_item").filter(
        has=page.get_by_text(ASSIGNMENT, exact=True)
    )
    with Timer(course, "fetch feedback (Assignment List)"):
        submitted.get_by_role("button", name="Fetch Feedback").click()
        submitted.get_by_text("(view feedback)").first.wait_for()
    screenshots.take(page, "feedback_fetched")
    pages = list((course.learner_dir / ASSIGNMENT / "feedback").glob(f"*/{Path(RENAMED).stem}.html"))
    assert len(pages) == 1, (
        f"Fetch Feedback should bring the feedback of {RENAMED} under that name, the folder holds "
        f"{sorted(p.relative_to(course.learner_dir) for p in (course.learner_dir / ASSIGNMENT).rglob('*.html'))}"
    )
    shown = pages[0].read_text(encoding="utf-8")
    total = course.auto_points + MANUAL_SCORE
    assert f"{total:g}" in shown, f"the fetched feedback should show the score with the manual grade ({total:g})"
    submitted.get_by_text("(view feedback)").first.click()
    screenshots.take(page, "feedback_folder_in_the_file_browser")
