"""`course grade`: autograde every collected submission, confined, in parallel, one row each.

For every folder submitted/<learner>/<assignment>:

1. preflight (no code runs): find, read and repair the notebook against the release; static checks;
2. execution: nbgrader's own `Autograde` converter in a forked worker process, with
   `SandboxedExecute` and a kernel from the sandbox (see sandbox.py); `--workers N` run at once;
3. result: scores from the gradebook, the execution report and the findings become one
   `GradeRecord`; a submission that could not be graded gets an explicit error row instead.

Re-running is idempotent: a submission whose files, source and settings have not changed is not
executed again (its scores are re-read from the gradebook, so manual grades entered in the meantime
show up); `force=True` executes everything again, and nbgrader keeps manual grades across that too.
"""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import pwd
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from . import pipeline, sandbox
from .layout import STUDENT_ID_PATTERN, Assignment, CourseLayout
from .notebooks import grade_id, is_autograded_test, is_grade, nbgrader_meta
from .preflight import Finding, Preflight, inspect_submission, stage

GRADER_VERSION = "1"
DEFAULT_UID_BASE = 1_640_000
UID_RANGE = 4096
ZYGOTE_START_TIMEOUT_S = 600    # importing PyTorch on a busy machine
KERNEL_NAME = "course-sandbox"
WORKER_GRACE_S = 120            # nbgrader's own work around the kernel, on a busy machine


@dataclasses.dataclass
class GradeRecord:
    """One row of the grades CSV."""

    student: str
    assignment: str
    status: str                       # "graded" or "error"
    score: float = 0.0
    max_score: float = 0.0
    auto_score: float = 0.0
    auto_max: float = 0.0
    manual_pending: float = 0.0       # points still waiting for the instructor
    needs_review: bool = False
    reasons: list[str] = dataclasses.field(default_factory=list)
    findings: list[dict] = dataclasses.field(default_factory=list)
    failed_cells: list[str] = dataclasses.field(default_factory=list)
    passed_cells: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    executed: bool = False            # False when an unchanged submission was not run again
    log: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class GradingRun:
    records: list[GradeRecord]
    csv_path: Path
    report_path: Path
    sandbox: str
    wall_seconds: float
    workers: int
    sandbox_uids: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Job:
    index: int
    student: str
    assignment: Assignment
    submission_dir: Path
    staged_dir: Path
    fingerprint: str
    preflight: Preflight
    log_path: Path
    report_path: Path
    result_path: Path
    status_path: Path | None = None


