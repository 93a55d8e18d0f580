"""Stage 3 of `course grade`: the jobs run, `workers` at a time, in one sandbox session.

The session (session.py) starts the sandbox manager with what every kernel imports ahead: the
assignments' `preload` setting and every module their fixed cells import or reach, so that the
kernel guard's snapshot holds the tests' references (kernel_guard.py). Each job then gets a worker
slot and a forked worker process that runs nbgrader's own `Autograde` converter with
`SandboxedExecute` (execute.py); the kernel nbgrader starts comes from the sandbox, confined, with
the limits of the job's KernelRequest (messages.py). A worker that outlives the assignment's total
time limit (and some grace for nbgrader's own work) is killed; whatever happens, no worker or kernel
outlives the run.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from pathlib import Path

from ..exchange import pipeline
from ..ground import untrusted
from ..ground.layout import Assignment, CourseLayout
from ..ground.messages import KernelRequest, Limits, WorkerResult
from ..sandbox import sandbox
from ..sandbox.session import KERNEL_NAME, SandboxSession
from .records import Admission, Execution, GradingContext, Job

WORKER_GRACE_S = 120  # nbgrader's own work around the kernel, on a busy machine


def run(context: GradingContext, admission: Admission) -> Execution:
    """Run every job in the sandbox; the outcome of each worker process, by job index."""
    layout, jobs, workers, log = context.layout, admission.jobs, context.workers, context.log
    if not jobs:
        return Execution(admission, {}, "not needed (nothing to execute)", [])
    assignments = list({job.assignment.id: job.assignment for job in jobs}.values())
    preload = sorted(
        {name for assignment in assignments for name in assignment.settings.preload}
        | {name for assignment in assignments for name in _modules_the_tests_reach(assignment)}
    )
    support_files = {assignment.id: _support_files(assignment) for assignment in assignments}
    for job in jobs:
        for stale in (job.report_path, job.result_path):
            stale.unlink(missing_ok=True)

    def progress(job: Job, outcome: dict) -> None:
        log(f"  graded {job.student} / {job.assignment.id} in {outcome['seconds']:.1f} s")

    log(f"grading {len(jobs)} submission(s) with {workers} worker(s)")
    _import_for_workers(assignments)
    settings = [assignment.settings for assignment in assignments]
    default_limits = Limits(
        memory_mb=max(x.memory_mb for x in settings),
        processes=max(x.max_processes for x in settings),
        cpu_s=max(x.effective_cpu_s for x in settings),
        wall_s=max(x.total_timeout_s for x in settings),
    )
    slots = min(workers, len(jobs))
    outcomes: dict[int, dict] = {}
    description, uids = "not started", []
    try:
        with SandboxSession(
            layout, preload, slots, context.isolation, context.uid_base, default_limits=default_limits
        ) as session:
            description = session.description
            uids = list(session.uids) if session.profile.own_uid else []
            _Scheduler(layout, session, slots, context.cell_timeout, support_files, progress, outcomes).run(jobs)
    except Exception as error:  # the sandbox or a slot failed: the jobs it did not finish are error rows
        why = f"{type(error).__name__}: {error}"
        log(f"grading stopped early: {why}")
        for job in jobs:
            if job.index not in outcomes:
                outcomes[job.index] = {"seconds": 0.0, "outcome": "not run", "error": why}
                _note(job, traceback.format_exc())
        description = f"{description} (stopped early: {why})"
    return Execution(admission, outcomes, description, uids)


def _note(job: Job, text: str) -> None:
    """A line in the submission's log (the grader's own folder)."""
    try:
        with open(job.log_path, "a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text.rstrip("\n") + "\n")
    except OSError:
        pass


# ------------------------------------------------------------------------------------------------
# What every kernel gets.
# ------------------------------------------------------------------------------------------------
def _support_files(assignment: Assignment) -> dict[str, str]:
    """The assignment's data files a kernel gets in its home folder: relative path -> source path."""
    files = {}
    for path in sorted(assignment.source_dir.rglob("*")):
        relative = path.relative_to(assignment.source_dir)
        if path.suffix == ".ipynb" or any(part in (".ipynb_checkpoints", "__pycache__") for part in relative.parts):
            continue
        if path.is_file() and not path.is_symlink():
            files[str(relative)] = str(path)
    return files


def _modules_the_tests_reach(assignment: Assignment) -> list[str]:
    """What the assignment's fixed cells import or reach in the kernel: the warm kernels import it ahead,
    so that the kernel guard's snapshot holds the tests' references (see kernel_guard.py). The hidden
    parts of the test cells run in the grader (judge.py), never in the kernel: what they import is not
    the kernel's to load."""
    from ..ground.notebooks import is_solution, load_json, source_text
    from ..judging.execute import split_hidden
    from ..judging.static_checks import modules_the_tests_reach

    sources = []
    for name in assignment.notebooks:
        notebook = load_json(assignment.source_dir / f"{name}.ipynb")
        sources += [
            split_hidden(source_text(cell))[0]
            for cell in notebook.get("cells", [])
            if cell.get("cell_type") == "code" and not is_solution(cell)
        ]
    return modules_the_tests_reach(sources)


