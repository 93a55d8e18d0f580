"""A class on one JupyterHub, end to end, each person as their own Unix account, in Chromium.

The class is built as deploy/README.md tells an instructor (hub.py): deploy/setup_course.sh,
deploy/add_learners.sh (two learners and an instructor, with passwords), `course release --publish`
as the grader account, JupyterHub with deploy/jupyterhub_config.py on free loopback ports.

1. Learner A (ana) and learner B (ben) log in on the Hub's login page (PAM); each gets a JupyterLab
   running as their own account from the shared environment.
2. Each fetches ex1_manual_attention in the Assignment List, types answers (A the model solution, B a
   typical mistake: no division by sqrt(d_k)), validates (A passes, B fails) and submits.
3. The instructor (ines) logs in, opens the course's formgrader (the grader account's JupyterLab, a
   Hub service that her group may open), collects; `course grade` runs as the grader account; both
   submissions appear with their scores; she grades the written answers by hand, generates and
   releases feedback.
4. Each learner fetches their feedback in the Assignment List and reads their own score; from each
   learner's account, the other's work, submission and feedback cannot be read, nor the course files.

Screenshots of each step: .e2e/hub-screenshots/ (printed at the start).
"""

from __future__ import annotations

import csv
import json
import re
import time
from pathlib import Path

import hub as hubs
import lab_ui as ui
import pytest
from test_browser_path import _learner_answers

pytestmark = pytest.mark.e2e_hub

ASSIGNMENT = "ex1_manual_attention"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
COURSE = hubs.COURSE_ID
MISTAKE = hubs.REPOSITORY / "tests" / "submissions" / ASSIGNMENT / "wrong_no_scaling"
MANUAL_SCORES = {"ana": 1.5, "ben": 0.5}  # not whole numbers, so that none is mistaken for a default
LEARNERS = ("ana", "ben")


class State:
    """What the steps learn on the way (the tests of this module run in order)."""

    pages: dict = {}
    submitted: set = set()
    expected_auto: dict = {}
    graded = False
    feedback_released = False
    timings: dict = {}


def timed(step: str):
    class _Timer:
        def __enter__(self):
            self.started = time.monotonic()
            print(f"[e2e-hub] {step} ...", flush=True)

        def __exit__(self, *exc):
            State.timings[step] = time.monotonic() - self.started
            print(f"[e2e-hub] {step}: {State.timings[step]:.1f} s", flush=True)

    return _Timer()


@pytest.fixture(scope="module")
def klass(screenshots):
    with timed("set up the class (accounts, course, exchange, release, JupyterHub)"):
        hub_class = hubs.HubClass(list(LEARNERS), ["ines"]).__enter__()
    try:
        yield hub_class
    finally:
        print(
            "\n[e2e-hub] wall time per step:\n"
            + "\n".join(f"  {s:7.1f} s  {step}" for step, s in State.timings.items()),
            flush=True,
        )
        hub_class.close(keep_log_in=screenshots.folder)


@pytest.fixture(scope="module")
def answers(klass):
    """Cell index -> text for A (model solution) and B (the typical mistake), from the course's source."""
    source = klass.course_dir / "solutions" / ASSIGNMENT / NOTEBOOK
    correct, written_index, written_id, auto_points, manual_points = _learner_answers(source)
    cells = json.loads(source.read_text(encoding="utf-8"))["cells"]
    ids = {index: cells[index]["metadata"]["nbgrader"]["grade_id"] for index in correct}
    mistake = {path.stem: path.read_text(encoding="utf-8").rstrip("\n") for path in MISTAKE.glob("*.py")}
    assert set(mistake) <= set(ids.values()), f"{MISTAKE} names cells the assignment does not have: {set(mistake)}"
    wrong = {index: mistake.get(ids[index], text) for index, text in correct.items()}
    expected_b = float(json.loads((MISTAKE / "expected.json").read_text())["auto_score"])
    State.expected_auto = {"ana": auto_points, "ben": expected_b}
    return {
        "ana": correct,
        "ben": wrong,
        "written_index": written_index,
        "written_id": written_id,
        "auto_points": auto_points,
        "manual_points": manual_points,
        "cell_count": len(cells),
    }


