"""`course check <id>`: a learner who works alone gets the full verdict on their own copy.

Validate runs the visible tests only; the points come from the hidden ones, which a class learner
meets when the instructor grades. A self-learner has the instructor's sources in the same checkout
(solutions/), so this does what the instructor's `course grade` would do, for one notebook:

1. a temporary course with the assignment's source, its release generated as for a class;
2. the learner's copy (``exercises/<id>/``, read, never changed) placed as a submission of learner ``you``;
3. ``course grade`` on it: the same sandbox, limits, preflight and hidden tests as in a class;
4. the verdict printed: points per graded cell, each failing test's message (what property failed,
   never the test's code), the points a person must still grade, what the grader found; and the
   feedback page, the same page a class learner fetches, written to ``build/check/<id>/``.

The temporary course is removed afterwards (``--keep`` keeps it).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from .ground.layout import CourseLayout


def _place(learner_copy: Path, submitted: Path) -> None:
    """The learner's folder as a submission: regular files and folders copied, links left as links
    (the grader's preflight refuses them, as in a class), nothing in the learner's folder changed."""
    shutil.copytree(learner_copy, submitted, symlinks=True, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (submitted / "timestamp.txt").write_text(time.strftime("%Y-%m-%d %H:%M:%S.000000 UTC", time.gmtime()))


def verdict_lines(record, maxima: dict[str, float]) -> list[str]:
    """What the learner reads: the score, then every graded cell with its points and, if it failed, why."""
    lines = [f"score: {record.score:g} / {record.max_score:g} ({record.auto_score:g} / {record.auto_max:g} automatic)"]
    if record.status != "graded":
        return lines + [f"not graded: {reason}" for reason in record.reasons]
    messages = {
        cell: "an answer cell still raises NotImplementedError(): write your answer there"
        if message.startswith("NotImplementedError")
        else message
        for cell, message in (record.test_messages or {}).items()
    }
    for cell in sorted(maxima, key=lambda name: (name not in record.failed_cells, name)):
        if cell in record.failed_cells:
            lines.append(f"  FAILED  {cell} (0 / {maxima[cell]:g}): {messages.get(cell, 'see the feedback page')}")
        elif cell in record.passed_cells:
            lines.append(f"  passed  {cell} ({maxima[cell]:g} / {maxima[cell]:g})")
    for cell in getattr(record, "manual_cells", []):
        lines.append(f"  to grade by a person: {cell} ({maxima.get(cell, 0):g} points): compare with the model answer")
    for finding in record.findings:
        lines.append(f"  the grader found: {finding.get('code')}: {finding.get('message')}")
    return lines


def check(source: CourseLayout, assignment_id: str, learner_copy: Path, out_dir: Path, keep: bool = False) -> int:
    from .autograde import grade
    from .exchange import pipeline
    from .stages.points import PointsTable

    assignment = source.assignment(assignment_id)
    if not learner_copy.is_dir():
        raise FileNotFoundError(
            f"no copy of {assignment_id} at {learner_copy}: `make setup` puts yours in exercises/{assignment_id}/"
        )
    workdir = Path(tempfile.mkdtemp(prefix="course-check-"))
    try:
        course = workdir / "course"
        shutil.copytree(assignment.source_dir, course / "solutions" / assignment.id)
        if (source.root / "nbgrader_config.py").is_file():
            shutil.copy(source.root / "nbgrader_config.py", course)
        layout = CourseLayout.from_directory(course, exchange=workdir / "exchange", course_id=source.course_id)
        pipeline.generate_release(layout, [assignment.id])
        _place(learner_copy, layout.submitted_dir / "you" / assignment.id)
        print(f"course check: grading {learner_copy} with the hidden tests, confined as in a class ...", flush=True)
        run = grade(layout, workers=1, students=["you"], assignment_ids=[assignment.id], log=lambda line: None)
        record = next(record for record in run.records if record.student == "you")
        table = PointsTable.from_release(layout, layout.assignment(assignment.id))
        maxima = {cell: points for cell, points, _ in table.cells}
        print("\n".join(verdict_lines(record, maxima)))
        page = layout.feedback_dir / "you" / assignment.id / f"{assignment.main_notebook.stem}.html"
        if page.is_file():
            out_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(page, out_dir / page.name)
            print(f"feedback page: {out_dir / page.name}")
        print(f"graded in {run.wall_seconds:.0f} s")
        if keep:
            print(f"kept: {workdir}")
        return 0 if record.status == "graded" else 1
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
