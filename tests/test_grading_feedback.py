"""The learner's feedback and the instructor's formgrader after `course grade`.

Fast (no grading): the sanitiser on learner HTML and Markdown (course_grader/ground/safe_html.py), the
rewriting of test tracebacks (feedback.LearnerErrors), the report's lists.

Slow: one temporary course with ex1_manual_attention. Learners fetch it from the exchange, fill it in
and submit it: one learner per typical mistake of tests/submissions/ex1_manual_attention/wrong_*, one
("mallory") who puts a <script>, an <img onerror=...>, javascript: links and HTML/JavaScript outputs
in her work, one model solution ("ada"), and a hand-made submission without nbgrader's submission
secret. Everything is graded by `course grade`, then:

- the feedback of every wrong submission shows each failing test's message, never a hidden test's
  lines, its markers or the grader's canary (the autograded notebook, for the instructor, holds the verdicts of
  the judge, which ran the hidden tests outside the kernel, and none of their code either);
- learner HTML reaches the feedback and the formgrader's grading page sanitised; in Chromium (offline),
  nothing of it runs, while the same notebook exported without the course's settings does run it;
- `nbgrader release_feedback` releases everyone's feedback and each learner fetches their own;
- a manual grade reaches the feedback without --force, survives a forced re-grade without
  "needs manual grading" coming back, and comes back for a new look when the answer changed;
- learners have names in the gradebook (their id, or roster.csv's), and the report lists the failing
  tests with their messages and the points that await a manual grade;
- a plain `nbgrader autograde` refuses to run and writes nothing; in a real Jupyter server set up as
  `course lab --instructor` sets it up, the formgrader's Autograde button runs `course grade`.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from chromium import browser  # noqa: F401  (the module-scoped Chromium fixture)
from grading_support import fixtures

from course_grader.autograde import GradeRecord, grade
from course_grader.exchange import feedback, pipeline
from course_grader.ground import notebooks, render, safe_html
from course_grader.ground.layout import CourseLayout
from course_grader.judging.execute import JUDGED_NOTE

REPOSITORY = Path(__file__).resolve().parents[1]
SUBMISSIONS = REPOSITORY / "tests" / "submissions"
ASSIGNMENT = "ex1_manual_attention"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
RENAMED = f"{ASSIGNMENT}-Copy1.ipynb"
WRITTEN = "explain_attention_pattern"
WRONG = [
    fixture for fixture in fixtures.discover_fixtures(SUBMISSIONS, ASSIGNMENT) if fixture.name.startswith("wrong_")
]
SERVER_START_S = 180  # a Jupyter server starts in 5-10 s idle; a busy 2-core machine is slower

# What mallory writes. Each payload that runs adds its name to window.__pwned (a link sets its own flag).
HUGE_ANSWER = "Each score is $q_i \\cdot k_j / \\sqrt{d_k}$, so *longer* keys win. " * 5_500  # about 360 KB
INJECTED_ANSWER = """My answer: x_3 has the largest dot product with itself.

<script>(window.__pwned = window.__pwned || []).push("script tag");</script>

<img src="no-such-image.png" onerror="(window.__pwned = window.__pwned || []).push('img onerror')">

[a Markdown link](javascript:void(window.__clicked_markdown='markdown-link'))

<a href="javascript:void(window.__clicked_html='html-link')">click me</a>

<svg><script>(window.__pwned = window.__pwned || []).push("svg script")</script></svg>

### explain_attention_pattern
"""
INJECTED_OUTPUTS = """
from IPython.display import HTML, Javascript, display
display(HTML("<b>html output</b><script>(window.__pwned = window.__pwned || []).push('html output script')</script>"
             "<img src='x.png' onerror=\\"(window.__pwned = window.__pwned || []).push('html output onerror')\\">"))
