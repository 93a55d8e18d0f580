"""What the stages of `course grade` hand each other, in the order they do (a `Candidate` of select's is
admitted as a `Job`, whose run is an `Execution`), and what `course grade` produces and keeps: one
`GradeRecord` per submission, the `GradingRun`, the state between runs.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..ground import untrusted
from ..ground.layout import Assignment
from ..judging.preflight import Finding, Preflight


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

    rows: dict[tuple[str, str], GradeRecord]  # (learner, assignment) -> a row decided already
    candidates: list[Candidate]


@dataclasses.dataclass
class Job:
    """One submission to execute, and where its run leaves what the collect stage reads."""

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
class Execution:
    """What the execute stage leaves for the collect stage."""

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
