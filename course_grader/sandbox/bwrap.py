"""The world of one grading kernel, built by bubblewrap (`bwrap`, Debian's package `bubblewrap`).

bubblewrap is the sandbox that Flatpak runs every application in: a small, audited program that
creates the namespaces and mounts and then runs one command in them. A kernel's world is an
allow-list, built on an empty tmpfs root:

    /usr (and the /bin, /lib, /lib64, /sbin links)   the operating system, read-only
    the Python installation and the course's virtual environment               read-only
    the `course_utils` package (the chapters' library the exercises import)     read-only
    /etc: only the dynamic loader's cache, time zone and a passwd line for the learner
    /home/learner, /tmp, /dev/shm     private tmpfs folders of their own, sized, gone with the kernel
    the kernel's runtime folder       the only folder shared with the grader (its ZeroMQ sockets)
    /proc                             a fresh one: only the kernel's own processes
    /dev                              null, zero, random, urandom, tty

and new user (without root), PID, network (no interfaces), IPC, UTS and cgroup namespaces. Nothing
else of the course, the exchange, other learners or the grader exists inside: not hidden, absent.
In its own PID namespace a kernel cannot see or signal any process outside it, with or without
root. When the sandbox's first process ends, the kernel ends every process left in it.

As root, bwrap runs without a user namespace and the kernel drops to a numeric uid of its own before
any learner code runs (so that its processes and files belong to that uid outside, too); without
root, bwrap creates a user namespace in which the kernel has no capabilities.
"""

from __future__ import annotations

import os
import shutil
import sys

HOME = "/home/learner"
PRIVATE_MB = {"/home/learner": 512, "/tmp": 256, "/dev/shm": 64}


def find() -> str | None:
    """The bwrap executable, or None when bubblewrap is not installed."""
    return shutil.which("bwrap") or next(
        (path for path in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(path, os.X_OK)), None
    )


def _parents(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[:index]) for index in range(1, len(parts) + 1)]


def _usr_links() -> list[str]:
    """/bin, /lib, /lib64, /sbin as the links they are on a merged-/usr system, or bound if real."""
    args = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def command(
    *,
    executable: str,
    read_only: list[str],
    shared: list[str],
    passwd_fd: int | None,
    as_root: bool,
    json_status_fd: int | None = None,
    argv: list[str],
    environment: dict[str, str],
) -> list[str]:
    """The bwrap command line that starts `argv` in a kernel's world.

    `read_only` are host paths bound read-only at their own paths (the Python installation, the
    package); `shared` are host folders bound read-write at their own paths (the runtime folder).
    """
    args = [
        executable,
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
    ]
    if as_root:
        # No user namespace: the kernel keeps only the capabilities it needs to hand its home folder
        # to its own uid and become that uid, and loses them when it does, before learner code runs.
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_CHOWN"]
    else:
        args += ["--unshare-user", "--disable-userns"]
    args += ["--ro-bind", "/usr", "/usr", *_usr_links()]
    for path in ("/etc/ld.so.cache", "/etc/localtime", "/etc/nsswitch.conf"):
        args += ["--ro-bind-try", path, path]
    if passwd_fd is not None:
        args += ["--perms", "0644", "--ro-bind-data", str(passwd_fd), "/etc/passwd"]
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "0755", "--dir", "/home"]
    for folder, size_mb in PRIVATE_MB.items():
        mode = "0700" if folder == HOME else "1777"
        args += ["--perms", mode, "--size", str(size_mb << 20), "--tmpfs", folder]
    made = {"/", "/home", "/tmp", "/dev", "/proc", "/usr", "/etc"}
    for path in [*read_only, *shared]:
        for parent in _parents(path):
            if parent not in made:
                args += ["--perms", "0755", "--dir", parent]
                made.add(parent)
    for path in read_only:
        args += ["--ro-bind", path, path]
    for path in shared:
        args += ["--bind", path, path]
    if json_status_fd is not None:
        args += ["--json-status-fd", str(json_status_fd)]
    args += ["--clearenv", "--chdir", HOME]
    for name, value in environment.items():
        args += ["--setenv", name, value]
    return args + ["--", *argv]


def python_paths() -> list[str]:
    """The folders a kernel needs to run this Python with its packages: the installation and the venv."""
    paths = {os.path.realpath(path) for path in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    executable = os.path.realpath(sys.executable)
    if not any(executable.startswith(path + os.sep) for path in paths):
        paths.add(os.path.dirname(executable))
    return sorted(paths)


def passwd_line(uid: int, gid: int) -> bytes:
    return f"learner:x:{uid}:{gid}:learner:{HOME}:/usr/sbin/nologin\n".encode()


def spawn(executable: str, command: list[str], *, stdout_fd: int, keep: list[int], cgroup=None) -> int:
    """fork + exec bubblewrap's `command`; its pid. The child joins `cgroup` first, so that everything
    inside is counted, reads /dev/null, writes to `stdout_fd`, and holds no descriptor but `keep`."""
    keep = [stdout_fd, *keep]
    pid = os.fork()
    if pid == 0:
        try:
            if cgroup is not None:
                cgroup.add(os.getpid())
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(stdout_fd, 1)
            os.dup2(stdout_fd, 2)
            for fd in keep:
                os.set_inheritable(fd, True)
            _close_except(keep)
            os.execv(executable, command)
        except BaseException as error:
            try:
                os.write(2, f"could not start bubblewrap: {error!r}\n".encode())
            finally:
                os._exit(127)
    return pid


def _close_except(keep: list[int]) -> None:
    """Close every descriptor from 3 up, except `keep` (a forked child must not hold the manager's)."""
    start = 3
    for fd in sorted(set(keep)):
        if fd >= start:
            os.closerange(start, fd)
            start = fd + 1
    os.closerange(start, 1 << 16)