# ------------------------------------------------------------------------------------------------
# Sandbox session: the zygote and the kernelspec, for one grading run.
# ------------------------------------------------------------------------------------------------
class SandboxSession:
    """Starts the zygote (see sandbox.py) and the kernelspec that asks it for kernels."""

    def __init__(self, layout: CourseLayout, preload: list[str], workers: int, isolation: str = "auto",
                 uid_base: int = DEFAULT_UID_BASE):
        self.layout, self.preload, self.workers, self.isolation = layout, preload, workers, isolation
        self.uid_base = uid_base
        self.process = None
        self.profile: dict = {}
        self.description = "not started"

    def uid_for(self, slot: int) -> int:
        return self.uids[slot]

    def _allocate_uids(self, count: int) -> list[int]:
        """Numeric uids no account and no other grading run uses, held (flock) until the run ends.

        Two grading runs on one machine must never share a uid: each run kills every process of
        its uids when a kernel ends, and would kill the other run's kernels.
        """
        lock_dir = Path(tempfile.gettempdir()) / "course-grading-uids"
        lock_dir.mkdir(mode=0o700, exist_ok=True)
        self.uid_locks, uids = [], []
        for uid in range(self.uid_base, self.uid_base + UID_RANGE):
            try:
                pwd.getpwuid(uid)
                continue  # an account
            except KeyError:
                pass
            handle = open(lock_dir / f"{uid}.lock", "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue  # another grading run holds it
            if sandbox_processes(uid, uid + 1):
                handle.close()
                continue  # left over from a run that crashed: not safe to reuse
            self.uid_locks.append(handle)
            uids.append(uid)
            if len(uids) == count:
                return uids
        raise RuntimeError(f"no free sandbox uid in {self.uid_base}..{self.uid_base + UID_RANGE}; "
                           "are other grading runs active? (--uid-base chooses another range)")

    def __enter__(self) -> "SandboxSession":
        try:
            return self._start()
        except BaseException:
            self.__exit__(None, None, None)  # no half-started zygote or folder left behind
            raise

    def _start(self) -> "SandboxSession":
        self.uids = self._allocate_uids(self.workers + 1) if os.geteuid() == 0 else list(range(self.workers + 1))
        base = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
        self.root = Path(tempfile.mkdtemp(prefix="cg-", dir=base))
        os.chmod(self.root, 0o711)
        for name, mode in (("zygote", 0o700), ("slots", 0o711), ("shared", 0o755), ("probe", 0o700)):
            (self.root / name).mkdir()
            os.chmod(self.root / name, mode)
        (self.root / "shared" / "matplotlib").mkdir()
        spec_dir = self.root / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-I", "-S", sandbox.__file__, "launch", "{connection_file}"],
            "display_name": "Course grading sandbox", "language": "python", "interrupt_mode": "signal",
        }))
        package_dir = Path(__file__).resolve().parents[1]
        hide = [str(self.layout.root), str(self.layout.exchange_dir), str(self.layout.source_dir),
                str(self.layout.output_dir), str(Path.home())]
        if (package_dir.parent / "nbgrader_config.py").is_file():
            hide.append(str(package_dir.parent))  # the course repository itself, with its solutions and history
        expose = [sys.prefix, sys.base_prefix, sys.exec_prefix, str(package_dir), str(self.layout.root / "data")]
        for hidden in hide:
            if sandbox._inside(str(self.root), os.path.realpath(hidden)):
                raise RuntimeError(f"the sandbox folder {self.root} lies inside {hidden}, which kernels must not see")
        config = {"socket": str(self.root / "zygote" / "zygote.sock"), "preload": self.preload,
                  "guard_file": str(Path(__file__).with_name("kernel_guard.py")), "hide": hide, "expose": expose,
                  "isolation": self.isolation, "probe_dir": str(self.root / "probe"),
                  "probe_uid": self.uids[self.workers], "shared_config_dir": str(self.root / "shared" / "matplotlib")}
        config_path = self.root / "zygote" / "config.json"
        config_path.write_text(json.dumps(config))
        self.socket = config["socket"]
        self.layout.output_dir.joinpath("logs").mkdir(parents=True, exist_ok=True)
        self.log_file = open(self.layout.output_dir / "logs" / "sandbox.log", "ab")
        self.process = subprocess.Popen([sys.executable, "-I", sandbox.__file__, "serve", str(config_path)],
                                        stdout=subprocess.PIPE, stderr=self.log_file, stdin=subprocess.DEVNULL)
        ready, _, _ = select.select([self.process.stdout], [], [], ZYGOTE_START_TIMEOUT_S)
        line = self.process.stdout.readline() if ready else b""
        if not line:
            raise RuntimeError(f"the grading sandbox did not start; see {self.log_file.name}")
        ready = json.loads(line)
        self.profile = ready["profile"]
        self.description = _describe_profile(ready)
        return self

    def __exit__(self, *exc_info) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if getattr(self, "log_file", None):
            self.log_file.close()
        if getattr(self, "root", None):
            shutil.rmtree(self.root, ignore_errors=True)
        for handle in getattr(self, "uid_locks", []):
            handle.close()

    def sweep(self, slot: int) -> None:
        """Kill whatever a slot's kernels left running (root only; otherwise the supervisor did it)."""
        if self.profile.get("own_uid") and not sandbox.sweep_uid(self.uid_for(slot)):
            message = (f"processes of sandbox uid {self.uid_for(slot)} survived the sweep; "
                       "its next kernel may be short of processes\n")
            if getattr(self, "log_file", None):
                self.log_file.write(message.encode())
            print(message, end="", file=sys.stderr, flush=True)