def log_in(browser, klass, short: str, screenshots) -> "ui.Page":
    """The Hub's login page, the account's Unix password (PAM), then its own JupyterLab."""
    account = klass.user(short)
    context = browser.new_context(viewport=ui.VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(ui.UI_TIMEOUT_MS)
    page.goto(f"{klass.url}/hub/login")
    page.locator("#username_input").fill(account.name)
    page.locator("#password_input").fill(account.password)
    screenshots.take(page, f"{short}_login_page")
    with timed(f"{short}: log in and start the server"):
        page.locator("#login_submit").click()
        page.wait_for_url(re.compile(rf"/user/{re.escape(account.name)}/lab"), timeout=hubs.TIMEOUT_S * 1000)
        ui.open_lab(page, page.url)
    return page


def menu_items(page, top: str, while_open=None) -> list[str]:
    """The labels of a menu bar entry's items; the menu is closed again before this returns."""
    page.locator(".lm-MenuBar-itemLabel").get_by_text(top, exact=True).click()
    menu = page.locator(".lm-Menu:visible")
    menu.first.wait_for()
    items = menu.locator(".lm-Menu-itemLabel").all_inner_texts()
    if while_open:
        while_open()
    page.keyboard.press("Escape")
    try:
        menu.first.wait_for(state="hidden", timeout=5000)
    except Exception:
        page.locator(".lm-MenuBar-itemLabel").get_by_text(top, exact=True).click()  # a second click closes it
        menu.first.wait_for(state="hidden")
    return items


# ------------------------------------------------------------------------------------------------
# 1. Learners log in; each server runs as its own account.
# ------------------------------------------------------------------------------------------------
def test_a_wrong_password_is_refused(browser, klass, screenshots):
    context = browser.new_context(viewport=ui.VIEWPORT)
    page = context.new_page()
    page.goto(f"{klass.url}/hub/login")
    page.locator("#username_input").fill(klass.user("ana").name)
    page.locator("#password_input").fill("not-the-password")
    page.locator("#login_submit").click()
    page.get_by_text("Invalid username or password").wait_for()
    screenshots.take(page, "wrong_password_refused")
    assert "/hub/login" in page.url, f"a wrong password must not log in; the browser went to {page.url}"
    context.close()


def test_learners_log_in_and_get_their_own_server(browser, klass, screenshots):
    for short in LEARNERS:
        page = log_in(browser, klass, short, screenshots)
        State.pages[short] = page
        screenshots.take(page, f"{short}_lab_opened")
        account = klass.user(short)
        model = klass.api("GET", f"/users/{account.name}")
        assert model["servers"][""]["ready"], f"the Hub does not list {account.name}'s server as ready: {model}"
        pids = klass.server_pids(account.name)
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() for pid in pids]
        assert any("jupyterhub-singleuser" in command for command in commands), (
            f"no jupyterhub-singleuser process runs as {account.name} (uid {account.uid}): {commands}"
        )
        assert all(str(hubs.PREFIX) in command for command in commands if "python" in command), (
            f"{account.name}'s server does not run from the shared environment {hubs.PREFIX}: {commands}"
        )
        # nbgrader's instructor tools are the grader's alone (deploy/install.sh, deploy/setup_course.sh).
        items = menu_items(page, "Nbgrader")
        assert "Assignment List" in items and "Formgrader" not in items, (
            f"a learner's Nbgrader menu should offer the Assignment List and no Formgrader, it shows {items}"
        )


# ------------------------------------------------------------------------------------------------
# 2. Each learner fetches, answers, validates and submits, in their own JupyterLab.
# ------------------------------------------------------------------------------------------------
def _validate(page, short: str) -> tuple[str, str]:
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").filter(has=page.get_by_text("Assignments", exact=True)).click()
    notebooks = page.locator(f"#nbgrader-{COURSE}-{ASSIGNMENT}")
    if not notebooks.is_visible():
        page.locator("#fetched_assignments_list a.assignment-notebooks-link").click()
    with timed(f"{short}: validate"):
        notebooks.locator(".nested_list_item").get_by_role("button", name="Validate").click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(timeout=ui.CELL_RUN_TIMEOUT_S * 1000)
        result = dialog.locator(".validation-success, .validation-failed, .validation-changed, .validation-passed")
        result.first.wait_for()
    return result.first.get_attribute("class"), dialog.inner_text()


