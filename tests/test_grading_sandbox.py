"""The confinement of grading kernels (course_grader/sandbox/sandbox.py, bwrap.py, limits.py), tested
directly: a sandbox session is started, kernels are launched the way nbgrader launches them, and
code runs in them that tries what a learner's code could try.

With bubblewrap installed (make test installs it) the bubblewrap profile is tested, and the
hand-written fallback too; without it, only the fallback.
"""

from __future__ import annotations

import json
import os
import queue
import time
import uuid
from pathlib import Path

import pytest

from course_grader.ground.layout import CourseLayout
from course_grader.sandbox import bwrap, limits, sandbox
from course_grader.sandbox.session import KERNEL_NAME, SandboxSession

pytestmark = pytest.mark.slow
HAS_BWRAP = bwrap.find() is not None
MEMORY_MB = 1536


def _layout(tmp_path: Path) -> CourseLayout:
    root = tmp_path / "course"
    for folder in (root / "solutions" / "ex0", root / "build" / "grading", tmp_path / "exchange"):
        folder.mkdir(parents=True)
    (root / "solutions" / "ex0" / "secret-answers.txt").write_text("the hidden tests")
    return CourseLayout(
        root=root,
        course_id="test-course",
        source_dir=root / "solutions",
        exchange_dir=tmp_path / "exchange",
        output_dir=root / "build" / "grading",
    )


class Kernel:
    """A kernel of the session, started and spoken to as nbgrader's executor does."""

    def __init__(
        self,
        session: SandboxSession,
        slot: int,
        tmp_path: Path,
        memory_mb: int = MEMORY_MB,
        cpu_s: float = 120,
        last: bool = False,
    ):
        from jupyter_client import KernelManager

        private = session.root / "slots" / f"test-{uuid.uuid4().hex[:8]}"  # as session.new_kernel_folder does
        private.mkdir(mode=0o711)
        self.status_file = private / "status.json"
        self.log = private / "kernel.log"
        request = {
            "slot": slot,
            "work_dir": str(private / "home"),
            "uid": session.uids[slot] if session.uids else None,
            "status_file": str(self.status_file),
            "kernel_log": str(self.log),
            "files": {},
            "limits": {"memory_mb": memory_mb, "cpu_s": cpu_s, "wall_s": 120, "processes": 64},
            "guard": {},
            "last": last,
        }
        (private / "home").mkdir()
        if request["uid"] is not None:
            os.chown(private / "home", request["uid"], request["uid"])
        (private / "request.json").write_text(json.dumps(request))
        os.environ[sandbox.SOCKET_ENV] = session.socket
        os.environ[sandbox.REQUEST_ENV] = str(private / "request.json")
        os.environ["JUPYTER_PATH"] = str(session.root)
        runtime = session.runtime_dir(slot)
        self.manager = KernelManager(
            kernel_name=KERNEL_NAME,
            transport="ipc",
            ip=str(runtime / "kernel"),
            connection_file=str(runtime / "kernel.json"),
        )
        began = time.monotonic()
        self.manager.start_kernel()
        self.client = self.manager.client()
        self.client.start_channels()
        try:
            self.client.wait_for_ready(timeout=120)
        except RuntimeError as error:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else "no kernel log"
            raise RuntimeError(f"{error}; the kernel's log says: {log}") from None
        self.start_s = time.monotonic() - began
        self.session, self.slot = session, slot

    def run(self, code: str, timeout: float = 60) -> dict:
        """Execute `code`; returns {"stdout", "stderr", "error"} (error: the exception's name or None)."""
        message_id = self.client.execute(code)
        result = {"stdout": "", "stderr": "", "error": None}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                message = self.client.get_iopub_msg(timeout=1)
            except queue.Empty:
                if not self.manager.is_alive():
                    result["error"] = "KernelDied"
                    return result
                continue
            if message["parent_header"].get("msg_id") != message_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                result[content["name"]] += content["text"]
            elif kind == "error":
                result["error"] = content["ename"]
            elif kind == "status" and content["execution_state"] == "idle":
                return result
        raise TimeoutError(f"no answer to {code!r} in {timeout} s")

    def stop(self) -> dict:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)
        assert self.session.sweep(self.slot) is None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not self.status_file.exists():
            time.sleep(0.05)
        return json.loads(self.status_file.read_text()) if self.status_file.exists() else {}


