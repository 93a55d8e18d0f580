"""A self-learner's path in a fresh clone: `make setup`, the chapters' links, the exercises, nbgrader.

After `make setup` every link of every chapter resolves (the exercise links open the learner's own
copy in exercises/); nbgrader's learner commands and JupyterLab's Assignment List work from any
folder against the checkout's own exchange; the learner's work survives `make setup`, `make release`,
`make lab` and `git pull`; nothing of this leaves `git status` dirty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import learner_checkout as lc
import pytest

from course_grader.ground import notebooks as nbtools
from course_tools import contents

pytestmark = pytest.mark.slow

COURSE_ID = "transformers-ground-up"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A fresh clone after the README's set-up step (`make setup`), with the learner's environment."""
    work = tmp_path_factory.mktemp("learner")
    upstream, clone = lc.fresh_clone(work)
    env = lc.learner_env(clone, work / "home")
    output = lc.make(clone, "setup", env)
    return {"work": work, "upstream": upstream, "clone": clone, "env": env, "setup_output": output}


def _solve(notebook: Path, assignment_id: str, clone: Path) -> None:
    """What a learner who solved everything has: the model answers in the solution cells, and a note."""
    source = nbtools.load_json(clone / "solutions" / assignment_id / f"{assignment_id}.ipynb")
    solved = nbtools.fill_in(nbtools.load_json(notebook), nbtools.solution_answers(source))
    solved["cells"].append(
        {
            "cell_type": "markdown",
            "metadata": {},
            "id": "learner-note",
            "source": ["My own notes: this took me an afternoon."],
        }
    )
    nbtools.save_json(solved, notebook)


def _save_clean(notebook: dict, path: Path) -> None:
    """Store a notebook as the course stores it (course_tools.nbclean), byte for byte."""
    from course_tools import nbclean

    path.write_text(nbclean.clean_text(json.dumps(notebook)), encoding="utf-8")


def test_setup_gives_the_learner_every_exercise(checkout):
    clone = checkout["clone"]
    for exercise in contents.exercises(clone):
        notebook = exercise.learner_notebook(clone)
        assert notebook.is_file(), (
            f"make setup did not give the learner {notebook.relative_to(clone)}:\n{checkout['setup_output']}"
        )
        text = notebook.read_text(encoding="utf-8")
        assert "### BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text, (
            f"{notebook.name}: the learner's copy must be the release version (no solutions, no hidden tests)"
        )
    assert (clone / "START.md").is_file(), "make setup should write the start page START.md"


def _check_link(source: Path, target: str, where: str) -> str | None:
    path, fragment = contents.split_target(target)
    resolved = (source.parent / path).resolve() if path else source
    if not resolved.exists():
        return f"{where}: {target} -> {resolved} does not exist"
    if fragment and resolved.suffix == ".ipynb":
        anchors = {contents.heading_anchor(text) for _, text in contents.headings(contents.load_notebook(resolved))}
        if fragment not in anchors:
            return f"{where}: {target}: no heading with the anchor #{fragment} in {resolved.name}"
    return None


def test_every_relative_link_in_every_chapter_resolves(checkout):
    clone = checkout["clone"]
    broken, followed = [], 0
    for chapter in contents.chapters(clone):
        for cell, target in contents.relative_links(contents.load_notebook(chapter.path)):
            followed += 1
            problem = _check_link(chapter.path, target, f"{chapter.path.name} cell {cell}")
            if problem:
                broken.append(problem)
    start = clone / "START.md"
    for target in filter(contents.is_relative, contents.markdown_links(start.read_text(encoding="utf-8"))):
        followed += 1
        problem = _check_link(start, target, "START.md")
        if problem:
            broken.append(problem)
    assert followed > 50, f"only {followed} links found: is the link extraction broken?"
    assert not broken, "links that do not resolve after `make setup` in a fresh clone:\n" + "\n".join(broken)