@pytest.mark.parametrize("short", LEARNERS)
def test_learner_fetches_answers_validates_and_submits(klass, answers, screenshots, short):
    page = State.pages.get(short)
    assert page is not None, f"{short} is not logged in: the log-in step failed"
    account = klass.user(short)
    ui.menu(page, "Nbgrader", "Assignment List")
    released = page.locator("#released_assignments_list .list_item").filter(
        has=page.get_by_text(ASSIGNMENT, exact=True)
    )
    released.wait_for()
    screenshots.take(page, f"{short}_assignment_list")
    with timed(f"{short}: fetch"):
        released.get_by_role("button", name="Fetch").click()
        page.locator("#fetched_assignments_list a.assignment-notebooks-link").filter(has_text=ASSIGNMENT).wait_for()
    fetched = account.home / ASSIGNMENT / NOTEBOOK
    assert fetched.is_file() and fetched.stat().st_uid == account.uid, (
        f"Fetch should create {fetched} owned by {account.name}"
    )

    page.locator("#fetched_assignments_list a.assignment-notebooks-link").click()
    page.locator(f"#nbgrader-{COURSE}-{ASSIGNMENT} .nested_list_item a").get_by_text(ASSIGNMENT, exact=True).click()
    panel = ui.current_notebook(page, NOTEBOOK, answers["cell_count"])
    with timed(f"{short}: type the answers"):
        for index, text in answers[short].items():
            ui.replace_cell_text(page, panel, index, text)
        page.keyboard.press("Escape")
    ui.cell(panel, answers["written_index"]).scroll_into_view_if_needed()
    screenshots.take(page, f"{short}_answers_typed")
    if short == "ana":
        # The right answer runs cleanly top to bottom (the wrong one stops at its first failing test).
        with timed(f"{short}: Restart Kernel and Run All Cells"):
            ui.menu(page, "Kernel", re.compile(r"^Restart Kernel and Run All Cells"))
            page.locator(".jp-Dialog .jp-mod-accept").click()
            page.locator(".jp-Dialog").wait_for(state="detached")
            ui.wait_until_every_cell_ran(panel)
        panel.locator(".jp-CodeCell").last.scroll_into_view_if_needed()
        screenshots.take(page, f"{short}_ran_all_cells")
        from load_check import pss_mib

        print(
            f"[e2e-hub] {short}'s processes (JupyterLab and the exercise's kernel, torch imported): "
            f"PSS {pss_mib(klass.server_pids(account.name)):.0f} MiB",
            flush=True,
        )
    page.keyboard.press("ControlOrMeta+s")
    ui.wait_until_saved(page, NOTEBOOK)
    saved = json.loads(fetched.read_text(encoding="utf-8"))["cells"]
    for index, text in answers[short].items():
        assert "".join(saved[index]["source"]) == text, (
            f"cell {index} of {short}'s notebook differs from what was typed"
        )

    result, text = _validate(page, short)
    screenshots.take(page, f"{short}_validated")
    if short == "ana":
        assert "validation-success" in result, f"ana's correct notebook should pass validation:\n{text}"
    else:
        assert "validation-failed" in result, f"ben's mistake (no 1/sqrt(d_k)) should fail validation:\n{text}"
    ui.dismiss_dialog(page, "Ok")

    with timed(f"{short}: submit"):
        page.locator("#fetched_assignments_list > .list_item").filter(
            has=page.get_by_text(ASSIGNMENT, exact=True)
        ).get_by_role("button", name="Submit").click()
        page.locator("#submitted_assignments_list .list_item").filter(
            has=page.get_by_text(ASSIGNMENT, exact=True)
        ).first.wait_for()
    screenshots.take(page, f"{short}_submitted")
    inbound = list((klass.exchange / COURSE / "inbound").glob(f"{account.name}+{ASSIGNMENT}+*"))
    assert len(inbound) == 1 and inbound[0].stat().st_uid == account.uid, (
        f"Submit should leave one submission of {account.name}, owned by that account, in the exchange: {inbound}"
    )
    State.submitted.add(short)


# ------------------------------------------------------------------------------------------------
# 3. The instructor collects, grades, grades by hand, releases feedback.
# ------------------------------------------------------------------------------------------------
def _formgrader_action(page, column: str, screenshots, step: str) -> str:
    """Press a button of the assignment's row in Manage Assignments; returns the dialog's text."""
    row = page.locator(f'tr:has(td.name[data-order="{ASSIGNMENT}"])')
    row.locator(f"td.{column} a").click()
    modal = page.locator("#success-modal, #error-modal")
    modal.first.wait_for(timeout=hubs.TIMEOUT_S * 1000)
    time.sleep(0.5)  # the modal fades in
    screenshots.take(page, step)
    text = modal.first.inner_text()
    modal_id = modal.first.get_attribute("id")
    modal.first.locator("button").last.click()
    modal.first.wait_for(state="hidden")
    assert modal_id == "success-modal", f"the formgrader's {column} failed:\n{text}"
    return text


