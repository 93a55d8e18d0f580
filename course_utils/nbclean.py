"""Strip outputs and execution counts from notebooks, so that they are stored clean.

    python -m course_utils.nbclean notebooks/*.ipynb solutions/*/*.ipynb
    python -m course_utils.nbclean --check notebooks   # exit 1 and name the files that are not clean

Cleaning is nbconvert's own: its ``ClearOutputPreprocessor`` (outputs, execution counts, the
``collapsed``/``scrolled`` view state) and ``ClearMetadataPreprocessor`` (execution timings, widget
state and any other metadata a run or an editor leaves), keeping the metadata the course needs:
nbgrader's cell metadata (which cells are graded, their points and ids), the kernel and language, and
the course's own grading settings.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import nbformat
from nbconvert.preprocessors import ClearMetadataPreprocessor, ClearOutputPreprocessor

# Metadata that is part of the course, not of a run: nbgrader's per-cell records (grade, points, ids,
# locks) and the cell's tags and lock flags, the notebook's kernel and language, the grader's settings.
KEPT_CELL_METADATA = {"nbgrader", "tags", "editable", "deletable"}
KEPT_NOTEBOOK_METADATA = {"kernelspec", "language_info", "course_grading"}


def _preprocessors() -> list:
    return [
        ClearOutputPreprocessor(),
        ClearMetadataPreprocessor(
            preserve_cell_metadata_mask=KEPT_CELL_METADATA, preserve_nb_metadata_mask=KEPT_NOTEBOOK_METADATA
        ),
    ]


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook without outputs, execution counts and run metadata (changed in place and returned)."""
    for preprocessor in _preprocessors():
        nb, _ = preprocessor.preprocess(nb, {})
    return nb


def is_clean(nb: nbformat.NotebookNode) -> bool:
    """True when cleaning would change nothing."""
    return clean(copy.deepcopy(nb)) == nb


def _expand(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(p for p in sorted(path.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts)
        elif path.exists():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such notebook or folder: {path}")
    return files


def dirty_notebooks(paths: list[str]) -> list[Path]:
    """The notebooks among ``paths`` (files or folders) that are not stored clean."""
    return [path for path in _expand(paths) if not is_clean(nbformat.read(path, as_version=4))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--check", action="store_true", help="only report notebooks that are not clean")
    args = parser.parse_args(argv)
    dirty = dirty_notebooks(args.paths)
    if args.check:
        if dirty:
            print("not clean (run `python -m course_utils.nbclean` on them):", *map(str, dirty), sep="\n  ")
            return 1
        return 0
    for path in dirty:
        nbformat.write(clean(nbformat.read(path, as_version=4)), path)
        print(f"cleaned {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
