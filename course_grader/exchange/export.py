"""The grades CSV of `course export` (and of `nbgrader export`, named in nbgrader_config.py).

nbgrader's CsvExportPlugin writes a row for every learner and every assignment, with a score of 0.0 where
nothing was handed in (indistinguishable from a submission that earned nothing), and joins the fields with
commas without quoting them (a name with a comma shifts the columns). This export has the same columns in
the same order, plus `submitted` ("yes" or "no"): an assignment not handed in has empty scores, and every
field is written by Python's csv module.
"""

from __future__ import annotations

import csv

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import CsvExportPlugin

from .formgrader import NO_ROSTER_NAME

COLUMNS = [
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
    "submitted",
]


class CourseCsvExport(CsvExportPlugin):
    """nbgrader's grades CSV, with unsubmitted work left empty and the fields quoted (see the module's docstring)."""

    def export(self, gradebook: Gradebook) -> None:
        students, assignments = {str(s) for s in self.student}, {str(a) for a in self.assignment}
        destination = self.to or "grades.csv"
        self.log.info("Exporting grades to %s", destination)
        with open(destination, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            for assignment in gradebook.assignments:
                if assignments and assignment.name not in assignments:
                    continue
                for student in gradebook.students:
                    if students and student.id not in students:
                        continue
                    writer.writerow(_row(gradebook, assignment, student))


def _row(gradebook: Gradebook, assignment, student) -> dict:
    row = {
        "assignment": assignment.name,
        "duedate": assignment.duedate or "",
        "student_id": student.id,
        "last_name": student.last_name or "",
        "first_name": "" if student.first_name in (None, NO_ROSTER_NAME) else student.first_name,
        "email": student.email or "",
        "max_score": assignment.max_score,
    }
    try:
        submission = gradebook.find_submission(assignment.name, student.id)
    except MissingEntry:
        return {**row, "timestamp": "", "raw_score": "", "late_submission_penalty": "", "score": "", "submitted": "no"}
    penalty = submission.late_submission_penalty or 0.0
    return {
        **row,
        "timestamp": submission.timestamp or "",
        "raw_score": submission.score,
        "late_submission_penalty": penalty,
        "score": max(0.0, submission.score - penalty),
        "submitted": "yes",
    }
