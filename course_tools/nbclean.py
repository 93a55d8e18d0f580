"""Strip outputs and execution counts from notebooks, so that they are stored clean.

    python -m course_tools.nbclean notebooks/*.ipynb solutions/*/*.ipynb
    python -m course_tools.nbclean --check notebooks   # exit 1 and name the files that are not clean
    python -m course_tools.nbclean --filter < run.ipynb  # the clean notebook on stdout (git's clean filter)

Cleaning is nbconvert's own: its ``ClearOutputPreprocessor`` (outputs, execution counts, the
``collapsed``/``scrolled`` view state) and ``ClearMetadataPreprocessor`` (execution timings, widget
state and any other metadata a run or an editor leaves), keeping the metadata the course needs:
nbgrader's cell metadata (which cells are graded, their points and ids), the kernel and language, and
the course's own grading settings. Of ``language_info`` only the language's name is kept: the rest
(the Python version, the mimetype, the lexer) is what the kernel reports on each start, which JupyterLab
and nbclient write into the notebook whenever it is opened or run.

``--filter`` makes this module the repository's git clean filter (``course setup`` sets it up, the
tracked ``.gitattributes`` names the notebooks it applies to): git stores and compares the chapters as
they are cleaned, so running or opening a chapter leaves ``git status`` clean and ``git pull`` free to
update it. Whatever cannot be read as a notebook passes through unchanged.
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
    language = nb.metadata.get("language_info")
    if isinstance(language, dict) and set(language) - {"name"} and "name" in language:
        nb.metadata["language_info"] = {"name": language["name"]}
    return nb


def clean_text(text: str) -> str:
    """The clean form of a notebook's file contents, as ``nbformat.write`` stores it."""
    return nbformat.writes(clean(nbformat.reads(text, as_version=4))) + "\n"


def git_filter(source=None, target=None) -> int:
    """git's clean filter: a notebook on stdin, its clean form on stdout; anything else unchanged."""
    source = source or sys.stdin.buffer
    target = target or sys.stdout.buffer
    data = source.read()
    try:
        cleaned = clean_text(data.decode("utf-8")).encode("utf-8")
    except Exception:  # not JSON, not a notebook, not UTF-8: git stores it as it is
        cleaned = data
    target.write(cleaned)
    target.flush()
    return 0


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
    """The notebooks among ``paths`` (files or folders) that are not stored clean, byte for byte as
    ``clean_text`` writes them (the git filter's output: a file stored otherwise shows as changed)."""
    dirty = []
    for path in _expand(paths):
        text = path.read_text(encoding="utf-8")
        if not is_clean(nbformat.reads(text, as_version=4)) or clean_text(text) != text:
            dirty.append(path)
    return dirty


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--check", action="store_true", help="only report notebooks that are not clean")
    parser.add_argument("--filter", action="store_true", help="clean stdin to stdout (git's clean filter)")
    args = parser.parse_args(argv)
    if args.filter:
        return git_filter()
    if not args.paths:
        parser.error("name the notebooks or folders to clean (or --filter)")
    dirty = dirty_notebooks(args.paths)
    if args.check:
        if dirty:
            print("not clean (run `python -m course_tools.nbclean` on them):", *map(str, dirty), sep="\n  ")
            return 1
        return 0
    for path in dirty:
        nbformat.write(clean(nbformat.read(path, as_version=4)), path)
        print(f"cleaned {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
