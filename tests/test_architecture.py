"""The house's import rules hold: the contracts in pyproject.toml ([tool.importlinter], checked by import-linter
with indirect imports), and the kernel guard's own rule, which import-linter cannot state: standard library only.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter brings tomli there, the same parser
    import tomli as tomllib

REPOSITORY = Path(__file__).resolve().parents[1]
GRADER = REPOSITORY / "course_grader"
# What the kernel guard loads by path into every learner's kernel, before any learner code
# (kernel_guard._part): these files may import the standard library and nothing else, not even each other.
GUARD_FILES = ("guard/kernel_guard.py", "guard/references.py", "guard/output.py", "ground/messages.py")


def test_import_contracts_hold():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    # --config: 2.10 needs it (2.17 takes the file alone and warns that --config is deprecated).
    result = subprocess.run(
        [str(lint_imports), "--config", "pyproject.toml", "--no-cache"],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"an import rule of pyproject.toml is broken:\n{result.stdout}\n{result.stderr}"
    assert "0 broken" in result.stdout, result.stdout


def test_every_package_of_the_distribution_is_under_the_contracts():
    """A new package of the distribution must be one of import-linter's root packages, or no rule would watch it;
    inside the grader, the layers contract is exhaustive (import-linter fails on a sub-package it does not list)."""
    configuration = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    roots = set(configuration["importlinter"]["root_packages"])
    distributed = {pattern.removesuffix("*") for pattern in configuration["setuptools"]["packages"]["find"]["include"]}
    on_disk = {path.parent.name for path in REPOSITORY.glob("*/__init__.py")}
    assert roots == distributed == on_disk, (
        f"import-linter's root packages {sorted(roots)}, the distribution's {sorted(distributed)} and the packages "
        f"of the checkout {sorted(on_disk)} must be the same"
    )
    layers = next(c for c in configuration["importlinter"]["contracts"] if c["type"] == "layers")
    assert layers["exhaustive"] is True and layers["containers"] == ["course_grader"]


def outside_the_standard_library(path: Path) -> list[str]:
    """ "line: module" for every import of a file (those inside functions included) that is not of the
    standard library; a relative import counts as outside (its dots and name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, "." * node.level + (node.module or "")))
    return [
        f"{line}: {module}"
        for line, module in sorted(found)
        if module.startswith(".") or module.split(".")[0] not in sys.stdlib_module_names
    ]


def test_the_kernel_guard_uses_the_standard_library_only():
    outside = {name: found for name in GUARD_FILES if (found := outside_the_standard_library(GRADER / name))}
    assert not outside, (
        "the kernel guard is loaded by path into learners' kernels before any learner code and may import the "
        f"standard library only (anything else is the learner's to replace first): {outside}"
    )


def test_the_guard_rule_finds_imports_from_outside_the_standard_library(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\n\ndef later():\n    import numpy.random\n    from . import judge\n", encoding="utf-8")
    assert outside_the_standard_library(sample) == ["4: numpy.random", "5: ."]