def sandbox_processes(first_uid: int, end_uid: int) -> list[tuple[int, int]]:
    """(pid, uid) of every running process whose uid lies in [first_uid, end_uid)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uid = os.stat(f"/proc/{entry}").st_uid
            except OSError:
                continue
            if first_uid <= uid < end_uid:
                found.append((int(entry), uid))
    return found


def _describe_profile(ready: dict) -> str:
    profile = ready["profile"]
    parts = []
    parts.append("own unprivileged uid per worker" if profile["own_uid"] else
                 "user namespace (no capabilities)" if profile["user_namespace"] else "grader's uid")
    parts.append("course files hidden (mount namespace)" if profile["mounts"] else "course files NOT hidden")
    parts.append("no network" if profile["network"] else "network NOT isolated")
    parts.append("limits on memory, CPU time, processes, file size, open files")
    if profile.get("unavailable"):
        parts.append("stronger isolation failed: " + " / ".join(profile["unavailable"]))
    return "; ".join(parts)


# ------------------------------------------------------------------------------------------------
# Fingerprints and state (idempotent re-runs).
# ------------------------------------------------------------------------------------------------
def _fingerprint(submission_dir: Path, source_hash: str, settings: str) -> str:
    digest = hashlib.sha256(f"{GRADER_VERSION}\0{source_hash}\0{settings}\0".encode())
    pipeline.hash_tree(submission_dir, digest)
    return digest.hexdigest()


def _load_state(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def ensure_release(layout: CourseLayout, assignments: list[Assignment], log=print) -> None:
    """Regenerate release/ and the gradebook entries of assignments whose source changed."""
    stale = pipeline.stale_releases(layout, assignments)
    if stale:
        log(f"generating the release of {', '.join(stale)} (new or changed source)")
        pipeline.generate_release(layout, stale)


# ------------------------------------------------------------------------------------------------
# Reading grades back.
# ------------------------------------------------------------------------------------------------
def _cell_roles(layout: CourseLayout, assignment: Assignment) -> tuple[set[str], set[str]]:
    """(autograded test cell ids, manually graded cell ids) of an assignment, from its release."""
    automatic, manual = set(), set()
    for name in assignment.notebooks:
        release = json.loads((layout.release_dir / assignment.id / f"{name}.ipynb").read_text(encoding="utf-8"))
        for cell in release["cells"]:
            if is_autograded_test(cell):
                automatic.add(grade_id(cell))
            elif is_grade(cell):
                manual.add(grade_id(cell))
    return automatic, manual


def _max_points(layout: CourseLayout, assignment: Assignment) -> float:
    total = 0.0
    for name in assignment.notebooks:
        release = json.loads((layout.release_dir / assignment.id / f"{name}.ipynb").read_text(encoding="utf-8"))
        total += sum(float(nbgrader_meta(cell).get("points", 0)) for cell in release["cells"] if is_grade(cell))
    return total


def read_scores(layout: CourseLayout, record: GradeRecord, assignment: Assignment) -> bool:
    """Fill a record's scores from the gradebook; False if nbgrader has no such submission."""
    from nbgrader.api import Gradebook, MissingEntry

    automatic, manual = _cell_roles(layout, assignment)
    with Gradebook(layout.db_url, layout.course_id) as gradebook:
        try:
            submission = gradebook.find_submission(assignment.id, record.student)
        except MissingEntry:
            return False
        grades = [grade for notebook in submission.notebooks for grade in notebook.grades]
        if not grades:
            return False
        record.score = record.auto_score = record.auto_max = record.manual_pending = record.max_score = 0.0
        record.failed_cells, record.passed_cells = [], []
        for grade in grades:
            maximum = float(grade.max_score)
            record.max_score += maximum
            record.score += float(grade.score or 0.0)
            if grade.name in automatic:
                record.auto_max += maximum
                auto = float(grade.auto_score or 0.0)
                record.auto_score += auto
                (record.passed_cells if auto >= maximum else record.failed_cells).append(grade.name)
            elif grade.name in manual and grade.manual_score is None and grade.auto_score is None:
                record.manual_pending += maximum
    return True


# ------------------------------------------------------------------------------------------------
# The worker (a forked process per submission).
# ------------------------------------------------------------------------------------------------
def _copy_support_files(assignment: Assignment, destination: Path, uid: int | None) -> None:
    for path in sorted(assignment.source_dir.rglob("*")):
        relative = path.relative_to(assignment.source_dir)
        if path.suffix == ".ipynb" or any(part in (".ipynb_checkpoints", "__pycache__") for part in relative.parts):
            continue
        target = destination / relative
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    if uid is not None:
        for path in [destination, *destination.rglob("*")]:
            os.chown(path, uid, uid)


