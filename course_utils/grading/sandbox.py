"""Confinement of learners' kernels during grading (Linux; standard library only).

Four processes take part, so that no learner code runs with the grader's rights and a kernel still
starts in well under a second with NumPy and PyTorch already imported:

zygote      one per grading run (`python -I sandbox.py serve CONFIG`), run by the grader. It imports
            the heavy libraries once, checks which protections this machine allows (the "profile"),
            then waits on a unix socket that only the grader's user can open.
launcher    what jupyter_client starts for each kernel (the kernelspec's argv is
            `python -I -S sandbox.py launch {connection_file}`). It asks the zygote for a kernel and
            mirrors that kernel's life: interrupt/terminate signals go in, the exit code comes out.
            It dies with the grading process that started it.
supervisor  a fork of the zygote per kernel, still with the grader's rights. It forks the kernel,
            enforces the wall-clock limit, writes a status file that says how the kernel ended, and
            kills every process the kernel's user left behind.
kernel      a fork of the supervisor: its own session; private mount and network namespaces in
            which the course directory, the exchange and the grader's files are covered by empty
            tmpfs mounts (the Python installation is mounted back read-only); resource limits
            (memory, CPU time, processes, file size, open files); a uid of its own with no
            capabilities and `no_new_privs`; then IPKernelApp runs in-process.

When the grader runs as root the kernel gets a numeric uid that no account uses (one per worker
slot, so a kernel can neither read another kernel's files nor signal its processes). Without root,
the same isolation is built inside an unprivileged user namespace when the kernel allows it; the
profile says what was possible and the grading report prints it.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import socket
import sys
import time

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
THREAD_ENV = {"COURSE_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "NUMEXPR_NUM_THREADS": "1", "VECLIB_MAXIMUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"}
SOCKET_ENV, REQUEST_ENV = "COURSE_SANDBOX_SOCKET", "COURSE_SANDBOX_REQUEST"
MiB = 1 << 20

_libc = ctypes.CDLL(None, use_errno=True)


# --------------------------------------------------------------------------------------------
# Small wrappers around the system calls Python does not expose.
# --------------------------------------------------------------------------------------------
def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _bytes(value):
    return None if value is None else os.fsencode(value)


def _mount(source, target, fstype, flags, data=None) -> None:
    _check(_libc.mount(_bytes(source), _bytes(target), _bytes(fstype), ctypes.c_ulong(flags), _bytes(data)),
           f"mount {target}")


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def _drop_capabilities() -> None:
    """Empty the bounding, effective, permitted and inheritable capability sets."""
    for capability in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two 32-bit data words
    data = (Data * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


# --------------------------------------------------------------------------------------------
# Building the kernel's world.
# --------------------------------------------------------------------------------------------
def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _traversable_by_others(path: str) -> bool:
    """Can a user that is neither owner nor group walk through every directory down to `path`?"""
    current = "/"
    for part in path.strip("/").split("/"):
        current = os.path.join(current, part)
        try:
            mode = os.stat(current).st_mode
        except OSError:
            return False
        if os.path.isdir(current) and not mode & 0o001:
            return False
    return True


def plan_mounts(hide: list[str], expose: list[str], need_traversal: bool) -> tuple[list[str], list[str]]:
    """Which directories get an empty tmpfs, and which paths are mounted back (read-only) inside them.

    An exposed path under a directory that an unprivileged user cannot traverse (such as a Python
    installed in /root) gets that directory covered too, so that the path can be mounted back.
    """
    hide = sorted({os.path.realpath(path) for path in hide if path and os.path.isdir(path)}, key=len)
    expose = sorted({os.path.realpath(path) for path in expose if path and os.path.exists(path)}, key=len)
    if need_traversal:
        for path in expose:
            current = "/"
            for part in path.strip("/").split("/")[:-1]:
                current = os.path.join(current, part)
                if os.path.isdir(current) and not os.stat(current).st_mode & 0o001:
                    hide.append(current)
                    break
        hide = sorted(set(hide), key=len)
    for forbidden in ("/", "/proc", "/dev", "/sys", "/usr", "/lib", "/bin", "/etc"):
        if forbidden in hide:
            raise ValueError(f"refusing to hide {forbidden}: the kernel could not run")
    outermost = [path for index, path in enumerate(hide) if not any(_inside(path, other) for other in hide[:index])]
    needed = [path for path in expose if any(_inside(path, hidden) for hidden in outermost)]
    mount_back = [path for index, path in enumerate(needed) if not any(_inside(path, other) for other in needed[:index])]
    return outermost, mount_back


def _readonly_remount_flags(path: str) -> int:
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY
    current = os.statvfs(path).f_flag
    for statvfs_bit, mount_flag in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC)):
        if current & statvfs_bit:
            flags |= mount_flag
    return flags | MS_NOSUID | MS_NODEV


def apply_mounts(hide: list[str], mount_back: list[str]) -> None:
    """Cover `hide` with empty tmpfs mounts, then bind `mount_back` read-only at their own paths."""
    handles = {path: os.open(path, os.O_PATH) for path in mount_back}  # opened before they disappear
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    for path in hide:
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for path, handle in handles.items():
        source = f"/proc/self/fd/{handle}"
        if os.path.isdir(source):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "a").close()
        _mount(source, path, None, MS_BIND | MS_REC)
        os.close(handle)
        _mount(None, path, None, _readonly_remount_flags(path))


def _count_processes(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def apply_limits(limits: dict, own_uid: bool) -> None:
    memory = int(limits["memory_mb"]) * MiB
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))  # SIGXCPU first, SIGKILL 5 s later
    file_size = int(limits.get("file_mb", 256)) * MiB
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    files = int(limits.get("open_files", 1024))
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    processes = int(limits["processes"])
    if not own_uid:
        # RLIMIT_NPROC counts every process of the real uid, the grader's own included.
        processes += _count_processes(os.getuid())
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def kernel_environment(work_dir: str, runtime_dir: str) -> dict[str, str]:
    """The whole environment of a learner's kernel: nothing of the grader's leaks in."""
    bin_dir = os.path.dirname(sys.executable)
    environment = {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": work_dir, "USER": "learner", "LOGNAME": "learner", "LANG": "C.UTF-8", "TMPDIR": os.path.join(work_dir, "tmp"),
        "IPYTHONDIR": os.path.join(work_dir, ".ipython"), "JUPYTER_RUNTIME_DIR": runtime_dir,
        "JUPYTER_CONFIG_DIR": os.path.join(work_dir, ".jupyter"), "JUPYTER_DATA_DIR": os.path.join(work_dir, ".local", "share", "jupyter"),
        "MPLCONFIGDIR": os.path.join(work_dir, ".config", "matplotlib"), "XDG_CACHE_HOME": os.path.join(work_dir, ".cache"),
        "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    environment.update(THREAD_ENV)
    return environment


# --------------------------------------------------------------------------------------------
# The kernel process.
# --------------------------------------------------------------------------------------------
def _enter_namespaces(profile: dict, hide: list[str], mount_back: list[str]) -> None:
    """Enter the namespaces the profile asks for (user, mounts, network) and hide the course files.

    Shared by the probe and the kernel, so that what the probe tested is what the kernel gets."""
    if profile["user_namespace"]:
        real_uid, real_gid = os.getuid(), os.getgid()
        _unshare(CLONE_NEWUSER | CLONE_NEWNS | (CLONE_NEWNET if profile["network"] else 0))
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {real_uid} 1")
        _write("/proc/self/gid_map", f"0 {real_gid} 1")
    elif profile["mounts"] or profile["network"]:
        _unshare((CLONE_NEWNS if profile["mounts"] else 0) | (CLONE_NEWNET if profile["network"] else 0))
    if profile["mounts"]:
        apply_mounts(hide, mount_back)


def _become_kernel(request: dict, profile: dict, connection_file: str, log_fd: int, supervisor_pid: int,
                   guard) -> None:
    """Runs in the kernel process; never returns."""
    status = 1
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.closerange(3, 1 << 16)  # the zygote's sockets and everything else the grader had open
        uid = request.get("uid") if profile["own_uid"] else None
        _enter_namespaces(profile, profile["hide"], profile["mount_back"])
        apply_limits(request["limits"], own_uid=uid is not None)
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        elif profile["user_namespace"]:
            _drop_capabilities()  # root inside the namespace must not be able to undo the mounts
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != supervisor_pid:
            os._exit(1)
        os.umask(0o077)
        work_dir = request["work_dir"]
        os.chdir(work_dir)
        os.environ.clear()
        os.environ.update(kernel_environment(work_dir, os.path.dirname(connection_file)))
        os.makedirs(os.environ["TMPDIR"], exist_ok=True)
        import tempfile

        tempfile.tempdir = None  # forget the grader's temporary directory
        sys.path[:] = [work_dir] + [entry for entry in sys.path if entry and entry != os.path.dirname(__file__)]
        sys.argv = ["ipykernel_launcher", "-f", connection_file]

        from ipykernel.kernelapp import IPKernelApp

        app = IPKernelApp.instance()
        app.initialize(["-f", connection_file, "--HistoryManager.hist_file=:memory:",
                        "--IPKernelApp.capture_fd_output=False"])
        guard.install(app, request.get("guard", {}))
        app.start()
        status = 0
    except BaseException as error:  # the kernel log is the only place left to say why
        try:
            os.write(2, f"sandboxed kernel failed to start: {error!r}\n".encode())
        except OSError:
            pass
    finally:
        os._exit(status)


# --------------------------------------------------------------------------------------------
# Cleaning up after a kernel.
# --------------------------------------------------------------------------------------------
def sweep_uid(uid: int, timeout_s: float = 10.0) -> bool:
    """Kill every process that runs as `uid` (a fork bomb's survivors included); root only.

    Waits until they are gone: a killed process still counts against the uid's process limit until
    its parent has reaped it, and the next kernel of this uid would otherwise start short of threads.
    Returns False if some were still there after `timeout_s`.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        pid = os.fork()
        if pid == 0:
            try:
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)  # every process this uid may signal, i.e. its own
            except OSError:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        if _count_processes(uid) == 0:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _namespace_of(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/user")
    except OSError:
        return None


def sweep_namespace(namespace: str | None, session: int) -> None:
    """Kill the processes of one kernel when it has no uid of its own (same user namespace or session)."""
    for _ in range(3):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                same_session = int(fields[3]) == session
            except (OSError, IndexError, ValueError):
                continue
            if same_session or (namespace is not None and _namespace_of(entry) == namespace):
                try:
                    os.kill(int(entry), signal.SIGKILL)
                    found = True
                except OSError:
                    pass
        if not found:
            return
        time.sleep(0.05)


# --------------------------------------------------------------------------------------------
# Supervisor: one per kernel.
# --------------------------------------------------------------------------------------------
def _send(connection: socket.socket, message: dict) -> None:
    try:
        connection.sendall((json.dumps(message) + "\n").encode())
    except OSError:
        pass


def _supervise(connection: socket.socket, listener: socket.socket, profile: dict, guard) -> None:
    """Runs in a fork of the zygote; never returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    listener.close()
    data = b""
    while not data.endswith(b"\n"):
        chunk = connection.recv(65536)
        if not chunk:
            os._exit(1)
        data += chunk
    hello = json.loads(data)
    with open(hello["request_file"]) as handle:
        request = json.load(handle)
    connection_file = hello["connection_file"]
    uid = request.get("uid") if profile["own_uid"] else None
    if uid is not None:
        os.chown(connection_file, uid, uid)
    log_fd = os.open(request["kernel_log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    started = time.monotonic()
    kernel_pid = os.fork()
    if kernel_pid == 0:
        connection.close()
        _become_kernel(request, profile, connection_file, log_fd, os.getppid(), guard)
    os.close(log_fd)
    _send(connection, {"event": "started", "pid": kernel_pid})
    namespace = None
    wall_limit = float(request["limits"]["wall_s"])
    ending, wait_status, usage = None, None, None
    while True:
        pid, wait_status, usage = os.wait4(kernel_pid, os.WNOHANG)
        if pid:
            break
        if namespace is None and profile["user_namespace"]:
            namespace = _namespace_of(kernel_pid)
        if ending is None and time.monotonic() - started > wall_limit:
            ending = f"stopped after the wall-clock limit of {wall_limit:.0f} s"
            _signal_group(kernel_pid, signal.SIGKILL)  # reaped above next time round, then swept below
        readable, _, _ = select.select([connection], [], [], 0.1)
        if readable:
            try:
                message = connection.recv(4096)
            except OSError:
                message = b""
            if not message:  # the launcher is gone: so is the kernel
                ending = ending or "stopped because the grading process went away"
                _signal_group(kernel_pid, signal.SIGKILL)
                continue
            for line in message.decode(errors="replace").splitlines():
                if line == "interrupt":
                    _signal(kernel_pid, signal.SIGINT)
                elif line == "terminate":
                    _signal(kernel_pid, signal.SIGTERM)
    _kill_kernel(kernel_pid, uid, namespace)  # whatever the kernel left running
    if os.WIFSIGNALED(wait_status):
        number = os.WTERMSIG(wait_status)
        code = 128 + number
        if ending is None:
            ending = {signal.SIGKILL: "killed (memory, CPU-time or process limit, or killed from outside)",
                      signal.SIGXCPU: f"stopped after the CPU-time limit of {request['limits']['cpu_s']} s",
                      signal.SIGSEGV: "crashed (segmentation fault)"}.get(number, f"killed by signal {number}")
    else:
        code = os.WEXITSTATUS(wait_status)
        ending = ending or (f"exited with status {code}" if code else "exited normally")
    status = {"exit_code": code, "ending": ending, "wall_s": round(time.monotonic() - started, 3),
              "cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "max_rss_mb": round(usage.ru_maxrss / 1024, 1)}
    try:
        with open(request["status_file"], "w") as handle:
            json.dump(status, handle)
    except OSError:
        pass
    _send(connection, {"event": "exit", "code": code})
    os._exit(0)


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except OSError:
        pass


def _signal_group(pid: int, number: int) -> None:
    try:
        os.killpg(pid, number)
    except OSError:
        pass


def _kill_kernel(kernel_pid: int, uid: int | None, namespace: str | None) -> None:
    """After the kernel was reaped: kill whatever it left running, and wait until it is gone."""
    _signal_group(kernel_pid, signal.SIGKILL)
    if uid is not None:
        sweep_uid(uid)
    else:
        sweep_namespace(namespace, kernel_pid)


# --------------------------------------------------------------------------------------------
# Zygote.
# --------------------------------------------------------------------------------------------
def _probe(profile: dict, probe_dir: str, hide: list[str], mount_back: list[str], guard) -> str | None:
    """Try a profile in a throw-away child: None if everything works, else what failed."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        message = "ok"
        try:
            uid = profile.get("probe_uid") if profile["own_uid"] else None
            _enter_namespaces(profile, hide, mount_back)
            if uid is not None:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
            elif profile["user_namespace"]:
                _drop_capabilities()
            _prctl(PR_SET_NO_NEW_PRIVS, 1)
            os.chdir(probe_dir)
            # What a kernel needs: its folder, the standard library and the installed packages.
            open(os.path.join(probe_dir, "probe.txt"), "w").close()
            for module_file in (os.__file__, json.__file__):
                with open(module_file, "rb") as handle:
                    handle.read(1)
            import importlib.util

            for name in ("ipykernel", "IPython"):
                spec = importlib.util.find_spec(name)
                with open(spec.origin, "rb") as handle:
                    handle.read(1)
            if profile["mounts"]:
                for path in hide:
                    allowed = {back[len(path):].strip("/").split("/")[0] for back in mount_back if _inside(back, path)}
                    try:
                        leaked = set(os.listdir(path)) - allowed
                    except (PermissionError, FileNotFoundError):
                        leaked = set()  # not even reachable: hidden all the same
                    if leaked:
                        raise RuntimeError(f"{path} still shows {sorted(leaked)[:3]}")
            if profile["network"]:
                probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                probe.settimeout(1)
                try:
                    probe.connect(("1.1.1.1", 53))
                    raise RuntimeError("the network is still reachable")
                except OSError:
                    pass
                finally:
                    probe.close()
        except BaseException as error:
            import traceback

            message = repr(error) + " at " + traceback.format_exc().strip().splitlines()[-3].strip()
        os.write(write_fd, message.encode()[:4000])
        os._exit(0)
    os.close(write_fd)
    chunks = []
    while True:
        chunk = os.read(read_fd, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    answer = b"".join(chunks).decode(errors="replace")
    return None if answer == "ok" else answer or "the probe died"


def choose_profile(config: dict, guard) -> tuple[dict, list[str], list[str]]:
    """The strongest isolation this machine allows, and what could not be had."""
    is_root = os.geteuid() == 0
    probe_dir = config["probe_dir"]
    wanted = config.get("isolation", "auto")
    candidates = []
    if wanted != "none":
        if is_root:
            candidates += [dict(own_uid=True, mounts=True, network=True, user_namespace=False),
                           dict(own_uid=True, mounts=True, network=False, user_namespace=False),
                           dict(own_uid=True, mounts=False, network=False, user_namespace=False)]
        candidates += [dict(own_uid=False, mounts=True, network=True, user_namespace=True),
                       dict(own_uid=False, mounts=False, network=True, user_namespace=True)]
    candidates.append(dict(own_uid=False, mounts=False, network=False, user_namespace=False))
    notes = []
    hide, mount_back = plan_mounts(config["hide"], config["expose"], need_traversal=is_root)
    for profile in candidates:
        profile["probe_uid"] = config.get("probe_uid")
        if profile["own_uid"]:
            os.chown(probe_dir, profile["probe_uid"], profile["probe_uid"])
        else:
            os.chown(probe_dir, os.getuid(), os.getgid())
        failure = _probe(profile, probe_dir, hide, mount_back, guard)
        if failure is None:
            profile.pop("probe_uid")
            profile["unavailable"] = notes
            return profile, hide, mount_back
        notes.append(f"{_describe(profile)}: {failure}")
    raise RuntimeError("no sandbox profile works, not even the weakest: " + "; ".join(notes))


def _describe(profile: dict) -> str:
    parts = [name for name in ("own_uid", "mounts", "network", "user_namespace") if profile.get(name)]
    return "+".join(parts) or "limits only"


def serve(config_path: str) -> None:
    with open(config_path) as handle:
        config = json.load(handle)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the zygote ends with the grading run
    os.environ.update(THREAD_ENV)
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["MPLCONFIGDIR"] = config["shared_config_dir"]
    preloaded, failed = [], []
    import importlib

    for name in ["ipykernel.kernelapp", "IPython", *config.get("preload", [])]:
        try:
            importlib.import_module(name)
            preloaded.append(name)
        except Exception as error:  # a missing optional library only makes its kernels slower
            failed.append(f"{name}: {error!r}")
    import importlib.util

    spec = importlib.util.spec_from_file_location("course_grader_guard", config["guard_file"])
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    profile, hide, mount_back = choose_profile(config, guard)
    profile_description = _describe(profile)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(config["socket"]):
        os.unlink(config["socket"])
    old_umask = os.umask(0o177)
    listener.bind(config["socket"])
    os.umask(old_umask)
    os.chmod(config["socket"], 0o600)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped automatically
    print(json.dumps({"ready": True, "profile": profile, "profile_description": profile_description,
                      "hide": hide, "mount_back": mount_back, "preloaded": preloaded, "preload_failed": failed,
                      "python": sys.executable}), flush=True)
    while True:
        try:
            connection, _ = listener.accept()
        except InterruptedError:
            continue
        pid = os.fork()
        if pid == 0:
            try:
                _supervise(connection, listener, dict(profile, hide=hide, mount_back=mount_back), guard)
            finally:
                os._exit(1)
        connection.close()


# --------------------------------------------------------------------------------------------
# Launcher.
# --------------------------------------------------------------------------------------------
def launch(connection_file: str) -> int:
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the grading process, and so does the kernel
    except OSError:
        pass
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(os.environ[SOCKET_ENV])
    hello = {"connection_file": os.path.abspath(connection_file), "request_file": os.environ[REQUEST_ENV]}
    connection.sendall((json.dumps(hello) + "\n").encode())
    signal.signal(signal.SIGINT, lambda *_: _forward(connection, "interrupt"))
    signal.signal(signal.SIGTERM, lambda *_: _forward(connection, "terminate"))
    buffer = b""
    while True:
        chunk = connection.recv(4096)
        if not chunk:
            return 1
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("event") == "exit":
                return int(message.get("code", 1))


def _forward(connection: socket.socket, command: str) -> None:
    try:
        connection.sendall((command + "\n").encode())
    except OSError:
        pass


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "launch":
        sys.exit(launch(sys.argv[2]))
    else:
        sys.exit("usage: sandbox.py serve CONFIG | sandbox.py launch CONNECTION_FILE")