def _import_for_workers(assignments: list[Assignment]) -> None:
    """Import what every worker needs once, before forking (imports cost seconds on a busy machine): nbgrader's
    steps, and what the judge's hidden tests import in the grader (torch above all, some 3 s of CPU that each
    forked worker would otherwise spend again)."""
    import importlib

    from ..ground.notebooks import load_json, source_text
    from ..judging.execute import split_hidden
    from ..judging.static_checks import modules_the_tests_reach

    hidden = [
        part
        for assignment in assignments
        for name in assignment.notebooks
        for cell in load_json(assignment.source_dir / f"{name}.ipynb").get("cells", [])
        if cell.get("cell_type") == "code"
        for part in [split_hidden(source_text(cell))[1]]
        if part
    ]
    judged = ["course_grader.judging.judge", *modules_the_tests_reach(hidden)]
    for module in (
        "nbconvert.preprocessors",
        "nbgrader.converters",
        "nbgrader.preprocessors",
        "nbgrader.utils",
        "course_grader.judging.execute",
    ):
        importlib.import_module(module)
    for entry in judged:  # a name ending in "?" may not be a module; nothing that fails here stops the run
        try:
            importlib.import_module(entry.rstrip("?"))
        except Exception:  # noqa: BLE001  (the hidden test will meet the same failure and say so)
            pass
    if "torch" in sys.modules:
        _use_torch_once()


def _use_torch_once() -> None:
    """What PyTorch loads on first use rather than with `import torch`, loaded here, before the workers fork: an
    optimizer's first step imports torch._dynamo (SymPy with it, some 900 modules) and torch._check the symbolic
    shapes. Otherwise every worker whose hidden test trains spends about a second of CPU on it. Done by using
    them, not by naming the modules: which ones they are changes from one PyTorch release to the next."""
    import torch

    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([weight])
    weight.sum().backward()
    optimizer.step()
    torch._check(weight.shape[0] == 1)


