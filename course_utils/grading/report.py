"""The grades CSV, the Markdown grading report and the per-learner summary."""
from __future__ import annotations

import csv
from pathlib import Path

CSV_COLUMNS = ["student", "assignment", "status", "score", "max_score", "auto_score", "auto_max",
               "manual_pending", "needs_review", "failed_cells", "reasons", "seconds"]


def _points(value: float) -> str:
    return f"{value:g}"


def write_csv(records, path: Path) -> Path:
    """One row per learner and assignment; an ungraded submission has status "error" and a reason."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for record in records:
            writer.writerow({
                "student": record.student, "assignment": record.assignment, "status": record.status,
                "score": _points(record.score), "max_score": _points(record.max_score),
                "auto_score": _points(record.auto_score), "auto_max": _points(record.auto_max),
                "manual_pending": _points(record.manual_pending), "needs_review": "yes" if record.needs_review else "no",
                "failed_cells": " ".join(record.failed_cells), "reasons": " | ".join(record.reasons),
                "seconds": f"{record.seconds:.1f}",
            })
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
        lines.append(f"{record.student:<{width}}  {record.assignment:<{awidth}}  {score:>11}  {status:<6}  "
                     + "; ".join(notes))
    graded = sum(record.status == "graded" for record in records)
    review = sum(record.needs_review for record in records)
    lines.append(f"{len(records)} submission(s): {graded} graded, {len(records) - graded} error(s), {review} to review")
    return lines


def write_report(records, path: Path, sandbox: str, wall_seconds: float, workers: int) -> Path:
    """The instructor's report: every submission, and the reasons behind every flag or error."""
    lines = ["# Grading report", "",
             f"- submissions: {len(records)}; workers: {workers}; wall time: {wall_seconds:.1f} s",
             f"- sandbox: {sandbox}", "",
             "| learner | assignment | score | status | review | seconds |", "|---|---|---|---|---|---|"]
    for record in records:
        lines.append(f"| {record.student} | {record.assignment} | {_points(record.score)}/{_points(record.max_score)} "
                     f"| {record.status} | {'yes' if record.needs_review else ''} | {record.seconds:.1f} |")
    flagged = [record for record in records if record.needs_review or record.status != "graded"]
    if flagged:
        lines += ["", "## To review", ""]
        for record in flagged:
            lines.append(f"### {record.student} / {record.assignment} ({record.status})")
            lines += [f"- {reason}" for reason in record.reasons] or ["- (no reason recorded)"]
            if record.log:
                lines.append(f"- log: `{record.log}`")
            lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
