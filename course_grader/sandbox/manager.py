"""The sandbox manager: one per grading run, with the grader's rights (see sandbox.py for the whole).

It chooses the strongest profile this machine allows (probes.py), creates each kernel's cgroup
(limits.py), keeps one warm kernel per worker slot (bubblewrap) or forks one on demand (the
fallback), hands each launcher a kernel, enforces the wall-clock limit and (where the kernel's cgroup counts
it) the CPU-time budget of the whole kernel, records how each kernel ended, and empties a slot
before it is reused. It is one thread with one select loop, so that it may
fork at any time.
"""

from __future__ import annotations

import base64
import gc
import os
import select
import signal
import socket
import sys
import time

from ..ground import untrusted
from ..ground.messages import (
    TERMINATE,
    Event,
    Hello,
    KernelAssignment,
    KernelRequest,
    KernelStatus,
    Limits,
    ManagerConfig,
    ManagerReady,
    MessageError,
    WarmReady,
    WarmSetup,
)
from . import bwrap, limits, namespaces, probes, wire
from .warmkernel import THREAD_ENV, become_uid, load_guard, preload, run_kernel

MAX_SUPPORT_BYTES = 64 << 20
MAX_WARM_FAILURES = 3
WARM_START_TIMEOUT_S = probes.WARM_START_TIMEOUT_S


class Kernel:
    """One sandboxed kernel, warm or running, as the manager sees it."""

    def __init__(self, slot: int, pid: int, cgroup, control: socket.socket | None):
        self.slot, self.pid, self.cgroup, self.control = slot, pid, cgroup, control
        self.ready = control is None  # forked kernels start their assignment at once
        self.started = time.monotonic()
        self.assigned_at: float | None = None
        self.request: KernelRequest | None = None  # set when it is assigned to a submission
        self.launcher: socket.socket | None = None
        self.ending: str | None = None
        self.status: int | None = None
        self.usage = None
        self.cpu_base: float | None = None  # the cgroup's CPU time when the kernel was assigned

    def alive(self) -> bool:
        return self.status is None


