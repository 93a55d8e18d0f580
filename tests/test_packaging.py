"""The install paths agree: pyproject.toml and environment.yml list the same packages."""

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import tomllib

from course_tools import nbclean

ROOT = Path(__file__).resolve().parent.parent
# conda-forge names that differ from PyPI names
CONDA_TO_PYPI = {"pytorch": "torch"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower()


def test_environment_yml_lists_the_same_packages_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # A dependency for some platforms only (triton: Linux x86-64, where PyPI has it) comes to the conda route with
    # its marker through environment.yml's `pip: -e .`, not from conda-forge.
    everywhere = [r for r in project["dependencies"] if ";" not in r]
    pypi = {_name(r) for r in everywhere} | {_name(r) for r in project["optional-dependencies"]["test"]}
    conda = set()
    in_deps = False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if line.startswith("dependencies:"):
            in_deps = True
            continue
        m = re.match(r"^  - ([A-Za-z0-9_.\-]+)", line)
        if in_deps and m and m.group(1) not in ("python", "pip"):
            conda.add(CONDA_TO_PYPI.get(m.group(1).lower(), m.group(1).lower()))
    assert pypi == conda, f"only in pyproject: {sorted(pypi - conda)}; only in environment.yml: {sorted(conda - pypi)}"


def test_user_facing_torch_requirement_is_a_range():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_req = next(d for d in deps if _name(d) == "torch")
    assert "==" not in torch_req, "learners get a range"


def test_ci_runs_make_test_with_the_default_torch_and_with_the_cpu_wheel():
    ci = (ROOT / ".ci" / "run").read_text()
    # With pip's default torch, as the README says, in this checkout after removing any .venv ...
    assert re.search(r"^make test( 2>&1 \| tee .*)?$", ci, re.M), "CI must run make test with pip's default torch"
    assert re.search(r"^rm -rf \.venv$", ci, re.M), "the default-torch run starts from a fresh .venv"
    # ... and with the CPU wheel, in a fresh clone (so a fresh .venv of its own).
    assert re.search(r'^git clone --quiet "\$PWD" "\$second"$', ci, re.M), "the CPU-wheel run needs a fresh clone"
    for target in ("setup", "test"):
        assert re.search(rf'cd "\$second" && COURSE_TORCH="torch==[0-9.]+" make {target}\)', ci), (
            f"CI must also run make {target} with the CPU wheel, in the second clone"
        )


def test_course_command_lists_every_make_target():
    out = subprocess.run(
        [sys.executable, "-m", "course_tools.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    makefile = (ROOT / "Makefile").read_text()
    for target in ("lab", "test", "release", "grade", "bench", "html", "e2e", "clean"):
        assert target in out, f"`course {target}` missing"
        assert re.search(rf"^{target}:", makefile, re.M), f"make {target} missing"


def test_committed_notebooks_are_clean():
    tracked = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    dirty = nbclean.dirty_notebooks([str(ROOT / path) for path in tracked])
    assert not dirty, f"notebooks stored with outputs or run metadata (run python -m course_tools.nbclean): {dirty}"


def test_nbclean_removes_what_a_run_leaves_and_keeps_what_the_course_needs(tmp_path):
    cell = nbformat.v4.new_code_cell(
        "print(1)", execution_count=3, outputs=[nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    )
    cell.metadata.update(
        {
            "nbgrader": {"grade": True, "points": 2, "grade_id": "t1"},
            "execution": {"iopub.status.busy": "2026-12-01T00:00:00Z"},
            "scrolled": True,
        }
    )
    nb = nbformat.v4.new_notebook(
        cells=[cell], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}, "widgets": {}}
    )
    path = tmp_path / "run.ipynb"
    nbformat.write(nb, path)
    assert nbclean.main(["--check", str(path)]) == 1
    assert nbclean.main([str(path)]) == 0 and nbclean.main(["--check", str(path)]) == 0
    cleaned = nbformat.read(path, as_version=4)
    kept = cleaned.cells[0]
    assert kept.outputs == [] and kept.execution_count is None
    assert kept.metadata == {"nbgrader": {"grade": True, "points": 2, "grade_id": "t1"}}
    assert cleaned.metadata == {"kernelspec": {"name": "python3", "display_name": "Python 3"}}


def test_course_test_runs_side_by_side_only_the_notebooks_that_pin_one_thread(tmp_path):
    from course_tools import cli

    def notebook(code: str) -> Path:
        path = tmp_path / f"nb{len(list(tmp_path.iterdir()))}.ipynb"
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), path)
        return path

    assert cli._pins_one_thread(notebook("device = env.setup(seed=0, threads=1)"))
    assert not cli._pins_one_thread(notebook("device = env.setup(seed=0)")), "every core: must run alone"
    assert not cli._pins_one_thread(notebook("env.setup(threads=12)")), "12 threads is not one"
    assert not cli._pins_one_thread(notebook("import torch")), "no env.setup: the kernel's default, every core"
    # The chapters that train or time on one thread say so themselves; the course has both kinds.
    chapters = sorted((ROOT / "notebooks").glob("*.ipynb"))
    pinned = {path.name for path in chapters if cli._pins_one_thread(path)}
    assert "01_rnn_to_transformer.ipynb" in pinned and "02_self_attention.ipynb" not in pinned, pinned
