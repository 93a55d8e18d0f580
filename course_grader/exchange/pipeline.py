"""The nbgrader cycle, step by step, through nbgrader's Python API.

    generate_release          solutions/<id>  ->  release/<id>        (+ gradebook entries)
    release_assignment        release/<id>    ->  exchange outbound
    fetch_assignment          exchange        ->  a learner's folder
    submit                    a learner's folder -> exchange inbound
    collect                   exchange inbound ->  submitted/<learner>/<id>
    (autograde: course_grader.autograde, which confines learners' code)
    generate_feedback         autograded/     ->  feedback/ (HTML)
    release_feedback          feedback/       ->  exchange (one file per learner and notebook)
    fetch_feedback            exchange        ->  a learner's folder (what "Fetch Feedback" does)
    export_nbgrader_csv       gradebook       ->  nbgrader's own CSV

Each step raises `GradingError` with nbgrader's log when nbgrader reports a failure, so that a caller
never mistakes a failed step for an empty result.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from ..ground.layout import Assignment, CourseLayout, check_student_id


class GradingError(RuntimeError):
    """An nbgrader step failed; the message carries nbgrader's own log."""


def prepare_nbgrader() -> None:
    """Before nbgrader runs in this process: it calls helper programs (`alembic`) by name, so the running
    environment's bin/ goes on PATH; the question it asks `alembic` for every new gradebook is answered
    here instead (`gradebook_schema_head`)."""
    bin_dir = os.path.dirname(os.path.abspath(sys.executable))
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    import nbgrader.api

    nbgrader.api.get_alembic_version = gradebook_schema_head


@functools.cache
def gradebook_schema_head() -> str:
    """The newest revision of nbgrader's gradebook schema, which nbgrader writes into every gradebook it
    creates: what `alembic heads` prints, read from nbgrader's own migration scripts. nbgrader asks an
    `alembic` subprocess, which imports nbgrader and its dependencies again: 5 to 8 s of CPU for each
    new course (measured on a 2-core AMD EPYC), against some milliseconds here."""
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    return ScriptDirectory(ALEMBIC_DIR).get_current_head()


def _run(app, what: str) -> str:
    from nbgrader.utils import capture_log

    prepare_nbgrader()
    result = capture_log(app)
    if not result["success"]:
        log = result.get("log", "").strip()
        raise GradingError(f"{what} failed.\n{log}\n{result.get('error', '')}".rstrip())
    return result.get("log", "")


def _coursedir(config, **attributes):
    from nbgrader.coursedir import CourseDirectory

    coursedir = CourseDirectory(config=config)
    for name, value in attributes.items():
        setattr(coursedir, name, value)
    return coursedir


def _exchange(config, kind: str, coursedir):
    from nbgrader.auth import Authenticator
    from nbgrader.exchange import ExchangeFactory

    factory = ExchangeFactory(config=config)
    return getattr(factory, kind)(coursedir=coursedir, authenticator=Authenticator(config=config), config=config)


def secure_gradebook(layout: CourseLayout) -> None:
    """Only the instructor may read the gradebook (learners' kernels never see it at all)."""
    if layout.gradebook_path.exists():
        os.chmod(layout.gradebook_path, 0o600)


def hash_tree(folder: Path, digest) -> None:
    """The instructor's own tree (solutions/<id>); learners' folders go through untrusted.fingerprint."""
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        digest.update(os.fsencode(path.relative_to(folder)) + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())


def source_fingerprint(assignment: Assignment) -> str:
    digest = hashlib.sha256()
    hash_tree(assignment.source_dir, digest)
    return digest.hexdigest()


def _stamps_path(layout: CourseLayout) -> Path:
    return layout.output_dir / "release-stamps.json"


def stale_releases(layout: CourseLayout, assignments: list[Assignment]) -> list[str]:
    """Assignments whose release (or gradebook entry) is missing or older than their source."""
    try:
        stamps = json.loads(_stamps_path(layout).read_text())
    except (OSError, ValueError):
        stamps = {}
    return [
        assignment.id
        for assignment in assignments
        if stamps.get(assignment.id) != source_fingerprint(assignment)
        or not layout.gradebook_path.exists()
        or not all((layout.release_dir / assignment.id / f"{name}.ipynb").is_file() for name in assignment.notebooks)
    ]


def generate_release(layout: CourseLayout, assignment_ids: list[str] | None = None) -> list[str]:
    """Regenerate release/<id> (and the gradebook's copy of the tests) for every assignment."""
    from nbgrader.converters import GenerateAssignment

    from .validate import record_graded_cells

    known = [assignment.id for assignment in layout.assignments()]
    wanted = known if assignment_ids is None else list(assignment_ids)
    missing = sorted(set(wanted) - set(known))
    if missing:
        raise GradingError(f"no such assignment in {layout.source_dir}: {', '.join(missing)}")
    for assignment_id in wanted:
        config = layout.nbgrader_config()
        app = GenerateAssignment(coursedir=_coursedir(config, assignment_id=assignment_id), config=config)
        app.force = True
        app.create_assignment = True
        _run(app, f"nbgrader generate_assignment {assignment_id}")
        for notebook in sorted((layout.release_dir / assignment_id).glob("*.ipynb")):
            record_graded_cells(notebook)  # what the Validate button of a copy misses (validate.py)
    secure_gradebook(layout)
    try:
        stamps = json.loads(_stamps_path(layout).read_text())
    except (OSError, ValueError):
        stamps = {}
    stamps.update({a.id: source_fingerprint(a) for a in layout.assignments() if a.id in wanted})
    _stamps_path(layout).parent.mkdir(parents=True, exist_ok=True)
    _stamps_path(layout).write_text(json.dumps(stamps, indent=1))
    return wanted