def test_link_extraction_sees_markdown_and_html_links_but_not_code():
    text = (
        "See [a](02_x.ipynb), ![fig](img/a.png \"title\"), <a href='03_y.ipynb#Top'>y</a>, "
        '<img src="b.svg">, `[not](code.ipynb)`, [web](https://example.org)\n\n[ref]: 04_z.ipynb\n'
        "```\n[fenced](fenced.ipynb)\n```\n"
    )
    assert contents.markdown_links(text) == [
        "02_x.ipynb",
        "img/a.png",
        "https://example.org",
        "04_z.ipynb",
        "03_y.ipynb#Top",
        "b.svg",
    ]
    assert [t for t in contents.markdown_links(text) if contents.is_relative(t)] == [
        "02_x.ipynb",
        "img/a.png",
        "04_z.ipynb",
        "03_y.ipynb#Top",
        "b.svg",
    ]
    assert contents.heading_anchor("2.1 The idea (核心思想)") == "2.1-The-idea-(核心思想)"


def test_nbgrader_works_for_the_learner_from_any_folder(checkout, tmp_path):
    """fetch, validate and submit from folders inside and outside the checkout, as the README says."""
    clone, env = checkout["clone"], checkout["env"]
    assignment = "ex1_manual_attention"
    listing = lc.nbgrader(["list"], cwd=clone / "notebooks", env=env)
    listed = listing.stdout + listing.stderr
    for exercise in contents.exercises(clone):
        assert f"{COURSE_ID} {exercise.id}" in listed, f"`nbgrader list` does not show {exercise.id}:\n{listed}"

    # A learner who has not fetched it yet (the copy moved aside), fetching from outside the checkout.
    mine = clone / "exercises" / assignment
    mine.rename(tmp_path / "moved-aside")
    elsewhere = tmp_path / "somewhere-else"
    elsewhere.mkdir()
    lc.nbgrader(["fetch_assignment", assignment], cwd=elsewhere, env=env)
    notebook = mine / f"{assignment}.ipynb"
    assert notebook.is_file(), "nbgrader fetch_assignment should put the exercise in exercises/<id>/"
    assert not (elsewhere / assignment).exists(), "fetch_assignment wrote into the current folder, not exercises/"
    again = lc.nbgrader(["fetch_assignment", assignment], cwd=clone, env=env, check=False)
    assert again.returncode != 0 and "already have a copy" in again.stdout + again.stderr, (
        "a second fetch must refuse to overwrite the learner's copy"
    )

    untouched = lc.nbgrader(["validate", str(notebook)], cwd=clone / "notebooks", env=env, check=False)
    report = untouched.stdout + untouched.stderr
    assert "VALIDATION FAILED" in report, f"validating the untouched exercise should fail its visible tests:\n{report}"

    _solve(notebook, assignment, clone)
    solved = lc.nbgrader(["validate", f"exercises/{assignment}/{assignment}.ipynb"], cwd=clone, env=env)
    assert "Success! Your notebook passes all the tests." in solved.stdout + solved.stderr, solved.stdout

    lc.nbgrader(["submit", assignment], cwd=mine, env=env)
    inbound = clone / "exchange" / COURSE_ID / "inbound"
    submissions = [p for p in inbound.iterdir() if f"+{assignment}+" in p.name]
    assert submissions, f"nothing arrived in {inbound}"
    assert (submissions[-1] / f"{assignment}.ipynb").read_bytes() == notebook.read_bytes()


