"""The examples in the library's docstrings run and show what they say (`>>>` lines are doctests)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import course_utils


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(course_utils.__path__, prefix="course_utils."):
        spec = importlib.util.find_spec(info.name)
        origin = spec.origin if spec else None
        if origin and origin.endswith(".py") and ">>> " in open(origin, encoding="utf-8").read():
            names.append(info.name)
    return names


MODULES = _modules_with_examples()


def test_the_library_has_docstring_examples():
    assert len(MODULES) >= 4, f"expected docstring examples in several modules, found {MODULES}"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0, f"{name}: no example was run"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples failed (see above)"
