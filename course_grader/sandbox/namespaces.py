"""The hand-written confinement, used only where bubblewrap is missing (Linux; standard library only).

Where `bwrap` is installed, every grading kernel gets its world from bubblewrap (see bwrap.py). On a
machine without it, the grader still confines kernels with the same system calls bubblewrap makes,
called here through ctypes: a private mount namespace in which the course, the exchange and the
grader's home are covered by empty tmpfs mounts (the Python installation mounted back read-only),
a private /tmp and /dev/shm per kernel (fresh tmpfs mounts: what a kernel leaves there is gone with
it, and no other kernel sees it; the kernel's own working folder and runtime folder are mounted
back into its /tmp), a PID namespace with a fresh /proc (no process outside the kernel can be seen
or signalled, with or without root), a network namespace without interfaces, and (without root) a
user namespace with no capabilities left. The grading report names the profile that ran.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the profile's fields are read; nothing of the package runs here
    from ..ground.messages import SandboxProfile

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
PRIVATE_TMP_MB = 256
HOME_MB = 512  # the kernel's working folder, as bubblewrap's /home/learner (bwrap.PRIVATE_MB)
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _bytes(value):
    return None if value is None else os.fsencode(value)


def mount(source, target, fstype, flags, data=None) -> None:
    _check(
        _libc.mount(_bytes(source), _bytes(target), _bytes(fstype), ctypes.c_ulong(flags), _bytes(data)),
        f"mount {target}",
    )


def umount(target) -> None:
    """Detach the filesystem mounted at `target` (lazily: it goes once nothing uses it)."""
    _check(_libc.umount2(_bytes(target), MNT_DETACH), f"umount {target}")


def mount_tmpfs(target, size_mb: int, *, mode: str = "0700", uid: int | None = None, inodes: int | None = None) -> None:
    """A fresh tmpfs at `target` that holds at most `size_mb` MB (and `inodes` entries)."""
    options = f"mode={mode},size={int(size_mb)}m"
    if inodes is not None:
        options += f",nr_inodes={int(inodes)}"
    if uid is not None:
        options += f",uid={int(uid)},gid={int(uid)}"
    mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, options)


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def drop_capabilities() -> None:
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


def inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


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
    outermost = [path for index, path in enumerate(hide) if not any(inside(path, other) for other in hide[:index])]
    needed = [path for path in expose if any(inside(path, hidden) for hidden in outermost)]
    mount_back = [path for index, path in enumerate(needed) if not any(inside(path, other) for other in needed[:index])]
    return outermost, mount_back


def _readonly_remount_flags(path: str) -> int:
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY
    current = os.statvfs(path).f_flag
    for statvfs_bit, mount_flag in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC)):
        if current & statvfs_bit:
            flags |= mount_flag
    return flags | MS_NOSUID | MS_NODEV


def apply_mounts(hide: list[str], mount_back: list[str], private: list[str], keep: list[str] = ()) -> None:
    """Give each folder of `private` (/tmp, /dev/shm) a fresh tmpfs of its own, cover `hide` with
    empty tmpfs mounts, bind `mount_back` read-only at their own paths, and `keep` (folders the
    kernel needs inside a private folder: its working and runtime folders) read-write."""
    handles = {path: os.open(path, os.O_PATH) for path in [*mount_back, *keep]}  # opened before they disappear
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    for path in private:
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={PRIVATE_TMP_MB}m")
    for path in hide:
        if not any(inside(path, folder) for folder in private):  # inside a fresh tmpfs it is gone already
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for path in sorted(mount_back, key=len):
        _bind_from(handles.pop(path), path)
        mount(None, path, None, _readonly_remount_flags(path))
    for path in sorted(keep, key=len):
        _bind_from(handles.pop(path), path)


def _bind_from(handle: int, path: str) -> None:
    source = f"/proc/self/fd/{handle}"
    if os.path.isdir(source):
        os.makedirs(path, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        open(path, "a").close()
    mount(source, path, None, MS_BIND | MS_REC)
    os.close(handle)


PRIVATE_FOLDERS = ("/tmp", "/dev/shm")


def enter(
    profile: SandboxProfile,
    hide: list[str],
    mount_back: list[str],
    keep: list[str] = (),
    expose: list[str] = (),
    home: str | None = None,
    home_uid: int | None = None,
) -> None:
    """Enter the namespaces the profile asks for (user, mounts, network, PID) and hide the course files.

    Shared by the probe and the kernels, so that what the probe tested is what a kernel gets. `keep`
    are the folders inside /tmp that the kernel needs (its working and runtime folders), `expose`
    the read-only paths it needs (mounted back where they lie inside /tmp), `home` the kernel's working
    folder: a fresh tmpfs of HOME_MB, owned by `home_uid`, in the kernel's mount namespace only, so that
    what a kernel writes there never reaches the grader's disk and is gone with it. With ``profile.pid``
    the caller must then call `become_pid_namespace_init`: only children live in the new PID namespace.
    """
    flags = (CLONE_NEWNS if profile.mounts else 0) | (CLONE_NEWNET if profile.network else 0)
    flags |= CLONE_NEWPID if profile.pid else 0
    if profile.user_namespace:
        real_uid, real_gid = os.getuid(), os.getgid()
        unshare(CLONE_NEWUSER | flags)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {real_uid} 1")
        _write("/proc/self/gid_map", f"0 {real_gid} 1")
    elif flags:
        unshare(flags)
    if profile.mounts:
        private = [folder for folder in PRIVATE_FOLDERS if os.path.isdir(folder) and not os.path.islink(folder)]
        keep = sorted({os.path.realpath(path) for path in keep if os.path.exists(path)}, key=len)
        needed = {os.path.realpath(path) for path in expose if os.path.exists(path)}
        inside_private = [
            path
            for path in needed
            if any(inside(path, folder) for folder in private)
            and not any(inside(path, other) for other in needed - {path})
        ]
        apply_mounts(hide, sorted(set(mount_back) | set(inside_private), key=len), private, keep)
        if home:
            os.makedirs(home, mode=0o755, exist_ok=True)
            mount_tmpfs(home, HOME_MB, uid=home_uid)


def become_pid_namespace_init() -> None:
    """After `enter` with a PID namespace: fork. The child returns, as the first process of the new
    namespace with a /proc of its own (it dies with its parent); the parent stays outside, waits for
    it, exits with its status, and never returns. When the child ends, every process left in its
    namespace is killed by the kernel."""
    child = os.fork()
    if child == 0:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        mount_fresh_proc()
        return
    os.closerange(3, 1 << 16)
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def mount_fresh_proc() -> None:
    """In the first process of a new PID namespace (with its own mount namespace): a /proc that shows
    only this namespace's processes."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def count_processes(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def sweep_uid(uid: int, timeout_s: float = 10.0) -> bool:
    """Kill every process that runs as `uid` (a fork bomb's survivors included); root only."""
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
        if count_processes(uid) == 0:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def sweep_session(session: int) -> None:
    """Kill the processes of one kernel's session (the fallback without a uid of its own)."""
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
            if same_session:
                try:
                    os.kill(int(entry), signal.SIGKILL)
                    found = True
                except OSError:
                    pass
        if not found:
            return
        time.sleep(0.05)
