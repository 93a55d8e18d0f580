"""Learners' Markdown rendered in a separate process, with a size and a time budget.

A learner's Markdown is data, and rendering it is work whose cost the learner chooses: mistune's
math and emphasis rules take time that grows with the square of some inputs (one Markdown cell of
360 KB with math took about 200 s), and nbconvert renders every cell of a notebook in the process
that asked for the page: `course grade` writing everyone's feedback, or the formgrader's server. So
the feedback pages and the formgrader (both call the ``markdown2html`` filter of safe_html.py)
render through this module:

- a cell larger than ``CELL_CHARS`` is not rendered at all;
- every other cell is rendered by one worker process (``python -m course_grader.ground.render``,
  started once and reused), which must answer within ``CELL_SECONDS``, and all the cells of one
  notebook within ``NOTEBOOK_SECONDS`` together; a worker that runs late is killed and a new one
  started for the next cell;
- a cell that is not rendered shows a note that says why, and its first lines as plain text, so the
  instructor can still read the answer and the learner knows what happened. The other cells and the
  other learners' pages are rendered as usual.

The budgets are far above what course notebooks need: the longest solution notebook renders all its
Markdown in well under a second (`tests/test_grading_feedback.py` measures it).
"""

from __future__ import annotations

import html
import json
import os
import selectors
import subprocess
import sys
import threading
import time

CELL_CHARS = 100_000
CELL_SECONDS = 5.0
NOTEBOOK_SECONDS = 30.0
SHOWN_CHARS = 2_000  # of a cell that was not rendered, shown as plain text
WORKER_BYTES = 2 << 30  # address space of the worker (it imports no PyTorch)


def not_rendered(source: str, why: str) -> str:
    """The note that stands in for a cell that was not rendered: why, and the start of its text."""
    shown = source[:SHOWN_CHARS] + ("\n..." if len(source) > SHOWN_CHARS else "")
    return (
        f'<div class="alert alert-warning"><p><strong>This Markdown cell was not rendered:</strong> {html.escape(why)}</p>'
        f"<pre>{html.escape(shown)}</pre></div>"
    )


class RenderBudget:
    """The time one notebook's Markdown may take; kept in the exporter's ``resources``, one per page."""

    def __init__(self, seconds: float = NOTEBOOK_SECONDS):
        self.left = seconds


def _limit_memory() -> None:  # in the worker, before it starts: Markdown gets no more than this
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_BYTES, WORKER_BYTES))


class _Worker:
    """One rendering process, reused across cells and notebooks; replaced when it runs late or dies."""

    def __init__(self):
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        environment = {key: value for key, value in os.environ.items() if key in ("PATH", "LANG", "LC_ALL", "HOME")}
        environment["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
        return subprocess.Popen(
            [sys.executable, "-m", "course_grader.ground.render"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=environment,
            preexec_fn=_limit_memory,
        )

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def render(self, request: dict, seconds: float) -> dict | None:
        """The worker's answer (``html`` or ``error``), or None if it did not answer within ``seconds``."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._process = self._start()
            process = self._process
            try:
                process.stdin.write(json.dumps(request).encode() + b"\n")
                process.stdin.flush()
            except OSError:
                self._stop()
                return None
            selector = selectors.DefaultSelector()
            selector.register(process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + seconds
            answer = b""
            while not answer.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(timeout=left):
                    self._stop()
                    return None
                chunk = os.read(process.stdout.fileno(), 1 << 20)
                if not chunk:  # the worker died
                    self._stop()
                    return None
                answer += chunk
            selector.close()
            return json.loads(answer)


_WORKER = _Worker()


def render_markdown(source: str, attachments: dict | None, path: str, budget: RenderBudget) -> str:
    """``source`` as safe HTML, rendered by the worker within the budgets, or the note that says why not."""
    if len(source) > CELL_CHARS:
        return not_rendered(source, f"it has {len(source):,} characters, more than the {CELL_CHARS:,} a cell may have.")
    if budget.left <= 0:
        return not_rendered(source, f"the notebook's Markdown took more than {NOTEBOOK_SECONDS:g} s to render.")
    seconds = min(CELL_SECONDS, budget.left)
    started = time.monotonic()
    answer = _WORKER.render({"source": source, "attachments": attachments or {}, "path": path}, seconds)
    budget.left -= time.monotonic() - started
    if answer is None:
        return not_rendered(source, f"it took more than {seconds:.3g} s to render.")
    if "error" in answer:
        return not_rendered(source, f"the renderer failed on it ({answer['error']}).")
    return answer["html"]


def _serve() -> None:
    from .safe_html import markdown_to_safe_html

    for line in sys.stdin.buffer:
        request = json.loads(line)
        try:
            answer = {"html": markdown_to_safe_html(request["source"], request["attachments"], request["path"])}
        except Exception as error:  # noqa: BLE001  (any failure on learner input is that cell's note)
            answer = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
        sys.stdout.buffer.write(json.dumps(answer).encode() + b"\n")
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    _serve()
