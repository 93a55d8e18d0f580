"""Which profile the sandbox manager uses: the candidates this machine might allow, strongest first, each
tried on a throw-away kernel that looks for the course's files, the grader's /tmp, the manager's
process and the network; the first that finds none of them is used, and the report says which."""

from __future__ import annotations

import dataclasses
import os
import select
import socket
import sys
import time

from ..ground.messages import ProbeAnswer, ProbeSecrets, SandboxProfile
from . import namespaces
from .warmkernel import become_uid

WARM_START_TIMEOUT_S = 300  # importing PyTorch on a busy machine
SANDBOX_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox.py")


def choose_profile(manager, notes: list[str]) -> SandboxProfile:
    """The strongest profile that passes its probe (see sandbox.py for the list). What was not
    available, and why, is added to `notes`, which the profile keeps for the report."""
    wanted = manager.config.isolation
    candidates = []
    if wanted in ("auto", "bwrap") and manager.bwrap:
        if manager.is_root:
            candidates.append(SandboxProfile(name="bwrap-root", kind="bwrap", own_uid=True))
        candidates.append(SandboxProfile(name="bwrap-user", kind="bwrap", own_uid=False))
    elif wanted in ("auto", "bwrap"):
        notes.append("bubblewrap is not installed (Debian: apt-get install bubblewrap)")
    if wanted == "bwrap" and not candidates:
        raise RuntimeError("isolation 'bwrap' was asked for, but bubblewrap is not installed")
    if wanted in ("auto", "namespaces"):  # a namespace a profile does not name is not used (its field is False)
        if manager.is_root:
            candidates += [
                SandboxProfile("namespaces-root", "fork", own_uid=True, mounts=True, network=True, pid=True),
                SandboxProfile("namespaces-root (no network namespace)", "fork", own_uid=True, mounts=True, pid=True),
            ]
        user = dict(kind="fork", own_uid=False, mounts=True, network=True, user_namespace=True)
        candidates += [
            SandboxProfile("namespaces-user", **user, pid=True),
            # Where /proc cannot be mounted again (some containers): processes of the
            # grader's uid can then be signalled, and the report says so.
            SandboxProfile("namespaces-user (no PID namespace)", **user),
        ]
    candidates.append(SandboxProfile("limits only", "fork", own_uid=False))
    for profile in candidates:
        if profile.kind == "bwrap":
            failure = bwrap_probe(manager, as_root=profile.own_uid)
        elif profile.name == "limits only":
            failure = None
        else:
            owner = manager.config.probe_uid if profile.own_uid else os.getuid()
            os.chown(manager.config.probe_dir, owner, owner)
            failure = namespace_probe(manager, profile)
        if failure is None:
            return dataclasses.replace(profile, unavailable=notes, memory=manager.memory_note, cpu=manager.cpu_note)
        notes.append(f"{profile.name}: {failure}")
    raise RuntimeError("no sandbox profile works, not even the weakest: " + "; ".join(notes))


def probe(secrets_json: str) -> None:
    """Entry point inside a probe sandbox: become what a kernel becomes, then look around."""
    secrets = ProbeSecrets.from_json(secrets_json, "the probe's argument")
    if secrets.uid is not None:
        become_uid(secrets.uid)
    found = []
    for path, allowed in secrets.hidden.items():
        try:
            shown = set(os.listdir(path)) - set(allowed)
        except (FileNotFoundError, PermissionError):
            shown = set()
        if shown:
            found.append(f"{path} shows {sorted(shown)[:3]}")
    for path in secrets.private:
        if os.path.exists(path):
            found.append(f"{path} (the grader's) is visible: /tmp is not private")
    try:
        os.kill(secrets.manager_pid, 0)
        found.append("the manager's process can be signalled")
    except ProcessLookupError:
        pass
    except PermissionError:
        found.append("the manager's process is visible (only permission stops a signal)")
    connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    connection.settimeout(1)
    try:
        connection.connect(("1.1.1.1", 53))
        found.append("the network is reachable")
    except OSError:
        pass
    finally:
        connection.close()
    if secrets.uid is not None and os.getuid() != secrets.uid:
        found.append(f"runs as uid {os.getuid()}, not {secrets.uid}")
    try:
        import ipykernel.kernelapp  # noqa: F401  (what every kernel needs)
    except Exception as error:
        found.append(f"ipykernel cannot be imported: {error!r}")
    print(ProbeAnswer(found).to_json(), flush=True)


def _visible_skeleton(hidden: list[str], exposed: list[str]) -> dict[str, list[str]]:
    """For each hidden folder, the names that may show in it: the first step towards an exposed path."""
    allowed = {}
    for path in hidden:
        path = os.path.realpath(path)
        allowed[path] = sorted(
            {
                back[len(path) :].strip("/").split("/")[0]
                for back in exposed
                if namespaces.inside(back, path) and back != path
            }
        )
    return allowed


def bwrap_probe(manager, as_root: bool) -> str | None:
    """Start one sandbox the way kernels start and check what it can see and do; None if all is well."""
    uid = manager.config.probe_uid if as_root else None
    exposed = [os.path.realpath(path) for path in manager.config.read_only + manager.config.runtime_dirs]
    secrets = ProbeSecrets(
        hidden=_visible_skeleton([p for p in manager.config.hide if os.path.exists(p)], exposed),
        private=[manager.marker],
        manager_pid=os.getpid(),
        uid=uid,
    )
    read_fd, write_fd = os.pipe()
    argv = [sys.executable, "-I", SANDBOX_SCRIPT, "probe", secrets.to_json()]
    pid = manager.spawn_bwrap(argv, as_root=as_root, uid=uid, stdout_fd=write_fd, cgroup=None, control_fd=None)
    os.close(write_fd)
    output = b""
    deadline = time.monotonic() + WARM_START_TIMEOUT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([read_fd], [], [], 1.0)
        if ready:
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            output += chunk
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    text = output.decode(errors="replace").strip()
    try:
        answer = ProbeAnswer.from_json(text.splitlines()[-1], "the probe's answer")
    except (ValueError, IndexError):
        return f"the sandbox did not start (status {status}): {text[-300:] or 'no output'}"
    return "; ".join(answer.problems) or None


