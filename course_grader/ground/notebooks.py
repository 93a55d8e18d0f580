"""Reading nbgrader's marks in notebooks: cell roles, solution regions, hidden tests.

nbgrader stores a cell's role in `cell.metadata["nbgrader"]`:

    solution cell        {"solution": true,  "grade": false}  the learner writes here
    autograded test      {"solution": false, "grade": true, "locked": true, "points": p}
    manually graded      {"solution": true,  "grade": true, "points": p}  (usually markdown)
    read-only            {"locked": true}

Inside sources, `### BEGIN SOLUTION` / `### END SOLUTION` mark what the release replaces with a stub,
and `### BEGIN HIDDEN TESTS` / `### END HIDDEN TESTS` mark tests that only the grader runs.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def load_json(path: str | Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def save_json(notebook: dict, path: str | Path) -> None:
    Path(path).write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def source_text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def nbgrader_meta(cell: dict) -> dict | None:
    metadata = cell.get("metadata")
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else None


def grade_id(cell: dict) -> str | None:
    meta = nbgrader_meta(cell)
    value = meta.get("grade_id") if meta else None
    return value if isinstance(value, str) else None


def is_solution(cell: dict) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta and meta.get("solution"))


def is_grade(cell: dict) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta and meta.get("grade"))


def is_locked(cell: dict) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta and meta.get("locked"))


def is_autograded_test(cell: dict) -> bool:
    return cell.get("cell_type") == "code" and is_grade(cell) and not is_solution(cell)


def graded_cells(notebook: dict) -> dict[str, dict]:
    """grade_id -> cell for every cell nbgrader tracks (grade, solution, locked or task cells)."""
    return {grade_id(cell): cell for cell in notebook.get("cells", []) if grade_id(cell)}


def points(notebook: dict) -> dict[str, float]:
    """grade_id -> points of every graded cell."""
    return {
        grade_id(cell): float(nbgrader_meta(cell).get("points", 0))
        for cell in notebook.get("cells", [])
        if grade_id(cell) and is_grade(cell)
    }


def marked_regions(source: str, begin: str, end: str) -> list[tuple[int, int]]:
    """(first, last) line indices, markers included, of every begin/end region in `source`."""
    regions, start = [], None
    for index, line in enumerate(source.splitlines()):
        stripped = line.strip()
        if stripped == begin and start is None:
            start = index
        elif stripped == end and start is not None:
            regions.append((start, index))
            start = None
    if start is not None:
        raise ValueError(f"'{begin}' on line {start + 1} has no matching '{end}'")
    return regions


def split_secret(source: str) -> tuple[list[str], list[str]]:
    """(lines inside solution or hidden-test regions, markers included; every other line)."""
    lines = source.splitlines()
    inside = set()
    for begin, end in ((BEGIN_SOLUTION, END_SOLUTION), (BEGIN_HIDDEN, END_HIDDEN)):
        for first, last in marked_regions(source, begin, end):
            inside.update(range(first, last + 1))
    return (
        [line for index, line in enumerate(lines) if index in inside],
        [line for index, line in enumerate(lines) if index not in inside],
    )


def without_markers(source: str) -> str:
    """The source as a learner who solved everything would have it: region contents kept, markers dropped."""
    markers = {BEGIN_SOLUTION, END_SOLUTION}
    return "\n".join(line for line in source.splitlines() if line.strip() not in markers)


def solution_answers(source_notebook: dict) -> dict[str, str]:
    """grade_id -> the model answer of every solution cell of a source notebook."""
    return {
        grade_id(cell): without_markers(source_text(cell))
        for cell in source_notebook.get("cells", [])
        if is_solution(cell) and grade_id(cell)
    }


def fill_in(release_notebook: dict, answers: dict[str, str]) -> dict:
    """A copy of a release notebook whose solution cells hold `answers` (others keep their stub)."""
    unknown = set(answers) - {grade_id(cell) for cell in release_notebook["cells"] if is_solution(cell)}
    if unknown:
        raise KeyError(f"no solution cell with id {sorted(unknown)} in this notebook")
    filled = copy.deepcopy(release_notebook)
    for cell in filled["cells"]:
        if is_solution(cell) and grade_id(cell) in answers:
            cell["source"] = answers[grade_id(cell)]
    return filled
