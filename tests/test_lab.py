"""`course lab`: JupyterLab on the course, and a class's learner working through the instructor's exchange.

- nbgrader's lab extension is installed and enabled, and `course lab --help` lists its options;
- in a class (COURSE_EXCHANGE names the instructor's exchange), a learner's fresh clone generates and
  publishes nothing: the Assignment List shows what the instructor released, and fetch and submit,
  from any folder, go through the instructor's exchange; the instructor collects the submission;
- the instructor's own lab (`course lab --instructor`) shows solutions/ and serves the formgrader.

The self-learner's lab and exercises: tests/test_learner_path.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import learner_checkout as lc
import pytest

from course_grader.exchange import pipeline
from course_grader.ground import notebooks
from course_grader.ground.layout import CourseLayout

COURSE_ID = "transformers-ground-up"
RELEASED = "ex1_manual_attention"


def test_nbgrader_lab_extension_is_enabled():
    out = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True, text=True, check=True
    )
    text = out.stdout + out.stderr
    line = next((row for row in text.splitlines() if "@jupyter/nbgrader" in row), "")
    assert "enabled" in line and "OK" in line, f"nbgrader lab extension not enabled:\n{text}"


def test_course_lab_help_lists_its_options():
    out = subprocess.run(
        [sys.executable, "-m", "course_tools.cli", "lab", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for option in ("--port", "--ip", "--no-browser", "--instructor"):
        assert option in out, f"`course lab --help` does not list {option}:\n{out}"


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    """An instructor's checkout (the upstream) with a class exchange, and a learner's fresh clone of it."""
    work = tmp_path_factory.mktemp("class")
    instructor_dir, clone = lc.fresh_clone(work)
    exchange = work / "srv-nbgrader-exchange"
    env = lc.learner_env(clone, work / "learner-home", exchange=exchange)
    setup_output = lc.make(clone, "setup", env)
    return {
        "work": work,
        "instructor_dir": instructor_dir,
        "clone": clone,
        "exchange": exchange,
        "env": env,
        "setup_output": setup_output,
        "layout": CourseLayout.from_directory(instructor_dir, exchange=exchange, course_id=COURSE_ID),
    }


@pytest.mark.slow
def test_a_class_learners_setup_generates_and_publishes_nothing(klass):
    clone = klass["clone"]
    assert "your instructor's, from COURSE_EXCHANGE" in klass["setup_output"], klass["setup_output"]
    exercises = clone / "exercises"
    assert exercises.is_dir() and not any(exercises.iterdir()), (
        "a class's learner gets exercises only from the instructor's exchange: exercises/ is there, empty"
    )
    assert not (clone / "exchange").exists() and not (clone / "build" / "learner" / "course").exists(), (
        "nothing may be generated or published in a class learner's checkout"
    )
    assert (clone / "START.md").is_file()


@pytest.mark.slow
def test_a_class_learner_fetches_and_submits_through_the_instructors_exchange(klass, tmp_path):
    clone, env, layout = klass["clone"], klass["env"], klass["layout"]
    pipeline.generate_release(layout, [RELEASED])
    pipeline.release_assignment(layout, RELEASED)
    # The Assignment List answers before the learner's first fetch (nbgrader changes into exercises/ to list).
    with lc.Lab(clone, env, klass["work"] / "lab-class-before-fetch.log") as lab:
        listed = lab.get(f"assignments?course_id={COURSE_ID}")
    assert listed["success"], f"the Assignment List before the first fetch: {listed}"
    assert {a["assignment_id"]: a["status"] for a in listed["value"]} == {RELEASED: "released"}, listed

    listing = lc.nbgrader(["list"], cwd=clone / "notebooks", env=env)
    listed = listing.stdout + listing.stderr
    assert f"{COURSE_ID} {RELEASED}" in listed and "ex2_transformer" not in listed, (
        f"the learner should see exactly what the instructor released:\n{listed}"
    )
    elsewhere = tmp_path / "home-folder"
    elsewhere.mkdir()
    lc.nbgrader(["fetch_assignment", RELEASED], cwd=elsewhere, env=env)
    notebook = clone / "exercises" / RELEASED / f"{RELEASED}.ipynb"
    assert notebook.is_file(), "fetch_assignment should put the exercise where the chapters link it"
    lc.nbgrader(["submit", RELEASED], cwd=clone / "exercises", env=env)
    learners = pipeline.collect(layout, RELEASED)
    assert len(learners) == 1, f"the instructor should collect the learner's submission, got {learners}"
    collected = layout.submitted_dir / learners[0] / RELEASED / f"{RELEASED}.ipynb"
    assert collected.read_bytes() == notebook.read_bytes()


@pytest.mark.slow
def test_a_class_learners_assignment_list_shows_the_instructors_releases(klass):
    clone, env, work = klass["clone"], klass["env"], klass["work"]
    with lc.Lab(clone, env, work / "lab-class.log") as lab:
        assert lab.get("courses") == {"success": True, "value": [COURSE_ID]}
        listed = lab.get(f"assignments?course_id={COURSE_ID}")
        assert listed["success"], listed
        released = {a["assignment_id"]: a["status"] for a in listed["value"] if a["status"] != "submitted"}
        assert released == {RELEASED: "fetched"}, f"Assignment List in a class: {released}"
        # The Validate button of this lab names a syntax error by its cell and line (not the NameErrors after it).
        fetched = clone / "exercises" / RELEASED / f"{RELEASED}.ipynb"
        broken = fetched.with_name("validate-check.ipynb")
        notebook = json.loads(fetched.read_text(encoding="utf-8"))
        answer = next(cell for cell in notebook["cells"] if notebooks.grade_id(cell) == "self_attention")
        answer["source"] = "def self_attention(X, W_q, W_k, W_v):\n    return (X\n"
        broken.write_text(json.dumps(notebook), encoding="utf-8")
        try:
            validated = lab.post("assignments/validate", {"path": str(broken.relative_to(clone))})
        finally:
            broken.unlink()
        assert validated["success"], validated
        (failure,) = validated["value"]["failed"]
        assert failure["error"].startswith("SyntaxError in the cell that starts with `def self_attention("), failure
    assert lc.git(clone, "status", "--porcelain", "--untracked-files=all") == "", "the learner's clone is dirty"


@pytest.mark.slow
def test_the_instructors_lab_shows_solutions_and_the_formgrader(klass):
    instructor_dir, work = klass["instructor_dir"], klass["work"]
    env = lc.learner_env(instructor_dir, work / "instructor-home", exchange=klass["exchange"])
    with lc.Lab(instructor_dir, env, work / "lab-instructor.log", "--instructor") as lab:
        root = {item["name"] for item in lab.get("api/contents")["content"]}
        assert "solutions" in root, f"the instructor's lab should list solutions/: {sorted(root)}"
        assert lab.status("formgrader") in (200, 302), "the instructor's lab should serve the formgrader"
