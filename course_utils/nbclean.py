"""Strip outputs and execution counts from notebooks, so that they are stored clean.

    python -m course_utils.nbclean notebooks/*.ipynb solutions/*/*.ipynb
    python -m course_utils.nbclean --check notebooks   # exit 1 and name the files that are not clean
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat


def is_clean(nb: nbformat.NotebookNode) -> bool:
    return all(not (c.get("outputs") or c.get("execution_count")) for c in nb.cells if c.cell_type == "code")


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    return nb


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--check", action="store_true", help="only report notebooks that are not clean")
    args = parser.parse_args(argv)
    dirty = []
    for path in _expand(args.paths):
        nb = nbformat.read(path, as_version=4)
        if is_clean(nb):
            continue
        dirty.append(path)
        if not args.check:
            nbformat.write(clean(nb), path)
            print(f"cleaned {path}")
    if args.check and dirty:
        print("not clean (run `python -m course_utils.nbclean` on them):", *map(str, dirty), sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
