"""What nbgrader's formgrader shows after `course grade`: learners' names, the manual-grading flags,
and no unconfined way to autograde.

- **Names.** nbgrader's autograde creates a learner with no name ("None, None" in the formgrader).
  `register_students` gives every graded learner a name: from `roster.csv` in the course directory when
  there is one (nbgrader's own roster format, `id,first_name,last_name,email`, the file that
  `nbgrader db student import` reads), else the learner's id (their exchange and account name) as the
  last name and `NO_ROSTER_NAME` as the first: the formgrader writes "last, first", so a learner without a
  roster entry shows as "ada, (not in roster.csv)", which says where names come from (an empty first name
  showed as "ada,"). `course export` leaves that first name empty. Names an instructor entered
  (formgrader, `nbgrader db student`) are kept where there is no roster.
- **Manual-grading flags.** nbgrader's autograde marks every manually graded cell "needs manual grading"
  again, even when its score was kept. `confirmed_manual_grades` (before a submission is graded again)
  and `restore_confirmed_grades` (after) clear the flag where the instructor's grade still applies: the
  written answer is the one that was graded (same text), or, for a test cell whose score the instructor
  overrode, the test's automatic score is the same. A changed answer keeps the flag (and its old score,
  as nbgrader does) for the instructor to look at again.
- **No unconfined autograde.** A plain `nbgrader autograde` (and the formgrader's per-submission
  Autograde button, which runs it) executes learners' code with the instructor's rights.
  nbgrader_config.py names `ConfinedOnlyExporter` as Autograde's exporter: it refuses to start unless the
  notebook is executed by the course's sandboxed step (`course grade`), before anything is written, with
  a message that says what to run instead. The course's server extension (server_extension.py) routes
  the button through `course grade`.
"""

from __future__ import annotations

import csv
import hashlib
import json

from nbconvert.exporters import NotebookExporter

from ..ground.layout import CourseLayout
from ..ground.notebooks import grade_id, is_autograded_test, is_grade, source_text

ROSTER = "roster.csv"


# ------------------------------------------------------------------------------------------------
# No unconfined autograde.
# ------------------------------------------------------------------------------------------------
class UnconfinedAutogradeRefused(RuntimeError):
    """nbgrader's autograde was asked to run learners' code outside the course's sandbox."""


def _is_sandboxed(step) -> bool:
    from traitlets.utils.importstring import import_item

    from ..judging.execute import SandboxedExecute

    if isinstance(step, str):
        try:
            step = import_item(step)
        except (ImportError, AttributeError, ValueError):
            return False
    return (isinstance(step, type) and issubclass(step, SandboxedExecute)) or isinstance(step, SandboxedExecute)


