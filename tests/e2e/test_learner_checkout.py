"""A learner who works alone, in a real checkout and a real browser.

The checkout is a `git clone` of the course set up with `make setup`, and the lab is `make lab`, as the
README tells a learner (tests/learner_checkout.py builds both). In JupyterLab the learner:

  1. opens a chapter from notebooks/, runs it with Run -> Run All Cells and saves it: `git status` stays
     clean, and a `git pull` of a new version of that chapter works (the checkout's clean filter);
  2. opens a terminal in the lab (File -> New -> Terminal) and runs `course check ex1_manual_attention` on
     their own copy, which has a typical mistake: the terminal shows the score, the parts that failed and
     why in words, never a line of the hidden tests, and where the feedback page is; the learner opens
     that page in the lab and trusts it, and its formulas are typeset (MathJax from the lab, offline).

Each step leaves a numbered screenshot (see conftest.py).
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import jupyter_servers as servers
import lab_ui as ui
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: learner_checkout, grading_support
import learner_checkout  # noqa: E402
from grading_support import fixtures  # noqa: E402

from course_grader.ground import notebooks  # noqa: E402
from course_grader.ground.layout import discover_assignments  # noqa: E402

pytestmark = pytest.mark.e2e

CHAPTER = "02_self_attention.ipynb"
ASSIGNMENT = "ex1_manual_attention"
MISTAKE = "wrong_no_scaling"  # tests/submissions/ex1_manual_attention/: no division by sqrt(d_k)
CHECK_TIMEOUT_S = 300  # `course check` of ex1 takes seconds; a busy 2-core runner starts a sandbox in under a minute


@pytest.fixture(scope="module")
def checkout(e2e_work):
    """(upstream, clone, environment): a fresh clone, `make setup` run in it."""
    upstream, clone = learner_checkout.fresh_clone(e2e_work / "self-learner")
    env = learner_checkout.learner_env(clone, e2e_work / "home-self-learner")
    # Settings that keep the page deterministic for the test, and a terminal whose text the test can read.
    settings = Path(env["JUPYTER_CONFIG_DIR"]) / "lab" / "user-settings"
    env["JUPYTERLAB_SETTINGS_DIR"] = str(settings)
    servers.write_lab_settings(settings)
    terminal = settings / "@jupyterlab" / "terminal-extension" / "plugin.jupyterlab-settings"
    terminal.parent.mkdir(parents=True, exist_ok=True)
    terminal.write_text(json.dumps({"screenReaderMode": True}))  # xterm.js keeps its rows as text in the page
    learner_checkout.make(clone, "setup", env)
    return upstream, clone, env


@pytest.fixture(scope="module")
def lab(checkout, e2e_work):
    _, clone, env = checkout
    with learner_checkout.Lab(clone, env, e2e_work / "self-learner-lab.log") as running:
        yield running


@pytest.fixture(scope="module")
def page(browser, lab):
    yield from ui.lab_page(browser, lab.url("lab"))


def _git_status(clone: Path, env: dict) -> str:
    return learner_checkout.git(clone, "status", "--porcelain", env=env)


def test_a_chapter_run_and_saved_in_the_lab_leaves_the_checkout_clean_and_pull_works(checkout, page, screenshots):
    upstream, clone, env = checkout
    assert _git_status(clone, env) == "", "the checkout should be clean right after `make setup`"
    listing = page.locator(".jp-DirListing-content .jp-DirListing-itemText")
    listing.get_by_text("notebooks", exact=True).dblclick()
    cells = len(notebooks.load_json(clone / "notebooks" / CHAPTER)["cells"])
    panel = ui.open_in_file_browser(page, CHAPTER, cells)
    ui.menu(page, "Run", "Run All Cells")
    ui.wait_until_every_cell_ran(panel)
    errors = ui.error_outputs_text(panel)
    assert not errors, f"{CHAPTER}: cells raised errors when run in the learner's checkout:\n{errors}"
    page.keyboard.press("ControlOrMeta+s")
    ui.wait_until_saved(page, CHAPTER)
    screenshots.take(page, "checkout_chapter_ran_and_saved")
    saved = notebooks.load_json(clone / "notebooks" / CHAPTER)
    assert any(cell.get("outputs") for cell in saved["cells"]), "the saved chapter should keep its outputs on disk"

    status = _git_status(clone, env)
    assert status == "", f"running and saving {CHAPTER} in the lab should leave `git status` clean, it says:\n{status}"

    # A new version of the chapter upstream: the learner's `git pull` takes it.
    chapter = upstream / "notebooks" / CHAPTER
    changed = notebooks.load_json(chapter)
    changed["cells"][0]["source"] = "".join(changed["cells"][0]["source"]) + "\n\n(Updated upstream.)"
    notebooks.save_json(changed, chapter)
    learner_checkout.git(upstream, "commit", "-qam", "a new version of the chapter")
    learner_checkout.git(clone, "pull", "-q", "--no-rebase", env=env)
    pulled = "".join(notebooks.load_json(clone / "notebooks" / CHAPTER)["cells"][0]["source"])
    assert pulled.endswith("(Updated upstream.)"), "`git pull` should bring the new version of the chapter"


def _terminal_text(page) -> str:
    rows = page.locator(".jp-Terminal:visible .xterm-accessibility-tree")
    return rows.first.inner_text() if rows.count() else ""


def test_course_check_in_a_lab_terminal_names_the_mistake_and_keeps_the_hidden_tests_hidden(
    checkout, page, screenshots
):
    _, clone, _ = checkout
    source = clone / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    copy = clone / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert copy.is_file(), f"`make setup` should give the learner {copy}"
    assignment = next(a for a in discover_assignments(clone / "solutions") if a.id == ASSIGNMENT)
    answers = fixtures.base_answers(MISTAKE, assignment, clone / "tests" / "submissions")
    notebooks.save_json(notebooks.fill_in(notebooks.load_json(copy), answers), copy)  # the learner's saved work

    ui.menu(page, "File", "New")
    page.locator(".lm-Menu:visible .lm-Menu-itemLabel").get_by_text("Terminal", exact=True).first.click()
    terminal = page.locator(".jp-Terminal:visible")
    terminal.wait_for()
    page.locator(".jp-Terminal:visible .xterm-helper-textarea").focus()
    page.keyboard.type(f"course check {ASSIGNMENT}\n")
    started, shown = time.monotonic(), ""
    while time.monotonic() - started < CHECK_TIMEOUT_S:
        shown = _terminal_text(page)
        if re.search(r"graded in \d+ s", shown) or "Traceback" in shown or "command not found" in shown:
            break
        time.sleep(1)
    screenshots.take(page, "checkout_course_check_in_terminal")
    assert re.search(r"graded in \d+ s", shown), f"`course check` did not finish in the lab's terminal:\n{shown}"
    assert re.search(r"score: \S+ / \S+", shown), f"the terminal should show the score:\n{shown}"
    failed = [line.strip() for line in shown.splitlines() if line.strip().startswith("FAILED")]
    assert failed, f"a copy without the division by sqrt(d_k) should fail some parts:\n{shown}"
    assert "sqrt" in shown, f"what failed should say what to fix (the scaling by sqrt(d_k)):\n{shown}"
    hidden = fixtures.hidden_lines(notebooks.load_json(source))
    leaked = [line for line in hidden if line in shown]
    assert not leaked, f"lines of the hidden tests reached the learner's terminal: {leaked[:3]}"

    page_path = clone / "build" / "check" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    assert page_path.is_file(), f"`course check` should write the feedback page {page_path}"
    leaked = [line for line in hidden if line in page_path.read_text(encoding="utf-8")]
    assert not leaked, f"lines of the hidden tests reached the feedback page: {leaked[:3]}"

    # The learner opens the page in the lab, where the terminal said it is.
    ui.menu(page, "File", re.compile(r"^Open from Path"))
    page.locator(".jp-Dialog input").fill(str(page_path.relative_to(clone)))
    page.locator(".jp-Dialog .jp-mod-accept").click()
    viewer = page.frame_locator(".jp-HTMLViewer:visible iframe")
    viewer.locator("body").get_by_text(ASSIGNMENT).first.wait_for()
    screenshots.take(page, "checkout_feedback_page_in_the_lab")
    # Trusted, the page typesets its formulas with the MathJax the lab itself serves (no network).
    page.locator(".jp-Toolbar:visible").get_by_text("Trust HTML", exact=True).first.click()
    viewer = page.frame_locator(".jp-HTMLViewer:visible iframe")
    viewer.locator(".MathJax, .MathJax_Display, mjx-container").first.wait_for()
    screenshots.take(page, "checkout_feedback_page_trusted_math_typeset")
