"""Running a chapter leaves the checkout clean: course_tools.nbclean as git's clean filter, the lab's
post-save hook, the stored kernelspec, and a lab that opens on a fresh workspace.

The learner's path through `make setup` and `make lab` in a fresh clone: tests/test_learner_path.py.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_tools import learner_setup, nbclean

ROOT = Path(__file__).resolve().parents[1]
GIT_USER = ["-c", "user.name=Course Tests", "-c", "user.email=tests@course.invalid", "-c", "commit.gpgsign=false"]


def _git(repository: Path, *arguments: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the filter imports this checkout's course_utils
    done = subprocess.run(["git", *GIT_USER, *arguments], cwd=repository, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(arguments)}: {done.stderr}"
    return done.stdout


def _run_all(path: Path) -> None:
    """What Run All and a save leave in a chapter: outputs, counts, the kernel's language_info, timings."""
    nb = nbformat.read(path, as_version=4)
    for number, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = number + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 5000 + "\n")]
        cell.metadata["execution"] = {"iopub.status.busy": "2026-12-01T00:00:00Z"}
    nb.metadata["language_info"] = {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": "3.11.2",
    }
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nbformat.write(nb, path)


@pytest.fixture
def checkout(tmp_path):
    """A git repository with this course's .gitattributes and two of its chapters, the filter set up."""
    repository = tmp_path / "course"
    (repository / "notebooks").mkdir(parents=True)
    for name in ("02_self_attention.ipynb", "13_exercises_and_self_check.ipynb"):
        (repository / "notebooks" / name).write_bytes((ROOT / "notebooks" / name).read_bytes())
    (repository / ".gitattributes").write_bytes((ROOT / ".gitattributes").read_bytes())
    _git(repository, "init", "-q", "-b", "main")
    assert learner_setup.configure_git_filter(repository) == "set"
    assert learner_setup.configure_git_filter(repository) == "", "a second set-up changes nothing"
    _git(repository, "add", "-A")
    _git(repository, "commit", "-q", "-m", "the course")
    return repository