def _session(tmp_path_factory, isolation: str, memory: str = "auto"):
    tmp_path = tmp_path_factory.mktemp(f"sandbox-{isolation}-{memory}")
    layout = _layout(tmp_path)
    started = SandboxSession(
        layout,
        ["numpy"],
        workers=1,
        isolation=isolation,
        memory=memory,
        default_limits={"memory_mb": MEMORY_MB, "processes": 64, "cpu_s": 120, "wall_s": 120},
    )
    started.tmp_path, started.layout = tmp_path, layout
    return started


@pytest.fixture(scope="module", params=["bwrap", "namespaces"] if HAS_BWRAP else ["namespaces"])
def session(request, tmp_path_factory):
    with _session(tmp_path_factory, request.param) as started:
        yield started


def test_the_report_names_the_profile_and_the_memory_mechanism(session):
    expected = "bubblewrap" if session.isolation == "bwrap" else "hand-written namespaces"
    assert expected in session.description, session.description
    assert "memory: " in session.description and session.memory in session.description
    maker = limits.cgroup_maker(f"course-grading-test-{uuid.uuid4().hex[:8]}")
    if maker is not None:
        maker.remove()
        assert session.memory.startswith("cgroup"), f"this grader can create cgroups, yet: {session.memory}"


def test_a_kernel_sees_nothing_of_the_course_and_reaches_nothing(session):
    kernel = Kernel(session, 0, session.tmp_path)
    try:
        secret = session.layout.source_dir / "ex0" / "secret-answers.txt"
        found = kernel.run(
            f"import os\nprint(os.path.exists({str(secret)!r}), os.path.exists({str(session.layout.exchange_dir)!r}))"
        )
        assert found["stdout"].split() == ["False", "False"], f"the kernel can see the course or the exchange: {found}"
        network = kernel.run(
            "import socket\ns = socket.socket(); s.settimeout(1)\ntry:\n    s.connect(('1.1.1.1', 53)); print('reached')\n"
            "except OSError as error:\n    print('blocked', type(error).__name__)"
        )
        assert "blocked" in network["stdout"], f"the network is reachable from a kernel: {network}"
        if session.isolation == "bwrap":
            world = kernel.run("import json, os\nprint(json.dumps([sorted(os.listdir('/')), os.getcwd()]))")
            names, cwd = json.loads(world["stdout"].strip().splitlines()[-1])
            bound = {
                path.strip("/").split("/")[0]
                for path in [*bwrap.python_paths(), *session.runtime_dirs, str(Path(sandbox.__file__).parents[1])]
            }
            allowed = {
                "bin",
                "sbin",
                "lib",
                "lib32",
                "lib64",
                "libx32",
                "usr",
                "etc",
                "proc",
                "dev",
                "home",
                "tmp",
            } | bound
            assert set(names) <= allowed, (
                f"the kernel's root holds more than its allow-list: {sorted(set(names) - allowed)}"
            )
            assert cwd == bwrap.HOME, f"the kernel should work in its private home, not {cwd}"
    finally:
        kernel.stop()