def _prepare_slot(session: SandboxSession, job: _Job, slot: int, settings) -> Path:
    uid = session.uid_for(slot) if session.profile.get("own_uid") else None
    slot_dir = session.root / "slots" / f"{slot}-{job.index}"
    home, runtime, private = slot_dir / "home", slot_dir / "rt", slot_dir / "private"
    slot_dir.mkdir(mode=0o711)
    for folder, mode in ((home, 0o700), (runtime, 0o700), (private, 0o700)):
        folder.mkdir(mode=mode)
    _copy_support_files(job.assignment, home, uid)
    if uid is not None:
        os.chown(runtime, uid, uid)
    job.status_path = private / "status.json"
    request = {
        "work_dir": str(home), "uid": uid, "status_file": str(job.status_path),
        "kernel_log": str(job.log_path.with_suffix(".kernel.log")),
        "limits": {"memory_mb": settings.memory_mb, "cpu_s": settings.effective_cpu_s,
                   "wall_s": settings.total_timeout_s, "processes": settings.max_processes,
                   "file_mb": 256, "open_files": 1024},
        "guard": {"message_chars": 200_000, "cell_chars": 2_000_000},
    }
    (private / "request.json").write_text(json.dumps(request))
    return slot_dir


def _worker(layout: CourseLayout, session: SandboxSession, job: _Job, slot_dir: Path, cell_timeout: int) -> None:
    """Runs in the forked worker: nbgrader's Autograde for one learner and one assignment."""
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput,
                                        SaveAutoGrades)
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.utils import capture_log

    from .execute import SandboxedExecute

    os.environ.pop("NBGRADER_EXECUTION", None)
    os.environ[sandbox.SOCKET_ENV] = session.socket
    os.environ[sandbox.REQUEST_ENV] = str(slot_dir / "private" / "request.json")
    os.environ["JUPYTER_PATH"] = str(session.root)
    os.environ["JUPYTER_RUNTIME_DIR"] = str(slot_dir / "rt")
    pipeline.ensure_tools_on_path()
    config = layout.nbgrader_config(
        CourseDirectory={"submitted_directory": str(job.staged_dir.parent.parent),
                         "student_id": job.student, "assignment_id": job.assignment.id},
        Execute={"timeout": cell_timeout, "kernel_name": KERNEL_NAME, "interrupt_on_timeout": True,
                 "startup_timeout": 120, "shutdown_kernel": "immediate",
                 # After a timeout the kernel may never go idle: that is a failed cell, not a failed notebook.
                 "raise_on_iopub_timeout": False},
        SandboxedExecute={"report_path": str(job.report_path), "status_path": str(job.status_path)},
        # Unix sockets in the slot's runtime folder: they reach into the kernel's network namespace.
        KernelManager={"transport": "ipc", "ip": str(slot_dir / "rt" / "kernel"),
                       "connection_file": str(slot_dir / "rt" / "kernel.json")},
        OverwriteCells={"add_missing_cells": False},
        Autograde={"autograde_preprocessors": [SandboxedExecute, IgnorePattern, ClearMetadataPreprocessor,
                                               LimitOutput, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]},
    )
    app = Autograde(coursedir=CourseDirectory(config=config), config=config)
    app.force = True
    app.create_student = True
    result = capture_log(app)
    job.result_path.write_text(json.dumps(result))
    print(result.get("log", ""), result.get("error", ""), sep="\n", flush=True)


def _import_for_workers() -> None:
    """Import what every worker needs once, before forking (imports cost seconds on a busy machine)."""
    import importlib

    for module in ("nbconvert.preprocessors", "nbgrader.converters", "nbgrader.preprocessors", "nbgrader.utils",
                   "course_utils.grading.execute"):
        importlib.import_module(module)