def _submission_notebook_id(klass, student: str) -> str:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{klass.course_dir / 'gradebook.db'}", COURSE) as gradebook:
        return gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student).id


def _grades(klass) -> dict[str, dict]:
    destination = klass.hub_dir / "grades.csv"
    klass.as_user(
        klass.grader,
        ["course", "export", "--course-dir", str(klass.course_dir), "--to", str(klass.course_dir / "export.csv")],
        "course export",
    )
    destination.write_bytes((klass.course_dir / "export.csv").read_bytes())
    with open(destination, newline="") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle) if row["assignment"] == ASSIGNMENT}


def test_instructor_collects_grades_and_releases_feedback(browser, klass, answers, screenshots):
    assert State.submitted == set(LEARNERS), f"only {sorted(State.submitted)} submitted: a learner's step failed"
    page = log_in(browser, klass, "ines", screenshots)
    State.pages["ines"] = page
    screenshots.take(page, "ines_lab_opened")
    formgrader = f"{klass.url}/services/{COURSE}/formgrader"
    with timed("ines: open the grader account's JupyterLab (Hub service, OAuth)"):
        page.goto(f"{klass.url}/services/{COURSE}/lab")
        ui.open_lab(page, page.url)
    items = menu_items(page, "Nbgrader", lambda: screenshots.take(page, "grader_service_lab_nbgrader_menu"))
    assert "Formgrader" in items, f"the grader account's JupyterLab should offer the Formgrader, its menu shows {items}"
    with timed("ines: open the formgrader"):
        page.goto(f"{formgrader}/manage_assignments")
        page.locator(f'tr:has(td.name[data-order="{ASSIGNMENT}"]) td.collect a').wait_for()
    screenshots.take(page, "formgrader_manage_assignments")

    with timed("ines: collect (formgrader)"):
        _formgrader_action(page, "collect", screenshots, "formgrader_collected")
    students = {short: klass.user(short).name for short in LEARNERS}
    for name in students.values():
        assert (klass.course_dir / "submitted" / name / ASSIGNMENT / NOTEBOOK).is_file(), f"collect missed {name}"

    with timed("course grade (as the grader account)"):
        result = klass.as_user(
            klass.grader,
            [
                "course",
                "grade",
                "--course-dir",
                str(klass.course_dir),
                "--assignment",
                ASSIGNMENT,
                "--workers",
                "1",
                "--strict",
            ],
            "course grade",
            timeout_s=900,
        )
    print(result.stdout, flush=True)
    State.graded = True

    page.goto(f"{formgrader}/manage_submissions/{ASSIGNMENT}")
    total = answers["auto_points"] + answers["manual_points"]
    for short, name in students.items():
        row = page.locator("#main-table tr").filter(has=page.locator(f'td.student-id[data-order="{name}"]'))
        row.wait_for()
        score = row.locator("td.score").inner_text()
        assert score.split() == [f"{State.expected_auto[short]:g}", "/", f"{total:g}"], (
            f"Manage Submissions should show {name} with {State.expected_auto[short]:g} / {total:g}, it shows {score!r}"
        )
        assert "needs manual grading" in row.locator("td.status").inner_text()
    screenshots.take(page, "formgrader_manage_submissions_both")

    for short, name in students.items():
        page.goto(f"{formgrader}/submissions/{_submission_notebook_id(klass, name)}")
        box = page.locator(f"input.score#{answers['written_id']}")
        box.wait_for()
        box.scroll_into_view_if_needed()
        with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT") as saved:
            box.click()
            box.fill("")
            page.keyboard.type(f"{MANUAL_SCORES[short]:g}")
            page.keyboard.press("Tab")
        assert saved.value.ok and saved.value.json().get("manual_score") == MANUAL_SCORES[short], (
            f"the formgrader did not store {short}'s manual score: {saved.value.status} {saved.value.text()}"
        )
        screenshots.take(page, f"formgrader_{short}_written_answer_graded")

    grades = _grades(klass)
    for short, name in students.items():
        want = State.expected_auto[short] + MANUAL_SCORES[short]
        assert float(grades[name]["score"]) == want, (
            f"{name}: the gradebook should hold {want:g}, it has {grades[name]}"
        )

    page.goto(f"{formgrader}/manage_assignments")
    with timed("ines: generate and release feedback (formgrader)"):
        _formgrader_action(page, "generate-feedback", screenshots, "formgrader_feedback_generated")
        _formgrader_action(page, "release-feedback", screenshots, "formgrader_feedback_released")
    released = list((klass.exchange / COURSE / "feedback").glob("*.html"))
    assert len(released) == len(LEARNERS), f"one released feedback file per learner expected, found {released}"
    State.feedback_released = True


