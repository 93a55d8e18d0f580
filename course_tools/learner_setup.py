"""The learner's side of the course: their own exercises, the exchange, nbgrader's settings, the lab.

A self-learner needs no instructor. `course setup` (run by `make setup`, and so by `make lab`) does
what an instructor and a learner would do, through nbgrader (`course_grader.exchange.pipeline`):

    solutions/<id>/                        the sources (answers and hidden tests inside)
      -> build/learner/course/release/<id>/  release notebooks (generate_assignment), only when a source changed
      -> exchange/<course>/outbound/<id>/    this checkout's own exchange (release_assignment)
      -> exercises/<id>/<id>.ipynb           the learner's copy (fetch_assignment), where the chapters link

A copy in exercises/ is the learner's work: nothing here writes over a file in it. A copy that exists
is kept as it is (a file missing from it is put back); a newer release is announced, not installed.
exercises/, exchange/ and build/ are git-ignored, so `git pull` never touches them either.

In a class, COURSE_EXCHANGE names the instructor's exchange (e.g. /srv/nbgrader/exchange): nothing is
generated or published here, and the learner fetches what the instructor released into the same
exercises/ folder (Assignment List, or `nbgrader fetch_assignment <id>`).

nbgrader reads the learner's settings (course id, exchange, exercises/ as the folder for fetched
assignments) from `nbgrader_config_text`, written to build/learner/jupyter/ (on JUPYTER_CONFIG_PATH
in `course lab`, its terminals and kernels) and, when the Python environment is this checkout's own
.venv, to .venv/etc/jupyter/, which every `nbgrader` of that environment reads from any folder.

The chapters are tracked by git and run where they are. So that running or opening one leaves the
checkout clean (and `git pull` free to update it), `course setup` makes `course_tools.nbclean` git's
clean filter for the notebooks that `.gitattributes` names: git compares and stores them without
outputs or run metadata, while the learner keeps their outputs on disk. A learner copy of every
chapter, the way exercises have one, would go stale at the first `git pull` that fixes a chapter.
The learner's lab opens on START.md with a fresh workspace (no notebook of an earlier run reopened,
so no kernel started for it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from course_grader.ground.layout import DEFAULT_COURSE_ID, EXCHANGE_ENV, CourseLayout

from . import contents

COURSE_ID = DEFAULT_COURSE_ID
START_PAGE = "START.md"
# What the learner's file browser does not list (jupyter_server's own defaults first). The files stay
# where they are: an instructor who runs a class keeps this checkout to themselves.
HIDDEN_FROM_LEARNERS = [
    "__pycache__",
    "*.pyc",
    "*.pyo",
    ".DS_Store",
    "*.so",
    "*.dylib",
    "*~",
    "solutions",
    "release",
    "submitted",
    "autograded",
    "feedback",
    "source",
    "exchange",
    "build",
    "gradebook.db",
    "gradebook.db-journal",
    "nbgrader_config.py",
    "*.egg-info",
]
# nbgrader's instructor tools: the formgrader lists solutions/ and links its notebooks.
INSTRUCTOR_PLUGINS = [
    "@jupyter/nbgrader:formgrader",
    "@jupyter/nbgrader:course-list",
    "@jupyter/nbgrader:create-assignment",
]
INSTRUCTOR_SERVER_EXTENSIONS = ["nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list"]
# Next to the formgrader: its Autograde button runs `course grade` (confined), not a plain nbgrader autograde.
COURSE_GRADE_BUTTON = "course_grader.exchange.server_extension"
VALIDATE_BUTTON = "course_grader.exchange.validate_extension"  # Validate names syntax errors and missing tests
# The first line of every file `course setup` writes: a file that starts otherwise is the learner's own and is left
# alone. Recognised by its start alone, so that a file written before this module moved (it named
# course_utils/learner.py) is still the course's to rewrite.
_MARK = "# Written by `course setup`"
_WRITTEN_BY = f"{_MARK} (course_tools/learner_setup.py)"
# git's clean filter for the notebooks that .gitattributes names (`filter=nbclean`).
GIT_FILTER = "nbclean"
# The lab's post-save hook: a chapter saved with outputs is recorded by git as unchanged.
AFTER_SAVE = "course_tools.learner_setup.after_save"


@dataclass(frozen=True)
class Paths:
    root: Path
    exercises: Path  # the learner's copies
    local_exchange: Path  # a self-learner's exchange
    build: Path  # build/learner: release notebooks, gradebook, records
    jupyter: Path  # build/learner/jupyter: the learner's Jupyter configuration folder
    start_page: Path

    @classmethod
    def of(cls, root: str | os.PathLike) -> "Paths":
        root = Path(root).resolve()
        build = root / "build" / "learner"
        return cls(root, root / contents.EXERCISES_DIR, root / "exchange", build, build / "jupyter", root / START_PAGE)

    @property
    def workspaces(self) -> Path:
        """JupyterLab's workspaces (open tabs, layout) for the learner's lab: emptied by every `course lab`."""
        return self.build / "workspaces"


@dataclass
class ExerciseState:
    id: str
    notebook: Path
    status: str  # "fetched" (new copy), "kept" (the learner's copy), "restored", "not fetched", "error"
    newer_release: bool = False
    note: str = ""


def class_exchange() -> Path | None:
    """The instructor's exchange when the learner is in a class (COURSE_EXCHANGE), else None."""
    value = os.environ.get(EXCHANGE_ENV, "").strip()
    return Path(value).expanduser().resolve() if value else None