def test_the_lab_serves_the_learner_view_and_the_assignment_list(checkout):
    clone, env, work = checkout["clone"], checkout["env"], checkout["work"]
    with lc.Lab(clone, env, work / "lab-api.log") as lab:
        root = {item["name"] for item in lab.get("api/contents")["content"]}
        assert {"notebooks", "exercises", "START.md"} <= root, f"the learner's root lacks something: {sorted(root)}"
        hidden = root & {"solutions", "release", "gradebook.db", "exchange", "build", "nbgrader_config.py"}
        assert not hidden, f"the learner's file browser lists the instructor's files: {sorted(hidden)}"
        start = lab.get("api/contents/START.md")["content"]
        assert "notebooks/01_rnn_to_transformer.ipynb" in start and "exercises/ex1_manual_attention/" in start

        import urllib.request

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        try:
            urllib.request.build_opener(NoRedirect).open(lab.url(""), timeout=30)
            location = ""
        except urllib.error.HTTPError as redirect:
            location = redirect.headers.get("Location", "")
        assert "/lab/tree/START.md" in location, f"`make lab` should open on START.md, not {location!r}"
        assert lab.status("formgrader") == 404, "the learner's lab must not serve nbgrader's formgrader"
        page = lab.get("lab")
        assert "@jupyter/nbgrader:formgrader" in page.split('"disabledExtensions"', 1)[1][:400], (
            "the formgrader plugin should be disabled in the learner's lab"
        )
        notification = lab.get("lab/api/settings/@jupyterlab/apputils-extension:notification")
        assert notification["schema"]["properties"]["fetchNews"]["default"] == "false", "the news pop-up is on"

        courses = lab.get("courses")
        assert courses == {"success": True, "value": [COURSE_ID]}, f"Assignment List: courses {courses}"
        listed = lab.get(f"assignments?course_id={COURSE_ID}")
        assert listed["success"], listed
        released = {a["assignment_id"]: a for a in listed["value"] if a["status"] in ("released", "fetched")}
        assert set(released) == {e.id for e in contents.exercises(clone)}, f"Assignment List: {sorted(released)}"
        assert released["ex3_positional_encoding"]["path"] == "exercises/ex3_positional_encoding"

        # Fetch from the Assignment List (a copy moved aside first), Validate, Submit.
        assignment = "ex3_positional_encoding"
        (clone / "exercises" / assignment).rename(work / f"{assignment}-aside")
        fetched = lab.post("assignments/fetch", {"course_id": COURSE_ID, "assignment_id": assignment})
        assert fetched["success"] and (clone / "exercises" / assignment / f"{assignment}.ipynb").is_file(), fetched
        validated = lab.post("assignments/validate", {"path": f"exercises/{assignment}/{assignment}.ipynb"})
        assert validated["success"] and validated["value"].get("failed"), (
            f"the Validate button should report the untouched exercise's failing tests: {str(validated)[:800]}"
        )
        submitted = lab.post("assignments/submit", {"course_id": COURSE_ID, "assignment_id": assignment})
        assert submitted["success"], submitted
        assert any(a["assignment_id"] == assignment and a["status"] == "submitted" for a in submitted["value"])


def test_the_learners_work_survives_setup_release_lab_and_git_pull(checkout):
    clone, env, upstream, work = checkout["clone"], checkout["env"], checkout["upstream"], checkout["work"]
    assignment = "ex2_transformer"
    notebook = clone / "exercises" / assignment / f"{assignment}.ipynb"
    _solve(notebook, assignment, clone)
    (notebook.parent / "my_scratch.py").write_text("# the learner's own file\n")
    before = lc.tree_digest(clone / "exercises")

    def unchanged(after_what: str) -> None:
        after = lc.tree_digest(clone / "exercises")
        lost = sorted(name for name in before if after.get(name) != before[name])
        assert not lost, f"{after_what} changed or removed the learner's files: {lost}"

    lc.make(clone, "setup", env)
    unchanged("make setup")
    lc.make(clone, "release", env)
    unchanged("make release")
    release_copy = clone / "release" / assignment / f"{assignment}.ipynb"
    assert release_copy.is_file() and release_copy.read_bytes() != notebook.read_bytes(), (
        "make release regenerates release/, which is not where the learner works"
    )
    with lc.Lab(clone, env, work / "lab-survival.log"):
        pass
    unchanged("make lab")

    # Upstream publishes a new version of the exercise; the learner pulls and sets up again.
    source = upstream / "solutions" / assignment / f"{assignment}.ipynb"
    changed = nbtools.load_json(source)
    changed["cells"].insert(
        1,
        {
            "cell_type": "markdown",
            "metadata": {},
            "id": "new-in-this-version",
            "source": ["A note added in a later version of the course."],
        },
    )
    _save_clean(changed, source)
    lc.git(upstream, "commit", "-q", "-am", "a new version of ex2")
    lc.git(clone, "pull", "-q", "--ff-only", env=env)
    unchanged("git pull")
    output = lc.make(clone, "setup", env)
    unchanged("make setup after git pull")
    assert "a newer release" in output, f"make setup should say that a newer ex2 exists:\n{output}"
    outbound = clone / "exchange" / COURSE_ID / "outbound" / assignment / f"{assignment}.ipynb"
    assert "new-in-this-version" in outbound.read_text(encoding="utf-8"), "the new release was not published"


