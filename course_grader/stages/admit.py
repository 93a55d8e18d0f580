"""Stage 2 of `course grade`: each selected submission read as data, before any of its code runs.

The preflight (preflight.py) finds, reads and repairs its notebooks against the release and runs
the static checks; a submission with no notebook left to grade becomes an error row, every other one
is staged (a clean copy in build/grading/staged/) and becomes a `Job` for the run stage. Any
exception while one submission is read becomes that submission's error row; the batch goes on. The
learners of the jobs are entered into the gradebook before any of them runs.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from ..exchange import formgrader
from ..ground.layout import CourseLayout
from ..ground.untrusted import display
from ..judging.preflight import inspect_submission, stage
from .points import PointsTables
from .records import Admission, Candidate, GradeRecord, GradingContext, Job, Selection, error_record
from .select import append_to_log


def admit(context: GradingContext, selection: Selection) -> Admission:
    """A job for each candidate that can run; an error row for each that cannot, beside select's rows."""
    layout, points = context.layout, context.points
    jobs, rows = [], dict(selection.rows)
    staged_root = layout.output_dir / "staged"
    for candidate in selection.candidates:
        try:
            outcome = _admit(layout, candidate, points, staged_root, len(jobs))
        except Exception as error:  # one unreadable submission is one error row, never the batch's end
            append_to_log(candidate.log_path, traceback.format_exc())
            outcome = error_record(
                candidate.student,
                candidate.assignment.id,
                f"could not be read: {display(str(error))}",
                log=str(candidate.log_path),
                **points.maxima_or_zero(candidate.assignment),
            )
        if isinstance(outcome, Job):
            jobs.append(outcome)
        else:
            rows[(candidate.student, candidate.assignment.id)] = outcome
    for job in jobs:  # before nbgrader marks their cells again (score.py puts them back)
        job.confirmed_grades = formgrader.confirmed_manual_grades(layout, job.student, job.assignment.id)
    if jobs:  # two workers adding one new learner at once would collide in the gradebook
        formgrader.add_students(layout, [job.student for job in jobs])
    return Admission(rows, jobs)


def _admit(
    layout: CourseLayout, candidate: Candidate, points: PointsTables, staged_root: Path, index: int
) -> GradeRecord | Job:
    """Preflight one submission: an error row when no notebook can be graded, else its staged copy as a job."""
    student, assignment, log_path = candidate.student, candidate.assignment, candidate.log_path
    preflight = inspect_submission(
        candidate.folder, assignment, layout.release_dir / assignment.id, tree=candidate.tree
    )
    if preflight.unreadable and not preflight.notebooks:
        reasons = [f.message for f in preflight.findings if f.severity == "error"]
        record = error_record(
            student,
            assignment.id,
            "; ".join(reasons) or "no notebook to grade",
            findings=preflight.findings,
            log=str(log_path),
            **points[assignment].maxima(),
        )
        record.note = candidate.note
        return record
    staged_dir = staged_root / student / assignment.id
    stage(preflight, candidate.folder, staged_dir)
    return Job(
        index,
        student,
        assignment,
        candidate.folder,
        staged_dir,
        candidate.fingerprint,
        preflight,
        log_path,
        log_path.with_suffix(".execution.json"),
        log_path.with_suffix(".result.json"),
        note=candidate.note,
    )
