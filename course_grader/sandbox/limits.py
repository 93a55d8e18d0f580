"""What one grading kernel may use: memory that counts memory, processes, CPU time, files.

The memory limit must count memory, not address space. A CUDA build of PyTorch maps more than 3 GB
of address space at `import torch` (its libraries' code: libcublasLt alone is over 500 MB), while
using about 550 MB, so an `RLIMIT_AS` of 3 GB killed every kernel before it started. In order of
preference, a kernel's memory is limited by:

1. **cgroup v2**: a child of the grader's own cgroup with `memory.max`, `memory.swap.max = 0` and
   `pids.max` (root, or a delegated subtree with the memory controller enabled);
2. **cgroup v1**: a child of the grader's own cgroup in the memory hierarchy with
   `memory.limit_in_bytes` and `memory.memsw.limit_in_bytes` (no swap either), and one in the pids
   hierarchy with `pids.max` (root);
3. **RLIMIT_DATA**: the kernel's private writable memory (heap, anonymous mappings; not the
   libraries' code), where the grader may not create cgroups. It counts what a kernel allocates,
   with either torch build.

A cgroup also tells afterwards whether the kernel was killed for its memory (`oom_kill`), and its
process list is the reliable way to know that nothing of a kernel is left. The grading report says
which mechanism was in force.

CPU time is charged to the whole kernel where it has a cgroup: cgroup v2's `cpu.stat` (`usage_usec`,
present whether or not the cpu controller is enabled) or cgroup v1's `cpuacct.usage` (a kernel
folder in the cpuacct hierarchy beside its memory one) count every process and thread in the
cgroup, forked children and their children included, living or gone. The manager reads it every
50 ms and stops the kernel when its budget is spent (manager.py). `RLIMIT_CPU` stays set as well,
but it counts one process: each forked child starts from zero with a budget of its own. So where no
cgroup can be made (or no cpuacct hierarchy exists) a kernel's forked children are NOT charged to
its budget, and the report says so. Refusing extra processes instead is not possible with
`RLIMIT_NPROC`: it counts threads too, and ipykernel, PyTorch and the guard start threads after the
limit is set.
"""

from __future__ import annotations

import os
import resource
import signal
import time
from pathlib import Path

from ..ground.messages import Limits

