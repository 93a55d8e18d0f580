"""Stage 1 of `course grade`: which submissions this run reads, which it keeps from the last run, and why.

Every entry of submitted/<learner>/<assignment> is looked at without following a link (an entry
that is a link, a FIFO where a folder should be, a learner id that is not allowed, an unknown
assignment: each becomes an error row). A submission outside --student/--assignment keeps its last
row. For the rest, the fingerprint of its files (with the assignment's source, the settings and the
grader's version) is compared with the last run's: unchanged and graded, it is not run again; its
last run ended in an error, or --force, it is run again, and its note says so.
"""

from __future__ import annotations

import hashlib
import os
import time
import traceback
from pathlib import Path

from ..exchange import pipeline
from ..ground import untrusted
from ..ground.layout import STUDENT_ID_PATTERN, Assignment
from ..ground.report import RETRIED
from ..ground.untrusted import display
from ..judging.preflight import Finding
from .records import Candidate, GradeRecord, GradingContext, Key, Selection, error_record

GRADER_VERSION = "1"
NOTE_UNCHANGED = (
    "not run again: graded before, and its files, the assignment's source and the settings are "
    "unchanged (scores re-read from the gradebook; `--force` runs it again)"
)
NOTE_NOT_SELECTED = "kept from an earlier run: not selected by --student/--assignment this time"
NOTE_RETRIED = RETRIED + ", the files are unchanged (that error: {reason})"
NOTE_FORCED = "run again: `--force` (graded before, unchanged)"


def select(context: GradingContext) -> Selection:
    """Sort every entry of submitted/ into a row decided now or a candidate for the next stages."""
    selection = Selection({}, [])
    submitted = context.layout.submitted_dir
    if not submitted.is_dir():
        context.log(f"nothing to grade: {submitted} does not exist (run `course collect` first)")
        return selection
    source_hashes: dict[str, str] = {}  # assignment id -> the fingerprint of its source, hashed once
    for learner_entry in _folder_entries(submitted):
        for submission_entry in _submissions_of(context, learner_entry, selection):
            _sort_submission(context, learner_entry.name, submission_entry, selection, source_hashes)
    return selection


def _submissions_of(context: GradingContext, learner_entry: os.DirEntry, selection: Selection) -> list[os.DirEntry]:
    """The entries of a learner's folder; none, and an error row where it is a link or cannot be listed."""
    student = learner_entry.name
    if learner_entry.is_symlink():
        if context.selected(student):
            selection.rows[(display(student), "*")] = _link_record(learner_entry, display(student), "*")
        return []
    if not learner_entry.is_dir(follow_symlinks=False):
        return []
    try:
        return _folder_entries(Path(learner_entry.path))
    except OSError as error:
        if context.selected(student):
            selection.rows[(display(student), "*")] = error_record(
                display(student), "*", f"submitted/{display(student)} could not be listed ({error.strerror})"
            )
        return []


def _sort_submission(
    context: GradingContext, student: str, entry: os.DirEntry, selection: Selection, source_hashes: dict[str, str]
) -> None:
    """One submission folder: its last row kept, an error row, or a candidate."""
    assignment_id = entry.name
    key = (student, assignment_id)
    if not context.selected(student, assignment_id):
        previous = context.last_state.get(f"{student}/{assignment_id}")
        if previous:  # not selected this time: its last result stays in the CSV
            selection.rows[key] = GradeRecord(**dict(previous["record"], executed=False, note=NOTE_NOT_SELECTED))
        return
    if not entry.is_symlink() and not entry.is_dir(follow_symlinks=False) and assignment_id not in context.assignments:
        return  # a stray file beside the submissions, named for no assignment: nothing to grade
    refused = _refusal(context, student, entry)
    if refused is not None:
        selection.rows.update([refused])
        return
    assignment = context.assignments[assignment_id]
    if assignment_id not in source_hashes:
        source_hashes[assignment_id] = pipeline.source_fingerprint(assignment)
    log_path = context.layout.output_dir / "logs" / assignment_id / f"{student}.log"
    try:
        outcome = _compare_with_last_run(
            context, Path(entry.path), student, assignment, source_hashes[assignment_id], log_path
        )
    except Exception as error:  # one unreadable submission is one error row, never the batch's end
        append_to_log(log_path, traceback.format_exc())
        outcome = error_record(
            student,
            assignment_id,
            f"could not be read: {display(str(error))}",
            log=str(log_path),
            **context.points.maxima_or_zero(assignment),
        )
    if isinstance(outcome, Candidate):
        selection.candidates.append(outcome)
    else:
        selection.rows[key] = outcome


