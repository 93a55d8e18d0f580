"""`course grade`: autograde every collected submission, confined, in parallel, one row each.

`grade` makes the run's context (stages/records.py: `GradingContext`, which no stage changes) and passes it,
with the last stage's answer, to five stages in a row, one module each:

1. select (stages/select.py): which folders of submitted/<learner>/<assignment> this run reads, and
   which rows it keeps: a submission graded before whose files, source and settings have not changed
   is not executed again (its scores are re-read from the gradebook, so manual grades entered in the
   meantime show up); one whose last run ended in an error is always tried again (the error may
   have come from the machine, not the submission); `force=True` executes everything again, and
   nbgrader keeps manual grades across that too. Each row says which of these happened (`note`).
2. admit (stages/admit.py): each selected submission read as data, no code run: its notebook
   found, read and repaired against the release, the static checks; a job to run, or an
   error row. The jobs' learners are entered into the gradebook.
3. run (stages/run.py): nbgrader's own `Autograde` converter in a forked worker process per
   job, with `SandboxedExecute` (judging/execute.py) and a kernel from the sandbox (sandbox/session.py);
   `workers` run at once.
4. score (stages/score.py): scores from the gradebook, the execution report and the findings
   become one `GradeRecord` per submission (a submission that could not be graded gets an explicit
   error row instead), with each failing test's message.
5. publish (stages/publish.py): the learners' names, the feedback, the state between runs, the CSV and
   the report are written.

Nothing in submitted/ is followed or opened but regular files (ground/untrusted.py): a link, a FIFO, a name
that is not UTF-8 is a finding, and any exception while one submission is read becomes that
submission's error row; the batch goes on. Each assignment's points table is read from its release
once per run (stages/points.py).
"""

from __future__ import annotations

import time

from .exchange import pipeline
from .ground.layout import Assignment, CourseLayout
from .ground.report import RETRIED
from .sandbox.session import DEFAULT_UID_BASE
from .stages.admit import admit
from .stages.points import PointsTables
from .stages.publish import publish
from .stages.records import Admission, GradeRecord, GradingContext, GradingRun, read_state
from .stages.run import run
from .stages.score import score
from .stages.select import NOTE_UNCHANGED, select

__all__ = ["GradeRecord", "GradingRun", "grade"]


def grade(
    layout: CourseLayout,
    *,
    workers: int = 1,
    cell_timeout: int | None = None,
    force: bool = False,
    students: list[str] | None = None,
    assignment_ids: list[str] | None = None,
    feedback: bool = True,
    isolation: str = "auto",
    uid_base: int = DEFAULT_UID_BASE,
    log=print,
) -> GradingRun:
    """Grade every collected submission; always writes the CSV and the report.

    workers: submissions executed at once; cell_timeout: seconds per cell (default: each assignment's
    setting); force: execute unchanged submissions again; students, assignment_ids: grade only these
    (the others keep their last row); feedback: write the learners' HTML feedback; isolation: "auto",
    "bwrap", "namespaces" or "none" (see sandbox/sandbox.py); uid_base: the first numeric uid of the kernels
    when grading runs as root; log: where progress lines go.
    """
    started = time.monotonic()
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    context = GradingContext(
        layout,
        assignments=_prepared_assignments(layout, assignment_ids, log),
        points=PointsTables(layout),
        last_state=read_state(layout.output_dir / "state.json"),
        students=tuple(students) if students else None,
        assignment_ids=tuple(assignment_ids) if assignment_ids else None,
        force=force,
        cell_timeout=cell_timeout,
        workers=workers,
        isolation=isolation,
        uid_base=uid_base,
        feedback=feedback,
        started=started,
        log=log,
    )
    admission = admit(context, select(context))
    _say_what_runs_again(admission, log)
    return publish(context, score(context, run(context, admission)))


def _prepared_assignments(layout: CourseLayout, assignment_ids: list[str] | None, log) -> dict[str, Assignment]:
    """Every assignment of the course, its release regenerated if its source changed; unknown ids are an error."""
    assignments = {assignment.id: assignment for assignment in layout.assignments()}
    unknown = sorted(set(assignment_ids or ()) - set(assignments))
    if unknown:
        raise ValueError(f"unknown assignment(s): {', '.join(unknown)}; known: {', '.join(sorted(assignments))}")
    stale = pipeline.stale_releases(layout, list(assignments.values()))
    if stale:
        log(f"generating the release of {', '.join(stale)} (new or changed source)")
        pipeline.generate_release(layout, stale)
    pipeline.secure_gradebook(layout)
    return assignments


def _say_what_runs_again(admission: Admission, log) -> None:
    """One line each for the unchanged submissions not run again and the failed ones run again."""
    jobs = admission.jobs
    unchanged = sum(record.note == NOTE_UNCHANGED for record in admission.rows.values())
    if unchanged:
        log(f"{unchanged} submission(s) graded before and unchanged: not run again (`--force` runs them again)")
    retried = sum(job.note.startswith(RETRIED) for job in jobs)
    if retried:
        log(f"{retried} submission(s) whose last run ended in an error: run again")