MiB = 1 << 20
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _own_cgroup(controller: str | None) -> str | None:
    """The grader's own cgroup path in the hierarchy of `controller` (None: the v2 unified one)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if controller is None and number == "0" and controllers == "":
            return path
        if controller is not None and controller in controllers.split(","):
            return path
    return None


def _v2_mount() -> Path | None:
    for candidate in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        if (candidate / "cgroup.controllers").is_file():
            return candidate
    return None


def _v1_mount(controller: str) -> Path | None:
    path = CGROUP_ROOT / controller
    return path if (path / "cgroup.procs").is_file() and not (path / "cgroup.controllers").exists() else None


class KernelCgroup:
    """The cgroup(s) of one kernel: limits, membership, what happened, removal."""

    def __init__(self, version: int, folders: dict[str, Path]):
        self.version, self.folders = version, folders  # controller ("memory", "pids", "cpuacct") -> folder

    def set_limits(self, memory_mb: int, max_tasks: int) -> None:
        """Memory (and no swap beyond it) and the number of tasks (processes and threads)."""
        memory, limit = self.folders["memory"], str(int(memory_mb) * MiB)
        if self.version == 2:
            (memory / "memory.max").write_text(limit)
            (memory / "memory.swap.max").write_text("0")
            (memory / "pids.max").write_text(str(max_tasks))
            return
        swap = memory / "memory.memsw.limit_in_bytes"
        # v1 keeps memory <= memory+swap at every step: raise the pair in the order that allows it.
        order = [memory / "memory.limit_in_bytes", swap] if swap.exists() else [memory / "memory.limit_in_bytes"]
        current = int((memory / "memory.limit_in_bytes").read_text())
        for path in order if int(limit) <= current else list(reversed(order)):
            path.write_text(limit)
        if "pids" in self.folders:
            (self.folders["pids"] / "pids.max").write_text(str(max_tasks))

    @property
    def limits_processes(self) -> bool:
        return self.version == 2 or "pids" in self.folders

    def add(self, pid: int) -> None:
        for folder in self.folders.values():
            (folder / "cgroup.procs").write_text(str(pid))

    def cpu_usage_s(self) -> float | None:
        """CPU time (user and system) used by every process and thread that ever was in the cgroup,
        in seconds; None where this cgroup does not count it."""
        try:
            if self.version == 2:
                for line in (self.folders["memory"] / "cpu.stat").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return int(value) / 1e6
                return None
            if "cpuacct" in self.folders:
                return int((self.folders["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError, KeyError):
            pass
        return None

    def processes(self) -> list[int]:
        found = set()
        for folder in self.folders.values():
            try:
                found.update(int(line) for line in (folder / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return sorted(found)

    def oom_kills(self) -> int:
        folder = self.folders.get("memory")
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (folder / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError, TypeError):
            pass
        return 0

    def peak_mb(self) -> float | None:
        folder = self.folders.get("memory")
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            try:
                return round(int((folder / name).read_text()) / MiB, 1)
            except (OSError, ValueError, TypeError):
                continue
        return None

    def kill_all(self, timeout_s: float = 10.0) -> bool:
        """SIGKILL every process in the cgroup until none is left; False if some survived."""
        deadline = time.monotonic() + timeout_s
        while True:
            pids = self.processes()
            if not pids:
                return True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)

    def remove(self) -> None:
        for folder in self.folders.values():
            try:
                folder.rmdir()
            except OSError:
                pass


class CgroupMaker:
    """Creates one cgroup per kernel under a folder of this grading run, in the grader's own cgroup."""

    def __init__(self, version: int, parents: dict[str, Path]):
        self.version, self.parents = version, parents
        self.counts_cpu = False  # set by `probe`: the kernels' CPU time can be read from their cgroup

    @property
    def mechanism(self) -> str:
        if self.version == 2:
            return "cgroup v2 (memory.max, memory.swap.max = 0, pids.max)"
        return "cgroup v1 (memory.limit_in_bytes, memory.memsw.limit_in_bytes" + (
            ", pids.max)" if "pids" in self.parents else "; no pids hierarchy)"
        )

    @property
    def cpu_mechanism(self) -> str:
        if not self.counts_cpu:
            return describe_cpu_fallback("the cgroup does not count CPU time")
        source = "cpu.stat usage_usec" if self.version == 2 else "cpuacct.usage"
        return f"charged to the whole kernel, every process and thread (cgroup {source}, checked every 50 ms)"

    def create(self, name: str, memory_mb: int, max_tasks: int) -> KernelCgroup:
        folders = {}
        try:
            for controller, parent in self.parents.items():
                folder = parent / name
                folder.mkdir()
                folders[controller] = folder
            group = KernelCgroup(self.version, folders)
            group.set_limits(memory_mb, max_tasks)
        except OSError:
            KernelCgroup(self.version, folders).remove()
            raise
        return group

    def remove(self) -> None:
        for parent in self.parents.values():
            for child in parent.glob("*"):
                if child.is_dir():
                    try:
                        child.rmdir()
                    except OSError:
                        pass
            try:
                parent.rmdir()
            except OSError:
                pass