def _start_worker(layout, session, job, slot, cell_timeout) -> tuple[int, Path]:
    slot_dir = _prepare_slot(session, job, slot, job.assignment.settings)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setsid()
            log_fd = os.open(job.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.write(log_fd, f"\n===== grading {job.student}/{job.assignment.id} at {time.ctime()} =====\n".encode())
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            _worker(layout, session, job, slot_dir, cell_timeout)
            code = 0
        except BaseException:
            try:
                os.write(2, traceback.format_exc().encode())
            except OSError:
                pass
        finally:
            os._exit(code)
    return pid, slot_dir


def _run_jobs(layout: CourseLayout, session: SandboxSession, jobs: list[_Job], workers: int,
              cell_timeout_override: int | None, progress) -> dict[int, dict]:
    """Execute the jobs, `workers` at a time; returns job index -> {"seconds", "outcome"}."""
    pending = list(jobs)
    running: dict[int, tuple[_Job, int, float, float, Path]] = {}
    free_slots = list(range(workers))
    outcomes: dict[int, dict] = {}
    try:
        _schedule(layout, session, pending, running, free_slots, outcomes, cell_timeout_override, progress)
    except BaseException:  # Ctrl-C or a grader bug: no worker or kernel may outlive the run
        for pid, (job, slot, started, deadline, slot_dir) in running.items():
            try:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            session.sweep(slot)
        raise
    return outcomes


def _schedule(layout, session, pending, running, free_slots, outcomes, cell_timeout_override, progress) -> None:
    while pending or running:
        while pending and free_slots:
            job = pending.pop(0)
            slot = free_slots.pop(0)
            settings = job.assignment.settings
            cell_timeout = cell_timeout_override or settings.cell_timeout_s
            pid, slot_dir = _start_worker(layout, session, job, slot, cell_timeout)
            deadline = time.monotonic() + settings.total_timeout_s + WORKER_GRACE_S
            running[pid] = (job, slot, time.monotonic(), deadline, slot_dir)
        finished = []
        for pid, (job, slot, started, deadline, slot_dir) in running.items():
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                finished.append((pid, "finished" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else "crashed"))
            elif time.monotonic() > deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                os.waitpid(pid, 0)
                finished.append((pid, "overran"))
        for pid, outcome in finished:
            job, slot, started, deadline, slot_dir = running.pop(pid)
            session.sweep(slot)
            shutil.rmtree(slot_dir, ignore_errors=True)
            free_slots.append(slot)
            outcomes[job.index] = {"seconds": round(time.monotonic() - started, 2), "outcome": outcome}
            progress(job, outcomes[job.index])
        if not finished:
            time.sleep(0.05)


# ------------------------------------------------------------------------------------------------
# The batch.
# ------------------------------------------------------------------------------------------------
def _error_record(student: str, assignment_id: str, reason: str, max_score: float = 0.0,
                  findings: list[Finding] = (), log: str = "", auto_max: float = 0.0) -> GradeRecord:
    return GradeRecord(student, assignment_id, "error", max_score=max_score, auto_max=auto_max, needs_review=True,
                       reasons=[reason], findings=[dataclasses.asdict(f) for f in findings], log=log)


def _points_of(layout: CourseLayout, assignment: Assignment) -> dict:
    """max_score and auto_max of an assignment, for rows of submissions that could not be graded."""
    automatic, _ = _cell_roles(layout, assignment)
    auto_max = 0.0
    for name in assignment.notebooks:
        release = json.loads((layout.release_dir / assignment.id / f"{name}.ipynb").read_text(encoding="utf-8"))
        auto_max += sum(float(nbgrader_meta(cell).get("points", 0)) for cell in release["cells"]
                        if grade_id(cell) in automatic)
    return {"max_score": _max_points(layout, assignment), "auto_max": auto_max}


def _summarize_execution(record: GradeRecord, report: dict) -> None:
    ending = report.get("kernel_ending")
    for label, cell in report.get("cells", {}).items():
        if cell.get("kernel_died"):
            record.reasons.append(f"the kernel {ending.get('ending') if ending else 'died'} in {label}; "
                                  "later cells were not run")
        if cell.get("canary_missing_without_error"):
            record.reasons.append(f"test {label} did not run to its end without an error (tests were tampered with)")
        if cell.get("timeout"):
            record.reasons.append(f"{label} hit the time limit")
        if cell.get("restore_failed"):
            record.reasons.append(f"the grader could not reset the kernel before {label} (tampering suspected)")
        if cell.get("output_cut"):
            record.reasons.append(f"{label} printed too much; its output was cut")
    integrity = report.get("integrity")
    if integrity and not integrity.get("ok"):
        problems = integrity.get("problems", [])
        shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
        record.reasons.append(f"runtime check: {shown}")


def grade(layout: CourseLayout, *, workers: int = 1, cell_timeout: int | None = None, force: bool = False,
          students: list[str] | None = None, assignment_ids: list[str] | None = None, feedback: bool = True,
          isolation: str = "auto", uid_base: int = DEFAULT_UID_BASE, log=print) -> GradingRun:
    """Grade every collected submission; always writes the CSV and the report."""
    from .report import write_csv, write_report

    started = time.monotonic()
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    assignments = {a.id: a for a in layout.assignments()}
    if assignment_ids:
        unknown = sorted(set(assignment_ids) - set(assignments))
        if unknown:
            raise ValueError(f"unknown assignment(s): {', '.join(unknown)}; known: {', '.join(sorted(assignments))}")
    ensure_release(layout, list(assignments.values()), log=log)
    pipeline.secure_gradebook(layout)
    state_path = layout.output_dir / "state.json"
    state = _load_state(state_path)
    source_hashes = {aid: pipeline.source_fingerprint(a) for aid, a in assignments.items()}
    records: dict[tuple[str, str], GradeRecord] = {}
    jobs: list[_Job] = []
    staged_root = layout.output_dir / "staged"
    logs_root = layout.output_dir / "logs"
    if not layout.submitted_dir.is_dir():
        log(f"nothing to grade: {layout.submitted_dir} does not exist (run `course collect` first)")
    for student_dir in sorted(layout.submitted_dir.iterdir()) if layout.submitted_dir.is_dir() else []:
        if not student_dir.is_dir():
            continue
        for submission_dir in sorted(student_dir.iterdir()):
            if not submission_dir.is_dir():
                continue
            student, assignment_id = student_dir.name, submission_dir.name
            key = (student, assignment_id)
            if (students and student not in students) or (assignment_ids and assignment_id not in assignment_ids):
                previous = state.get(f"{student}/{assignment_id}")
                if previous:  # not selected this time: its last result stays in the CSV
                    records[key] = GradeRecord(**dict(previous["record"], executed=False))
                continue
            if not STUDENT_ID_PATTERN.match(student):
                records[key] = _error_record(student, assignment_id, "the learner id is not allowed "
                                             "(letters, digits and . _ @ - only); rename the folder to grade it")
                continue
            if assignment_id not in assignments:
                records[key] = _error_record(student, assignment_id, f"there is no assignment {assignment_id!r}")
                continue
            assignment = assignments[assignment_id]
            timeout = cell_timeout or assignment.settings.cell_timeout_s
            fingerprint = _fingerprint(submission_dir, source_hashes[assignment_id], f"{timeout}")
            log_path = logs_root / assignment_id / f"{student}.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            previous = None if force else state.get(f"{student}/{assignment_id}")
            if previous and previous.get("fingerprint") == fingerprint and (
                    previous["record"]["status"] != "graded" or (layout.autograded_dir / student / assignment_id).is_dir()):
                record = GradeRecord(**previous["record"])
                record.executed = False
                records[key] = record
                continue
            try:
                preflight = inspect_submission(submission_dir, assignment, layout.release_dir / assignment_id)
            except Exception as error:
                records[key] = _error_record(student, assignment_id, f"could not be read: {error}",
                                             log=str(log_path), **_points_of(layout, assignment))
                continue
            if preflight.unreadable and not preflight.notebooks:
                reasons = [f.message for f in preflight.findings if f.severity == "error"]
                records[key] = _error_record(student, assignment_id, "; ".join(reasons) or "no notebook to grade",
                                             findings=preflight.findings, log=str(log_path), **_points_of(layout, assignment))
                continue
            staged_dir = staged_root / student / assignment_id
            stage(preflight, submission_dir, staged_dir)
            jobs.append(_Job(len(jobs), student, assignment, submission_dir, staged_dir, fingerprint, preflight,
                             log_path, log_path.with_suffix(".execution.json"), log_path.with_suffix(".result.json")))
    sandbox_description = "not needed (nothing to execute)"
    sandbox_uids: list[int] = []
    outcomes: dict[int, dict] = {}
    if jobs:
        preload = sorted({name for job in jobs for name in job.assignment.settings.preload})
        for job in jobs:
            for stale in (job.report_path, job.result_path):
                stale.unlink(missing_ok=True)

        def progress(job: _Job, outcome: dict) -> None:
            log(f"  graded {job.student} / {job.assignment.id} in {outcome['seconds']:.1f} s")

        log(f"grading {len(jobs)} submission(s) with {workers} worker(s)")
        _import_for_workers()
        with SandboxSession(layout, preload, min(workers, len(jobs)), isolation, uid_base) as session:
            sandbox_description = session.description
            sandbox_uids = list(session.uids) if session.profile.get("own_uid") else []
            outcomes = _run_jobs(layout, session, jobs, min(workers, len(jobs)), cell_timeout, progress)
    for job in jobs:
        records[(job.student, job.assignment.id)] = _collect_result(layout, job, outcomes.get(job.index, {}))
    if feedback:
        _write_feedback(layout, records, log)
    for record in records.values():
        if record.status == "graded" and not record.executed and record.assignment in assignments:
            read_scores(layout, record, assignments[record.assignment])  # manual grades entered since
    new_state = dict(state)
    for (student, assignment_id), record in records.items():
        job = next((j for j in jobs if j.student == student and j.assignment.id == assignment_id), None)
        if job is not None:  # errors too: a re-run gives the same row until the files change (or --force)
            new_state[f"{student}/{assignment_id}"] = {"fingerprint": job.fingerprint, "record": record.to_dict()}
    layout.output_dir.mkdir(parents=True, exist_ok=True)
    state_path.write_text(json.dumps(new_state, indent=1))
    ordered = [records[key] for key in sorted(records)]
    csv_path = write_csv(ordered, layout.output_dir / "grades.csv")
    wall = round(time.monotonic() - started, 2)
    report_path = write_report(ordered, layout.output_dir / "report.md", sandbox_description, wall, workers)
    return GradingRun(ordered, csv_path, report_path, sandbox_description, wall, workers, sandbox_uids)


def _root_cause(text: str) -> str:
    """The most specific error line of an nbgrader log (not its generic closing message)."""
    exceptions = [line.strip() for line in text.splitlines()
                  if re.match(r"^\s*[\w.]+(Error|Exception|Exit|Interrupt)\b.*:", line) and "NbGraderException" not in line]
    if exceptions:
        return exceptions[-1][:300]
    errors = [line.strip() for line in text.splitlines() if "[ERROR]" in line and "Please see" not in line]
    return (errors[-1] if errors else "no details in the log")[:300]


def _write_feedback(layout: CourseLayout, records: dict, log) -> None:
    """HTML feedback for every graded submission that has none or was graded again (one nbgrader run each)."""
    wanted: dict[str, list[GradeRecord]] = {}
    for record in records.values():
        if record.status == "graded" and (record.executed or not (
                layout.feedback_dir / record.student / record.assignment).is_dir()):
            wanted.setdefault(record.assignment, []).append(record)
    for assignment_id, pending in wanted.items():
        log(f"writing feedback for {len(pending)} submission(s) of {assignment_id}")
        # One nbgrader run for many learners; a single run per learner when only a few changed.
        for student in ([record.student for record in pending] if len(pending) <= 2 else ["*"]):
            try:
                pipeline.generate_feedback(layout, assignment_id, student)
            except Exception as error:  # reported per learner below
                log(f"  feedback: {str(error).splitlines()[0]}")
        for record in pending:
            if not any((layout.feedback_dir / record.student / assignment_id).glob("*.html")):
                record.reasons.append("feedback could not be generated (see the grading log)")


def _collect_result(layout: CourseLayout, job: _Job, outcome: dict) -> GradeRecord:
    record = GradeRecord(job.student, job.assignment.id, "graded", executed=True, log=str(job.log_path),
                         seconds=outcome.get("seconds", 0.0),
                         findings=[dataclasses.asdict(f) for f in job.preflight.findings])
    review_findings = [f for f in job.preflight.findings if f.severity in ("review", "error")]
    record.reasons += [f.describe() for f in review_findings]
    if job.preflight.unreadable:
        record.reasons.append(f"not graded (unreadable or missing): {', '.join(job.preflight.unreadable)}")
    try:
        result = json.loads(job.result_path.read_text())
    except (OSError, ValueError):
        result = None
    try:
        report = json.loads(job.report_path.read_text())
    except (OSError, ValueError):
        report = None
    if report is not None:
        _summarize_execution(record, report)
    found = read_scores(layout, record, job.assignment)
    if result is None or not result.get("success") or not found:
        if outcome.get("outcome") == "overran":
            reason = "grading took longer than the assignment's total time limit and was stopped"
        elif result is None:
            reason = "the grading worker crashed"
        else:
            reason = "nbgrader could not grade it: " + _root_cause(result.get("log", "") + "\n" + result.get("error", ""))
        failed = _error_record(job.student, job.assignment.id, reason, findings=job.preflight.findings,
                               log=str(job.log_path), **_points_of(layout, job.assignment))
        failed.reasons += record.reasons
        failed.seconds = record.seconds
        failed.executed = True
        return failed
    record.needs_review = bool(record.reasons)
    return record