display(Javascript("(window.__pwned = window.__pwned || []).push('javascript output')"))
"""


# ------------------------------------------------------------------------------------------------
# Fast: the sanitiser.
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "payload,forbidden",
    [
        ("<script>alert(1)</script>", "<script"),
        ('<img src="x" onerror="alert(1)">', "onerror"),
        ("[link](javascript:alert(1))", "javascript:"),
        ('<a href="JaVaScRiPt:alert(1)">x</a>', "javascript:"),
        ('<a href="java&#x09;script:alert(1)">x</a>', "script:"),
        ('<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>', "data:"),
        ('<svg onload="alert(1)"><circle r="1"/></svg>', "onload"),
        ('<iframe src="https://example.org"></iframe>', "<iframe"),
        ('<div style="position: fixed; top: 0">cover the page</div>', "position"),
        ('<form action="https://example.org"><input name="token"></form>', "<form"),
        ('<object data="x.swf"></object><embed src="x.swf">', "x.swf"),
        ("<math><mtext><script>alert(1)</script></mtext></math>", "<script"),
        ("<style>body { display: none }</style>", "display"),
    ],
)
def test_learner_markdown_loses_every_active_part(payload, forbidden):
    cleaned = safe_html.markdown_to_safe_html(f"Before.\n\n{payload}\n\nAfter.")
    assert forbidden.lower() not in cleaned.lower(), f"{payload!r} became {cleaned!r}"
    assert "Before." in cleaned and "After." in cleaned, f"the text around {payload!r} was lost: {cleaned!r}"


def test_learner_markdown_keeps_what_notebooks_use():
    source = (
        "# A heading\n\nText with $a < b$ and `<bos>`, **bold**, a [paper](https://arxiv.org/abs/1706.03762) "
        "and [a section](#A-heading).\n\n| a | b |\n|:--|--:|\n| 1 | 2 |\n\n```python\nx = 1 < 2\n```\n\n"
        "![attached](attachment:plot.png)\n\n- one\n- two\n"
    )
    cleaned = safe_html.markdown_to_safe_html(source, {"plot.png": {"image/png": "iVBORw0KGgo="}})
    page = BeautifulSoup(cleaned, "html.parser")
    assert page.h1 and page.h1.get("id") == "user-content-A-heading", cleaned
    assert page.find("a", href="#user-content-A-heading") is not None, "in-page links must follow the prefixed ids"
    assert page.find("a", href="https://arxiv.org/abs/1706.03762") is not None, cleaned
    assert "$a < b$" in page.get_text() and "<bos>" in page.get_text(), "math and code must keep their text"
    assert page.find("th", style="text-align:left") is not None, "table alignment should stay"
    assert page.find("span", class_="o") is not None, "highlighted code keeps pygments' classes"
    assert page.find("img", src="data:image/png;base64,iVBORw0KGgo=") is not None, "attachments stay as images"
    assert [li.get_text() for li in page.find_all("li")] == ["one", "two"]


def test_a_learner_heading_cannot_take_the_id_of_a_score_box():
    cleaned = safe_html.markdown_to_safe_html(f'<h2 id="{WRITTEN}">x</h2>\n\n## {WRITTEN}\n')
    ids = [tag.get("id") for tag in BeautifulSoup(cleaned, "html.parser").find_all(id=True)]
    assert ids and WRITTEN not in ids and all(value.startswith(safe_html.ID_PREFIX) for value in ids), ids


def test_learner_markdown_is_rendered_within_its_budgets(monkeypatch):
    # A cell over the size limit is not rendered: a note and the start of its text instead.
    huge = "A long answer with $x^2$. " * (render.CELL_CHARS // 20)
    note = render.render_markdown(huge, None, "", render.RenderBudget())
    assert "was not rendered" in note and "A long answer with $x^2$." in note and len(note) < 4 * render.SHOWN_CHARS
    # A cell the worker does not render in time: the worker is stopped, the cell gets a note, and
    # the next page (another learner's) is rendered as usual by a new worker.
    monkeypatch.setattr(render, "CELL_SECONDS", 1e-4)
    late = render.render_markdown("# slow *enough*", None, "", render.RenderBudget())
    assert "took more than" in late and "# slow *enough*" in late
    monkeypatch.setattr(render, "CELL_SECONDS", 5.0)
    assert "<em>enough</em>" in render.render_markdown("# slow *enough*", None, "", render.RenderBudget())
    # A notebook whose budget is spent: its remaining cells get the note; a new page has its own budget.
    spent = render.RenderBudget(seconds=0)
    assert "took more than" in render.render_markdown("**x**", None, "", spent)
    assert "<strong>x</strong>" in render.render_markdown("**x**", None, "", render.RenderBudget())


def test_a_solution_notebook_renders_far_within_the_budget():
    # The budgets must never cut a real answer: the longest Markdown of the course's exercises, timed.
    longest = max(
        (
            notebooks.source_text(cell)
            for path in (REPOSITORY / "solutions").glob("*/*.ipynb")
            for cell in notebooks.load_json(path)["cells"]
            if cell["cell_type"] == "markdown"
        ),
        key=len,
    )
    budget = render.RenderBudget()
    render.render_markdown("warm-up", None, "", budget)
    started = time.monotonic()
    page = render.render_markdown(longest, None, "", budget)
    seconds = time.monotonic() - started
    assert "was not rendered" not in page and len(longest) < render.CELL_CHARS / 10
    assert seconds < render.CELL_SECONDS / 10, f"the longest exercise cell took {seconds:.2f} s to render"


# ------------------------------------------------------------------------------------------------
# Fast: tracebacks of tests.
# ------------------------------------------------------------------------------------------------
def _error(ename: str, evalue: str, *frames: str):
    return nbformat.v4.new_output(
        "error",
        ename=ename,
        evalue=evalue,
        traceback=[
            "\x1b[31m" + "-" * 75 + "\x1b[39m",
            f"\x1b[31m{ename}\x1b[39m      Traceback (most recent call last)",
            *frames,
            f"\x1b[31m{ename}\x1b[39m: {evalue}",
        ],
    )


def _test_cell(source: str, count: int, *outputs):
    cell = nbformat.v4.new_code_cell(source, execution_count=count, outputs=list(outputs))
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 2, "grade_id": "test_x"}
    return cell


def test_a_failing_test_shows_its_message_and_the_learners_frames_only():
    hidden_frame = (
        "\x1b[36mCell\x1b[39m \x1b[32mIn[7]\x1b[39m, line 4, in _hidden_check\n      3 secret = 42\n"
        "----> 4 assert answer == secret, 'wrong'\n      5 print('[grader-canary 1234 7]')"
    )
    learner_frame = "\x1b[36mCell\x1b[39m \x1b[32mIn[3]\x1b[39m, line 2, in answer\n----> 2     return 1 / 0"
    library_frame = "File \x1b[32m/usr/lib/python3/numpy/core.py:10\x1b[39m, in f\n---> 10 raise"
    learner = nbformat.v4.new_code_cell("def answer():\n    return 1 / 0", execution_count=3)
    learner.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "answer"}
    nb = nbformat.v4.new_notebook(
        cells=[
            learner,
            _test_cell(
                "### BEGIN HIDDEN TESTS\n...",
                7,
                _error("AssertionError", "the scores are not divided by sqrt(d_k)", hidden_frame, library_frame),
            ),
            _test_cell(
                "answer()",
                8,
                _error("ZeroDivisionError", "division by zero", hidden_frame, learner_frame, library_frame),
            ),
            _test_cell("assert False", 9, _error("AssertionError", "", hidden_frame)),
        ]
    )
    nb, _ = feedback.LearnerErrors().preprocess(nb, {})
    first, second, third = (cell.outputs[0]["traceback"] for cell in nb.cells[1:])
    for shown in (first, second, third):
        text = "\n".join(shown)
        assert "secret = 42" not in text and "grader-canary" not in text, f"a test's lines are shown:\n{text}"
        assert feedback.HIDDEN_NOTE in shown
    assert first[-1].endswith("the scores are not divided by sqrt(d_k)"), first
    assert learner_frame in second and library_frame in second, "the learner's own frames (and what they called) stay"
    assert library_frame not in first, "library frames called by the test itself are not the learner's"
    assert third[-1] == f"AssertionError: {feedback.NO_MESSAGE}", third


def test_the_report_lists_failing_tests_and_manual_points(tmp_path):
    from course_grader.ground.report import write_report

    record = GradeRecord(
        "ada",
        ASSIGNMENT,
        "graded",
        score=4,
        max_score=18,
        auto_score=4,
        auto_max=16,
        manual_pending=2,
        failed_cells=["test_scores"],
        manual_cells=[WRITTEN],
        test_messages={"test_scores": "AssertionError: divide | by `sqrt(2)`\nplease"},
    )
    text = write_report([record], tmp_path / "report.md", "none", 1.0, 1).read_text()
    assert "awaiting a manual grade: 1 submission(s), 2 points" in text, text
    assert f"- ada / {ASSIGNMENT}: 2 points (`{WRITTEN}`)" in text, text
    assert "- `test_scores`: `` AssertionError: divide | by `sqrt(2)` please ``" in text, text


def test_the_report_and_the_csv_show_every_finding(tmp_path):
    from course_grader.ground.report import read_csv, write_csv, write_report

    findings = [
        dict(code="renamed-notebook", severity="repaired", message="graded copy.ipynb as ex1.ipynb", notebook="ex1"),
        dict(
            code="static:syntax-error",
            severity="info",
            message="line 3: invalid syntax",
            notebook="ex1",
            cell="self_attention",
        ),
        dict(code="restored-test-cell", severity="review", message="test_scores was deleted", cell="test_scores"),
    ]
    record = GradeRecord("ada", ASSIGNMENT, "graded", score=2, max_score=18, needs_review=True, findings=findings)
    quiet = GradeRecord("bob", ASSIGNMENT, "graded", score=18, max_score=18)
    text = write_report([record, quiet], tmp_path / "report.md", "none", 1.0, 1).read_text()
    assert "| renamed-notebook, restored-test-cell, static:syntax-error | yes |" in text, text
    assert "- static:syntax-error (ex1/self_attention): line 3: invalid syntax (for information)" in text, text
    assert "- renamed-notebook (ex1): graded copy.ipynb as ex1.ipynb (repaired by the grader)" in text, text
    assert "| bob |" in text and "|  | no |" in text, "a row with nothing found says so"
    rows = {row["student"]: row for row in read_csv(write_csv([record, quiet], tmp_path / "grades.csv"))}
    assert "[repaired] renamed-notebook (ex1)" in rows["ada"]["findings"], rows["ada"]
    assert "line 3: invalid syntax" in rows["ada"]["findings"] and rows["bob"]["findings"] == ""


def test_a_feedback_folder_without_secret_or_timestamp_is_made_releasable(tmp_path):
    bare, complete = tmp_path / "bare", tmp_path / "complete"
    for folder in (bare, complete):
        folder.mkdir()
    secret = secrets.token_hex(64)
    (complete / "submission_secret.txt").write_text(secret)
    (complete / "timestamp.txt").write_text("2025-01-15 12:00:00.000000 UTC")
    assert feedback.make_releasable(complete) == "", "a submission from nbgrader submit needs nothing"
    assert (complete / "submission_secret.txt").read_text() == secret
    note = feedback.make_releasable(bare)
    assert "no submission secret" in note and "no timestamp" in note, note
    assert re.fullmatch(r"[0-9a-f]{128}", (bare / "submission_secret.txt").read_text())
    assert (bare / "timestamp.txt").read_text() == "", "an empty timestamp is nbgrader's 'no timestamp'"


def test_a_roster_that_is_not_nbgraders_format_is_named(tmp_path):
    from course_grader.exchange import formgrader

    layout = CourseLayout.from_directory(tmp_path)
    (tmp_path / "roster.csv").write_text("name,surname\nAda,Lovelace\n")
    with pytest.raises(ValueError, match="needs an 'id' column"):
        formgrader.read_roster(layout)
    (tmp_path / "roster.csv").write_text("id,first_name,last_name\nada,Ada,<i>Lovelace</i>\n")
    assert formgrader.read_roster(layout) == {"ada": {"first_name": "Ada", "last_name": "iLovelace/i", "email": ""}}


# ------------------------------------------------------------------------------------------------
# Slow: a class graded by `course grade`.
# ------------------------------------------------------------------------------------------------
def _visible_text(page_html: str) -> str:
    soup = BeautifulSoup(page_html, "html.parser")
    for tag in soup(["script", "style"]):
        tag.decompose()
    return html.unescape(soup.get_text(" "))


def _hidden_lines(assignment) -> set[str]:
    """Lines that occur only inside the hidden-test regions of the source notebook."""
    source = notebooks.load_json(assignment.main_notebook)
    hidden, public = set(), set()
    for cell in source["cells"]:
        text = notebooks.source_text(cell)
        lines = text.splitlines()
        hidden |= {
            line.strip()
            for first, last in notebooks.marked_regions(text, notebooks.BEGIN_HIDDEN, notebooks.END_HIDDEN)
            for line in lines[first + 1 : last]
        }  # the lines strictly inside each region
        inside, outside = notebooks.split_secret(text)
        public |= {line.strip() for line in outside}
    return {line for line in hidden - public if len(line) > 12}


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    (root / "solutions").mkdir()
    shutil.copytree(REPOSITORY / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    shutil.copy(REPOSITORY / "nbgrader_config.py", root)
    layout = CourseLayout.from_directory(root, exchange=root / "exchange")
    pipeline.generate_release(layout, [ASSIGNMENT])
    pipeline.release_assignment(layout, ASSIGNMENT)
    assignment = layout.assignment(ASSIGNMENT)
    learners = {fixture.name.replace("_", "-"): fixture.answers(assignment) for fixture in WRONG}
    mallory = fixtures.base_answers("wrong_no_scaling", assignment, SUBMISSIONS)
    mallory[WRITTEN] = INJECTED_ANSWER
    mallory["self_attention"] += "\n" + INJECTED_OUTPUTS
    learners["mallory"] = mallory
    # Zoe's written answer is 360 KB of Markdown with math: it is shown as a note, not rendered.
    zoe = fixtures.model_answers(assignment)
    zoe[WRITTEN] = HUGE_ANSWER
    learners["zoe"] = zoe
    learners["ada"] = fixtures.model_answers(assignment)
    # Rene saves the notebook under another name (File > Save As) and hands in only that copy.
    learners["rene"] = fixtures.model_answers(assignment)
    homes = root / "homes"
    for learner, answers in learners.items():
        folder = pipeline.fetch_assignment(layout, ASSIGNMENT, homes / learner)
        notebooks.save_json(notebooks.fill_in(notebooks.load_json(folder / NOTEBOOK), answers), folder / NOTEBOOK)
        if learner == "rene":
            (folder / NOTEBOOK).rename(folder / RENAMED)
        pipeline.submit(layout, ASSIGNMENT, learner, homes / learner)
    assert sorted(pipeline.collect(layout, ASSIGNMENT)) == sorted(learners)
    # Put in submitted/ by hand: no submission secret, no timestamp.
    handmade = fixtures.place_submission(
        layout,
        "handmade",
        assignment,
        fixtures.notebook_files(assignment, fixtures.release_notebook(layout, assignment)),
    )
    (handmade / "timestamp.txt").unlink()
    run = grade(layout, workers=2, log=print)
    return {
        "layout": layout,
        "assignment": assignment,
        "homes": homes,
        "run": run,
        "report": run.report_path.read_text(encoding="utf-8"),
        "wrong": [fixture.name.replace("_", "-") for fixture in WRONG],
    }


def _feedback_page(layout: CourseLayout, learner: str) -> str:
    return (layout.feedback_dir / learner / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")


def _row(run, learner: str):
    rows = [record for record in run.records if record.student == learner]
    assert len(rows) == 1, f"one row for {learner} expected, got {rows}"
    return rows[0]


@pytest.mark.slow
@pytest.mark.parametrize("fixture", WRONG, ids=[fixture.name for fixture in WRONG])
def test_feedback_of_a_wrong_submission_teaches_and_hides_the_hidden_tests(klass, fixture):
    layout, learner = klass["layout"], fixture.name.replace("_", "-")
    record = _row(klass["run"], learner)
    assert record.status == "graded" and record.failed_cells, record
    shown = _visible_text(_feedback_page(layout, learner))
    for marker in ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "grader-canary", "_hidden_check"):
        assert marker not in shown, f"{learner}'s feedback shows {marker!r}"
    leaked = [line for line in _hidden_lines(klass["assignment"]) if line in shown]
    assert not leaked, f"{learner}'s feedback shows lines of the hidden tests: {leaked[:5]}"
    messages = feedback.failing_test_messages(layout.autograded_dir / learner / ASSIGNMENT)
    assert set(messages) == set(record.failed_cells), (messages, record.failed_cells)
    for cell, message in messages.items():
        wanted = message.split(": ", 1)[1]
        assert wanted.split()[0] in shown and " ".join(wanted.split()) in " ".join(shown.split()), (
            f"{learner}'s feedback does not show the message of {cell}: {message!r}"
        )
    # Hidden checks did fail here, decided by the judge outside the kernel (ex1's source says judge: outside):
    # the instructor's autograded copy has their verdicts (a one-line error: the message) and not their code.
    autograded = notebooks.load_json(layout.autograded_dir / learner / ASSIGNMENT / NOTEBOOK)
    judged = [cell for cell in autograded["cells"] if JUDGED_NOTE in notebooks.source_text(cell)]
    hidden_failures = [
        notebooks.grade_id(cell)
        for cell in judged
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error" and len(output["traceback"]) == 1
    ]
    assert hidden_failures, f"no hidden check of {learner} failed: the test would prove nothing"
    text = json.dumps(autograded)
    assert "_hidden_check" not in text and "BEGIN HIDDEN TESTS" not in text, "hidden code in the autograded copy"


@pytest.mark.slow
def test_the_feedback_page_names_its_parts_awaits_manual_grades_and_typesets_offline(klass):
    page = BeautifulSoup(_feedback_page(klass["layout"], "ada"), "html.parser")
    contents = page.find(id="toc").get_text(" ", strip=True)
    assert "Test cell" not in contents and "Tests: values with PyTorch inputs (Score: 2.0 / 2.0)" in contents, contents
    assert "Written answer: explain attention pattern (awaiting your instructor's grade, 2.0 points)" in contents
    loader = "".join(script.get_text() for script in page.find_all("script"))
    assert "/static/jupyter_server_mathjax/MathJax.js" in loader, "MathJax from the Jupyter server, offline too"


@pytest.mark.slow
def test_learner_html_reaches_the_feedback_sanitised(klass):
    page = _feedback_page(klass["layout"], "mallory")
    soup = BeautifulSoup(page, "html.parser")
    assert "x_3 has the largest dot product with itself" in soup.get_text(), "mallory's answer should be shown"
    assert "html output" in soup.get_text(), "the harmless part of her HTML output should be shown"
    assert "__pwned" not in "".join(script.get_text() for script in soup.find_all("script"))
    for tag in soup.find_all(True):
        for name, value in tag.attrs.items():
            assert not name.lower().startswith("on") or "__pwned" not in str(value), (
                f"{tag.name} keeps {name}={value!r}"
            )
            assert "javascript:" not in str(value).lower(), f"{tag.name} keeps {name}={value!r}"


@pytest.mark.slow
def test_learner_content_beyond_the_budget_is_a_note_and_the_class_gets_its_feedback(klass):
    zoe = _row(klass["run"], "zoe")
    assert zoe.status == "graded" and zoe.auto_score == zoe.auto_max, zoe
    page = BeautifulSoup(_feedback_page(klass["layout"], "zoe"), "html.parser").get_text()
    assert "This Markdown cell was not rendered" in page and HUGE_ANSWER[:60] in page
    assert (
        "x_3 has the largest dot product with itself"
        in BeautifulSoup(_feedback_page(klass["layout"], "mallory"), "html.parser").get_text()
    ), "the other learners' pages are rendered as usual"


@pytest.mark.slow
def test_feedback_is_released_and_each_learner_fetches_their_own(klass):
    layout = klass["layout"]
    pipeline.release_feedback(layout, ASSIGNMENT)
    for learner in ["ada", "mallory", "zoe", *klass["wrong"]]:
        fetched = pipeline.fetch_feedback(layout, ASSIGNMENT, learner, klass["homes"] / learner)
        assert len(fetched) == 1, f"{learner} should fetch one feedback page, got {fetched}"
        assert (
            fetched[0].read_bytes() == (layout.feedback_dir / learner / ASSIGNMENT / f"{ASSIGNMENT}.html").read_bytes()
        )
    # Rene handed in a renamed copy: the report says so, and the feedback reaches him under his own name.
    rene = _row(klass["run"], "rene")
    assert rene.auto_score == rene.auto_max and "renamed-notebook" in {f["code"] for f in rene.findings}, rene
    assert "renamed-notebook" in klass["report"] and RENAMED in klass["report"]
    fetched = pipeline.fetch_feedback(layout, ASSIGNMENT, "rene", klass["homes"] / "rene")
    assert [page.name for page in fetched] == [RENAMED.replace(".ipynb", ".html")], fetched
    assert (
        fetched[0].read_bytes()
        == (layout.feedback_dir / "rene" / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_bytes()
    )
    released = sorted((layout.exchange_dir / layout.course_id / "feedback").glob("*.html"))
    assert len(released) == len(klass["wrong"]) + 6, (  # ada, mallory, zoe, the hand-made one and rene's two names
        "the hand-made submission's page goes out too, under a name nobody has"
    )


@pytest.mark.slow
def test_learners_have_names_and_a_roster_names_them(klass):
    from nbgrader.api import Gradebook

    from course_grader.exchange import formgrader

    layout = klass["layout"]
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        names = {student.id: (student.last_name, student.first_name) for student in gradebook.students}
    unnamed = formgrader.NO_ROSTER_NAME
    assert names["ada"] == ("ada", unnamed) and names["mallory"] == ("mallory", unnamed), names
    (layout.root / "roster.csv").write_text("id,first_name,last_name,email\nada,Ada,Lovelace <b>,ada@example.org\n")
    try:
        grade(layout, workers=1, students=["ada"], log=print)
        with Gradebook(layout.db_url, layout.course_id) as gradebook:
            ada = gradebook.find_student("ada")
            assert (ada.first_name, ada.last_name, ada.email) == ("Ada", "Lovelace b", "ada@example.org")
            assert gradebook.find_student("mallory").last_name == "mallory"
    finally:
        (layout.root / "roster.csv").unlink()


@pytest.mark.slow
def test_the_report_marks_manual_points_and_lists_failing_tests_with_messages(klass):
    report = klass["report"]
    awaiting = report.split("## Awaiting a manual grade")[1].split("##")[0]
    for learner in ["ada", "mallory"]:
        assert f"- {learner} / {ASSIGNMENT}: 2 points (`{WRITTEN}`)" in awaiting, awaiting
    for learner in ["handmade", *klass["wrong"]]:  # their written answer is the release's, untouched
        assert learner not in awaiting, "an unanswered written question scores 0 and waits for nobody"
    failing = report.split("## Failing tests")[1]
    section = failing.split(f"### wrong-no-scaling / {ASSIGNMENT}")[1].split("###")[0]
    assert "`test_scores`: ` AssertionError: These are the raw dot products" in section, section


@pytest.mark.slow
def test_a_manual_grade_reaches_the_feedback_and_stays_graded(klass):
    from nbgrader.api import Gradebook

    layout, learner = klass["layout"], "ada"
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        entry = gradebook.find_grade(WRITTEN, ASSIGNMENT, ASSIGNMENT, learner)
        entry.manual_score, entry.needs_manual_grade = 1.5, False  # what the formgrader stores
        gradebook.db.commit()
    again = grade(layout, workers=1, log=print)
    ada = _row(again, learner)
    assert not ada.executed and ada.score == 17.5, ada
    assert "(Score: 17.5 / 18.0)" in _feedback_page(layout, learner), "the feedback must show the manual grade"
    forced = _row(grade(layout, workers=1, force=True, students=[learner], log=print), learner)
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        entry = gradebook.find_grade(WRITTEN, ASSIGNMENT, ASSIGNMENT, learner)
        assert (entry.manual_score, entry.needs_manual_grade) == (1.5, False), "the kept grade needs no new look"
        submission = gradebook.find_submission(ASSIGNMENT, learner)
        assert not submission.needs_manual_grade, "the formgrader would say 'needs manual grading'"
    assert forced.executed and forced.manual_pending == 0 and not forced.needs_review, forced
    # A new answer (handed in again): the kept score needs a new look.
    home = klass["homes"] / learner
    notebook = home / ASSIGNMENT / NOTEBOOK
    data = notebooks.load_json(notebook)
    for cell in data["cells"]:
        if notebooks.grade_id(cell) == WRITTEN:
            cell["source"] = "A different answer, handed in again."
    notebooks.save_json(data, notebook)
    time.sleep(1.1)  # nbgrader's submission timestamps have a resolution of a second
    pipeline.submit(layout, ASSIGNMENT, learner, home)
    pipeline.collect(layout, ASSIGNMENT)
    changed = _row(grade(layout, workers=1, students=[learner], log=print), learner)
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        assert gradebook.find_grade(WRITTEN, ASSIGNMENT, ASSIGNMENT, learner).needs_manual_grade
    assert changed.manual_pending == 2 and changed.needs_review, changed
    assert any(WRITTEN in reason and "new look" in reason for reason in changed.reasons), changed.reasons


@pytest.mark.slow
def test_plain_nbgrader_autograde_refuses_and_touches_nothing(klass):
    layout = klass["layout"]
    folder = layout.autograded_dir / "mallory" / ASSIGNMENT
    before = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in folder.iterdir()}
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--student", "mallory", "--force"],
        cwd=layout.root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]},
    )
    assert result.returncode != 0, "nbgrader autograde should refuse"
    assert "course grade --assignment ex1_manual_attention --student mallory" in result.stdout + result.stderr
    after = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in folder.iterdir()}
    assert after == before, "the refused autograde changed the autograded files"


# ------------------------------------------------------------------------------------------------
# Browser: what runs in the pages.
# ------------------------------------------------------------------------------------------------
def _payloads_that_ran(browser, url: str, allowed_prefix: str, settle_ms: int = 500) -> tuple[list, str]:  # noqa: F811
    """Open `url` with only `allowed_prefix` reachable, click mallory's links; (payloads that ran, page text)."""
    context = browser.new_context()
    context.route(
        "**/*", lambda route: route.continue_() if route.request.url.startswith(allowed_prefix) else route.abort()
    )
    dialogs = []
    try:
        page = context.new_page()
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(url, wait_until="load")
        page.wait_for_timeout(settle_ms)
        page.evaluate("""() => document.querySelectorAll('a').forEach(
            a => { if (/click me|a Markdown link/.test(a.textContent)) a.click(); })""")
        page.wait_for_timeout(settle_ms)
        ran = (
            page.evaluate(
                "() => [...(window.__pwned || []), window.__clicked_markdown, window.__clicked_html].filter(x => x)"
            )
            + dialogs
        )
        return ran, page.inner_text("body")
    finally:
        context.close()


