"""The sandbox session of one grading run: the sandbox manager, the kernelspec that asks it for kernels,
the numeric uids its kernels run as (each held by this run alone), the one runtime folder per worker
slot that a kernel shares with the grader, and a folder per kernel for its request and status files
(see sandbox.py for the confinement itself, messages.py for what the manager is told)."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import select
import subprocess
import sys
import tempfile
from pathlib import Path

from ..ground import untrusted
from ..ground.layout import CourseLayout
from ..ground.messages import Limits, ManagerConfig, ManagerReady, SandboxProfile
from . import bwrap, namespaces, sandbox

DEFAULT_UID_BASE = 1_640_000
UID_RANGE = 4096
MANAGER_START_TIMEOUT_S = 600  # probing profiles and importing PyTorch on a busy machine
KERNEL_NAME = "course-sandbox"
# A slot's runtime folder holds a connection file and five sockets; as root it is a tmpfs this small,
# so that a kernel cannot fill the grader's disk through it nor leave more than this many entries.
RUNTIME_MB = 8
RUNTIME_ENTRIES = 1024


class SandboxSession:
    """Starts the sandbox manager (see sandbox.py) and the kernelspec that asks it for kernels."""

    def __init__(
        self,
        layout: CourseLayout,
        preload: list[str],
        workers: int,
        isolation: str = "auto",
        uid_base: int = DEFAULT_UID_BASE,
        default_limits: Limits | dict | None = None,
        memory: str = "auto",
    ):
        self.layout, self.preload, self.workers, self.isolation = layout, preload, workers, isolation
        self.memory_choice = memory
        if isinstance(default_limits, dict):
            default_limits = Limits.from_dict(default_limits, "default_limits")
        self.default_limits = default_limits or Limits(memory_mb=3072, processes=64, cpu_s=300, wall_s=300)
        self.uid_base = uid_base
        self.process = None
        self.profile: SandboxProfile | None = None  # the manager's, once it serves
        self.description = "not started"

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
        raise RuntimeError(
            f"no free sandbox uid in {self.uid_base}..{self.uid_base + UID_RANGE}; "
            "are other grading runs active? (--uid-base chooses another range)"
        )

    def __enter__(self) -> "SandboxSession":
        try:
            return self._start()
        except BaseException:
            self.__exit__(None, None, None)  # no half-started manager or folder left behind
            raise

    def _start(self) -> "SandboxSession":
        self.uids = self._allocate_uids(self.workers + 1) if os.geteuid() == 0 else []
        base = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
        self.root = Path(tempfile.mkdtemp(prefix="cg-", dir=base))
        os.chmod(self.root, 0o711)
        for name, mode in (("manager", 0o700), ("slots", 0o711), ("rt", 0o711), ("probe", 0o700)):
            (self.root / name).mkdir()
            os.chmod(self.root / name, mode)
        self.runtime_dirs, self.runtime_mounts = [], []
        for slot in range(self.workers):
            folder = self.root / "rt" / str(slot)
            folder.mkdir(mode=0o700)
            if self.uids:
                os.chown(folder, self.uids[slot], self.uids[slot])
            self.runtime_dirs.append(str(folder))
        self.runtime_note = self._mount_runtime_dirs()
        spec_dir = self.root / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [sys.executable, "-I", "-S", sandbox.__file__, "launch", "{connection_file}"],
                    "display_name": "Course grading sandbox",
                    "language": "python",
                    "interrupt_mode": "message",
                }
            )
        )
        # What kernels import from the course: the library (course_utils) and the grader's own sandbox and guard
        # (course_grader), side by side in a checkout as in an installation; read-only.
        grader_dir = Path(__file__).resolve().parents[1]
        package_dirs = [str(grader_dir), str(grader_dir.parent / "course_utils")]
        hide = [
            str(self.layout.root),
            str(self.layout.exchange_dir),
            str(self.layout.source_dir),
            str(self.layout.output_dir),
            str(Path.home()),
        ]
        if (grader_dir.parent / "nbgrader_config.py").is_file():
            hide.append(str(grader_dir.parent))  # the course repository itself, with its solutions and history
        expose = [sys.prefix, sys.base_prefix, sys.exec_prefix, *package_dirs]
        for hidden in hide:
            if namespaces.inside(str(self.root), os.path.realpath(hidden)):
                raise RuntimeError(f"the sandbox folder {self.root} lies inside {hidden}, which kernels must not see")
        self.layout.output_dir.joinpath("logs").mkdir(parents=True, exist_ok=True)
        config = ManagerConfig(
            socket=str(self.root / "manager" / "manager.sock"),
            preload=list(self.preload),
            guard_file=str(grader_dir / "guard" / "kernel_guard.py"),
            hide=hide,
            expose=expose,
            read_only=sorted({*bwrap.python_paths(), *package_dirs}),
            runtime_dirs=self.runtime_dirs,
            isolation=self.isolation,
            memory=self.memory_choice,
            probe_dir=str(self.root / "probe"),
            probe_uid=self.uids[self.workers] if self.uids else None,
            slot_uids=self.uids[: self.workers],
            workers=self.workers,
            limits=self.default_limits,
            marker_dir=str(self.root / "manager"),
            log_dir=str(self.layout.output_dir / "logs"),
            font_list=matplotlib_font_list(),
        )
        config_path = self.root / "manager" / "config.json"
        config.write(config_path)
        self.socket = config.socket
        self.log_file = open(self.layout.output_dir / "logs" / "sandbox.log", "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-I", sandbox.__file__, "serve", str(config_path)],
            stdout=subprocess.PIPE,
            stderr=self.log_file,
            stdin=subprocess.DEVNULL,
        )
        ready, _, _ = select.select([self.process.stdout], [], [], MANAGER_START_TIMEOUT_S)
        line = self.process.stdout.readline() if ready else b""
        if not line:
            raise RuntimeError(f"the grading sandbox did not start; see {self.log_file.name}")
        self.ready = ManagerReady.from_json(line, "the sandbox manager's first line")
        self.profile = self.ready.profile
        self.description = f"{self.ready.profile_description}; {self.runtime_note}"
        self.memory = self.ready.memory
        return self

    def _mount_runtime_dirs(self) -> str:
        """As root, give each slot's runtime folder (the only folder a kernel shares with the grader) a
        tmpfs of RUNTIME_MB and RUNTIME_ENTRIES, mounted once for the run: a warm kernel binds the folder
        ahead of its assignment, so the mount must stay the same; the manager empties it between
        kernels. Without root it stays on the grader's disk. The report's words for it."""
        if os.geteuid() != 0:
            return "runtime folders on the grader's disk (a tmpfs needs root): each file capped by RLIMIT_FSIZE"
        for slot, folder in enumerate(self.runtime_dirs):
            try:
                namespaces.mount_tmpfs(
                    folder, RUNTIME_MB, inodes=RUNTIME_ENTRIES, uid=self.uids[slot] if self.uids else None
                )
            except OSError as error:
                return f"runtime folders on the grader's disk (no tmpfs: {error.strerror or error})"
            self.runtime_mounts.append(folder)
        return f"runtime folders: tmpfs of {RUNTIME_MB} MB and {RUNTIME_ENTRIES} entries each"

    def slot_uid(self, slot: int) -> int | None:
        """The uid a slot's kernels run as; None where they keep the grader's (not root, or a profile without)."""
        return self.uids[slot] if self.profile is not None and self.profile.own_uid else None

    def new_kernel_folder(self, slot: int, name: str) -> Path:
        """A fresh folder for one kernel of `slot`: home/ (where a fallback kernel works; the slot uid's) and
        private/ (the grader's: the KernelRequest and KernelStatus files). The caller removes it."""
        folder = self.root / "slots" / f"{slot}-{name}"
        folder.mkdir(mode=0o711)
        for part in ("home", "private"):
            (folder / part).mkdir(mode=0o700)
        uid = self.slot_uid(slot)
        if uid is not None:
            os.chown(folder / "home", uid, uid)  # the fallback's kernels work here; bubblewrap's get a private tmpfs
        return folder

    def runtime_dir(self, slot: int) -> Path:
        """The one folder a slot's kernel shares with the grader: its connection file and sockets."""
        return Path(self.runtime_dirs[slot])

    def __exit__(self, *exc_info) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if getattr(self, "log_file", None):
            self.log_file.close()
        for folder in getattr(self, "runtime_mounts", []):
            try:
                namespaces.umount(folder)
            except OSError:
                pass  # remove_tree stays off a filesystem that is still mounted, and says so
        if getattr(self, "root", None):
            problems = untrusted.remove_tree(self.root)
            if problems:
                print(f"the sandbox folder {self.root} was not removed: " + "; ".join(problems), file=sys.stderr)
        for handle in getattr(self, "uid_locks", []):
            handle.close()

    def sweep(self, slot: int) -> None:
        """End whatever a slot's kernel left and empty its runtime folder, before the slot is reused."""
        if sandbox.release(self.socket, slot):
            return
        message = f"the sandbox did not confirm that slot {slot}'s kernel is gone; its next kernel may fail\n"
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


def matplotlib_font_list() -> dict[str, str]:
    """matplotlib's font list, {file name: JSON}, as the grader's matplotlib has it cached (building it if
    need be); {} where matplotlib is not installed. A warm kernel starts with an empty home, where
    matplotlib would build the list again by reading every font file: about 0.3 s of CPU in each kernel
    (`import matplotlib.pyplot` 1.71-2.02 s with an empty MPLCONFIGDIR, 1.17-1.77 s with the list, 2-core
    AMD EPYC), and with a timer thread that the guard refuses to notebook code: a notebook whose first
    plot (`%matplotlib inline` in course_utils.env.setup) comes after the guard would be flagged for it.
    So every kernel gets the list, whether or not it preloads matplotlib. A font the list names that a
    kernel cannot see makes matplotlib build it anew."""
    try:
        import matplotlib
        from matplotlib import font_manager
    except ImportError:
        return {}
    cached = Path(matplotlib.get_cachedir()) / f"fontlist-v{font_manager.FontManager.__version__}.json"
    try:
        return {cached.name: cached.read_text(encoding="utf-8")}
    except (OSError, UnicodeDecodeError):  # no cache the grader could write: the kernels build their own
        return {}