def nbgrader_config_text(root: str | os.PathLike) -> str:
    """The learner's nbgrader_config.py for the checkout at `root`."""
    paths = Paths.of(root)
    return f"""{_WRITTEN_BY}: nbgrader's settings for a learner of the course
# in {paths.root}. Regenerated by every `course setup`; delete it to undo.
#
# They apply wherever nbgrader runs, except in a folder with its own nbgrader_config.py (an
# instructor's course directory, another course): that folder's settings are left alone.
import os

c = get_config()  # noqa: F821  (injected by traitlets)
_checkout = {str(paths.root)!r}
try:
    _in_checkout_root = os.path.samefile(os.getcwd(), _checkout)
except OSError:
    _in_checkout_root = False
if _in_checkout_root or not os.path.isfile("nbgrader_config.py"):
    c.CourseDirectory.course_id = {COURSE_ID!r}
    # A class uses the instructor's exchange ({EXCHANGE_ENV}); a self-learner this checkout's own.
    c.Exchange.root = os.environ.get({EXCHANGE_ENV!r}) or {str(paths.local_exchange)!r}
    # Fetched exercises go where the chapters link them: exercises/<id>/<id>.ipynb.
    c.Exchange.assignment_dir = {str(paths.exercises)!r}
"""


def environment_belongs_to(root: str | os.PathLike) -> bool:
    """True when the running Python environment is a virtual environment inside the checkout (.venv)."""
    prefix = Path(sys.prefix).resolve()
    return sys.prefix != sys.base_prefix and Path(root).resolve() in prefix.parents


def write_nbgrader_config(root: str | os.PathLike) -> list[Path]:
    """Write the learner's nbgrader settings; returns the files written."""
    paths, text, written = Paths.of(root), nbgrader_config_text(root), []
    targets = [paths.jupyter / "nbgrader_config.py"]
    if environment_belongs_to(paths.root):
        targets.append(Path(sys.prefix) / "etc" / "jupyter" / "nbgrader_config.py")
    for target in targets:
        if target.exists() and not target.read_text(encoding="utf-8").startswith(_MARK):
            print(f"course setup: {target} was not written by the course; left as it is")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def git_filter_command() -> str:
    """The clean filter's command line: this environment's Python running course_tools.nbclean.

    git runs it in the checkout's top folder, so `-m` finds the checkout's own course_utils.
    """
    return f"{shlex.quote(sys.executable)} -m course_tools.nbclean --filter"


def configure_git_filter(root: str | os.PathLike) -> str | None:
    """Make course_tools.nbclean git's clean filter in the checkout at `root` (its .git/config).

    Returns what changed ("set" or "updated"), "" when it was already so, None when `root` is not the
    top of a git checkout or git is missing (nothing to do: the notebooks are then not tracked).
    """
    root = Path(root).resolve()
    if not (root / ".git").exists() or shutil.which("git") is None:
        return None

    def git(*arguments: str) -> subprocess.CompletedProcess:
        return _git(root, *arguments)

    top = git("rev-parse", "--show-toplevel")
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root:
        return None
    key, command = f"filter.{GIT_FILTER}.clean", git_filter_command()
    before = git("config", "--local", "--get", key)
    if before.returncode == 0 and before.stdout.strip() == command:
        return ""
    if git("config", "--local", key, command).returncode != 0:
        return None
    return "updated" if before.returncode == 0 else "set"


def _git(root: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *arguments], capture_output=True, text=True)