def confinement_report(session: SandboxSession, tmp_path: Path) -> dict:
    """What one kernel can do to the next and to the grader's processes, in the session's profile.

    A kernel writes files (mode 666) to /tmp and /dev/shm for a classmate, then tries to signal the
    grader, the sandbox manager and a grader-side process of its own uid (SIGKILL to the latter);
    the next kernel of the slot looks for the files. Used as root and, through `_run_unprivileged`,
    as an ordinary user.
    """
    import subprocess

    marker = f"course-collusion-{uuid.uuid4().hex[:8]}"
    own_uid = session.uids[0] if session.uids else os.getuid()
    bystander = subprocess.Popen(["sleep", "300"], user=own_uid if os.geteuid() == 0 else None)
    report = {"profile": session.profile.name, "description": session.description}
    writer = Kernel(session, 0, tmp_path)
    try:
        wrote = writer.run(
            f"import os\nfor folder in ('/tmp', '/dev/shm'):\n"
            f"    open(f'{{folder}}/{marker}', 'w').write('for the next learner')\n"
            f"    os.chmod(f'{{folder}}/{marker}', 0o666)\nprint('written')"
        )
        report["written"] = "written" in wrote["stdout"]
        outside = {
            "the grader": os.getpid(),
            "the sandbox manager": session.process.pid,
            "a grader-side process of the kernel's uid": bystander.pid,
        }
        reach = writer.run(
            "import json, os, signal\nreach = {}\n"
            f"for name, pid in {outside!r}.items():\n"
            "    try:\n        os.kill(pid, signal.SIGKILL if 'uid' in name else 0); reach[name] = 'signalled'\n"
            "    except ProcessLookupError:\n        reach[name] = 'absent'\n"
            "    except PermissionError:\n        reach[name] = 'visible'\nprint(json.dumps(reach))"
        )
        report["reach"] = json.loads(reach["stdout"].strip().splitlines()[-1])
    finally:
        writer.stop()
    time.sleep(0.2)
    report["bystander_alive"] = bystander.poll() is None
    bystander.kill()
    bystander.wait()
    report["left_on_the_machine"] = [path for path in (f"/tmp/{marker}", f"/dev/shm/{marker}") if os.path.exists(path)]
    reader = Kernel(session, 0, tmp_path)
    try:
        seen = reader.run(f"import os\nprint([os.path.exists(f'{{d}}/{marker}') for d in ('/tmp', '/dev/shm')])")
        report["next_kernel_sees"] = seen["stdout"].strip()
    finally:
        reader.stop()
    return report


def _assert_confined(report: dict) -> None:
    assert report["written"], f"the kernel could not write to its own /tmp and /dev/shm: {report}"
    assert set(report["reach"].values()) == {"absent"}, (
        f"a kernel ({report['profile']}) can see or signal processes outside its sandbox: {report['reach']}"
    )
    assert report["bystander_alive"], f"a kernel ({report['profile']}) killed a grader-side process of its own uid"
    assert not report["left_on_the_machine"], f"a kernel's /tmp or /dev/shm files reached the machine: {report}"
    assert report["next_kernel_sees"] == "[False, False]", f"the next kernel sees the previous one's files: {report}"


def test_kernels_have_private_tmp_and_shm_and_cannot_signal_anything_outside(session):
    _assert_confined(confinement_report(session, session.tmp_path))


def _run_unprivileged(argv: list[str], uid: int, gid: int, timeout_s: float):
    """Run `argv` as `uid` (root only). Where the Python installation lies in a folder that user may
    not enter (e.g. /root), the child gets a private mount namespace in which that folder is
    replaced by one holding only the installation, read-only, as the grader does for its kernels."""
    import subprocess
    import sys

    from course_grader.sandbox import namespaces

    needed = [sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(__file__).resolve().parents[1])]
    hide, mount_back = namespaces.plan_mounts([], needed, need_traversal=True)

    def become_the_user():
        if hide:
            namespaces.unshare(namespaces.CLONE_NEWNS)
            namespaces.apply_mounts(hide, mount_back, private=[])
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)

    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "LANG": "C.UTF-8"}
    return subprocess.run(
        argv, preexec_fn=become_the_user, capture_output=True, text=True, timeout=timeout_s, env=environment, cwd="/"
    )