def namespace_probe(manager, profile: SandboxProfile) -> str | None:
    """The fallback's probe: try a profile in a throw-away child. None if everything works."""
    read_fd, write_fd = os.pipe()
    manager_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        message = "ok"
        try:
            _enter_profile(manager, profile)
            _check_a_kernel_can_work(manager)
            _check_what_is_out_of_reach(manager, profile, manager_pid)
        except BaseException as error:
            message = repr(error)
        os.write(write_fd, message.encode()[:4000])
        os._exit(0)
    os.close(write_fd)
    output = _read_to_end(read_fd)
    os.waitpid(pid, 0)
    answer = output.decode(errors="replace")
    return None if answer == "ok" else answer or "the probe died"


def _enter_profile(manager, profile: SandboxProfile) -> None:
    """Confine the probe's child as the profile would confine a kernel."""
    uid = manager.config.probe_uid if profile.own_uid else None
    namespaces.enter(
        profile, manager.hide, manager.mount_back, keep=[manager.config.probe_dir], expose=manager.config.expose
    )
    if profile.pid:
        namespaces.become_pid_namespace_init()  # the checks below run inside the new PID namespace
    if uid is not None:
        become_uid(uid)
    elif profile.user_namespace:
        namespaces.drop_capabilities()
    namespaces.prctl(namespaces.PR_SET_NO_NEW_PRIVS, 1)


def _check_a_kernel_can_work(manager) -> None:
    """A profile that hides too much is no use: the kernel must write in its folder and read its own code."""
    probe_dir = manager.config.probe_dir
    os.chdir(probe_dir)
    open(os.path.join(probe_dir, "probe.txt"), "w").close()
    import importlib.util

    for name in ("ipykernel", "IPython"):
        with open(importlib.util.find_spec(name).origin, "rb") as handle:
            handle.read(1)


def _check_what_is_out_of_reach(manager, profile: SandboxProfile, manager_pid: int) -> None:
    """Raise at the first thing the profile promises to hide or isolate that the child can still reach."""
    if profile.mounts:
        _check_course_files_hidden(manager)
        if os.path.exists(manager.marker):
            raise RuntimeError(f"{manager.marker} (the grader's) is visible: /tmp is not private")
    if profile.pid:
        _check_manager_process_out_of_reach(manager_pid)
    if profile.network:
        _check_network_unreachable()


def _check_course_files_hidden(manager) -> None:
    """Each hidden folder may show only the entries mounted back into it."""
    for path in manager.hide:
        allowed = {
            back[len(path) :].strip("/").split("/")[0] for back in manager.mount_back if namespaces.inside(back, path)
        }
        try:
            leaked = set(os.listdir(path)) - allowed
        except (PermissionError, FileNotFoundError):
            leaked = set()
        if leaked:
            raise RuntimeError(f"{path} still shows {sorted(leaked)[:3]}")


def _check_manager_process_out_of_reach(manager_pid: int) -> None:
    try:
        os.kill(manager_pid, 0)
        raise RuntimeError("the manager's process can be signalled")
    except ProcessLookupError:
        pass
    if os.path.exists(f"/proc/{manager_pid}"):
        raise RuntimeError("the manager's process is visible in /proc")


def _check_network_unreachable() -> None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.settimeout(1)
    try:
        probe.connect(("1.1.1.1", 53))
        raise RuntimeError("the network is still reachable")
    except OSError:
        pass
    finally:
        probe.close()


def _read_to_end(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def describe(profile: SandboxProfile) -> str:
    """One line for the grading report: which confinement ran, with what."""
    if profile.kind == "bwrap":
        parts = [
            f"bubblewrap ({profile.name})",
            "own unprivileged uid per worker" if profile.own_uid else "user namespace (no capabilities)",
            "course files hidden (allow-list root: the course, the exchange and other learners are absent)",
            "private /tmp, /dev/shm and home",
            "own PID namespace (no other process can be seen or signalled)",
            "no network",
        ]
    elif profile.name == "limits only":
        parts = ["limits only (no bubblewrap, no namespaces)", "course files NOT hidden", "network NOT isolated"]
    else:
        parts = [
            f"hand-written namespaces ({profile.name}; bubblewrap was not used)",
            "own unprivileged uid per worker" if profile.own_uid else "user namespace (no capabilities)",
            "course files hidden (mount namespace)" if profile.mounts else "course files NOT hidden",
            "private /tmp and /dev/shm" if profile.mounts else "/tmp and /dev/shm NOT private",
            "own PID namespace (no other process can be seen or signalled)"
            if profile.pid
            else "processes outside NOT protected from signals" + ("" if profile.own_uid else " of the grader's uid"),
            "no network" if profile.network else "network NOT isolated",
        ]
    parts.append(f"memory: {profile.memory or 'unknown'}")
    parts.append(f"CPU time: {profile.cpu or 'unknown'}")
    parts.append("limits on processes, file size, open files")
    if profile.unavailable:
        parts.append("stronger isolation failed: " + " / ".join(profile.unavailable))
    return "; ".join(parts)