@pytest.mark.slow
def test_no_learner_script_runs_in_the_feedback_page(klass, browser, tmp_path):  # noqa: F811
    fetched = pipeline.fetch_feedback(klass["layout"], ASSIGNMENT, "mallory", klass["homes"] / "mallory")
    ran, text = _payloads_that_ran(browser, fetched[0].as_uri(), "file://")
    assert ran == [], f"mallory's code ran in her feedback page: {ran}"
    assert "x_3 has the largest dot product with itself" in text
    # The same notebook exported by nbconvert as it comes (no course settings) runs her scripts: the
    # check above can see a payload run.
    from nbconvert import HTMLExporter

    plain, _ = HTMLExporter(template_name="classic").from_filename(
        str(klass["layout"].autograded_dir / "mallory" / ASSIGNMENT / NOTEBOOK)
    )
    (tmp_path / "plain.html").write_text(plain, encoding="utf-8")
    ran_plain, _ = _payloads_that_ran(browser, (tmp_path / "plain.html").as_uri(), "file://", settle_ms=3000)
    assert {
        "script tag",
        "img onerror",
        "markdown-link",
        "html-link",
        "html output script",
        "html output onerror",
    } <= set(ran_plain), f"the unsanitised export should run them: {ran_plain}"


class FormgraderServer:
    """A Jupyter server in the course directory, configured as `course lab --instructor` configures it."""

    def __init__(self, layout: CourseLayout, log: Path):
        from course_tools import learner_setup

        self.layout, self.log = layout, log
        self.token = secrets.token_hex(16)
        config_dir = learner_setup.lab_config_dir(layout.root, instructor=True)
        with __import__("socket").socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        home = layout.root.parent / "formgrader-home"
        self.env = {
            **os.environ,
            "HOME": str(home),
            "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
            "JUPYTER_CONFIG_PATH": str(config_dir),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        }
        self.env.pop("JUPYTER_PATH", None)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def __enter__(self):
        command = [
            sys.executable,
            "-m",
            "jupyter",
            "server",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.layout.root}",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.layout.root,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the server stopped:\n{self.log.read_text()[-3000:]}"
            try:
                self.request("api/status")
                return self
            except OSError:
                time.sleep(1)
        raise AssertionError(f"the server did not answer in {SERVER_START_S} s:\n{self.log.read_text()[-3000:]}")

    def request(self, path: str, method: str = "GET", timeout: float = 30) -> bytes:
        request = urllib.request.Request(
            self.url(path),
            method=method,
            data=b"" if method == "POST" else None,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.read()

    def __exit__(self, *exc):
        os.killpg(self.process.pid, 15)  # this server's own process group only
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait(timeout=10)


@pytest.mark.slow
def test_the_formgrader_shows_learner_html_inert_and_its_autograde_button_runs_course_grade(klass, browser):  # noqa: F811
    from nbgrader.api import Gradebook

    layout = klass["layout"]
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        submission_id = gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, "mallory").id
    with FormgraderServer(layout, layout.root.parent / "formgrader.log") as server:
        page_url = server.url(f"formgrader/submissions/{submission_id}/?token={server.token}")
        ran, text = _payloads_that_ran(browser, page_url, server.url(""))
        assert ran == [], f"mallory's code ran in the formgrader's grading page: {ran}"
        assert "x_3 has the largest dot product with itself" in text, "her written answer should be shown"
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(page_url)
            kind = page.evaluate(f"() => document.getElementById('{WRITTEN}').tagName")
            assert kind == "INPUT", f"#{WRITTEN} should be the score box, it is a {kind}"
        finally:
            context.close()
        answer = json.loads(
            server.request(f"formgrader/api/submission/{ASSIGNMENT}/mallory/autograde", "POST", timeout=600)
        )
    assert answer["success"], answer
    log = answer["log"]
    assert log.startswith("Graded by the course's confined grader (course grade)"), log
    assert "sandbox:" in log and "report:" in log and "mallory" in log, f"course grade's summary is missing:\n{log}"