def _refusal(context: GradingContext, student: str, entry: os.DirEntry) -> tuple[Key, GradeRecord] | None:
    """The error row of a submission that is not read at all: a link, not a folder, a learner id that is not
    allowed, an unknown assignment. None for one that is read."""
    assignment_id, assignments, points = entry.name, context.assignments, context.points
    shown = (display(student), display(assignment_id))
    if entry.is_symlink():
        maxima = points.maxima_or_zero(assignments[assignment_id]) if assignment_id in assignments else {}
        return shown, _link_record(entry, *shown, maxima)
    if not entry.is_dir(follow_symlinks=False):
        kind = untrusted.kind_of(entry.stat(follow_symlinks=False).st_mode)  # a FIFO or a file
        return (student, assignment_id), error_record(
            student,
            assignment_id,
            f"submitted/{display(student)}/{assignment_id} is a {kind}, not a folder; nothing was read",
            **points.maxima_or_zero(assignments[assignment_id]),
        )
    if not STUDENT_ID_PATTERN.match(student):
        return shown, error_record(
            *shown, "the learner id is not allowed (letters, digits and . _ @ - only); rename the folder to grade it"
        )
    if assignment_id not in assignments:
        return (student, assignment_id), error_record(
            student, display(assignment_id), f"there is no assignment {display(assignment_id)!r}"
        )
    return None


def _compare_with_last_run(
    context: GradingContext, folder: Path, student: str, assignment: Assignment, source_hash: str, log_path: Path
) -> GradeRecord | Candidate:
    """The last run's row if the submission is unchanged and was graded (and not --force); else a candidate."""
    timeout = context.cell_timeout or assignment.settings.cell_timeout_s
    tree = untrusted.scan_tree(folder)
    fingerprint = _fingerprint(tree, source_hash, f"{timeout}")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    previous = context.last_state.get(f"{student}/{assignment.id}")
    note = ""
    if previous and previous.get("fingerprint") == fingerprint:
        last = previous["record"]
        graded_before = (context.layout.autograded_dir / student / assignment.id).is_dir()
        if not context.force and last["status"] == "graded" and graded_before:
            return GradeRecord(**dict(last, executed=False, note=NOTE_UNCHANGED))
        if last["status"] != "graded":
            reason = (last.get("reasons") or ["no reason recorded"])[0]
            note = NOTE_RETRIED.format(reason=reason[:160])
        elif context.force:
            note = NOTE_FORCED
    return Candidate(student, assignment, folder, tree, fingerprint, note, log_path)


def _fingerprint(tree: untrusted.TreeScan, source_hash: str, settings: str) -> str:
    """The submission's files, the assignment's source, the settings and the grader's version, as one hash."""
    digest = hashlib.sha256(f"{GRADER_VERSION}\0{source_hash}\0{settings}\0".encode())
    untrusted.fingerprint(tree, digest)
    return digest.hexdigest()


def _folder_entries(folder: Path) -> list[os.DirEntry]:
    """A folder's entries, sorted by name as bytes; links are seen as links (DirEntry never follows them here)."""
    with os.scandir(folder) as listing:
        return sorted(listing, key=lambda entry: os.fsencode(entry.name))


def _link_record(entry: os.DirEntry, student: str, assignment_id: str, maxima: dict | None = None) -> GradeRecord:
    try:
        target = display(os.readlink(entry.path))
    except OSError as error:
        target = f"(unreadable: {error.strerror})"
    where = os.path.relpath(entry.path, Path(entry.path).parents[1 if assignment_id == "*" else 2])
    message = f"{display(where)} is a symbolic link to {target}; it was not followed and nothing of it was graded"
    return error_record(
        student, assignment_id, message, findings=[Finding("symlink", "error", message)], **(maxima or {})
    )


def append_to_log(log_path: Path, text: str) -> None:
    """Add a traceback to a submission's log (the grader's problem reading it), never failing itself."""
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(f"\n===== reading the submission at {time.ctime()} =====\n{text}")
    except OSError:
        pass