def test_a_run_chapter_is_clean_for_git_and_a_changed_one_is_not(checkout, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    chapter, other = (
        checkout / "notebooks" / "02_self_attention.ipynb",
        checkout / "notebooks" / "13_exercises_and_self_check.ipynb",
    )
    _run_all(chapter)
    _run_all(other)
    assert _git(checkout, "diff") == "", "git diff runs the clean filter: a run shows nothing"
    # git status compares sizes before it runs a filter: the run chapters look modified until recorded.
    assert learner_setup.refresh_git_index(checkout) == [
        "notebooks/02_self_attention.ipynb",
        "notebooks/13_exercises_and_self_check.ipynb",
    ]
    assert _git(checkout, "status", "--porcelain") == "", "after a run and refresh_git_index, git status is clean"
    assert '"output_type": "stream"' in chapter.read_text(encoding="utf-8"), "the learner keeps the outputs"

    # A real change to a cell stays a change: neither hidden by the filter nor recorded away.
    nb = nbformat.read(chapter, as_version=4)
    nb.cells[0].source += "\n\nMy own note."
    nbformat.write(nb, chapter)
    assert learner_setup.refresh_git_index(checkout) == []
    assert _git(checkout, "status", "--porcelain") == " M notebooks/02_self_attention.ipynb\n"
    assert "My own note." in _git(checkout, "diff")


def test_the_labs_save_hook_records_a_run_chapter_as_unchanged(checkout, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    chapter = checkout / "notebooks" / "02_self_attention.ipynb"
    _run_all(chapter)
    assert _git(checkout, "status", "--porcelain") == " M notebooks/02_self_attention.ipynb\n"

    class ContentsManager:
        root_dir = str(checkout)

    learner_setup.after_save(os_path=str(chapter), model={}, contents_manager=ContentsManager())
    assert _git(checkout, "status", "--porcelain") == ""


def test_a_checkout_set_up_before_the_tools_moved_is_brought_up_to_date(checkout, monkeypatch):
    """A checkout set up before the tools left course_utils names modules that are gone: git's clean filter
    (`-m course_utils.nbclean`) and the mark of `course setup`'s nbgrader settings (course_utils/learner.py).
    After a `git pull`, `make lab` (and `make setup`) runs `course setup`: it names the new modules, and the
    settings it wrote earlier are still its own to rewrite, not a learner's file left alone."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    key = "filter.nbclean.clean"
    _git(checkout, "config", "--local", key, f"{shlex.quote(sys.executable)} -m course_utils.nbclean --filter")
    paths = learner_setup.Paths.of(checkout)
    settings = paths.jupyter / "nbgrader_config.py"
    settings.parent.mkdir(parents=True)
    settings.write_text("# Written by `course setup` (course_utils/learner.py): nbgrader's settings for a learner\n")
    chapter = checkout / "notebooks" / "02_self_attention.ipynb"
    _run_all(chapter)
    before = subprocess.run(["git", "diff", "--stat"], cwd=checkout, capture_output=True, text=True)
    assert "course_utils.nbclean" in before.stderr, "the old filter fails: git shows the run's outputs as a change"

    assert learner_setup.configure_git_filter(checkout) == "updated"
    assert _git(checkout, "config", "--local", "--get", key).strip() == learner_setup.git_filter_command()
    assert "course_tools.nbclean" in learner_setup.git_filter_command()
    assert _git(checkout, "diff") == "", "with the filter's new name a run chapter shows nothing again"
    assert learner_setup.write_nbgrader_config(checkout) == [settings], "the earlier settings are rewritten"
    assert settings.read_text().startswith("# Written by `course setup` (course_tools/learner_setup.py)")


def test_the_filter_cleans_what_a_run_leaves_and_passes_anything_else_through():
    import io

    stored = (ROOT / "notebooks" / "02_self_attention.ipynb").read_text(encoding="utf-8")
    assert nbclean.clean_text(stored) == stored, "a stored chapter is its own clean form, byte for byte"
    ran = json.loads(stored)
    ran["metadata"]["language_info"] = {"name": "python", "version": "3.11.2", "mimetype": "text/x-python"}
    ran["cells"][1].setdefault("metadata", {})["scrolled"] = True
    assert nbclean.clean_text(json.dumps(ran)) == stored
    for data in (b"not a notebook", b"\xff\xfe", b'{"cells": 1}'):
        out = io.BytesIO()
        assert nbclean.git_filter(io.BytesIO(data), out) == 0 and out.getvalue() == data


def test_every_stored_notebook_names_the_kernel_the_lab_starts():
    """JupyterLab copies its kernel's display name into a notebook it opens (and autosaves it): a stored
    name that differs rewrites every chapter a learner only opens."""
    from jupyter_client.kernelspec import KernelSpecManager

    tracked = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    tracked = [path for path in tracked if path.startswith(("notebooks/", "solutions/"))]
    assert tracked
    wrong = {}
    for path in tracked:
        spec = json.loads((ROOT / path).read_text(encoding="utf-8"))["metadata"]["kernelspec"]
        kernel = KernelSpecManager().get_kernel_spec(spec["name"])
        if (spec.get("display_name"), spec.get("language")) != (kernel.display_name, kernel.language):
            wrong[path] = (spec.get("display_name"), kernel.display_name)
    assert not wrong, f"stored kernelspec (display name) vs the lab's kernel: {wrong}"


def test_make_lab_starts_on_an_empty_workspace_and_records_saves(tmp_path):
    folder = learner_setup.Paths.of(tmp_path).workspaces
    folder.mkdir(parents=True)
    (folder / "default-37a8.jupyterlab-workspace").write_text('{"data": {"notebook:x.ipynb": {}}}')
    assert learner_setup.fresh_workspace(tmp_path) == folder and not any(folder.iterdir())
    config = json.loads((learner_setup.lab_config_dir(tmp_path) / "jupyter_server_config.json").read_text())
    assert config["LabApp"]["workspaces_dir"] == str(folder)
    assert config["ContentsManager"]["post_save_hook"] == "course_tools.learner_setup.after_save"
