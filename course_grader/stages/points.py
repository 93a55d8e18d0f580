"""What each assignment's graded cells are worth (its points table, read from the release), and a row's scores
read from nbgrader's gradebook against it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..ground.layout import Assignment, CourseLayout
from ..ground.notebooks import grade_id, is_autograded_test, is_grade, load_json, nbgrader_meta

if TYPE_CHECKING:  # records holds the run's context, which holds the points tables
    from .records import GradeRecord


@dataclasses.dataclass(frozen=True)
class PointsTable:
    """What the graded cells of one assignment are worth, read from its release notebooks."""

    cells: tuple[tuple[str, float, bool], ...]  # (grade id, points, autograded test?) of every graded cell

    @classmethod
    def from_release(cls, layout: CourseLayout, assignment: Assignment) -> "PointsTable":
        cells = []
        for name in assignment.notebooks:
            release = load_json(layout.release_dir / assignment.id / f"{name}.ipynb")
            cells += [
                (grade_id(cell), float(nbgrader_meta(cell).get("points", 0)), is_autograded_test(cell))
                for cell in release["cells"]
                if is_grade(cell)
            ]
        return cls(tuple(cells))

    @property
    def automatic(self) -> set[str]:
        """Grade ids of the autograded test cells."""
        return {cell_id for cell_id, _, automatic in self.cells if automatic}

    @property
    def max_score(self) -> float:
        return sum(points for _, points, _ in self.cells)

    @property
    def auto_max(self) -> float:
        return sum(points for _, points, automatic in self.cells if automatic)

    def maxima(self) -> dict[str, float]:
        """max_score and auto_max, for the row of a submission that could not be graded."""
        return {"max_score": self.max_score, "auto_max": self.auto_max}


class PointsTables:
    """The points table of each assignment, read once per grading run (when it is first needed)."""

    def __init__(self, layout: CourseLayout):
        self.layout = layout
        self.tables: dict[str, PointsTable] = {}

    def __getitem__(self, assignment: Assignment) -> PointsTable:
        """The assignment's table; raises if its release cannot be read."""
        if assignment.id not in self.tables:
            self.tables[assignment.id] = PointsTable.from_release(self.layout, assignment)
        return self.tables[assignment.id]

    def maxima_or_zero(self, assignment: Assignment) -> dict:
        """max_score and auto_max of an error row; zero where even the release cannot be read."""
        try:
            return self[assignment].maxima()
        except Exception:
            return {"max_score": 0.0, "auto_max": 0.0}


def read_scores(layout: CourseLayout, record: GradeRecord, table: PointsTable) -> bool:
    """Fill a record's scores from the gradebook; False if nbgrader has no such submission."""
    from nbgrader.api import Gradebook, MissingEntry

    automatic = table.automatic
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        try:
            submission = gradebook.find_submission(record.assignment, record.student)
        except MissingEntry:
            return False
        grades = [grade for notebook in submission.notebooks for grade in notebook.grades]
        if not grades:
            return False
        record.score = record.auto_score = record.auto_max = record.manual_pending = record.max_score = 0.0
        record.failed_cells, record.passed_cells, record.manual_cells = [], [], []
        for grade in grades:
            maximum = float(grade.max_score)
            record.max_score += maximum
            record.score += float(grade.score or 0.0)
            if grade.name in automatic:
                record.auto_max += maximum
                auto = float(grade.auto_score or 0.0)
                record.auto_score += auto
                (record.passed_cells if auto >= maximum else record.failed_cells).append(grade.name)
            if grade.needs_manual_grade:  # what the formgrader lists as "needs manual grade"
                record.manual_pending += maximum
                record.manual_cells.append(grade.name)
    return True