class ConfinedOnlyExporter(NotebookExporter):
    """Autograde's exporter (nbgrader_config.py): refuses unless the execution step is `course grade`'s."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        autograde = kwargs.get("parent")
        steps = list(getattr(autograde, "autograde_preprocessors", []) or [])
        if not any(_is_sandboxed(step) for step in steps):
            coursedir = getattr(autograde, "coursedir", None)
            assignment = getattr(coursedir, "assignment_id", "") or "<assignment>"
            student = getattr(coursedir, "student_id", "") or "<learner>"
            raise UnconfinedAutogradeRefused(
                "nbgrader's own autograde is switched off for this course: it would run learners' code "
                "with your rights, outside any sandbox. Grade with the course's confined grader instead: "
                f"`course grade --assignment {assignment}"
                + (f" --student {student}`" if student not in ("*", "") else "`")
                + " (the formgrader's Autograde button runs it when the course's server extension "
                "course_grader.exchange.server_extension is enabled)."
            )


# ------------------------------------------------------------------------------------------------
# Names.
# ------------------------------------------------------------------------------------------------
def _clean_name(value: str | None) -> str:
    # The formgrader writes names into its pages as they are: no markup in them.
    return "".join(ch for ch in (value or "").strip() if ch not in "<>")[:128]


def read_roster(layout: CourseLayout) -> dict[str, dict[str, str]]:
    """id -> {"first_name", "last_name", "email"} from roster.csv in the course directory (empty if none)."""
    path = layout.root / ROSTER
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or "id" not in reader.fieldnames:
            raise ValueError(
                f"{path}: a roster needs an 'id' column (nbgrader's format: "
                f"id,first_name,last_name,email), found {reader.fieldnames}"
            )
        return {
            row["id"].strip(): {key: _clean_name(row.get(key)) for key in ("first_name", "last_name", "email")}
            for row in reader
            if row.get("id", "").strip()
        }


NO_ROSTER_NAME = "(not in roster.csv)"  # the first name of a learner the roster does not name


def _names(roster: dict[str, dict[str, str]], student: str) -> dict[str, str]:
    """A learner's gradebook names: the roster's, else the id as last name and `NO_ROSTER_NAME` as first."""
    if student not in roster:
        return {"last_name": student, "first_name": NO_ROSTER_NAME}
    entry = roster[student]
    names = {"first_name": entry["first_name"], "last_name": entry["last_name"] or student}
    return {**names, "email": entry["email"]} if entry["email"] else names


def register_students(layout: CourseLayout, students: list[str]) -> None:
    """Give every learner in `students` a name in the gradebook (see the module's docstring)."""
    from nbgrader.api import Gradebook, MissingEntry

    roster = read_roster(layout)
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        for student in sorted(set(students)):
            if student in roster:
                gradebook.update_or_create_student(student, **_names(roster, student))
                continue
            try:
                known = gradebook.find_student(student)
            except MissingEntry:
                continue  # not in the gradebook: nbgrader never graded it, nothing to show
            unnamed = known.last_name is None and known.first_name is None
            named_by_an_earlier_version = known.last_name == student and known.first_name == ""
            if unnamed or named_by_an_earlier_version:
                gradebook.update_or_create_student(student, **_names(roster, student))


def add_students(layout: CourseLayout, students: list[str]) -> None:
    """Every learner about to be graded, in the gradebook before the workers start. nbgrader's autograde
    adds a learner it does not know; two workers grading two assignments of one new learner at once
    would both add them, and the second fails on the gradebook's unique key (its row an error)."""
    from nbgrader.api import Gradebook, MissingEntry

    try:
        roster = read_roster(layout)
    except ValueError:  # a roster.csv that is not nbgrader's format: register_students says so after grading
        roster = {}
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        for student in sorted(set(students)):
            try:
                gradebook.find_student(student)
            except MissingEntry:
                gradebook.add_student(student, **_names(roster, student))


# ------------------------------------------------------------------------------------------------
# Manual-grading flags.
# ------------------------------------------------------------------------------------------------
def _answer_digests(layout: CourseLayout, student: str, assignment_id: str) -> dict[tuple[str, str], str]:
    """(notebook, grade id) -> digest of every manually graded cell's answer in the autograded notebooks."""
    digests = {}
    for path in sorted((layout.autograded_dir / student / assignment_id).glob("*.ipynb")):
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError):
            continue
        for cell in cells:
            if is_grade(cell) and not is_autograded_test(cell) and grade_id(cell):
                text = json.dumps([cell.get("cell_type"), source_text(cell), cell.get("attachments")], sort_keys=True)
                digests[(path.stem, grade_id(cell))] = hashlib.sha256(text.encode()).hexdigest()
    return digests


def _grades(gradebook, student: str, assignment_id: str):
    from nbgrader.api import MissingEntry

    try:
        submission = gradebook.find_submission(assignment_id, student)
    except MissingEntry:
        return []
    return [(notebook.name, grade) for notebook in submission.notebooks for grade in notebook.grades]


def confirmed_manual_grades(layout: CourseLayout, student: str, assignment_id: str) -> dict[str, list]:
    """The instructor's grades of a submission that stand now, with what they were given for.

    Keys "notebook/grade id"; values ["answer", digest] for a written answer, ["auto", score] for a
    test cell whose automatic score the instructor overrode.
    """
    from nbgrader.api import Gradebook

    if not layout.gradebook_path.exists():
        return {}
    answers = _answer_digests(layout, student, assignment_id)
    confirmed = {}
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        for notebook, grade in _grades(gradebook, student, assignment_id):
            if grade.manual_score is None or grade.needs_manual_grade:
                continue
            key = f"{notebook}/{grade.name}"
            if (notebook, grade.name) in answers:
                confirmed[key] = ["answer", answers[(notebook, grade.name)]]
            elif grade.auto_score is not None:
                confirmed[key] = ["auto", float(grade.auto_score)]
    return confirmed


def restore_confirmed_grades(
    layout: CourseLayout, student: str, assignment_id: str, confirmed: dict[str, list]
) -> list[str]:
    """After autograding again: clear "needs manual grading" where the grade still applies.

    Returns the grade ids whose kept manual score needs a new look (the answer or the test result changed).
    """
    from nbgrader.api import Gradebook

    if not confirmed:
        return []
    answers = _answer_digests(layout, student, assignment_id)
    changed = []
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        for notebook, grade in _grades(gradebook, student, assignment_id):
            was = confirmed.get(f"{notebook}/{grade.name}")
            if was is None or grade.manual_score is None or not grade.needs_manual_grade:
                continue
            now = (
                ["answer", answers.get((notebook, grade.name))]
                if was[0] == "answer"
                else ["auto", None if grade.auto_score is None else float(grade.auto_score)]
            )
            if now == was:
                grade.needs_manual_grade = False
            else:
                changed.append(grade.name)
        gradebook.db.commit()
    return changed
