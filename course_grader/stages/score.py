"""Stage 4 of `course grade`: a row for every submission.

For each job that ran: the instructor's manual grades that still stand are put back, and nbgrader's result,
the execution report and the preflight's findings become its row (or an error row that says why it could not be
graded). Rows kept from an earlier run re-read their scores from the gradebook, so that manual grades entered
since show up. Each failing test's message goes to its row.
"""

from __future__ import annotations

import dataclasses
import re
import traceback
from pathlib import Path

from ..exchange import formgrader
from ..exchange.feedback import failing_test_messages
from ..ground.layout import CourseLayout
from ..ground.messages import ExecutionReport, WorkerResult
from ..ground.untrusted import display
from .points import PointsTables, read_scores
from .records import Execution, GradeRecord, GradingContext, Job, Scored, error_record
from .select import append_to_log


def score(context: GradingContext, execution: Execution) -> Scored:
    """Every row: the jobs' from their results, the kept ones' scores re-read, failing tests' messages added."""
    layout, points, rows = context.layout, context.points, dict(execution.admission.rows)
    for job in execution.admission.jobs:
        rows[(job.student, job.assignment.id)] = _job_record(layout, job, execution.outcomes.get(job.index, {}), points)
    for record in rows.values():
        if record.status == "graded" and not record.executed and record.assignment in context.assignments:
            try:
                read_scores(layout, record, points[context.assignments[record.assignment]])  # manual grades since
            except Exception as error:
                record.reasons.append(f"scores could not be re-read from the gradebook: {display(str(error))}")
                record.needs_review = True
    for record in rows.values():
        if record.status != "graded":
            continue
        try:
            record.test_messages = failing_test_messages(layout.autograded_dir / record.student / record.assignment)
        except Exception as error:  # the messages are a courtesy: the grade stands without them
            context.log(
                f"failing-test messages of {record.student} / {record.assignment} not read: {display(str(error))}"
            )
    return Scored(rows, execution)


def _job_record(layout: CourseLayout, job: Job, outcome: dict, points: PointsTables) -> GradeRecord:
    """An executed job's row, with the manual grades that stand put back first."""
    try:
        changed = formgrader.restore_confirmed_grades(layout, job.student, job.assignment.id, job.confirmed_grades)
        record = _result_record(layout, job, outcome, points)
    except Exception as error:  # e.g. a gradebook that cannot be read: this row is an error, the rest go on
        append_to_log(job.log_path, traceback.format_exc())
        record = error_record(
            job.student,
            job.assignment.id,
            f"its result could not be read: {display(str(error))}",
            findings=job.preflight.findings,
            log=str(job.log_path),
            **points.maxima_or_zero(job.assignment),
        )
        record.executed = True
        changed = []
    if changed and record.status == "graded":
        record.reasons.append(
            f"the answer or test result behind the manual grade of {', '.join(changed)} "
            "changed: the kept score awaits a new look in the formgrader"
        )
        record.needs_review = True
    record.note = job.note or record.note
    return record


def _result_record(layout: CourseLayout, job: Job, outcome: dict, points: PointsTables) -> GradeRecord:
    """The row from nbgrader's result, the gradebook, the execution report and the preflight's findings."""
    record = GradeRecord(
        job.student,
        job.assignment.id,
        "graded",
        executed=True,
        log=str(job.log_path),
        seconds=outcome.get("seconds", 0.0),
        findings=[dataclasses.asdict(f) for f in job.preflight.findings],
    )
    record.reasons += [f.describe() for f in job.preflight.findings if f.severity in ("review", "error")]
    if job.preflight.unreadable:
        record.reasons.append(f"not graded (unreadable or missing): {', '.join(job.preflight.unreadable)}")
    result = _read_or_none(WorkerResult, job.result_path)
    report = _read_or_none(ExecutionReport, job.report_path)
    if report is not None:
        _summarize_execution(record, report)
    table = points[job.assignment]
    found = read_scores(layout, record, table)
    if result is None or not result.success or not found:
        if outcome.get("outcome") == "overran":
            reason = "grading took longer than the assignment's total time limit and was stopped"
        elif outcome.get("outcome") == "not run":
            reason = "it could not be executed: " + display(str(outcome.get("error", "")))
        elif result is None:
            reason = "the grading worker crashed"
        else:
            reason = "nbgrader could not grade it: " + _root_cause(result.log + "\n" + result.error)
        failed = error_record(
            job.student,
            job.assignment.id,
            reason,
            findings=job.preflight.findings,
            log=str(job.log_path),
            **table.maxima(),
        )
        failed.reasons += record.reasons
        failed.seconds = record.seconds
        failed.executed = True
        return failed
    record.needs_review = bool(record.reasons)
    return record


def _read_or_none(kind, path: Path):
    """The message in the file, or None where the worker left none (or a broken one)."""
    try:
        return kind.read(path)
    except (OSError, ValueError):
        return None


def _summarize_execution(record: GradeRecord, report: ExecutionReport) -> None:
    """What the grader saw while the notebook ran, as review reasons."""
    ending = report.kernel_ending
    for label, cell in report.cells.items():
        if cell.kernel_died:
            record.reasons.append(
                f"the kernel {ending.ending if ending else 'died'} in {label}; later cells were not run"
            )
        if cell.canary_missing_without_error:
            record.reasons.append(f"test {label} did not run to its end without an error (tests were tampered with)")
        if cell.timeout:
            record.reasons.append(f"{label} hit the time limit")
        if cell.restore_failed:
            undone = f": {'; '.join(cell.not_undone[:3])}" if cell.not_undone else ""
            record.reasons.append(f"the grader could not reset the kernel before {label} (tampering suspected){undone}")
        if cell.changed_during_test:
            record.reasons.append(
                f"{label} scored 0: while it ran, the notebook changed {', '.join(cell.changed_during_test[:4])}"
            )
        if cell.verify_failed:
            record.reasons.append(
                f"{label} scored 0: the grader could not check the kernel after it (tampering suspected)"
            )
        if cell.for_review:
            record.reasons.append(f"{label} scored 0 for review: {cell.for_review}")
        if cell.output_cut:
            record.reasons.append(f"{label} printed too much; its output was cut")
    integrity = report.integrity
    if integrity and not integrity.ok:
        problems = integrity.problems
        shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
        record.reasons.append(f"runtime check: {shown}")


def _root_cause(text: str) -> str:
    """The most specific error line of an nbgrader log (not its generic closing message)."""
    exceptions = [
        line.strip()
        for line in text.splitlines()
        if re.match(r"^\s*[\w.]+(Error|Exception|Exit|Interrupt)\b.*:", line) and "NbGraderException" not in line
    ]
    if exceptions:
        return exceptions[-1][:300]
    errors = [line.strip() for line in text.splitlines() if "[ERROR]" in line and "Please see" not in line]
    return (errors[-1] if errors else "no details in the log")[:300]
