"""What the stages of `course grade` read and hand each other, in the order they do, and what it keeps.

Every stage is `stage(context, input) -> output`, and reads the run's `GradingContext`, which none changes:

    select(context)              -> Selection   rows decided at once, and the Candidates the next stages read
    admit(context, Selection)    -> Admission   every row so far, and a Job for each submission that can run
    run(context, Admission)      -> Execution   how each job's worker ended, and the confinement in force
    score(context, Execution)    -> Scored      a GradeRecord for every submission
    publish(context, Scored)     -> GradingRun  names, feedback, the state between runs, the CSV, the report
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path

from ..ground import untrusted
from ..ground.layout import Assignment, CourseLayout
from ..judging.preflight import Finding, Preflight
from .points import PointsTables

Key = tuple[str, str]  # (learner, assignment), as shown in the CSV


@dataclasses.dataclass(frozen=True)
class GradingContext:
    """One run of `course grade`: what every stage reads, and none changes."""

    layout: CourseLayout
    assignments: Mapping[str, Assignment]  # every assignment of the course by id, its release current
    points: PointsTables  # each assignment's points table, read once when first needed
    last_state: Mapping[str, dict]  # "<learner>/<assignment>" -> its fingerprint and row, from the last runs
    students: tuple[str, ...] | None  # grade only these learners (the others keep their last row)
    assignment_ids: tuple[str, ...] | None  # grade only these assignments
    force: bool  # run unchanged submissions again
    cell_timeout: int | None  # seconds per cell; None: each assignment's own setting
    workers: int  # submissions run at once
    isolation: str  # "auto", "bwrap", "namespaces" or "none" (sandbox/sandbox.py)
    uid_base: int  # the first numeric uid of the kernels, when grading runs as root
    feedback: bool  # write the learners' HTML feedback
    started: float  # time.monotonic() when the run began
    log: Callable[[str], None]  # where progress lines go

    def selected(self, student: str, assignment_id: str | None = None) -> bool:
        """Whether --student and --assignment let this learner (and assignment) be graded in this run."""
        return not (
            (self.students and student not in self.students)
            or (self.assignment_ids and assignment_id is not None and assignment_id not in self.assignment_ids)
        )


@dataclasses.dataclass
class Candidate:
    """A submission this run reads: selected, a real folder, of a known assignment, not kept from the last run."""

    student: str
    assignment: Assignment
    folder: Path
    tree: untrusted.TreeScan  # its entries, as lstat saw them
    fingerprint: str
    note: str  # why it runs again ("" the first time)
    log_path: Path


@dataclasses.dataclass
class Selection:
    """The select stage's answer: rows it decided on its own, and the submissions the next stages read."""

    rows: dict[Key, GradeRecord]  # a row decided already
    candidates: list[Candidate]


@dataclasses.dataclass
class Job:
    """One submission to run, and where its run leaves what the score stage reads."""

    index: int
    student: str
    assignment: Assignment
    submission_dir: Path
    staged_dir: Path
    fingerprint: str
    preflight: Preflight
    log_path: Path
    report_path: Path  # the ExecutionReport (messages.py)
    result_path: Path  # nbgrader's WorkerResult
    status_path: Path | None = None  # the kernel's KernelStatus, once a slot is given (run.py)
    note: str = ""  # why it runs (e.g. retried after an error)
    confirmed_grades: dict = dataclasses.field(default_factory=dict)  # the instructor's manual grades that stand


@dataclasses.dataclass
class Admission:
    """The admit stage's answer: every row decided so far (select's, and those of submissions that cannot run),
    and the jobs to run."""

    rows: dict[Key, GradeRecord]
    jobs: list[Job]


@dataclasses.dataclass
class Execution:
    """The run stage's answer: how each job's worker ended, for the score stage."""

    admission: Admission  # what ran, and the rows decided before
    outcomes: dict[int, dict]  # job index -> {"seconds", "outcome": "finished", "crashed" or "overran"}
    sandbox: str  # the confinement in force, in words (for the report)
    uids: list[int]  # the numeric uids the kernels ran as (root only)


@dataclasses.dataclass
class GradeRecord:
    """One row of the grades CSV."""

    student: str
    assignment: str
    status: str  # "graded" or "error"
    score: float = 0.0
    max_score: float = 0.0
    auto_score: float = 0.0
    auto_max: float = 0.0
    manual_pending: float = 0.0  # points still waiting for the instructor
    needs_review: bool = False
    reasons: list[str] = dataclasses.field(default_factory=list)
    findings: list[dict] = dataclasses.field(default_factory=list)
    failed_cells: list[str] = dataclasses.field(default_factory=list)
    passed_cells: list[str] = dataclasses.field(default_factory=list)
    manual_cells: list[str] = dataclasses.field(default_factory=list)  # awaiting a manual grade
    test_messages: dict[str, str] = dataclasses.field(default_factory=dict)  # failing test -> its message
    seconds: float = 0.0
    executed: bool = False  # False when an unchanged submission was not run again
    log: str = ""
    note: str = ""  # why this run skipped it, kept it or ran it again (for the report)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def error_record(
    student: str,
    assignment_id: str,
    reason: str,
    max_score: float = 0.0,
    findings: list[Finding] = (),
    log: str = "",
    auto_max: float = 0.0,
) -> GradeRecord:
    """The row of a submission that could not be graded: no points, on the review list, with the reason."""
    return GradeRecord(
        student,
        assignment_id,
        "error",
        max_score=max_score,
        auto_max=auto_max,
        needs_review=True,
        reasons=[reason],
        findings=[dataclasses.asdict(f) for f in findings],
        log=log,
    )


@dataclasses.dataclass
class Scored:
    """The score stage's answer: a row for every submission, and the execution behind them."""

    rows: dict[Key, GradeRecord]
    execution: Execution


@dataclasses.dataclass
class GradingRun:
    """What `grade` returns: the rows (sorted by learner and assignment) and where they were written."""

    records: list[GradeRecord]
    csv_path: Path
    report_path: Path
    sandbox: str
    wall_seconds: float
    workers: int
    sandbox_uids: list[int] = dataclasses.field(default_factory=list)


# ------------------------------------------------------------------------------------------------
# The state between runs: per submission, its fingerprint and its last row.
# ------------------------------------------------------------------------------------------------
def read_state(path: Path) -> dict[str, dict]:
    """ "<learner>/<assignment>" -> {"fingerprint", "record"} from the last runs; empty if there is none."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_state(path: Path, state: dict[str, dict]) -> None:
    path.write_text(json.dumps(state, indent=1))