def refresh_git_index(root: str | os.PathLike, paths: list[str | os.PathLike] | None = None) -> list[str]:
    """Record as unchanged the notebooks whose clean form is what git stores; returns their paths.

    `git status` compares sizes before it runs a clean filter: a chapter saved with its outputs is larger
    than when git last looked at it, so git calls it modified (and `git pull` refuses to update it) while
    `git diff`, which does run the filter, shows nothing. For such a notebook `git add` stores nothing new
    and records the file's new size and time. A notebook whose clean form differs (the learner changed a
    cell) is left as it is: that is a real change. `paths`: the files to look at (default: every one git
    sees as changed). Called by `course setup` and after every save in the lab (`after_save`).
    """
    root = Path(root).resolve()
    if shutil.which("git") is None or _git(root, "config", "--get", f"filter.{GIT_FILTER}.clean").returncode != 0:
        return []
    named = [str(Path(path).resolve().relative_to(root)) for path in paths] if paths else []
    listed = _git(root, "ls-files", "-m", "-z", "--", *named)
    candidates = []
    for path in filter(None, listed.stdout.split("\0")):
        attribute = _git(root, "check-attr", "filter", "--", path).stdout.strip()
        if path.endswith(".ipynb") and attribute.endswith(f": {GIT_FILTER}"):
            candidates.append(path)
    if not candidates:
        return []
    cleaned = _git(root, "hash-object", "--", *candidates).stdout.split()  # through the clean filter
    stored = {}
    for line in _git(root, "ls-files", "-s", "-z", "--", *candidates).stdout.split("\0"):
        if "\t" in line:
            info, path = line.split("\t", 1)
            stored[path] = info.split()[1]
    unchanged = [path for path, digest in zip(candidates, cleaned, strict=False) if stored.get(path) == digest]
    if unchanged and _git(root, "add", "--", *unchanged).returncode != 0:
        return []
    return unchanged


def after_save(os_path: str, model: dict, contents_manager) -> None:
    """The lab's post-save hook: a saved chapter that differs from git's copy only in outputs stays clean."""
    if str(os_path).endswith(".ipynb"):
        try:
            refresh_git_index(contents_manager.root_dir, [os_path])
        except (OSError, ValueError):  # outside the checkout, or git busy: nothing to do
            pass


def fresh_workspace(root: str | os.PathLike) -> Path:
    """Empty the learner's JupyterLab workspaces, so that the lab opens on START.md alone; returns the folder.

    JupyterLab reopens every notebook of the workspace it saved last time, and starts a kernel for each.
    """
    folder = Paths.of(root).workspaces
    if folder.is_dir():
        for saved in folder.glob("*.jupyterlab-workspace"):
            saved.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def release_layout(root: str | os.PathLike) -> CourseLayout:
    """The self-learner's own nbgrader course directory (build/learner/course), apart from an instructor's."""
    paths = Paths.of(root)
    return CourseLayout(
        root=paths.build / "course",
        course_id=COURSE_ID,
        source_dir=paths.root / contents.SOURCE_DIR,
        exchange_dir=paths.local_exchange,
        output_dir=paths.build,
    )


