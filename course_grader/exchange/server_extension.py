"""A Jupyter server extension: the formgrader's per-submission Autograde button runs `course grade`.

nbgrader's formgrader has an Autograde button on every row of Manage Submissions. It posts to
`/formgrader/api/submission/<assignment>/<learner>/autograde`, which runs a plain `nbgrader autograde`:
the learner's code with the instructor's rights, outside any sandbox. nbgrader has no setting that
hides the button, so this extension answers that URL itself: it runs the course's confined grader,

    course grade --course-dir <the formgrader's course> --assignment <assignment> --student <learner>

and gives the formgrader its answer in nbgrader's form ({"success", "log", "error"}), so that the page
shows `course grade`'s summary (score, findings, sandbox) in its usual dialog and refreshes the row.
It succeeded when the learner's row of grades.csv says "graded".

Enable it next to the formgrader (`course lab --instructor` and deploy/setup_course.sh do):

    {"ServerApp": {"jpserver_extensions": {"course_grader.exchange.server_extension": true,
                                           "nbgrader.server_extensions.formgrader": true}}}

jupyter_server loads extensions in alphabetical order, and the first handler added for a URL answers it:
`course_utils...` comes before `nbgrader...`, so this handler is the one the button reaches (a test starts
a server and checks it). Without the extension the button still runs nothing unconfined: the course's
nbgrader_config.py makes nbgrader's autograde refuse (formgrader.ConfinedOnlyExporter).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

AUTOGRADE_URL = r"/formgrader/api/submission/([^/]+)/([^/]+)/autograde"
LOG_CHARS = 20_000
_one_at_a_time = None  # asyncio.Lock, made in the server's event loop


def _jupyter_server_extension_points():
    return [{"module": "course_grader.exchange.server_extension"}]


async def run_course_grade(course_dir: str, assignment_id: str, student_id: str) -> dict:
    """`course grade` for one submission, as nbgrader's API answers an autograde request."""
    global _one_at_a_time
    if _one_at_a_time is None:
        _one_at_a_time = asyncio.Lock()
    command = [
        sys.executable,
        "-m",
        "course_grader.cli",
        "grade",
        "--course-dir",
        str(course_dir),
        "--assignment",
        assignment_id,
        "--student",
        student_id,
    ]
    async with _one_at_a_time:  # two clicks must not grade into the same folders at once
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=str(course_dir),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        output, _ = await process.communicate()
    text = output.decode("utf-8", errors="replace")
    text = text if len(text) <= LOG_CHARS else "[...]\n" + text[-LOG_CHARS:]
    heading = (
        "Graded by the course's confined grader (course grade), not by nbgrader's own autograde:\n"
        f"$ course grade --assignment {assignment_id} --student {student_id}\n\n"
    )
    status = _row_status(course_dir, assignment_id, student_id) if process.returncode == 0 else None
    if status == "graded":
        return {"success": True, "log": heading + text}
    problem = (
        f"course grade exited with status {process.returncode}"
        if process.returncode != 0
        else f"the submission's row says {status!r}"
        if status
        else "course grade wrote no row for it"
    )
    return {
        "success": False,
        "log": heading + text,
        "error": f"{problem}: it could not be graded (the reason is in the log above and in the grading report)",
    }


def _row_status(course_dir: str, assignment_id: str, student_id: str) -> str | None:
    """The status ("graded", "error") of one submission in `course grade`'s grades.csv, None if absent."""
    from ..ground.layout import CourseLayout
    from ..ground.report import read_csv

    try:
        rows = read_csv(CourseLayout.from_directory(course_dir).output_dir / "grades.csv")
    except (OSError, ValueError):
        return None
    return next(
        (row["status"] for row in rows if row["student"] == student_id and row["assignment"] == assignment_id), None
    )


def _handler_class():
    from nbgrader.server_extensions.formgrader.base import BaseApiHandler, check_notebook_dir, check_xsrf
    from tornado import web

    class CourseGradeAutogradeHandler(BaseApiHandler):
        """POST .../formgrader/api/submission/<assignment>/<learner>/autograde -> `course grade`."""

        @web.authenticated
        @check_xsrf
        @check_notebook_dir
        async def post(self, assignment_id, student_id):
            result = await run_course_grade(self.coursedir.root, assignment_id, student_id)
            self.write(json.dumps(result))

    return CourseGradeAutogradeHandler


def _load_jupyter_server_extension(serverapp):
    from jupyter_server.utils import url_path_join

    web_app = serverapp.web_app
    pattern = url_path_join(web_app.settings["base_url"], AUTOGRADE_URL)
    web_app.add_handlers(".*$", [(pattern, _handler_class())])
    serverapp.log.info("course_utils: the formgrader's Autograde button runs `course grade` (confined)")


# jupyter_server < 2 looked for the name without the underscore.
load_jupyter_server_extension = _load_jupyter_server_extension