def ensure_exchange(layout: CourseLayout) -> Path:
    """Create the exchange folder if needed (learners must be able to write its inbound folder)."""
    layout.exchange_dir.mkdir(parents=True, exist_ok=True)
    return layout.exchange_dir


def release_assignment(layout: CourseLayout, assignment_id: str) -> None:
    """Copy release/<id> into the exchange so that learners can fetch it (replaces an older release)."""
    ensure_exchange(layout)
    outbound = layout.exchange_dir / layout.course_id / "outbound" / assignment_id
    if outbound.exists():
        shutil.rmtree(outbound)
    config = layout.nbgrader_config()
    app = _exchange(config, "ReleaseAssignment", _coursedir(config, assignment_id=assignment_id))
    _run(app, f"nbgrader release_assignment {assignment_id}")


def fetch_assignment(layout: CourseLayout, assignment_id: str, learner_dir: str | os.PathLike) -> Path:
    """What a learner does: copy the released assignment into `learner_dir`/<id>."""
    config = layout.nbgrader_config(Exchange={"assignment_dir": str(learner_dir)})
    app = _exchange(config, "FetchAssignment", _coursedir(config, assignment_id=assignment_id))
    _run(app, f"nbgrader fetch_assignment {assignment_id}")
    return Path(learner_dir) / assignment_id


def submit(layout: CourseLayout, assignment_id: str, student_id: str, learner_dir: str | os.PathLike) -> None:
    """What a learner does: hand in `learner_dir`/<id> as `student_id`."""
    check_student_id(student_id)
    learner_dir = Path(learner_dir)
    config = layout.nbgrader_config(
        Exchange={"assignment_dir": str(learner_dir), "cache": str(learner_dir / ".nbgrader_cache")}
    )
    app = _exchange(config, "Submit", _coursedir(config, assignment_id=assignment_id, student_id=student_id))
    _run(app, f"nbgrader submit {assignment_id} (as {student_id})")


def collect(layout: CourseLayout, assignment_id: str, log=None) -> list[str]:
    """Move the newest submission of every learner into submitted/<learner>/<id>; returns learner ids.

    The copy never follows a link in the exchange (collect.SafeExchangeCollect): links, FIFOs and the
    like stay there, are listed in the submission's collect_refused.json, and each is passed to `log`.
    """
    from nbgrader.auth import Authenticator

    from .collect import SafeExchangeCollect

    config = layout.nbgrader_config()
    coursedir = _coursedir(config, assignment_id=assignment_id)
    app = SafeExchangeCollect(coursedir=coursedir, authenticator=Authenticator(config=config), config=config)
    app.update = True
    _run(app, f"nbgrader collect {assignment_id}")
    for line in app.refusals:
        (log or (lambda message: None))(f"left in the exchange: {line}")
    base = layout.submitted_dir
    return sorted(
        path.parent.name for path in base.glob(f"*/{assignment_id}") if path.is_dir() and not path.is_symlink()
    )


def generate_feedback(layout: CourseLayout, assignment_id: str, student_id: str = "*") -> Path:
    """feedback/<learner>/<id>/*.html from the autograded notebooks (hidden tests left out).

    With the default student "*", every autograded submission of the assignment is done in one
    nbgrader run (much faster than one run per learner); a learner whose feedback fails does not stop
    the others, and the error names them.
    """
    from nbgrader.converters import GenerateFeedback

    from .feedback import template_settings

    config = layout.nbgrader_config(HTMLExporter=template_settings())
    app = GenerateFeedback(
        coursedir=_coursedir(config, assignment_id=assignment_id, student_id=student_id), config=config
    )
    app.force = True
    _run(app, f"nbgrader generate_feedback {assignment_id} --student {student_id}")
    return layout.feedback_dir / student_id / assignment_id


def release_feedback(layout: CourseLayout, assignment_id: str, student_id: str = "*") -> None:
    """Put the feedback of an assignment in the exchange, where each learner can fetch their own."""
    config = layout.nbgrader_config()
    app = _exchange(config, "ReleaseFeedback", _coursedir(config, assignment_id=assignment_id, student_id=student_id))
    _run(app, f"nbgrader release_feedback {assignment_id}")


def fetch_feedback(
    layout: CourseLayout, assignment_id: str, student_id: str, learner_dir: str | os.PathLike
) -> list[Path]:
    """What a learner does: copy their released feedback into `learner_dir`/<id>/feedback/<timestamp>/."""
    check_student_id(student_id)
    learner_dir = Path(learner_dir)
    config = layout.nbgrader_config(
        Exchange={"assignment_dir": str(learner_dir), "cache": str(learner_dir / ".nbgrader_cache")}
    )
    app = _exchange(config, "FetchFeedback", _coursedir(config, assignment_id=assignment_id, student_id=student_id))
    _run(app, f"nbgrader fetch_feedback {assignment_id} (as {student_id})")
    return sorted((learner_dir / assignment_id / "feedback").glob("*/*.html"))


def export_nbgrader_csv(layout: CourseLayout, destination: str | os.PathLike) -> Path:
    """nbgrader's grade export (one row per learner and assignment), as `CourseCsvExport` writes it."""
    from nbgrader.api import Gradebook

    from .export import CourseCsvExport

    plugin = CourseCsvExport(config=layout.nbgrader_config())
    plugin.to = str(destination)
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        plugin.export(gradebook)
    return Path(destination)
