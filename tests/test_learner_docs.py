"""What the learner reads agrees with the course: one source for which chapters lead to each exercise,
and the tutor policy for AI assistants (AGENTS.md).

The chapters that lead to an exercise are those whose links point at it (`course_tools.contents`):
START.md and the book are written from that; the README's and chapter 13's exercise tables are
checked against it here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_tools import contents

ROOT = Path(__file__).resolve().parents[1]


def _chapter_numbers(cell: str) -> list[str]:
    """'05, 06, 11' or '[05](05_encoder.ipynb)-[08](...), [11](...)' -> ['05', ..., '11'] (ranges expanded)."""
    text = re.sub(r"\[(\d\d)\]\([^)]*\)", r"\1", cell)
    numbers = []
    for part in re.split(r"\s*,\s*", text.strip()):
        bounds = re.fullmatch(r"(\d\d)\s*[-–]\s*(\d\d)", part)
        if bounds:
            numbers += [f"{n:02d}" for n in range(int(bounds[1]), int(bounds[2]) + 1)]
        elif re.fullmatch(r"\d\d", part):
            numbers.append(part)
        else:
            raise AssertionError(f"not a list of chapters: {cell!r}")
    return numbers


def _table_chapters(text: str) -> dict[str, list[str]]:
    """{exercise id: chapters} from the rows of a Markdown table that start with | `exN_...` |."""
    rows = re.findall(r"^\|\s*`(ex\d+_\w+)`\s*\|([^|]*)\|", text, flags=re.M)
    return {exercise_id: _chapter_numbers(cell) for exercise_id, cell in rows}


def _linked() -> dict[str, list[str]]:
    return {e.id: [name[:2] for name in e.chapters] for e in contents.exercises(ROOT) if e.chapters}


def test_the_readmes_exercise_table_names_the_chapters_that_link_each_exercise():
    table = _table_chapters((ROOT / "README.md").read_text(encoding="utf-8"))
    assert table == _linked(), (
        "README.md's exercise table (column Chapters) should list the chapters whose links lead to each "
        f"exercise, as START.md and the book do:\n  README:   {table}\n  chapters: {_linked()}"
    )


def test_chapter_13s_exercise_table_names_the_chapters_that_link_each_exercise():
    notebook = json.loads((ROOT / "notebooks" / "13_exercises_and_self_check.ipynb").read_text(encoding="utf-8"))
    text = "\n".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown")
    table = _table_chapters(text)
    assert table == _linked(), f"chapter 13's exercise table:\n  13:       {table}\n  chapters: {_linked()}"


AGENTS = ROOT / "AGENTS.md"


@pytest.mark.parametrize(
    "rule, pattern",
    [
        ("it is addressed to AI assistants", r"AI assistants?"),
        ("assistants explain, hint and review", r"explain, hint and review"),
        ("they do not write exercise solutions", r"do not write exercise solutions"),
        ("they never reveal hidden tests", r"never reveal hidden tests"),
        ("solutions/ is off limits", r"`solutions/`"),
        ("the test cells are not to be changed", r"test cells"),
        ("the visible checks: Validate", r"\*\*Validate\*\*.*?nbgrader validate exercises/<id>/<id>\.ipynb"),
        ("the full verdict: course check", r"`course check <id>` grades the learner's own copy with the hidden tests"),
    ],
)
def test_agents_md_states_the_tutor_policy(rule, pattern):
    assert AGENTS.is_file(), "AGENTS.md (the tutor policy for AI assistants) is missing at the repository root"
    text = re.sub(r"\s+", " ", AGENTS.read_text(encoding="utf-8"))
    assert re.search(pattern, text, flags=re.S | re.I), f"AGENTS.md should say that {rule} (looked for {pattern!r})"