def _unprivileged_account() -> tuple[int, int] | None:
    import pwd

    try:
        account = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return account.pw_uid, account.pw_gid


@pytest.mark.skipif(
    os.geteuid() != 0 or _unprivileged_account() is None,
    reason="needs root to run the grader as the unprivileged account 'nobody'",
)
@pytest.mark.parametrize("isolation", ["bwrap", "namespaces"] if HAS_BWRAP else ["namespaces"])
def test_graded_by_an_ordinary_user_kernels_are_confined_too(isolation):
    """Without root a kernel has the grader's uid: only namespaces keep it from the grader's processes."""
    import sys
    import tempfile

    uid, gid = _unprivileged_account()
    folder = Path(tempfile.mkdtemp(prefix="course-unprivileged-"))
    try:
        os.chown(folder, uid, gid)
        result = _run_unprivileged([sys.executable, __file__, "--confinement", isolation, str(folder)], uid, gid, 900)
        lines = result.stdout.strip().splitlines()
        assert result.returncode == 0 and lines, (
            f"the unprivileged grader failed ({result.returncode}): {result.stdout[-2000:]} {result.stderr[-3000:]}"
        )
        report = json.loads(lines[-1])
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    expected = {"bwrap": "bwrap-user", "namespaces": "namespaces-user"}[isolation]
    print(f"as uid {uid}: {report['profile']}; kernel start times {report['starts']}")
    assert report["profile"] == expected, f"an ordinary user should get {expected}, got {report['description']}"
    _assert_confined(report)


def test_a_memory_bomb_is_stopped_and_the_report_says_why(session):
    kernel = Kernel(session, 0, session.tmp_path)
    result = kernel.run(
        f"hoard = [bytearray(256 << 20) for _ in range({2 * MEMORY_MB // 256})]\nprint('survived')", timeout=120
    )
    status = kernel.stop()
    assert "survived" not in result["stdout"], "a kernel allocated twice its memory limit"
    if session.memory.startswith("cgroup"):
        assert result["error"] == "KernelDied" and "memory limit" in status.get("ending", ""), (result, status)
    else:
        assert result["error"] == "MemoryError", result


# Forked children that train: each leaves the kernel's process group (interrupts miss it) and spends
# FORKED_CPU_S of CPU time of its own, while the notebook waits for all of them.
FORKED_CHILDREN = 3
FORKED_TRAINING = f"""
import os, time
children = []
for _ in range({FORKED_CHILDREN}):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        while time.process_time() < {{seconds}}:
            pass
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
print('trained in', len(children), 'children')
"""


def test_the_cpu_budget_is_charged_to_the_whole_kernel_forked_children_included(session):
    """RLIMIT_CPU counts one process, and each forked child starts from zero: with a cgroup that counts
    CPU time the manager charges every process and thread of the kernel to its budget and stops it
    when the budget is spent. Without one the report says that the budget is per process."""
    if "charged to the whole kernel" not in session.description:
        assert "CPU time: per process only (RLIMIT_CPU" in session.description, session.description
        pytest.skip(f"no cgroup counts CPU time here: {session.description}")
    budget = 3
    kernel = Kernel(session, 0, session.tmp_path, cpu_s=budget)
    began = time.monotonic()
    result = kernel.run(FORKED_TRAINING.format(seconds=2 * budget), timeout=90)
    seconds = time.monotonic() - began
    status = kernel.stop()
    print(
        f"forked training ({session.isolation}): {status.get('cpu_s')} s of CPU for a budget of {budget} s, "
        f"stopped after {seconds:.1f} s: {status.get('ending')}"
    )
    assert "trained" not in result["stdout"], f"children spent {FORKED_CHILDREN * 2 * budget} s for a {budget} s budget"
    assert result["error"] == "KernelDied", result
    assert "CPU-time limit of 3 s" in status.get("ending", ""), status
    assert not status.get("processes_left"), f"a forked child survived its kernel: {status}"
    # Checked every 50 ms: at most a fraction of a second per core past the budget.
    assert budget <= status["cpu_s"] < budget + 1.0, status