def _put(lab: lc.Lab, path: str, body: dict) -> dict:
    import urllib.request

    request = urllib.request.Request(
        lab.url(path), data=json.dumps(body).encode(), method="PUT", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read().decode() or "{}")


def test_a_chapter_run_in_place_and_saved_in_the_lab_leaves_git_clean_and_pull_works(checkout):
    """Issue point 6: running or opening a chapter must not dirty the checkout, nor block `git pull`."""
    clone, env, upstream, work = checkout["clone"], checkout["env"], checkout["upstream"], checkout["work"]
    chapter = "02_self_attention"
    relative = f"notebooks/{chapter}.ipynb"
    path = clone / relative
    with lc.Lab(clone, env, work / "lab-run-chapter.log") as lab:
        # Run in place, as Run All does: outputs, execution counts and the kernel's language_info in the file.
        lc.run(
            [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace",
             "--ExecutePreprocessor.timeout=900", path.name],
            cwd=path.parent, env={**env, "MPLBACKEND": "Agg"}, timeout=900,
        )  # fmt: skip
        assert '"output_type"' in path.read_text(encoding="utf-8"), "the run should leave its outputs on disk"
        # What the lab does on opening: its kernel's spec copied into the notebook, then the (auto)save.
        model = lab.get(f"api/contents/{relative}?type=notebook&content=1")
        stored = model["content"]["metadata"]["kernelspec"]
        spec = lab.get("api/kernelspecs")["kernelspecs"][stored["name"]]["spec"]
        assert (stored["display_name"], stored["language"]) == (spec["display_name"], spec["language"]), (
            f"{relative} names kernel {stored}, the lab's is {spec['display_name']!r}: opening it rewrites the file"
        )
        model["content"]["metadata"]["kernelspec"] = {
            "name": stored["name"],
            "display_name": spec["display_name"],
            "language": spec["language"],
        }
        _put(lab, f"api/contents/{relative}", {"type": "notebook", "format": "json", "content": model["content"]})
    assert '"output_type"' in path.read_text(encoding="utf-8"), "the learner keeps the outputs on disk"
    status = lc.git(clone, "status", "--porcelain", "--untracked-files=all")
    assert status == "", f"running and saving {chapter} left the checkout dirty:\n{status}"
    assert lc.git(clone, "diff") == "", "git diff should show nothing after a run"

    # A later version of the chapter upstream: `git pull` updates it (the run's outputs go with the old version).
    source = upstream / relative
    changed = nbtools.load_json(source)
    changed["cells"].insert(1, {"cell_type": "markdown", "metadata": {}, "id": "pulled", "source": ["New text."]})
    _save_clean(changed, source)
    lc.git(upstream, "commit", "-q", "-am", "a new version of chapter 02")
    lc.git(clone, "pull", "-q", "--ff-only", env=env)
    assert '"id": "pulled"' in path.read_text(encoding="utf-8"), "git pull did not bring the new chapter"