# ------------------------------------------------------------------------------------------------
# The workers.
# ------------------------------------------------------------------------------------------------
class _Scheduler:
    """Hands jobs to free slots, one forked worker each, and waits for them (or kills them when late)."""

    def __init__(
        self,
        layout: CourseLayout,
        session: SandboxSession,
        slots: int,
        cell_timeout: int | None,
        support_files: dict[str, dict[str, str]],
        progress,
        outcomes: dict[int, dict],
    ):
        self.layout, self.session, self.cell_timeout = layout, session, cell_timeout
        self.support_files, self.progress = support_files, progress
        self.free_slots = list(range(slots))
        self.running: dict[int, tuple[Job, int, float, float, Path]] = {}  # pid -> job, slot, start, deadline, folder
        self.outcomes = outcomes

    def run(self, jobs: list[Job]) -> dict[int, dict]:
        """Execute the jobs; job index -> {"seconds", "outcome"}."""
        pending = list(jobs)
        try:
            while pending or self.running:
                while pending and self.free_slots:
                    job, slot = pending.pop(0), self.free_slots.pop(0)
                    try:
                        self._start(job, slot, last=not pending)
                    except Exception as error:  # this job's folder or worker could not be made: its error row
                        self.free_slots.append(slot)
                        self.outcomes[job.index] = {
                            "seconds": 0.0,
                            "outcome": "not run",
                            "error": f"{type(error).__name__}: {error}",
                        }
                        _note(job, traceback.format_exc())
                if not self._reap():
                    time.sleep(0.05)
        except BaseException:  # Ctrl-C or a grader bug: no worker or kernel may outlive the run
            for pid, (_job, slot, _started, _deadline, _folder) in self.running.items():
                try:
                    os.killpg(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except OSError:
                    pass
                self.session.sweep(slot)
            raise
        return self.outcomes

    def _start(self, job: Job, slot: int, last: bool) -> None:
        settings = job.assignment.settings
        folder = self._kernel_folder(job, slot, last)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setsid()
                log_fd = os.open(job.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                os.write(
                    log_fd, f"\n===== grading {job.student}/{job.assignment.id} at {time.ctime()} =====\n".encode()
                )
                os.dup2(log_fd, 1)
                os.dup2(log_fd, 2)
                _worker(self.layout, self.session, job, slot, folder, self.cell_timeout or settings.cell_timeout_s)
                code = 0
            except BaseException:
                try:
                    os.write(2, traceback.format_exc().encode())
                except OSError:
                    pass
            finally:
                os._exit(code)
        deadline = time.monotonic() + settings.total_timeout_s + WORKER_GRACE_S
        self.running[pid] = (job, slot, time.monotonic(), deadline, folder)

    def _kernel_folder(self, job: Job, slot: int, last: bool) -> Path:
        """The job's folder in the session, with the KernelRequest the sandbox manager will read (`last`: no
        job waits after this one, so the slot's next kernel would import its libraries for nothing)."""
        folder = self.session.new_kernel_folder(slot, str(job.index))
        settings = job.assignment.settings
        job.status_path = folder / "private" / "status.json"
        request = KernelRequest(
            slot=slot,
            work_dir=str(folder / "home"),
            uid=self.session.slot_uid(slot),
            status_file=str(job.status_path),
            kernel_log=str(job.log_path.with_suffix(".kernel.log")),
            files=self.support_files[job.assignment.id],
            last=last,
            limits=Limits(
                memory_mb=settings.memory_mb,
                cpu_s=settings.effective_cpu_s,
                wall_s=settings.total_timeout_s,
                processes=settings.max_processes,
            ),
        )
        request.write(folder / "private" / "request.json")
        return folder

    def _reap(self) -> bool:
        """Collect the workers that ended or overran; True if any did."""
        finished = []
        for pid, (_job, _slot, _started, deadline, _folder) in self.running.items():
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                finished.append(
                    (pid, "finished" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else "crashed")
                )
            elif time.monotonic() > deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                os.waitpid(pid, 0)
                finished.append((pid, "overran"))
        for pid, outcome in finished:
            job, slot, started, deadline, folder = self.running.pop(pid)
            # What the kernel left is hostile data: whatever goes wrong while clearing it is noted in
            # this submission's log, and the batch goes on (the score stage makes its row).
            try:
                self.session.sweep(slot)
                problems = untrusted.remove_tree(folder)
            except Exception as error:
                problems = [f"{type(error).__name__}: {error}"]
            if problems:
                _note(job, "the kernel's folder was not removed: " + "; ".join(problems))
            self.free_slots.append(slot)
            self.outcomes[job.index] = {"seconds": round(time.monotonic() - started, 2), "outcome": outcome}
            self.progress(job, self.outcomes[job.index])
        return bool(finished)


def _worker(
    layout: CourseLayout, session: SandboxSession, job: Job, slot: int, folder: Path, cell_timeout: int
) -> None:
    """Runs in the forked worker: nbgrader's Autograde for one learner and one assignment."""
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import (
        AssignLatePenalties,
        CheckCellMetadata,
        IgnorePattern,
        LimitOutput,
        SaveAutoGrades,
    )
    from nbgrader.utils import capture_log

    from ..judging.execute import RemoveJudgedHiddenTests, SandboxedExecute

    os.environ.pop("NBGRADER_EXECUTION", None)
    os.environ[sandbox.SOCKET_ENV] = session.socket
    os.environ[sandbox.REQUEST_ENV] = str(folder / "private" / "request.json")
    os.environ["JUPYTER_PATH"] = str(session.root)
    runtime = session.runtime_dir(slot)
    os.environ["JUPYTER_RUNTIME_DIR"] = str(runtime)
    pipeline.prepare_nbgrader()
    config = layout.nbgrader_config(
        CourseDirectory={
            "submitted_directory": str(job.staged_dir.parent.parent),
            "student_id": job.student,
            "assignment_id": job.assignment.id,
        },
        Execute={
            "timeout": cell_timeout,
            "kernel_name": KERNEL_NAME,
            "interrupt_on_timeout": True,
            "startup_timeout": 120,
            "shutdown_kernel": "immediate",
            # After a timeout the kernel may never go idle: that is a failed cell, not a failed notebook.
            "raise_on_iopub_timeout": False,
        },
        SandboxedExecute={
            "report_path": str(job.report_path),
            "status_path": str(job.status_path),
            "judge_forbidden": list(job.assignment.settings.forbidden_calls),
        },
        # Unix sockets in the slot's runtime folder: they reach into the kernel's network namespace.
        KernelManager={
            "transport": "ipc",
            "ip": str(runtime / "kernel"),
            "connection_file": str(runtime / "kernel.json"),
        },
        OverwriteCells={"add_missing_cells": False},
        Autograde={
            "autograde_preprocessors": [
                SandboxedExecute,
                IgnorePattern,
                ClearMetadataPreprocessor,
                LimitOutput,
                SaveAutoGrades,
                AssignLatePenalties,
                CheckCellMetadata,
                RemoveJudgedHiddenTests,
            ]
        },
    )
    app = Autograde(coursedir=CourseDirectory(config=config), config=config)
    app.force = True
    app.create_student = True
    result = capture_log(app)
    WorkerResult(
        success=bool(result.get("success")), log=str(result.get("log", "")), error=str(result.get("error", ""))
    ).write(job.result_path)
    print(result.get("log", ""), result.get("error", ""), sep="\n", flush=True)
