"""Stage 5 of `course grade`: every row, written down.

The learners' names go to the gradebook (from the roster), the HTML feedback is brought up to date, and the
state between runs, the grades CSV and the report are written.
"""

from __future__ import annotations

import time

from ..exchange import formgrader
from ..exchange.feedback import write_feedback
from ..ground.report import write_csv, write_report
from .records import GradeRecord, GradingContext, GradingRun, Job, Key, Scored, write_state


def publish(context: GradingContext, scored: Scored) -> GradingRun:
    """Write the rows down: the learners' names, the feedback, the state between runs, the CSV and the report."""
    layout, rows, execution = context.layout, scored.rows, scored.execution
    graded = [record for record in rows.values() if record.status == "graded"]
    if graded and layout.gradebook_path.exists():
        try:
            formgrader.register_students(layout, [record.student for record in graded])
        except ValueError as error:  # a roster.csv that is not nbgrader's format: the grades stand
            context.log(f"learners' names not updated: {error}")
    if context.feedback:
        write_feedback(layout, list(rows.values()), context.log)  # each graded row without it or whose grade changed
    _save_state(context, rows, execution.admission.jobs)
    ordered = [rows[key] for key in sorted(rows)]
    csv_path = write_csv(ordered, layout.output_dir / "grades.csv")
    wall = round(time.monotonic() - context.started, 2)
    report_path = write_report(ordered, layout.output_dir / "report.md", execution.sandbox, wall, context.workers)
    return GradingRun(ordered, csv_path, report_path, execution.sandbox, wall, context.workers, execution.uids)


def _save_state(context: GradingContext, rows: dict[Key, GradeRecord], jobs: list[Job]) -> None:
    """Each executed submission's fingerprint and row (errors too, so that the next run can say it tries them again)."""
    layout = context.layout
    new_state = dict(context.last_state)
    fingerprints = {(job.student, job.assignment.id): job.fingerprint for job in jobs}
    for key, record in rows.items():
        if key in fingerprints:
            new_state[f"{key[0]}/{key[1]}"] = {"fingerprint": fingerprints[key], "record": record.to_dict()}
    layout.output_dir.mkdir(parents=True, exist_ok=True)
    write_state(layout.output_dir / "state.json", new_state)
