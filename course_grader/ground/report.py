"""The grades CSV, the Markdown grading report and the per-learner summary."""

from __future__ import annotations

import csv
import re
from pathlib import Path

CSV_COLUMNS = [
    "student",
    "assignment",
    "status",
    "score",
    "max_score",
    "auto_score",
    "auto_max",
    "manual_pending",
    "needs_review",
    "failed_cells",
    "reasons",
    "findings",
    "seconds",
]


def _points(value: float) -> str:
    return f"{value:g}"


def finding_text(finding: dict) -> str:
    """One finding of the preflight as a line: what, where (notebook / cell), and how it was handled."""
    where = "/".join(part for part in (finding.get("notebook", ""), finding.get("cell", "")) if part)
    return f"{finding.get('code', '?')}" + (f" ({where})" if where else "") + f": {finding.get('message', '')}"


# What each severity of a finding means for the instructor, as the report says it.
SEVERITY_WORDS = {
    "error": "not graded, review",
    "review": "review",
    "repaired": "repaired by the grader",
    "info": "for information",
}


def write_csv(records, path: Path) -> Path:
    """One row per learner and assignment; an ungraded submission has status "error" and a reason."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # backslashreplace: a name that is not UTF-8 must never cost the whole CSV (names are escaped before this).
    with open(path, "w", newline="", encoding="utf-8", errors="backslashreplace") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for record in records:
            writer.writerow(
                {
                    "student": record.student,
                    "assignment": record.assignment,
                    "status": record.status,
                    "score": _points(record.score),
                    "max_score": _points(record.max_score),
                    "auto_score": _points(record.auto_score),
                    "auto_max": _points(record.auto_max),
                    "manual_pending": _points(record.manual_pending),
                    "needs_review": "yes" if record.needs_review else "no",
                    "failed_cells": " ".join(record.failed_cells),
                    "reasons": " | ".join(record.reasons),
                    "findings": " | ".join(
                        f"[{finding.get('severity', '?')}] {finding_text(finding)}" for finding in record.findings
                    ),
                    "seconds": f"{record.seconds:.1f}",
                }
            )
    return path


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def summary_lines(records) -> list[str]:
    """A fixed-width table for the terminal: one line per learner and assignment."""
    if not records:
        return ["no submissions found"]
    width = max(len(record.student) for record in records)
    awidth = max(len(record.assignment) for record in records)
    lines = [f"{'learner':<{width}}  {'assignment':<{awidth}}  {'score':>11}  status  notes"]
    for record in records:
        score = f"{_points(record.score)}/{_points(record.max_score)}"
        notes = []
        if record.manual_pending:
            notes.append(f"{_points(record.manual_pending)} pts to grade by hand")
        if record.needs_review:
            notes.append("REVIEW: " + (record.reasons[0] if record.reasons else "see report"))
        status = "ok" if record.status == "graded" else "ERROR"
        lines.append(
            f"{record.student:<{width}}  {record.assignment:<{awidth}}  {score:>11}  {status:<6}  " + "; ".join(notes)
        )
    graded = sum(record.status == "graded" for record in records)
    review = sum(record.needs_review for record in records)
    lines.append(f"{len(records)} submission(s): {graded} graded, {len(records) - graded} error(s), {review} to review")
    lines += _note_summary(records)
    return lines


RETRIED = "run again: the last run ended in an error"


def _notes(records) -> tuple[dict[str, list], list]:
    """(note shared by many rows -> those rows, rows run again after an error) of this run."""
    shared: dict[str, list] = {}
    retried = []
    for record in records:
        note = getattr(record, "note", "")
        if note.startswith(RETRIED):
            retried.append(record)
        elif note:
            shared.setdefault(note, []).append(record)
    return shared, retried


def _note_summary(records) -> list[str]:
    """For the terminal: how many rows this run did not execute, kept, or ran again, and why."""
    shared, retried = _notes(records)
    lines = [f"{len(rows)} {note}" for note, rows in shared.items()]
    if retried:
        lines.append(f"{len(retried)} {RETRIED} (see the report)")
    return lines


def _notes_section(records) -> list[str]:
    """For the report: every row this run did not execute, kept from an earlier run, or ran again, and why."""
    shared, retried = _notes(records)
    if not shared and not retried:
        return []
    lines = ["", "## Not run again, kept, run again", ""]
    for note, rows in shared.items():
        lines.append(f"- {note}: " + ", ".join(f"{record.student} / {record.assignment}" for record in rows))
    lines += [f"- {record.student} / {record.assignment}: {record.note}" for record in retried]
    return lines


def _code(text: str, limit: int = 300) -> str:
    """`text` as a Markdown code span (learners' values can appear in a test's message)."""
    text = " ".join(str(text).split())
    text = text if len(text) <= limit else text[: limit - 1] + "\u2026"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}"


def write_report(records, path: Path, sandbox: str, wall_seconds: float, workers: int) -> Path:
    """The instructor's report: every submission, what awaits a manual grade, every failing test with
    its message, and the reasons behind every flag or error."""
    awaiting = [record for record in records if record.status == "graded" and record.manual_pending]
    lines = [
        "# Grading report",
        "",
        f"- submissions: {len(records)}; workers: {workers}; wall time: {wall_seconds:.1f} s",
        f"- sandbox: {sandbox}",
        f"- awaiting a manual grade: {len(awaiting)} submission(s), "
        f"{_points(sum(record.manual_pending for record in awaiting))} points (formgrader: Manual Grading)",
        "",
        "| learner | assignment | score | status | to grade by hand | failing tests | found | review | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        manual = f"{_points(record.manual_pending)} pts" if record.manual_pending else ""
        failing = str(len(record.failed_cells)) if record.status == "graded" else ""
        found = ", ".join(sorted({finding.get("code", "?") for finding in record.findings}))
        lines.append(
            f"| {record.student} | {record.assignment} | {_points(record.score)}/{_points(record.max_score)} "
            f"| {record.status} | {manual} | {failing} | {found} | {'yes' if record.needs_review else 'no'} "
            f"| {record.seconds:.1f} |"
        )
    lines += _notes_section(records)
    found = [record for record in records if record.findings]
    if found:
        lines += ["", "## What the grader found in the submissions", ""]
        for record in found:
            lines.append(f"### {record.student} / {record.assignment}")
            lines += [
                f"- {finding_text(finding)} ({SEVERITY_WORDS.get(finding.get('severity', ''), finding.get('severity', ''))})"
                for finding in record.findings
            ]
            lines.append("")
    flagged = [record for record in records if record.needs_review or record.status != "graded"]
    if flagged:
        lines += ["", "## To review", ""]
        for record in flagged:
            lines.append(f"### {record.student} / {record.assignment} ({record.status})")
            lines += [f"- {reason}" for reason in record.reasons] or ["- (no reason recorded)"]
            if record.log:
                lines.append(f"- log: `{record.log}`")
            lines.append("")
    if awaiting:
        lines += ["", "## Awaiting a manual grade", ""]
        for record in awaiting:
            cells = ", ".join(f"`{cell}`" for cell in getattr(record, "manual_cells", [])) or "see the formgrader"
            lines.append(f"- {record.student} / {record.assignment}: {_points(record.manual_pending)} points ({cells})")
    failing = [record for record in records if record.status == "graded" and record.failed_cells]
    if failing:
        lines += ["", "## Failing tests", ""]
        for record in failing:
            lines.append(
                f"### {record.student} / {record.assignment} "
                f"({_points(record.auto_score)}/{_points(record.auto_max)} automatic points)"
            )
            messages = getattr(record, "test_messages", {}) or {}
            for cell in record.failed_cells:
                lines.append(f"- `{cell}`" + (f": {_code(messages[cell])}" if cell in messages else ""))
            lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="backslashreplace")
    return path