class Manager:
    def __init__(self, config: ManagerConfig):
        self.config = config
        self.is_root = os.geteuid() == 0
        self.bwrap = bwrap.find() if config.isolation in ("auto", "bwrap") else None
        self.kernels: dict[int, Kernel] = {}  # pid -> kernel
        self.warm: dict[int, Kernel] = {}  # slot -> the warm kernel waiting for it
        self.running: dict[int, Kernel] = {}  # slot -> the kernel serving it
        self.generation: dict[int, int] = {}
        self.failures: dict[int, int] = {}  # slot -> warm kernels that died before their assignment
        self.marker = os.path.join(config.marker_dir, "grader-only")
        self.cgroups = None
        self.memory_note = ""
        self.cpu_note = ""
        self.hide, self.mount_back = [], []

    # -- choosing the profile -----------------------------------------------------------------
    def choose(self) -> dict:
        """The memory limit's mechanism, then the strongest profile this machine allows (probes.py)."""
        notes = []
        self.cgroups, self.memory_note = limits.choose_memory_limit(
            self.config.memory, f"course-grading-{os.getpid()}", notes
        )
        self.cpu_note = limits.cpu_budget_note(self.cgroups)
        self.hide, self.mount_back = namespaces.plan_mounts(
            self.config.hide, self.config.expose, need_traversal=self.is_root
        )
        return probes.choose_profile(self, notes)

    # -- starting kernels -----------------------------------------------------------------
    def spawn_bwrap(
        self, argv: list[str], *, as_root: bool, uid: int | None, stdout_fd: int, cgroup, control_fd: int | None
    ) -> int:
        """fork + exec bwrap; the child joins the kernel's cgroup first, so everything inside is counted."""
        passwd_read, passwd_write = os.pipe()
        line = bwrap.passwd_line(uid if uid is not None else os.getuid(), uid if uid is not None else os.getgid())
        os.write(passwd_write, line)
        os.close(passwd_write)
        runtime = self.config.runtime_dirs
        command = bwrap.command(
            executable=self.bwrap,
            read_only=self.config.read_only,
            shared=runtime,
            passwd_fd=passwd_read,
            as_root=as_root,
            argv=argv,
            environment={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        keep = [passwd_read] + ([control_fd] if control_fd is not None else [])
        pid = bwrap.spawn(self.bwrap, command, stdout_fd=stdout_fd, keep=keep, cgroup=cgroup)
        os.close(passwd_read)
        return pid

    def _new_cgroup(self, slot: int, kernel_limits: Limits):
        if self.cgroups is None:
            return None
        self.generation[slot] = self.generation.get(slot, 0) + 1
        return self.cgroups.create(
            f"slot{slot}-{self.generation[slot]}", kernel_limits.memory_mb, kernel_limits.processes
        )

    def start_warm(self, slot: int) -> None:
        """A bubblewrap kernel for `slot`, importing its libraries while the slot's current one works."""
        profile = self.profile
        ours, theirs = socket.socketpair()
        log = os.open(self._warm_log(slot), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        cgroup = self._new_cgroup(slot, self.config.limits)
        uid = self.config.slot_uids[slot] if profile.own_uid else None
        argv = [sys.executable, "-I", probes.SANDBOX_SCRIPT, "warm", str(theirs.fileno())]
        pid = self.spawn_bwrap(
            argv, as_root=profile.own_uid, uid=uid, stdout_fd=log, cgroup=cgroup, control_fd=theirs.fileno()
        )
        theirs.close()
        os.close(log)
        wire.send(
            ours,
            WarmSetup(
                uid=uid,
                preload=self.config.preload,
                guard_file=self.config.guard_file,
                memory_by_cgroup=cgroup is not None,
                processes_by_cgroup=cgroup is not None and cgroup.limits_processes,
                font_list=self.config.font_list,
            ),
        )
        kernel = Kernel(slot, pid, cgroup, ours)
        self.kernels[pid] = kernel
        self.warm[slot] = kernel

    def _fork_kernel(self, slot: int, request: KernelRequest, assignment: KernelAssignment, log_fd: int) -> Kernel:
        """The fallback: a fork of this (preloaded) manager confines itself and becomes the kernel."""
        profile = self.profile
        cgroup = self._new_cgroup(slot, request.limits)
        uid = request.uid if profile.own_uid else None
        # With a mount namespace the working folder is a sized tmpfs of the kernel's own (namespaces.enter);
        # without one ("limits only") it is the folder on the grader's disk that remove_tree empties.
        keep = [self.config.runtime_dirs[slot]]
        pid = os.fork()
        if pid == 0:
            try:
                namespaces.prctl(namespaces.PR_SET_PDEATHSIG, signal.SIGKILL)
                if cgroup is not None:
                    cgroup.add(os.getpid())
                os.setsid()
                if profile.name != "limits only":
                    namespaces.enter(
                        profile,
                        self.hide,
                        self.mount_back,
                        keep=keep,
                        expose=self.config.expose,
                        home=request.work_dir if profile.mounts else None,
                        home_uid=uid,
                    )
                if profile.pid:
                    namespaces.become_pid_namespace_init()  # this process waits outside; its child goes on
                if uid is not None:
                    become_uid(uid)
                elif profile.user_namespace:
                    namespaces.drop_capabilities()
                namespaces.prctl(namespaces.PR_SET_NO_NEW_PRIVS, 1)
                namespaces.prctl(namespaces.PR_SET_PDEATHSIG, signal.SIGKILL)
            except BaseException as error:
                os.write(log_fd, f"sandboxed kernel failed to start: {error!r}\n".encode())
                os._exit(1)
            run_kernel(
                assignment,
                log_fd,
                self.guard,
                own_uid=uid is not None,
                memory_by_cgroup=cgroup is not None,
                processes_by_cgroup=cgroup is not None and cgroup.limits_processes,
                home=request.work_dir,
            )
        kernel = Kernel(slot, pid, cgroup, None)
        self.kernels[pid] = kernel
        return kernel

    # -- serving ----------------------------------------------------------------------------
    def serve(self) -> None:
        namespaces.prctl(namespaces.PR_SET_PDEATHSIG, signal.SIGTERM)  # the manager ends with the grading run
        os.environ.update(THREAD_ENV)
        os.environ["MPLBACKEND"] = "Agg"
        with open(self.marker, "w"):
            pass
        self.profile = self.choose()
        preloaded, failed = [], []
        if self.profile.kind == "fork":  # forked kernels inherit what the manager imported
            preloaded, failed = preload(self.config.preload)
            self.guard = load_guard(self.config.guard_file)
            self.guard.prepare()
            # What is loaded now is shared by every forked kernel: kept out of the garbage
            # collector's scans, its pages stay shared instead of being copied into each kernel.
            gc.freeze()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(self.config.socket):
            os.unlink(self.config.socket)
        old_umask = os.umask(0o177)
        listener.bind(self.config.socket)
        os.umask(old_umask)
        os.chmod(self.config.socket, 0o600)
        listener.listen(64)
        warm_s = None
        if self.profile.kind == "bwrap":
            began = time.monotonic()
            for slot in range(self.config.workers):
                self.start_warm(slot)
            self._wait_until_warm()
            warm_s = round(time.monotonic() - began, 2)
        ready = ManagerReady(
            profile=self.profile,
            profile_description=probes.describe(self.profile),
            memory=self.memory_note,
            warm_s=warm_s,
            preloaded=preloaded,
            preload_failed=failed,
            python=sys.executable,
        )
        print(ready.to_json(), flush=True)
        self.listener = listener
        # launchers waiting for a kernel: (connection, connection file, the grader's request)
        self.pending: list[tuple[socket.socket, str, KernelRequest]] = []
        self.releases: list[tuple[socket.socket, int]] = []  # grader asking to reuse a slot
        try:
            self._loop()
        finally:
            for kernel in list(self.kernels.values()):
                self._kill(kernel)
            if self.cgroups is not None:
                self.cgroups.remove()

    def _wait_until_warm(self) -> None:
        """Before the first submission: every slot's kernel has imported its libraries (or failed)."""
        deadline = time.monotonic() + WARM_START_TIMEOUT_S
        while time.monotonic() < deadline:
            waiting = [k for k in self.warm.values() if k.alive() and not k.ready]
            if not waiting:
                return
            readable, _, _ = select.select([k.control for k in waiting], [], [], 0.1)
            for kernel in waiting:
                if kernel.control in readable:
                    self._warm_message(kernel)
            self._reap()

    def _loop(self) -> None:
        while True:
            sockets = [self.listener] + [k.control for k in self.kernels.values() if k.control and not k.ready]
            sockets += [k.launcher for k in self.kernels.values() if k.launcher is not None]
            readable, _, _ = select.select(sockets, [], [], 0.05)
            for sock in readable:
                if sock is self.listener:
                    self._accept()
                    continue
                kernel = next((k for k in self.kernels.values() if sock in (k.control, k.launcher)), None)
                if kernel is None:
                    continue
                if sock is kernel.control and not kernel.ready:
                    self._warm_message(kernel)
                elif sock is kernel.launcher:
                    self._launcher_message(kernel)
            self._reap()
            self._enforce_wall_limits()
            self._enforce_cpu_limits()
            self._serve_pending()
            self._serve_releases()

    def _accept(self) -> None:
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        connection.settimeout(30)
        try:
            hello = wire.receive(connection, Hello)
        except (OSError, ValueError):
            hello = None
        if hello is None:
            connection.close()
            return
        connection.settimeout(None)
        if hello.command == "release":
            self.releases.append((connection, hello.slot))
            return
        if hello.command == "warm":  # is the slot's next kernel ready? (for measurements)
            kernel = self.warm.get(hello.slot)
            wire.send(connection, Event("warm", ready=bool(kernel and kernel.ready and kernel.alive())))
            connection.close()
            return
        try:
            request = KernelRequest.read(hello.request_file)
        except (OSError, MessageError) as error:  # nowhere to write a status: the launcher exits with 1
            print(f"a kernel was refused, its request could not be read: {error}", file=sys.stderr, flush=True)
            wire.send(connection, Event("exit", code=1))
            connection.close()
            return
        self.pending.append((connection, hello.connection_file, request))

    def _warm_message(self, kernel: Kernel) -> None:
        try:
            ready = wire.receive(kernel.control, WarmReady)
        except (OSError, ValueError):
            ready = None
        if ready is not None:
            kernel.ready = True
            kernel.control.settimeout(None)
        else:
            kernel.ending = "failed while starting (see the warm kernel's log)"
            self._kill(kernel)

    def _serve_pending(self) -> None:
        still = []
        for connection, connection_file, request in self.pending:
            slot = request.slot
            if slot in self.running and self.running[slot].alive():
                still.append((connection, connection_file, request))  # the slot's previous kernel is still going
                continue
            try:
                assignment = self._assignment(connection_file, request)
                if self.profile.own_uid:  # the kernel reads its connection file as its own uid
                    os.chown(connection_file, self.config.slot_uids[slot], self.config.slot_uids[slot])
            except (OSError, RuntimeError) as error:
                self._refuse(connection, request, f"its support files could not be read: {error}")
                continue
            if self.profile.kind == "bwrap":
                kernel = self.warm.get(slot)
                if kernel is None or not kernel.alive():
                    if self.failures.get(slot, 0) >= MAX_WARM_FAILURES:
                        self._refuse(
                            connection,
                            request,
                            "the sandbox could not start a kernel "
                            f"{MAX_WARM_FAILURES} times in a row: " + _tail(self._warm_log(slot)),
                        )
                        continue
                    self.start_warm(slot)
                    still.append((connection, connection_file, request))
                    continue
                if not kernel.ready:
                    if time.monotonic() - kernel.started > WARM_START_TIMEOUT_S:
                        kernel.ending = "did not finish importing its libraries in time"
                        self._kill(kernel)
                    still.append((connection, connection_file, request))
                    continue
                if not self._assign(kernel, connection, request, assignment):
                    continue
                del self.warm[slot]
                if not request.last:
                    self.start_warm(slot)  # the next submission's kernel imports while this one works
            else:
                log_fd = os.open(request.kernel_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                kernel = self._fork_kernel(slot, request, assignment, log_fd)
                os.close(log_fd)
                kernel.launcher, kernel.request, kernel.assigned_at = connection, request, time.monotonic()
                kernel.cpu_base = self._cpu_used(kernel)
                wire.send(connection, Event("started"))
            self.running[slot] = kernel
        self.pending = still

    def _assignment(self, connection_file: str, request: KernelRequest) -> KernelAssignment:
        """What a kernel receives: its connection file, limits, guard settings and support files."""
        files, total = {}, 0
        for relative, source in request.files.items():
            with open(source, "rb") as handle:
                data = handle.read(MAX_SUPPORT_BYTES + 1)
            total += len(data)
            if total > MAX_SUPPORT_BYTES:
                raise RuntimeError(f"support files over {MAX_SUPPORT_BYTES} bytes")
            files[relative] = base64.b64encode(data).decode()
        return KernelAssignment(
            connection_file=connection_file, limits=request.limits, guard=request.guard, files=files
        )

    def _refuse(self, connection: socket.socket, request: KernelRequest, reason: str) -> None:
        """No kernel for this request: the status file says why, the launcher exits with status 1."""
        try:
            KernelStatus(
                exit_code=1, ending=f"never started: {reason}", profile=self.profile.name, memory=self.memory_note
            ).write(request.status_file)
        except OSError:
            pass
        wire.send(connection, Event("exit", code=1))
        connection.close()

    def _warm_log(self, slot: int) -> str:
        return os.path.join(self.config.log_dir, f"warm-slot{slot}.log")

    def _assign(
        self, kernel: Kernel, connection: socket.socket, request: KernelRequest, assignment: KernelAssignment
    ) -> bool:
        if kernel.cgroup is not None:
            kernel.cgroup.set_limits(request.limits.memory_mb, request.limits.processes)
        log_fd = os.open(request.kernel_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        sent = wire.send(kernel.control, assignment, [log_fd])
        os.close(log_fd)
        if not sent:
            kernel.ending = "the warm kernel was gone before its assignment"
            self._kill(kernel)
            return False
        kernel.launcher, kernel.request, kernel.assigned_at = connection, request, time.monotonic()
        kernel.cpu_base = self._cpu_used(kernel)  # its preloading is not the learner's
        self.failures[kernel.slot] = 0
        wire.send(connection, Event("started"))
        return True

    def _launcher_message(self, kernel: Kernel) -> None:
        try:
            message = kernel.launcher.recv(4096)
        except OSError:
            message = b""
        if not message:  # the launcher is gone: so is the kernel
            kernel.ending = kernel.ending or "stopped because the grading process went away"
            self._kill(kernel)
            return
        if TERMINATE.encode() in message:
            kernel.ending = kernel.ending or "stopped by the grader"
            self._kill(kernel)

    def _enforce_wall_limits(self) -> None:
        for kernel in list(self.kernels.values()):
            if kernel.alive() and kernel.assigned_at is not None:
                wall = float(kernel.request.limits.wall_s)
                if time.monotonic() - kernel.assigned_at > wall:
                    kernel.ending = kernel.ending or f"stopped after the wall-clock limit of {wall:.0f} s"
                    self._kill(kernel)

    def _cpu_used(self, kernel: Kernel) -> float | None:
        """CPU time of every process and thread of the kernel so far (its cgroup), or None."""
        if kernel.cgroup is None or self.cgroups is None or not self.cgroups.counts_cpu:
            return None
        return kernel.cgroup.cpu_usage_s()

    def _enforce_cpu_limits(self) -> None:
        """The CPU budget is the whole kernel's: forked children and threads are charged to it (RLIMIT_CPU,
        which the kernel also has, counts one process; each forked child would get a budget of its own)."""
        for kernel in list(self.kernels.values()):
            if not kernel.alive() or kernel.assigned_at is None or kernel.cpu_base is None:
                continue
            used = self._cpu_used(kernel)
            budget = float(kernel.request.limits.cpu_s)
            if used is not None and used - kernel.cpu_base > budget:
                kernel.ending = kernel.ending or (
                    f"stopped after the CPU-time limit of {budget:g} s "
                    f"(all its processes and threads together used {used - kernel.cpu_base:.1f} s)"
                )
                self._kill(kernel)

    def _kill(self, kernel: Kernel) -> None:
        for target in (lambda: os.killpg(kernel.pid, signal.SIGKILL), lambda: os.kill(kernel.pid, signal.SIGKILL)):
            try:
                target()
            except OSError:
                pass
        if kernel.cgroup is not None:
            kernel.cgroup.kill_all()

    def _reap(self) -> None:
        for pid, kernel in list(self.kernels.items()):
            if not kernel.alive():
                continue
            try:
                done, status, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                done, status, usage = pid, 1 << 8, None
            if not done:
                continue
            kernel.status, kernel.usage = status, usage
            self._finish(kernel)

    def _finish(self, kernel: Kernel) -> None:
        """After the kernel's first process ended: nothing of it may be left; say how it ended."""
        left = self._end_what_is_left(kernel)
        oom = kernel.cgroup.oom_kills() if kernel.cgroup is not None else 0
        limit = kernel.request.limits if kernel.request is not None else self.config.limits
        code, number = _exit_code_and_signal(kernel.status)
        if kernel.ending is None:
            kernel.ending = _describe_ending(code, number, oom, limit)
        if kernel.request is not None:
            self._write_status(kernel, code, oom, left)
        self._close_and_forget(kernel, code)

    def _end_what_is_left(self, kernel: Kernel) -> bool:
        """Kill whatever of the kernel still runs; True if some of it survived (only a cgroup can tell)."""
        if kernel.cgroup is not None:
            return not kernel.cgroup.kill_all()
        self._sweep_without_cgroup(kernel)
        return False

    def _write_status(self, kernel: Kernel, code: int, oom: int, left: bool) -> None:
        """Write how the assigned kernel ended and what it used to its status file, for the grader's report."""
        usage = kernel.usage
        # Without a cgroup: the first process and the children it reaped; with one: every process.
        cpu_s = round(usage.ru_utime + usage.ru_stime, 3) if usage else None
        used = self._cpu_used(kernel)
        if used is not None and kernel.cpu_base is not None:
            cpu_s = round(used - kernel.cpu_base, 3)
        status = KernelStatus(
            exit_code=code,
            ending=kernel.ending,
            oom_kills=oom,
            wall_s=round(time.monotonic() - (kernel.assigned_at or kernel.started), 3),
            cpu_s=cpu_s,
            peak_memory_mb=kernel.cgroup.peak_mb() if kernel.cgroup is not None else None,
            processes_left=left,
            profile=self.profile.name,
            memory=self.memory_note,
            start_s=round(kernel.assigned_at - kernel.started, 3) if kernel.assigned_at else None,
        )
        try:
            status.write(kernel.request.status_file)
        except OSError:
            pass

    def _close_and_forget(self, kernel: Kernel, code: int) -> None:
        """Tell its launcher the exit code, close its sockets, remove its cgroup and drop it from the books;
        a warm kernel that died before its assignment counts against its slot."""
        if kernel.launcher is not None:
            wire.send(kernel.launcher, Event("exit", code=code))
            kernel.launcher.close()
            kernel.launcher = None
        if kernel.control is not None:
            kernel.control.close()
            kernel.control = None
        if kernel.cgroup is not None:
            kernel.cgroup.remove()
        del self.kernels[kernel.pid]
        if self.warm.get(kernel.slot) is kernel:
            del self.warm[kernel.slot]
            self.failures[kernel.slot] = self.failures.get(kernel.slot, 0) + 1

    def _sweep_without_cgroup(self, kernel: Kernel) -> None:
        """Without a cgroup: a kernel's PID namespace died with it; a forked one without a PID
        namespace is swept by uid (root) or by session."""
        if self.profile.kind == "bwrap" or self.profile.pid:
            return
        if self.profile.own_uid and kernel.request is not None and kernel.request.uid is not None:
            namespaces.sweep_uid(kernel.request.uid)
        else:
            namespaces.sweep_session(kernel.pid)

    def _serve_releases(self) -> None:
        """The grader wants to reuse a slot: answer once its kernel is gone and its runtime folder empty."""
        still = []
        for connection, slot in self.releases:
            running = self.running.get(slot)
            if running is not None and running.alive():
                running.ending = running.ending or "stopped by the grader"
                self._kill(running)
                still.append((connection, slot))
                continue
            self.running.pop(slot, None)
            _clear_folder(self.config.runtime_dirs[slot])
            wire.send(connection, Event("released"))
            connection.close()
        self.releases = still


def _exit_code_and_signal(status: int) -> tuple[int, int | None]:
    """The kernel's exit code (128 + the signal's number if a signal ended it) and that signal, or None.
    An exit code above 128 counts as a signal too: bubblewrap, the first process of its kernels, exits
    with 128 + the number of the signal that killed the kernel inside it."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return 128 + number, number
    code = os.WEXITSTATUS(status)
    return code, code - 128 if code > 128 else None


def _describe_ending(code: int, number: int | None, oom: int, limit: Limits) -> str:
    """How a kernel ended, for the learner's report, when nothing that stopped it has said so already."""
    if oom:
        return f"killed: it used more than its memory limit of {limit.memory_mb} MB"
    if number == signal.SIGKILL:
        return "killed (CPU-time or process limit, or killed from outside)"
    if number == signal.SIGXCPU:
        return f"stopped after the CPU-time limit of {limit.cpu_s} s"
    if number == signal.SIGSEGV:
        return "crashed (segmentation fault)"
    if number is not None:
        return f"killed by signal {number}"
    return f"exited with status {code}" if code else "exited normally"


def _tail(path: str, lines: int = 5) -> str:
    try:
        with open(path, errors="replace") as handle:
            return " / ".join(line.strip() for line in handle.read().splitlines()[-lines:] if line.strip())
    except OSError:
        return "no log"


def _clear_folder(folder: str) -> None:
    """Empty a slot's runtime folder: what its kernel wrote there is hostile data (untrusted.remove_tree)."""
    try:
        problems = untrusted.remove_tree(folder, keep_root=True)
        handle = untrusted.open_folder(folder)
        try:
            os.chmod(handle, 0o700)  # its kernel may have shut it (mode 000) for the slot's next one
        finally:
            os.close(handle)
    except Exception as error:  # never the manager's end: the next kernel of the slot may still start
        problems = [f"{type(error).__name__}: {error}"]
    if problems:
        print(f"runtime folder {folder} not emptied: " + "; ".join(problems), file=sys.stderr, flush=True)
