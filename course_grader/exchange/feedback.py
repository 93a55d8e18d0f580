"""The learner's feedback: what a failing test tells them, and feedback that follows every grade change.

A failing test cell keeps, in the autograded notebook, IPython's whole traceback: the frames of the
test code with a few lines of source around each, which for a hidden test are its hidden lines (and
the grader's canary, the line the grader appends to every test). nbgrader's ClearHiddenTests removes
the hidden lines from the cell's source in the feedback, but not from its tracebacks. `LearnerErrors`
(a preprocessor of `nbgrader generate_feedback`, listed in nbgrader_config.py, so that the
formgrader's feedback button uses it too) rewrites every error of the feedback:

    AssertionError                            Traceback (most recent call last)
    (the test's own lines are not shown: its message below says what it checked)
    Cell In[12], line 9, in self_attention       <- frames of the learner's own cells stay, with
        ...                                         whatever they called
    AssertionError: These are the raw dot products: divide them by sqrt(d_k) = sqrt(2).

A frame is the learner's when it runs code of a cell that is not an autograded test cell (IPython names
a cell's code by its execution count, `In[N]`); the frames of test cells are left out, and so are the
library frames they called before any learner code ran.

`feedback_stamp` says what a feedback page shows (the autograded notebook, every score and comment
in the gradebook, the late penalty): `course grade` writes a learner's feedback again whenever it
changed, so that a manual grade reaches the feedback without `--force`.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import GetGrades
from traitlets import Bool

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
CELL_FRAME = re.compile(r"^\s*Cell In\s*\[(\d+)\]")
FILE_FRAME = re.compile(r"^\s*File \S")
HIDDEN_NOTE = "(the test's own lines are not shown: its message below says what it checked)"
NO_MESSAGE = "(this check gives no message)"


def _plain(text: str) -> str:
    return ANSI.sub("", text)


def _is_test_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def learner_execution_counts(nb) -> set[int]:
    """Execution counts of the code cells whose frames a learner may see (every cell but the tests)."""
    return {
        cell.get("execution_count")
        for cell in nb.cells
        if cell.get("cell_type") == "code" and not _is_test_cell(cell) and cell.get("execution_count")
    }


def learner_traceback(output, learner_counts: set[int]) -> list[str] | None:
    """An error output's traceback without the frames of test code (see the module's docstring); None
    when it is not IPython's usual traceback."""
    ename, evalue = str(output.get("ename", "Error")), str(output.get("evalue", ""))
    last = f"{ename}: {evalue}" if evalue.strip() else f"{ename}: {NO_MESSAGE}"
    lines = [str(line) for line in output.get("traceback", [])]
    plain = [_plain(line) for line in lines]
    standard = len(lines) >= 3 and "Traceback (most recent call last)" in plain[1] and set(plain[0].strip()) == {"-"}
    if not standard:
        # A SyntaxError, the grader's own errors or another shape: nothing to sort, only the message
        # where it could show test code (in a learner's cell, it is their own code).
        return None
    kept, dropped, in_learner_code = [], False, False
    for line, text in zip(lines[2:-1], plain[2:-1], strict=False):
        cell = CELL_FRAME.match(text)
        if cell and int(cell.group(1)) in learner_counts:
            in_learner_code = True
            kept.append(line)
        elif FILE_FRAME.match(text) and in_learner_code:
            kept.append(line)
        else:
            dropped = True
    return lines[:2] + ([HIDDEN_NOTE] if dropped else []) + kept + [lines[-1] if evalue.strip() else last]


class LearnerErrors(Preprocessor):
    """Feedback step: errors show their message and the learner's frames, never a test's code."""

    enabled = Bool(True, help="nbgrader registers its steps without enabling them").tag(config=True)

    def preprocess(self, nb, resources):
        learner_counts = learner_execution_counts(nb)
        for cell in nb.cells:
            if cell.get("cell_type") != "code":
                continue
            test = _is_test_cell(cell)
            for output in cell.get("outputs", []):
                if output.get("output_type") != "error":
                    continue
                rewritten = learner_traceback(output, learner_counts)
                if rewritten is not None:
                    output["traceback"] = rewritten
                elif test:
                    evalue = str(output.get("evalue", ""))
                    output["traceback"] = [
                        f"{output.get('ename', 'Error')}: {evalue if evalue.strip() else NO_MESSAGE}"
                    ]
        return nb, resources