# ------------------------------------------------------------------------------------------------
# 4. Each learner fetches their own feedback and can read nobody else's.
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("short", LEARNERS)
def test_learner_fetches_own_feedback(klass, answers, screenshots, short):
    assert State.feedback_released, "no feedback was released: the instructor's step failed"
    page = State.pages[short]
    account = klass.user(short)
    page.bring_to_front()
    ui.menu(page, "Nbgrader", "Assignment List")
    submitted = page.locator("#submitted_assignments_list > .list_item").filter(
        has=page.get_by_text(ASSIGNMENT, exact=True)
    )
    with timed(f"{short}: fetch feedback"):
        submitted.get_by_role("button", name="Fetch Feedback").click()
        page.locator("#submitted_assignments_list").get_by_text("(view feedback)").first.wait_for()
    screenshots.take(page, f"{short}_feedback_fetched")
    files = list((account.home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
    assert len(files) == 1 and files[0].stat().st_uid == account.uid, f"{short}'s fetched feedback: {files}"
    relative = files[0].relative_to(account.home)
    page.goto(f"{klass.url}/user/{account.name}/files/{relative}")
    text = page.locator("body").inner_text()
    screenshots.take(page, f"{short}_feedback_page")
    total = answers["auto_points"] + answers["manual_points"]
    want = State.expected_auto[short] + MANUAL_SCORES[short]
    assert re.search(rf"\b{re.escape(f'{want:g}')}\s*/\s*{re.escape(f'{total:g}')}\b", text), (
        f"{short}'s feedback should show the score {want:g} / {total:g}; it reads:\n{text[:600]}"
    )
    html = files[0].read_text(encoding="utf-8")
    assert "BEGIN HIDDEN TESTS" not in html, "feedback must not reveal the hidden tests"
    page.goto(f"{klass.url}/user/{account.name}/lab")
    ui.open_lab(page, page.url)


def _can_read(klass, name: str, path: Path) -> tuple[bool, str]:
    """Whether account `name` can read `path` (a file: its bytes; a folder: its listing)."""
    probe = (
        "import os, sys\np = sys.argv[1]\n"
        "try:\n    os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(1)\n    print('READ')\n"
        "except OSError as e:\n    print(type(e).__name__, e.strerror)\n"
    )
    result = klass.as_user(name, ["python", "-c", probe, str(path)], f"probe {path} as {name}", check=False)
    return result.stdout.strip() == "READ", (result.stdout + result.stderr).strip()


@pytest.mark.parametrize("short, other", [("ana", "ben"), ("ben", "ana")])
def test_learner_cannot_read_the_others_work(klass, short, other):
    assert State.feedback_released, "the class did not get to feedback: earlier steps failed"
    me, them = klass.user(short), klass.user(other)
    exchange = klass.exchange / COURSE
    theirs = {
        "their fetched notebook": them.home / ASSIGNMENT / NOTEBOOK,
        "their home folder": them.home,
        "their feedback": next((them.home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html")),
        "the exchange's inbound folder (everyone's submissions)": exchange / "inbound",
        "the exchange's feedback folder (everyone's feedback)": exchange / "feedback",
        "their collected submission": klass.course_dir / "submitted" / them.name / ASSIGNMENT / NOTEBOOK,
        "their autograded notebook": klass.course_dir / "autograded" / them.name / ASSIGNMENT / NOTEBOOK,
        "their feedback in the course": klass.course_dir / "feedback" / them.name / ASSIGNMENT / f"{ASSIGNMENT}.html",
        "the course's solutions (hidden tests)": klass.course_dir / "solutions" / ASSIGNMENT / NOTEBOOK,
        "the gradebook": klass.course_dir / "gradebook.db",
    }
    for what, path in theirs.items():
        assert path.exists(), f"{what} ({path}) does not exist: the probe would prove nothing"
        readable, said = _can_read(klass, me.name, path)
        assert not readable, f"{me.name} can read {what}: {path}"
        assert "PermissionError" in said, f"reading {what} as {me.name} should be refused by permissions, got {said!r}"
    own = {
        "own notebook": me.home / ASSIGNMENT / NOTEBOOK,
        "own feedback": next((me.home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html")),
        "the released assignment": exchange / "outbound" / ASSIGNMENT / NOTEBOOK,
    }
    for what, path in own.items():
        readable, said = _can_read(klass, me.name, path)
        assert readable, f"{me.name} should be able to read {what} ({path}), got {said!r}"