def test_kernels_start_in_well_under_a_second_once_warm(session):
    """The first kernel of a session waits for its imports; later ones were warmed while the previous one ran."""
    starts = []
    for _ in range(3):
        kernel = Kernel(session, 0, session.tmp_path)
        kernel.run("x = 1")
        starts.append(kernel.start_s)
        kernel.stop()
        deadline = time.monotonic() + 300  # a submission's grading takes longer than the next kernel's imports
        while session.isolation == "bwrap" and not sandbox.is_warm(session.socket, 0) and time.monotonic() < deadline:
            time.sleep(0.2)
    print(f"kernel start times ({session.isolation}): {[round(s, 2) for s in starts]}")
    assert min(starts[1:]) < 1.0, f"warm kernels should start in under a second, measured {starts}"


def _seconds_until_warm(session, slot: int, limit_s: float) -> float | None:
    began = time.monotonic()
    while time.monotonic() - began < limit_s:
        if sandbox.is_warm(session.socket, slot):
            return time.monotonic() - began
        time.sleep(0.1)
    return None


def test_no_kernel_is_warmed_after_a_slots_last_submission(session):
    """A warm kernel imports its libraries (seconds of CPU) for the slot's next submission; after the last one
    of a run there is none, and none is warmed. A later request still gets a kernel."""
    if session.isolation != "bwrap":
        pytest.skip("only bubblewrap kernels are warmed ahead (the fork profiles fork the manager)")
    kernel = Kernel(session, 0, session.tmp_path)
    kernel.run("x = 1")
    kernel.stop()
    warmed_in = _seconds_until_warm(session, 0, 300)
    assert warmed_in is not None, "after an ordinary submission the slot's next kernel should be warmed"
    kernel = Kernel(session, 0, session.tmp_path, last=True)
    kernel.run("x = 1")
    kernel.stop()
    # Three times what warming took just now, and at least five seconds: a warm kernel would be ready by then.
    assert _seconds_until_warm(session, 0, max(5.0, 3 * warmed_in)) is None, "a kernel was warmed for no submission"
    kernel = Kernel(session, 0, session.tmp_path)
    assert kernel.run("print('started on demand')")["stdout"].strip() == "started on demand"
    kernel.stop()


def test_without_cgroups_rlimit_data_stops_a_memory_bomb_and_lets_torch_start(tmp_path_factory):
    """The fallback for graders that may not create cgroups: RLIMIT_DATA counts allocations, not the
    address space that a CUDA build of torch maps for its libraries (over 3 GB at import)."""
    with _session(tmp_path_factory, "auto", memory="rlimit") as rlimited:
        assert "RLIMIT_DATA" in rlimited.description, rlimited.description
        assert "CPU time: per process only (RLIMIT_CPU; no cgroup)" in rlimited.description, rlimited.description
        kernel = Kernel(rlimited, 0, rlimited.tmp_path)
        try:
            started = kernel.run(
                "import torch\nx = torch.ones(1000, 1000)\nprint('torch', torch.__version__, float(x.sum()))"
            )
            assert started["error"] is None and "torch" in started["stdout"], (
                f"torch did not work under RLIMIT_DATA: {started}"
            )
            bomb = kernel.run(
                f"hoard = [bytearray(256 << 20) for _ in range({2 * MEMORY_MB // 256})]\nprint('survived')"
            )
            assert bomb["error"] == "MemoryError" and "survived" not in bomb["stdout"], bomb
            after = kernel.run("print('still alive')")
            assert "still alive" in after["stdout"], "the kernel should survive a refused allocation"
        finally:
            kernel.stop()


@pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap is not installed here")
def test_by_default_the_grader_uses_bubblewrap_when_it_is_installed(tmp_path_factory):
    with _session(tmp_path_factory, "auto") as chosen:
        expected = "bwrap-root" if os.geteuid() == 0 else "bwrap-user"
        assert chosen.description.startswith(f"bubblewrap ({expected})"), chosen.description
        assert chosen.profile.own_uid == (os.geteuid() == 0)


if __name__ == "__main__":  # the ordinary user's half of test_graded_by_an_ordinary_user_kernels_are_confined_too
    import sys

    if sys.argv[1:2] != ["--confinement"] or len(sys.argv) != 4:
        sys.exit("usage: test_grading_sandbox.py --confinement bwrap|namespaces FOLDER")
    folder = Path(sys.argv[3])
    with SandboxSession(
        _layout(folder),
        ["numpy"],
        workers=1,
        isolation=sys.argv[2],
        default_limits={"memory_mb": MEMORY_MB, "processes": 64, "cpu_s": 120, "wall_s": 120},
    ) as started:
        found = confinement_report(started, folder)
        starts = []
        for _ in range(3):
            deadline = time.monotonic() + 300
            while (
                started.profile.kind == "bwrap"
                and not sandbox.is_warm(started.socket, 0)
                and time.monotonic() < deadline
            ):
                time.sleep(0.2)
            kernel = Kernel(started, 0, folder)
            kernel.run("x = 1")
            starts.append(round(kernel.start_s, 3))
            kernel.stop()
        found["starts"] = starts
    print(json.dumps(found))


def test_warm_kernels_get_the_graders_matplotlib_font_list(tmp_path, monkeypatch):
    """A warm kernel's home starts empty: the grader hands every kernel matplotlib's font list (where matplotlib
    would otherwise read every font file again, and start a timer thread that the guard refuses to a notebook's
    first plot)."""
    import matplotlib
    from matplotlib import font_manager

    from course_grader.sandbox import warmkernel
    from course_grader.sandbox.session import matplotlib_font_list

    handed = matplotlib_font_list()
    name = f"fontlist-v{font_manager.FontManager.__version__}.json"
    assert list(handed) == [name], f"expected matplotlib's own cache file {name}, got {list(handed)}"
    assert json.loads(handed[name])["_version"] == font_manager.FontManager.__version__
    assert handed[name] == (Path(matplotlib.get_cachedir()) / name).read_text(encoding="utf-8")

    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "home" / ".config" / "matplotlib"))
    warmkernel.place_font_list({"../../elsewhere.json": "{}", **handed})
    placed = sorted(path.name for path in (tmp_path / "home" / ".config" / "matplotlib").iterdir())
    assert placed == sorted(["elsewhere.json", name]), f"the list must land in MPLCONFIGDIR, and only there: {placed}"


def test_the_profile_in_force_is_a_typed_record_read_field_by_field():
    """The manager's ManagerReady carries its SandboxProfile as a record of its own: written and read back whole,
    and a profile with a field of the wrong type, or one no profile has, is refused with the field's name."""
    from course_grader.ground.messages import ManagerReady, MessageError, SandboxProfile

    profile = SandboxProfile("namespaces-user", "fork", own_uid=False, mounts=True, network=True, user_namespace=True)
    ready = ManagerReady(profile=profile, profile_description="hand-written namespaces", memory="cgroup")
    again = ManagerReady.from_json(ready.to_json(), "the manager's first line")
    assert again.profile == profile and type(again.profile) is SandboxProfile
    assert again.profile.pid is False, "a field the profile does not set has its default"
    written = ready.to_dict()
    with pytest.raises(MessageError, match=r"the manager's first line: field 'profile': field 'own_uid' must be bool"):
        ManagerReady.from_dict(
            {**written, "profile": {**written["profile"], "own_uid": "yes"}}, "the manager's first line"
        )
    with pytest.raises(MessageError, match=r"unknown field\(s\) seccomp"):
        ManagerReady.from_dict({**written, "profile": {**written["profile"], "seccomp": True}})