def _tree_digest(folder: Path) -> str | None:
    if not folder.is_dir():
        return None
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _load_record(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _restore_missing(release: Path, copy: Path) -> list[Path]:
    """Copy the files of `release` that `copy` lacks; never replaces a file that exists."""
    restored = []
    for source in sorted(release.rglob("*")):
        target = copy / source.relative_to(release)
        if source.is_dir() or target.exists() or ".ipynb_checkpoints" in source.parts:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        restored.append(target)
    return restored


def prepare_exercises(root: str | os.PathLike) -> list[ExerciseState]:
    """A self-learner's exercises: releases regenerated if stale, published locally, fetched if missing."""
    from course_grader.exchange import pipeline

    paths = Paths.of(root)
    if class_exchange() is not None:
        # Empty until the learner's first fetch: nbgrader's Assignment List changes into this folder to list
        # the assignments, and answers HTTP 500 where it is missing.
        paths.exercises.mkdir(parents=True, exist_ok=True)
        return [
            ExerciseState(
                a.id,
                a.learner_notebook(paths.root),
                "kept" if a.learner_notebook(paths.root).exists() else "not fetched",
            )
            for a in contents.exercises(paths.root)
        ]
    layout = release_layout(paths.root)
    assignments = layout.assignments()
    layout.root.mkdir(parents=True, exist_ok=True)
    stale = pipeline.stale_releases(layout, assignments)
    if stale:
        print(
            f"course setup: generating the release notebooks of {', '.join(stale)} (nbgrader generate_assignment)",
            flush=True,
        )
    states, broken = [], set()
    for assignment_id in stale:
        try:
            pipeline.generate_release(layout, [assignment_id])
        except pipeline.GradingError as error:  # one broken source does not keep the others from the learner
            broken.add(assignment_id)
            states.append(
                ExerciseState(
                    assignment_id,
                    paths.exercises / assignment_id / f"{assignment_id}.ipynb",
                    "error",
                    note=f"could not be generated from solutions/{assignment_id}: "
                    + str(error).strip().splitlines()[0],
                )
            )
    published_path, fetched_path = paths.build / "published.json", paths.build / "fetched.json"
    published, fetched = _load_record(published_path), _load_record(fetched_path)
    for assignment in assignments:
        if assignment.id in broken:
            continue
        release = layout.release_dir / assignment.id
        outbound = layout.exchange_dir / COURSE_ID / "outbound" / assignment.id
        release_digest, outbound_digest = _tree_digest(release), _tree_digest(outbound)
        if outbound_digest is None or (
            outbound_digest != release_digest and published.get(assignment.id) == outbound_digest
        ):
            pipeline.release_assignment(layout, assignment.id)
            published[assignment.id] = outbound_digest = _tree_digest(outbound)
        # else: outbound holds a release that `course setup` did not make (an instructor's): left alone.
        copy = paths.exercises / assignment.id
        notebook = copy / f"{assignment.id}.ipynb"
        if not copy.exists():
            pipeline.fetch_assignment(layout, assignment.id, paths.exercises)
            fetched[assignment.id] = outbound_digest
            states.append(ExerciseState(assignment.id, notebook, "fetched"))
            continue
        if not copy.is_dir():
            states.append(
                ExerciseState(
                    assignment.id,
                    notebook,
                    "kept",
                    note=f"{copy.relative_to(paths.root)} is not a folder: left as it is",
                )
            )
            continue
        restored = _restore_missing(outbound, copy)
        state = ExerciseState(assignment.id, notebook, "restored" if restored else "kept")
        if restored:
            state.note = "put back: " + ", ".join(str(p.relative_to(copy)) for p in restored)
        if fetched.get(assignment.id) not in (None, outbound_digest):
            state.newer_release = True
            state.note = (
                f"a newer release is in the exchange; your copy is kept. To start again from it, move "
                f"{copy.relative_to(paths.root)} aside and run `make setup`"
            )
        states.append(state)
    paths.build.mkdir(parents=True, exist_ok=True)
    published_path.write_text(json.dumps(published, indent=1), encoding="utf-8")
    fetched_path.write_text(json.dumps(fetched, indent=1), encoding="utf-8")
    return states


def write_start_page(root: str | os.PathLike, states: list[ExerciseState] | None = None) -> Path:
    """START.md: the chapters in order and the learner's own exercises, with how to check them."""
    paths = Paths.of(root)
    by_id = {state.id: state for state in states or []}
    exchange = class_exchange()
    lines = [
        "# Transformers from the Ground Up: start here",
        "",
        f"<!-- {_WRITTEN_BY[2:]} on every `make lab`; edits here are lost. -->",
        "",
        "Work through the chapters in order; each one ends with the exercise that belongs to it.",
        "",
        "## The chapters",
        "",
    ]
    for chapter in contents.chapters(paths.root):
        lines.append(f"1. [{chapter.title}]({contents.CHAPTER_DIR}/{chapter.name}.ipynb)")
    lines += ["", "## Your exercises", ""]
    if exchange is None:
        lines += [
            "Your own copies, in `exercises/`. They are yours: `make lab`, `make setup`, `make release` and "
            "`git pull` never write over them.",
            "",
        ]
    else:
        lines += [
            f"Your class's exercises come from your instructor's exchange (`{exchange}`): fetch each one "
            "in *Nbgrader → Assignment List* once it is released; it lands in `exercises/`.",
            "",
        ]
    lines += ["| exercise | chapters | your notebook |", "|---|---|---|"]
    for exercise in contents.exercises(paths.root):
        chapter_links = ", ".join(f"[{name[:2]}]({contents.CHAPTER_DIR}/{name}.ipynb)" for name in exercise.chapters)
        notebook = exercise.learner_notebook(paths.root)
        relative = notebook.relative_to(paths.root).as_posix()
        state = by_id.get(exercise.id)
        if notebook.exists():
            cell = f"[{relative}]({relative})"
            if state is not None and state.newer_release:
                cell += " (a newer release exists; yours is kept)"
        else:
            cell = "not fetched yet (*Nbgrader → Assignment List → Fetch*)"
        lines.append(f"| {exercise.title} | {chapter_links} | {cell} |")
    lines += [
        "",
        "Check your work: in the exercise, *Kernel → Restart Kernel and Run All Cells*, then **Validate** "
        "(*Nbgrader → Assignment List*, or the Validate button in the notebook's toolbar), or in a terminal",
        "`nbgrader validate exercises/ex1_manual_attention/ex1_manual_attention.ipynb`. Validate runs the visible "
        "tests. For the full verdict (the hidden tests too, as in a class: your points per test and what failed), "
        "run `course check ex1_manual_attention` in a terminal (in the lab: *File → New → Terminal*); it also writes "
        "the feedback page, which you can open in the lab (*Trust HTML* typesets its formulas).",
        "",
        "More: `README.md` (how the course works, for self-learners and for classes).",
        "",
    ]
    paths.start_page.write_text("\n".join(lines), encoding="utf-8")
    return paths.start_page


def lab_config_dir(root: str | os.PathLike, instructor: bool = False) -> Path:
    """A Jupyter configuration folder for `course lab` (put on JUPYTER_CONFIG_PATH); returns it.

    Both: no news or update pop-ups (they would ask the network). The learner's lab also opens on
    START.md (in Markdown preview), lists none of the instructor's files, and has no formgrader.
    """
    paths = Paths.of(root)
    folder = paths.jupyter if not instructor else paths.build.parent / "instructor" / "jupyter"
    overrides = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}
    page_config: dict = {}
    server: dict = {
        "ServerApp": {"jpserver_extensions": {COURSE_GRADE_BUTTON: True}},
        "ContentsManager": {"post_save_hook": AFTER_SAVE},
    }
    if not instructor:
        overrides["@jupyterlab/docmanager-extension:plugin"] = {"defaultViewers": {"markdown": "Markdown Preview"}}
        page_config = {"disabledExtensions": {name: True for name in INSTRUCTOR_PLUGINS}}
        server = {
            "ContentsManager": {"hide_globs": HIDDEN_FROM_LEARNERS, "post_save_hook": AFTER_SAVE},
            "ServerApp": {
                "jpserver_extensions": {
                    **{name: False for name in INSTRUCTOR_SERVER_EXTENSIONS},
                    VALIDATE_BUTTON: True,
                }
            },
            # JupyterLab's own default_url ("/lab") would win over ServerApp's. Its workspaces live in the
            # checkout's build/, emptied by every `course lab` (fresh_workspace), not in ~/.jupyter.
            "LabApp": {"default_url": f"/lab/tree/{START_PAGE}", "workspaces_dir": str(paths.workspaces)},
        }
    files = {
        folder / "labconfig" / "default_setting_overrides.json": overrides,
        folder / "labconfig" / "page_config.json": page_config,
        folder / "jupyter_server_config.json": server,
    }
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return folder


