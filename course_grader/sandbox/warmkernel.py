"""The kernel's side of the sandbox: a warm kernel imports its libraries inside its confinement, waits
for one assignment, then becomes the IPython kernel of one learner's submission (see sandbox.py).

Everything here runs inside the sandbox, before any learner code, and trusts nothing it did not
receive from the sandbox manager on its control socket.
"""

from __future__ import annotations

import base64
import os
import socket
import sys

from ..ground.messages import KernelAssignment, WarmReady, WarmSetup
from . import bwrap, limits, namespaces, wire

THREAD_ENV = {
    "COURSE_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
}
GRADING_DIR = os.path.dirname(os.path.abspath(__file__))
PACKAGE_PARENT = os.path.dirname(os.path.dirname(GRADING_DIR))


def kernel_environment(home: str, runtime_dir: str) -> dict[str, str]:
    """The whole environment of a learner's kernel: nothing of the grader's leaks in."""
    bin_dir = os.path.dirname(sys.executable)
    environment = {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "USER": "learner",
        "LOGNAME": "learner",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "IPYTHONDIR": os.path.join(home, ".ipython"),
        "JUPYTER_RUNTIME_DIR": runtime_dir,
        "JUPYTER_CONFIG_DIR": os.path.join(home, ".jupyter"),
        "JUPYTER_DATA_DIR": os.path.join(home, ".local", "share", "jupyter"),
        "MPLCONFIGDIR": os.path.join(home, ".config", "matplotlib"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "MPLBACKEND": "Agg",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    environment.update(THREAD_ENV)
    return environment


def load_guard(path: str):
    """The kernel guard (kernel_guard.py), with a private copy of the builtins: learner code that
    replaces `builtins.len` or `builtins.isinstance` changes nothing in the guard's own code."""
    import builtins
    import importlib.util

    spec = importlib.util.spec_from_file_location("course_grader_guard", path)
    guard = importlib.util.module_from_spec(spec)
    vars(guard)["__builtins__"] = dict(vars(builtins))
    spec.loader.exec_module(guard)
    return guard


# What IPKernelApp.initialize would import otherwise (its debugger's debugpy above all): loaded ahead,
# a kernel answers in a fraction of a second. tqdm: the guard switches off its monitor thread.
KERNEL_MODULES = [
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel.debugger",
    "IPython",
    "sqlite3",
    "tornado.queues",
    "tqdm.std?",
]


def preload(names: list[str]) -> tuple[list[str], list[str]]:
    """Import the libraries, and the modules the assignment's tests reach, before the kernel guard
    takes its snapshot of them (kernel_guard.py). A name ending in "?" is imported if it is a module
    (`numpy.random` is, `torch.randn` is not), and skipped without a word otherwise."""
    import importlib

    loaded, failed = [], []
    for entry in [*KERNEL_MODULES, *names]:
        name, optional = entry.rstrip("?"), entry.endswith("?")
        try:
            importlib.import_module(name)
            loaded.append(name)
        except ModuleNotFoundError as error:
            if not (optional and error.name and name.startswith(error.name)):
                failed.append(f"{name}: {error!r}")
        except Exception as error:  # a missing optional library only makes its kernels slower
            if not optional:
                failed.append(f"{name}: {error!r}")
    return loaded, failed


def place_font_list(font_list: dict[str, str]) -> None:
    """matplotlib's font list from the grader, where this kernel's matplotlib looks for it first."""
    folder = os.environ["MPLCONFIGDIR"]
    if font_list:
        os.makedirs(folder, exist_ok=True)
    for name, text in font_list.items():
        with open(os.path.join(folder, os.path.basename(name)), "w", encoding="utf-8") as handle:
            handle.write(text)


def become_uid(uid: int) -> None:
    """Drop to `uid` for good (root only): no groups, no capabilities left."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # A change of uid makes the process undumpable, which hides /proc/self from its own code; the
    # uid is this kernel's alone, so nothing else could use the access.
    namespaces.prctl(namespaces.PR_SET_DUMPABLE, 1)


# --------------------------------------------------------------------------------------------
# The kernel side: what a warm kernel does with its assignment.
# --------------------------------------------------------------------------------------------
def run_kernel(
    assignment: KernelAssignment,
    log_fd: int,
    guard,
    *,
    own_uid: bool,
    memory_by_cgroup: bool,
    processes_by_cgroup: bool,
    home: str,
) -> None:
    """Become the IPython kernel of `assignment`; never returns."""
    status = 1
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.closerange(3, 1 << 16)  # the manager's sockets, the launcher's, everything else
        if os.getpid() != os.getsid(0):
            os.setsid()  # ipykernel interrupts its own process group: that is this kernel alone
        connection_file = assignment.connection_file
        os.makedirs(home, exist_ok=True)
        os.chdir(home)
        os.umask(0o077)
        os.environ.clear()
        os.environ.update(kernel_environment(home, os.path.dirname(connection_file)))
        for folder in (os.environ["MPLCONFIGDIR"], os.environ["IPYTHONDIR"]):
            os.makedirs(folder, exist_ok=True)
        for relative, encoded in assignment.files.items():
            target = os.path.join(home, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(base64.b64decode(encoded))
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        limits.apply_rlimits(
            assignment.limits,
            memory_by_cgroup=memory_by_cgroup,
            processes_by_cgroup=processes_by_cgroup,
            own_uid=own_uid,
            cpu_used_s=usage.ru_utime + usage.ru_stime,
            count_processes=namespaces.count_processes,
        )
        import tempfile

        tempfile.tempdir = None  # forget any temporary directory chosen before
        sys.path[:] = [home] + [entry for entry in sys.path if entry and entry not in (GRADING_DIR, PACKAGE_PARENT)]
        sys.argv = ["ipykernel_launcher", "-f", connection_file]

        from ipykernel.kernelapp import IPKernelApp

        app = IPKernelApp.instance()
        app.initialize(
            ["-f", connection_file, "--HistoryManager.hist_file=:memory:", "--IPKernelApp.capture_fd_output=False"]
        )
        guard.install(app, assignment.guard.to_dict())
        app.start()
        status = 0
    except BaseException as error:  # the kernel log is the only place left to say why
        try:
            import traceback

            where = traceback.format_exc().strip().splitlines()[-3:-1]
            os.write(
                2, f"sandboxed kernel failed to start: {error!r} ({' / '.join(w.strip() for w in where)})\n".encode()
            )
        except OSError:
            pass
    finally:
        os._exit(status)


def warm(control_fd: int) -> None:
    """Entry point inside a bubblewrap sandbox: confine, preload, wait for the assignment, run it."""
    control = socket.socket(fileno=control_fd)
    setup = wire.receive(control, WarmSetup)
    if setup is None:
        os._exit(1)
    if setup.uid is not None:
        os.chown(bwrap.HOME, setup.uid, setup.uid)  # bubblewrap made it as root
        become_uid(setup.uid)
    os.environ.clear()
    os.environ.update(kernel_environment(bwrap.HOME, "/nonexistent"))
    place_font_list(setup.font_list)
    loaded, failed = preload(setup.preload)
    guard = load_guard(setup.guard_file)
    guard.prepare()  # the snapshot of the tests' references, taken while nothing waits for this kernel
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    wire.send(
        control, WarmReady(preloaded=loaded, preload_failed=failed, cpu_s=round(usage.ru_utime + usage.ru_stime, 2))
    )
    assignment, fds = wire.receive(control, KernelAssignment, with_fds=True)
    if assignment is None or not fds:
        os._exit(1)
    run_kernel(
        assignment,
        fds[0],
        guard,
        own_uid=setup.uid is not None,
        memory_by_cgroup=setup.memory_by_cgroup,
        processes_by_cgroup=setup.processes_by_cgroup,
        home=bwrap.HOME,
    )


# --------------------------------------------------------------------------------------------
# Probing what this machine allows.
# --------------------------------------------------------------------------------------------
