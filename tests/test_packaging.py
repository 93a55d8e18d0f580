"""The install paths agree: pyproject.toml and environment.yml list the same packages."""
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
# conda-forge names that differ from PyPI names
CONDA_TO_PYPI = {"pytorch": "torch"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower()


def test_environment_yml_lists_the_same_packages_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pypi = {_name(r) for r in project["dependencies"]} | {_name(r) for r in project["optional-dependencies"]["test"]}
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
    assert "==" not in torch_req, "learners get a range; only CI pins the CPU build"
    assert "torch==" in (ROOT / ".ci" / "run").read_text(), "CI must pin the CPU torch build"


def test_ci_calls_make_test():
    assert re.search(r"^make test", (ROOT / ".ci" / "run").read_text(), re.M)


def test_course_command_lists_every_make_target():
    out = subprocess.run([sys.executable, "-m", "course_utils.cli", "--help"], capture_output=True, text=True,
                         check=True).stdout
    makefile = (ROOT / "Makefile").read_text()
    for target in ("lab", "test", "release", "grade", "bench", "html", "e2e", "clean"):
        assert target in out, f"`course {target}` missing"
        assert re.search(rf"^{target}:", makefile, re.M), f"make {target} missing"


def test_committed_notebooks_are_clean():
    tracked = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    dirty = []
    for path in tracked:
        nb = nbformat.read(ROOT / path, as_version=4)
        if any(c.cell_type == "code" and (c.get("outputs") or c.get("execution_count")) for c in nb.cells):
            dirty.append(path)
    assert not dirty, f"notebooks stored with outputs (run python -m course_utils.nbclean): {dirty}"