TEMPLATE = "course_feedback"  # templates/course_feedback: nbgrader's feedback page, with the changes it lists


def template_settings() -> dict:
    """HTMLExporter settings for the course's feedback page (nbgrader's template folder is where it extends from)."""
    import nbgrader

    nbgrader_templates = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"
    return {
        "template_name": TEMPLATE,
        "template_file": "page.html.j2",  # not index.html.j2, so that it can extend nbgrader's index.html.j2
        "extra_template_basedirs": [str(Path(__file__).parent / "templates"), str(nbgrader_templates)],
    }


class FeedbackLabels(GetGrades):
    """nbgrader's GetGrades, and what the feedback page (templates/course_feedback) says of each graded part:
    its title (a test cell's first comment line, an answer cell's id in words) and whether its points still
    await the instructor (a written answer before it is graded shows that, not 0 points)."""

    def _get_score(self, cell, resources) -> None:
        super()._get_score(cell, resources)
        grade = self.gradebook.find_grade(
            cell.metadata["nbgrader"]["grade_id"], self.notebook_id, self.assignment_id, self.student_id
        )
        cell.metadata.nbgrader["awaiting_grade"] = bool(grade.needs_manual_grade)

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") or meta.get("task"):
            meta["course_title"] = part_title(cell)
        return cell, resources


def part_title(cell) -> str:
    """What a graded cell is, in words: "Tests: values with PyTorch inputs", "Written answer: explain attention pattern"."""
    meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
    words = str(meta.get("grade_id", "")).replace("_", " ").strip()
    if _is_test_cell(cell):
        first = next((line for line in str(cell.get("source", "")).splitlines() if line.strip()), "")
        if first.lstrip().startswith("#"):
            title = re.sub(r"\s*\((visible part[^)]*)\)\s*$", "", first.lstrip("# ").strip())
            if title:
                return title[:120]
        return f"Test: {words}"
    if cell.get("cell_type") == "markdown":
        return f"Written answer: {words}"
    return f"Your code: {words}"


def failing_test_messages(autograded_folder: Path) -> dict[str, str]:
    """grade id -> "Name: message" of every failing test cell in a submission's autograded notebooks."""
    messages = {}
    for path in sorted(Path(autograded_folder).glob("*.ipynb")):
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError):
            continue
        for cell in cells:
            errors = [output for output in cell.get("outputs", []) if output.get("output_type") == "error"]
            if _is_test_cell(cell) and errors:
                message = " ".join(_plain(str(errors[0].get("evalue", ""))).split())
                messages[cell["metadata"]["nbgrader"]["grade_id"]] = (
                    f"{errors[0].get('ename', 'Error')}: {message or NO_MESSAGE}"
                )
    return messages


def feedback_stamp(layout, student: str, assignment_id: str) -> str | None:
    """A digest of what the learner's feedback shows; None when nbgrader has no such submission."""
    from nbgrader.api import Gradebook, MissingEntry

    digest = hashlib.sha256()
    folder = layout.autograded_dir / student / assignment_id
    for path in sorted(folder.glob("*.ipynb")):
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        try:
            submission = gradebook.find_submission(assignment_id, student)
        except MissingEntry:
            return None
        rows = [("late", submission.late_submission_penalty)]
        for notebook in sorted(submission.notebooks, key=lambda n: n.name):
            rows += [
                (notebook.name, g.name, g.auto_score, g.manual_score, g.extra_credit)
                for g in sorted(notebook.grades, key=lambda g: g.name)
            ]
            rows += [
                (notebook.name, c.name, c.auto_comment, c.manual_comment)
                for c in sorted(notebook.comments, key=lambda c: c.name)
            ]
    digest.update(json.dumps(rows, default=str).encode())
    return digest.hexdigest()


# ------------------------------------------------------------------------------------------------
# Writing the feedback, and keeping it releasable.
# ------------------------------------------------------------------------------------------------
SECRET = re.compile(r"^[0-9a-f]{16,256}$")