def setup(root: str | os.PathLike, quiet: bool = False) -> int:
    """`course setup`: the learner's exercises and settings; prints what it did (`quiet`: only changes)."""
    paths = Paths.of(root)
    states = prepare_exercises(paths.root)
    written = write_nbgrader_config(paths.root)
    start = write_start_page(paths.root, states)
    filtered = configure_git_filter(paths.root)
    refreshed = refresh_git_index(paths.root)
    exchange = class_exchange()
    whose = f"your instructor's, from {EXCHANGE_ENV}" if exchange else "this checkout's own"
    print(f"course setup: exchange {exchange or paths.local_exchange} ({whose})")
    for state in states:
        if quiet and state.status == "kept" and not state.note:
            continue
        where = state.notebook.relative_to(paths.root)
        print(f"  {state.id:26s} {state.status:12s} {where}" + (f"  ({state.note})" if state.note else ""))
    for path in written:
        print(f"course setup: nbgrader's learner settings in {path}")
    if not environment_belongs_to(paths.root):
        print(
            f"course setup: this Python environment is not inside {paths.root}, so `nbgrader` outside `course lab` "
            f"reads these settings only with JUPYTER_CONFIG_PATH={paths.jupyter}"
        )
    print(f"course setup: start page {start}")
    if filtered or (filtered == "" and not quiet):
        print(
            f"course setup: git compares and stores the chapters without outputs (clean filter {GIT_FILTER!r}: "
            "course_tools/nbclean.py, named in .gitattributes); running them leaves `git status` clean"
        )
    if refreshed:
        print(
            f"course setup: {len(refreshed)} notebook(s) differ from git's copy only in outputs: recorded as unchanged"
        )
    errors = [state for state in states if state.status == "error"]
    if errors:
        print(
            f"course setup: {len(errors)} exercise(s) could not be set up: {', '.join(s.id for s in errors)} "
            "(the messages are above)"
        )
        return 1
    return 0