def test_make_lab_opens_a_clean_workspace(checkout):
    """Notebooks left open in one `make lab` are not reopened (with a kernel each) by the next."""
    clone, env, work = checkout["clone"], checkout["env"], checkout["work"]
    opened = "notebook:notebooks/02_self_attention.ipynb"
    with lc.Lab(clone, env, work / "lab-workspace-1.log") as lab:
        assert lab.get("api/kernels") == [], "a fresh lab should run no kernel"
        _put(
            lab,
            "lab/api/workspaces/default",
            {"data": {opened: {"data": {"path": opened.split(":", 1)[1], "factory": "Notebook"}}},
             "metadata": {"id": "default"}},
        )  # fmt: skip
        assert opened in lab.get("lab/api/workspaces/default")["data"], "the workspace was not saved"
    with lc.Lab(clone, env, work / "lab-workspace-2.log") as lab:
        data = lab.get("lab/api/workspaces/default")["data"]
        assert opened not in data, f"`make lab` reopened the last run's notebooks: {sorted(data)}"
        assert lab.get("api/kernels") == [], "a fresh lab should run no kernel"


def test_git_status_stays_clean(checkout):
    status = lc.git(checkout["clone"], "status", "--porcelain", "--untracked-files=all")
    assert status == "", f"the learner's path left the working tree dirty:\n{status}"


_SEEN_FROM = """
import json, os, sys
from nbgrader.apps import NbGrader
seen = {}
for folder in sys.argv[1:]:
    os.chdir(folder)
    app = NbGrader()
    app.load_config_file()
    c = app.config
    seen[folder] = {"assignment_dir": c.Exchange.get("assignment_dir"), "root": c.Exchange.get("root"),
                    "course_id": c.CourseDirectory.get("course_id")}
print(json.dumps(seen))
"""


def test_learner_settings_leave_a_folder_with_its_own_nbgrader_config_alone(tmp_path):
    """Another course's folder (or an instructor's) keeps its own settings; any other folder gets the learner's."""
    from course_tools import learner_setup

    checkout_root, config_dir, plain, other = (tmp_path / name for name in ("course", "config", "plain", "other"))
    for folder in (checkout_root, config_dir, plain, other):
        folder.mkdir()
    (config_dir / "nbgrader_config.py").write_text(learner_setup.nbgrader_config_text(checkout_root))
    (other / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.course_id = 'other'\n")
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(config_dir), "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter")}
    env.pop("COURSE_EXCHANGE", None)
    out = subprocess.run(
        [sys.executable, "-c", _SEEN_FROM, str(plain), str(other)], env=env, capture_output=True, text=True, check=True
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen[str(plain)] == {
        "assignment_dir": str(checkout_root.resolve() / "exercises"),
        "root": str(checkout_root.resolve() / "exchange"),
        "course_id": COURSE_ID,
    }, seen
    assert seen[str(other)] == {"assignment_dir": None, "root": None, "course_id": "other"}, seen


def test_one_broken_exercise_source_does_not_keep_the_others_from_the_learner(tmp_path, capsys):
    import nbformat

    from course_tools import learner_setup

    def source(name: str, code: str) -> None:
        folder = tmp_path / "solutions" / name
        folder.mkdir(parents=True)
        made = nbformat.v4.new_notebook()
        made.cells = [nbformat.v4.new_markdown_cell(f"# {name}"), nbformat.v4.new_code_cell(code)]
        made.cells[1].metadata["nbgrader"] = {
            "grade": False,
            "solution": True,
            "locked": False,
            "grade_id": "answer",
            "schema_version": 3,
        }
        nbformat.write(made, folder / f"{name}.ipynb")

    source("exa_fine", "### BEGIN SOLUTION\nanswer = 42\n### END SOLUTION")
    source("exb_broken", "### BEGIN SOLUTION\nanswer = 42")  # the end marker is missing
    status = learner_setup.setup(tmp_path)
    printed = capsys.readouterr().out
    assert status == 1, "a source that cannot be generated must make `course setup` fail"
    assert "exb_broken" in printed and "could not be generated from solutions/exb_broken" in printed, printed
    fine = tmp_path / "exercises" / "exa_fine" / "exa_fine.ipynb"
    assert fine.is_file() and "answer = 42" not in fine.read_text(), "the good exercise is released without its answer"
    assert not (tmp_path / "exercises" / "exb_broken").exists()