def make_releasable(folder: Path) -> str:
    """Give an autograded or feedback folder the two files `nbgrader release_feedback` opens.

    release_feedback stops at the first learner whose feedback folder lacks timestamp.txt or
    submission_secret.txt, so one hand-made submission would keep everybody's feedback back. A folder
    without them gets an empty timestamp (nbgrader reads that as "no timestamp") and a fresh random
    secret: the feedback is released under a name nobody can fetch, and the others' go out. Returns a
    note for the instructor ("" when the submission had both).
    """
    folder = Path(folder)
    if not folder.is_dir():
        return ""
    notes = []
    timestamp = folder / "timestamp.txt"
    if not timestamp.is_file() or timestamp.is_symlink():
        timestamp.unlink(missing_ok=True)
        timestamp.write_text("", encoding="utf-8")
        notes.append("no timestamp")
    secret = folder / "submission_secret.txt"
    try:
        valid = secret.is_file() and not secret.is_symlink() and bool(SECRET.match(secret.read_text("ascii").strip()))
    except (OSError, UnicodeDecodeError):
        valid = False
    if not valid:
        import secrets

        secret.unlink(missing_ok=True)
        secret.write_text(secrets.token_hex(64), encoding="ascii")
        notes.append(
            "no submission secret (not handed in with nbgrader submit): the learner cannot fetch this feedback"
        )
    return "; ".join(notes)


def _feedback_under_the_learners_names(layout, record, log) -> None:
    """A learner who renamed the notebook (Save As, Duplicate) fetches feedback by the name they handed in:
    nbgrader releases a page under a hash of its file name, and the learner's fetch looks for the hash of
    theirs. So the page of a renamed notebook is also written under the learner's name, and the report says so.
    """
    folder = layout.feedback_dir / record.student / record.assignment
    for finding in record.findings:
        if finding.get("code") != "renamed-notebook":
            continue
        source, graded = finding.get("source", ""), folder / f"{finding.get('notebook', '')}.html"
        stem = source[: -len(".ipynb")] if source.endswith(".ipynb") else ""
        readable = stem and "/" not in stem and stem.isprintable() and stem == stem.encode("utf-8", "ignore").decode()
        if not readable or not graded.is_file():
            record.reasons.append(f"feedback for the renamed notebook {source!r} cannot be released under its name")
            continue
        (folder / f"{stem}.html").write_bytes(graded.read_bytes())
        log(f"  {record.student}: feedback also under the name handed in, {stem}.html")


def write_feedback(layout, records, log=print) -> None:
    """HTML feedback for every graded submission whose feedback is missing or no longer shows its grade.

    `records` are `course grade`'s rows. A submission gets its feedback written again when it was graded
    again or when `feedback_stamp` changed since its feedback was written (a manual grade, a comment).
    """
    from . import pipeline

    stamps_path = layout.output_dir / "feedback-stamps.json"
    try:
        stamps = json.loads(stamps_path.read_text())
    except (OSError, ValueError):
        stamps = {}
    wanted: dict[str, list] = {}
    current: dict[str, str] = {}
    for record in records:
        if record.status != "graded":
            continue
        key = f"{record.student}/{record.assignment}"
        stamp = feedback_stamp(layout, record.student, record.assignment)
        if stamp is None:
            continue
        current[key] = stamp
        pages = list((layout.feedback_dir / record.student / record.assignment).glob("*.html"))
        if record.executed or not pages or stamps.get(key) != stamp:
            wanted.setdefault(record.assignment, []).append(record)
    for assignment_id, pending in wanted.items():
        log(f"writing feedback for {len(pending)} submission(s) of {assignment_id}")
        for record in pending:
            note = make_releasable(layout.autograded_dir / record.student / assignment_id)
            if note:
                log(f"  {record.student}: {note}")
        # One nbgrader run for many learners; a single run per learner when only a few changed.
        for student in [record.student for record in pending] if len(pending) <= 2 else ["*"]:
            try:
                pipeline.generate_feedback(layout, assignment_id, student)
            except Exception as error:  # reported per learner below
                log(f"  feedback: {str(error).splitlines()[0]}")
        for folder in sorted(layout.feedback_dir.glob(f"*/{assignment_id}")):
            make_releasable(folder)  # also the folders that the "*" run wrote again
        for record in pending:
            _feedback_under_the_learners_names(layout, record, log)
        for record in pending:
            key = f"{record.student}/{record.assignment}"
            if any((layout.feedback_dir / record.student / assignment_id).glob("*.html")):
                stamps[key] = current[key]
            else:
                stamps.pop(key, None)
                record.reasons.append("feedback could not be generated (see the grading log)")
    stamps_path.parent.mkdir(parents=True, exist_ok=True)
    stamps_path.write_text(json.dumps(stamps, indent=1))
