"""`course export` / `nbgrader export` (course_grader/exchange/export.py): work not handed in is empty, not 0.0."""

from __future__ import annotations

import csv
import datetime

from nbgrader.api import Gradebook

from course_grader.exchange.export import COLUMNS, CourseCsvExport
from course_grader.exchange.formgrader import NO_ROSTER_NAME


def test_unsubmitted_work_is_empty_and_names_with_commas_keep_their_columns(tmp_path):
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gradebook:
        gradebook.add_assignment("ex1", duedate=datetime.datetime(2026, 12, 1))
        gradebook.add_student("bob", first_name="Bob", last_name="Smith, Jr.")
        gradebook.add_student("ada", last_name="ada", first_name=NO_ROSTER_NAME)  # as course grade names her
        gradebook.add_submission("ex1", "ada")
    destination = tmp_path / "grades.csv"
    plugin = CourseCsvExport()
    plugin.to = str(destination)
    with Gradebook(url) as gradebook:
        plugin.export(gradebook)
    with open(destination, newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == COLUMNS
        rows = {row["student_id"]: row for row in reader}
    assert rows["bob"]["submitted"] == "no" and rows["bob"]["score"] == "" and rows["bob"]["raw_score"] == ""
    assert rows["bob"]["last_name"] == "Smith, Jr." and rows["bob"]["first_name"] == "Bob"
    assert rows["ada"]["submitted"] == "yes" and float(rows["ada"]["score"]) == 0.0
    assert rows["ada"]["last_name"] == "ada" and rows["ada"]["first_name"] == "", "no roster: no first name"