def _try_v2(run_name: str) -> CgroupMaker | None:
    mount = _v2_mount()
    own = _own_cgroup(None)
    if mount is None or own is None:
        return None
    base = mount / own.lstrip("/")
    if "memory" not in (mount / "cgroup.controllers").read_text().split():
        return None
    parent = base / run_name
    try:
        parent.mkdir()
        # A cgroup that holds processes cannot pass controllers down (the "no internal processes"
        # rule), except the root: the run's folder holds none, its kernels' folders get the limits.
        (parent / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError:
        try:
            parent.rmdir()
        except OSError:
            pass
        return None
    return CgroupMaker(2, {"memory": parent})


def _try_v1(run_name: str) -> CgroupMaker | None:
    parents = {}
    for controller in ("memory", "pids", "cpuacct"):
        mount, own = _v1_mount(controller), _own_cgroup(controller)
        if mount is None or own is None:
            continue
        parent = mount / own.lstrip("/") / run_name
        try:
            parent.mkdir()
        except OSError:
            continue
        parents[controller] = parent
    if "memory" not in parents:
        for parent in parents.values():
            parent.rmdir()
        return None
    return CgroupMaker(1, parents)


def cgroup_maker(run_name: str) -> CgroupMaker | None:
    """A maker for this run's kernel cgroups, or None where the grader may not create any."""
    for attempt in (_try_v2, _try_v1):
        try:
            maker = attempt(run_name)
        except OSError:
            maker = None
        if maker is not None:
            return maker
    return None


def probe(maker: CgroupMaker, memory_mb: int = 64) -> str | None:
    """Check that a kernel cgroup really limits memory: a child that allocates past the limit must be
    killed. None if it works, else what went wrong. Sets `maker.counts_cpu` if the cgroup counted the
    CPU time that child spent."""
    group = maker.create("probe", memory_mb, 16)
    try:
        pid = os.fork()
        if pid == 0:
            try:
                group.add(os.getpid())
                hoard = bytearray(4 * memory_mb * MiB)  # zero-filled: every page is touched
                os._exit(3 if hoard else 4)
            except MemoryError:
                os._exit(5)
            except BaseException:
                os._exit(6)
        _, status = os.waitpid(pid, 0)
        used = group.cpu_usage_s()
        maker.counts_cpu = used is not None and used > 0  # touching the pages took CPU time
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            return None
        return f"a child allocating {4 * memory_mb} MB in a {memory_mb} MB cgroup was not stopped (status {status})"
    finally:
        group.kill_all()
        group.remove()


def apply_rlimits(
    limits: Limits,
    *,
    memory_by_cgroup: bool,
    processes_by_cgroup: bool,
    own_uid: bool,
    cpu_used_s: float = 0.0,
    count_processes=None,
) -> None:
    """Resource limits of the kernel process (inherited by everything it starts).

    `cpu_used_s` is the CPU time the process already spent (preloading libraries): the learner's
    budget starts after it.
    """
    if not memory_by_cgroup:
        memory = int(limits.memory_mb) * MiB
        resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    # Per process: every forked child starts from zero with this limit. Where the kernel has a cgroup
    # that counts CPU time, the manager charges all its processes to the budget (manager.py).
    cpu = int(limits.cpu_s + cpu_used_s + 1)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))  # SIGXCPU first, SIGKILL 5 s later
    file_size = int(limits.file_mb) * MiB
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    files = int(limits.open_files)
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not processes_by_cgroup or own_uid:
        processes = int(limits.processes)
        if not own_uid and count_processes is not None:
            # RLIMIT_NPROC counts every process of the real uid, the grader's own included.
            processes += count_processes(os.getuid())
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def describe_cpu_fallback(why: str) -> str:
    return f"per process only (RLIMIT_CPU; {why}): a forked child gets a budget of its own"


def cpu_budget_note(maker: CgroupMaker | None) -> str:
    """The report's words for how a kernel's CPU budget is counted."""
    if maker is None:
        return describe_cpu_fallback("no cgroup")
    return maker.cpu_mechanism


def describe_rlimit_fallback(asked: bool = False) -> str:
    why = "asked for" if asked else "no cgroup could be created"
    return f"RLIMIT_DATA (private writable memory; {why})"


def choose_memory_limit(asked: str, run_name: str, notes: list[str]) -> tuple[CgroupMaker | None, str]:
    """How this run's kernels get their memory limit: (a cgroup maker, or None for RLIMIT_DATA; the
    report's words for it). `asked` is "auto" or "rlimit"; why a cgroup could not be used goes to `notes`."""
    if asked == "rlimit":
        return None, describe_rlimit_fallback(asked=True)
    maker = cgroup_maker(run_name)
    if maker is not None:
        failure = probe(maker)
        if failure is None:
            return maker, maker.mechanism
        notes.append(f"cgroup memory limit: {failure}")
        maker.remove()
    return None, describe_rlimit_fallback()
