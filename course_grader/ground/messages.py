"""Every file and JSON line that one grading process hands another: their fields, in one place.

A grading run has four kinds of process (see sandbox.py): the grader (`course grade` and its forked
workers, which run nbgrader), the sandbox manager, the launcher that jupyter_client starts for each
kernel, and the kernels (warm, then assigned). What they exchange:

    message           from -> to                         carried as
    ManagerConfig     grader -> manager                  config.json, the manager's one argument
    ManagerReady      manager -> grader                  the manager's first line on its stdout (with its
                                                         SandboxProfile)
    KernelRequest     grader's worker -> manager         request.json, named by the launcher's hello
    Hello             launcher or grader -> manager      the first JSON line of a socket connection
    Event             manager -> launcher or grader      JSON lines back on that connection
    TERMINATE         launcher -> manager                a bare line: jupyter_client ends the kernel
    WarmSetup         manager -> warm kernel             a JSON line on the kernel's control socket
    WarmReady         warm kernel -> manager             a JSON line back once its libraries are loaded
    KernelAssignment  manager -> kernel                  a JSON line (the kernel log's descriptor beside it)
    KernelStatus      manager -> grader's worker         status.json: how the kernel ended
    ProbeSecrets      manager -> probe sandbox           the probe's argument
    ProbeAnswer       probe sandbox -> manager           the probe's last line on its stdout
    GuardReply        kernel guard -> grader's worker    a Jupyter message of type GUARD_REPLY
    ExecutionReport   grader's worker -> grader          <learner>.execution.json (execute.py)
    WorkerResult      grader's worker -> grader          <learner>.result.json (nbgrader's capture_log)
    CollectRefusals   `course collect` -> `course grade`  collect_refused.json beside a collected submission

Each is a dataclass. `to_dict`/`to_json` write one; `from_dict`/`from_json` read one and check every
field, nested messages included: a missing field, one of the wrong type or one no message of that
kind has raises `MessageError` with where the text came from and the field's name.

Standard library only, and nothing here runs at import but definitions: the manager, the launcher
(`python -I -S`) and the kernels import it inside the sandbox, and the kernel guard loads it by its
path (kernel_guard.py).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

TERMINATE = "terminate"  # launcher -> manager, a bare line after its hello: end the kernel (jupyter_client asked)
GUARD_REQUEST = "course_guard_request"  # the grader's Jupyter message to the kernel guard (kernel_guard.py)
GUARD_REPLY = "course_guard_reply"  # the guard's answer, a GuardReply


class MessageError(ValueError):
    """A message or file that is not what its kind promises; the text names where it came from and the field."""


class Message:
    """The reading and writing that every message shares (the subclasses are dataclasses)."""

    strict = True  # an unknown field is an error (False: ignored, for what a library writes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data, where: str = ""):
        """The message in `data` (parsed JSON), every field checked; MessageError names what is wrong."""
        where = where or cls.__name__
        if not isinstance(data, dict):
            raise MessageError(f"{where}: expected a JSON object ({cls.__name__}), got {type(data).__name__}")
        fields = {item.name: item for item in dataclasses.fields(cls)}
        unknown = sorted(str(name) for name in set(data) - set(fields))
        if unknown and cls.strict:
            raise MessageError(
                f"{where}: unknown field(s) {', '.join(unknown)}; a {cls.__name__} has {', '.join(fields)}"
            )
        values = {}
        for name, item in fields.items():
            if name in data:
                values[name] = _checked(data[name], item.type, f"{where}: field {name!r}")
            elif item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
                raise MessageError(f"{where}: the field {name!r} is missing (a {cls.__name__} needs it)")
        try:
            return cls(**values)
        except MessageError as error:  # a message's own check (__post_init__)
            raise MessageError(f"{where}: {error}") from None

    @classmethod
    def from_json(cls, text: str | bytes, where: str = ""):
        try:
            data = json.loads(text)
        except ValueError as error:
            raise MessageError(f"{where or cls.__name__}: not JSON ({error})") from None
        return cls.from_dict(data, where)

    @classmethod
    def read(cls, path: str):
        """The message in the file at `path`; OSError if it cannot be read, MessageError if it is not one."""
        with open(path, "rb") as handle:
            return cls.from_json(handle.read(), str(path))

    def write(self, path: str, indent: int | None = None) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self.to_dict(), handle, indent=indent)


_SIMPLE = {"str": (str,), "bool": (bool,), "None": (type(None),), "list": (list,), "dict": (dict,), "object": (object,)}


def _checked(value, annotation: str, where: str):
    """`value` if it is of the annotated type (nested messages are built from their dicts)."""
    for option in (part.strip() for part in annotation.split("|")):
        base, _, inner = option.partition("[")
        inner = inner[:-1]
        if base in _MESSAGES:
            if isinstance(value, dict):
                return _MESSAGES[base].from_dict(value, where)
        elif base in ("int", "float"):
            if isinstance(value, int if base == "int" else (int, float)) and not isinstance(value, bool):
                return value
        elif isinstance(value, _SIMPLE[base]):
            if base == "list" and inner:
                return [_checked(item, inner, f"{where}[{index}]") for index, item in enumerate(value)]
            if base == "dict" and inner:
                key_type, value_type = (part.strip() for part in inner.split(",", 1))
                return {
                    _checked(key, key_type, f"{where} key"): _checked(item, value_type, f"{where}[{key!r}]")
                    for key, item in value.items()
                }
            return value
    shown = repr(value)
    raise MessageError(
        f"{where} must be {annotation}, got {type(value).__name__} {shown if len(shown) <= 80 else shown[:77] + '...'}"
    )


# ------------------------------------------------------------------------------------------------
# The sandbox: grader, manager, launcher, kernels.
# ------------------------------------------------------------------------------------------------
@dataclass
class Limits(Message):
    """What one kernel may use (limits.py applies them)."""

    memory_mb: int
    cpu_s: float  # CPU time from the end of the kernel's preloading; all its processes where a cgroup counts it
    wall_s: float  # the manager stops the kernel after this long
    processes: int  # threads count too
    file_mb: int = 256  # largest file it may write
    open_files: int = 1024


@dataclass
class GuardSettings(Message):
    """The kernel guard's output limits (kernel_guard.py)."""

    message_chars: int = 200_000  # per output message
    cell_chars: int = 2_000_000  # per cell


@dataclass
class ManagerConfig(Message):
    """Everything the manager is told, once, by the grader's SandboxSession (session.py)."""

    socket: str  # the unix socket it serves (only the grader's user may open it)
    preload: list[str]  # modules every kernel imports ahead ("name?": if it is a module)
    guard_file: str  # kernel_guard.py
    hide: list[str]  # folders kernels must not see (the course, the exchange, the home)
    expose: list[str]  # folders kernels need (the Python installation, the package)
    read_only: list[str]  # what bubblewrap binds read-only
    runtime_dirs: list[str]  # per slot: the one folder a kernel shares with the grader
    isolation: str  # "auto", "bwrap", "namespaces" or "none" (course grade --isolation)
    memory: str  # "auto" (a cgroup where possible) or "rlimit"
    probe_dir: str  # where the profile probes may write
    probe_uid: int | None  # the probes' uid (root only)
    slot_uids: list[int]  # per slot: its kernels' uid (root only; else empty)
    workers: int  # slots
    limits: Limits  # for warm kernels, until their request sets their own
    marker_dir: str  # the manager's own folder; a marker file there must stay invisible to kernels
    log_dir: str  # the warm kernels' logs
    # matplotlib's font list as the grader has it cached ({file name: its JSON}), handed to each warm
    # kernel (WarmSetup): {} when no test imports matplotlib.
    font_list: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SandboxProfile(Message):
    """One way of confining kernels; the manager probes them strongest first and serves with the first that works
    (sandbox/probes.py, choose_profile; sandbox/sandbox.py lists them)."""

    name: str  # "bwrap-root", "bwrap-user", "namespaces-root", "namespaces-user", ..., "limits only"
    kind: str  # "bwrap": each kernel a bubblewrap sandbox; "fork": forked from the manager, confined by namespaces
    own_uid: bool  # each kernel runs as a numeric uid of its own (the grader runs as root)
    mounts: bool = False  # fork: a mount namespace (the course's files hidden, a private /tmp and /dev/shm)
    network: bool = False  # fork: a network namespace (no network)
    user_namespace: bool = False  # fork: a user namespace without capabilities (the grader is not root)
    pid: bool = False  # fork: a PID namespace of the kernel's own
    unavailable: list[str] = field(default_factory=list)  # the stronger profiles this machine refused, and why
    memory: str = ""  # how memory is limited, once chosen
    cpu: str = ""  # how CPU time is limited, once chosen


@dataclass
class ManagerReady(Message):
    """The manager's first line: it serves, with this profile."""

    profile: SandboxProfile  # the profile in force
    profile_description: str  # one line for the grading report (probes.describe)
    memory: str  # how memory is limited
    warm_s: float | None = None  # how long the first warm kernels took to import (bubblewrap)
    preloaded: list[str] = field(default_factory=list)  # what the manager imported (fork profiles)
    preload_failed: list[str] = field(default_factory=list)
    python: str = ""


@dataclass
class KernelRequest(Message):
    """What the grader asks for one submission's kernel (written before nbgrader starts the kernel)."""

    slot: int
    work_dir: str  # the kernel's home for the fallback profiles (bubblewrap's is private)
    uid: int | None  # the slot's uid (root only)
    status_file: str  # where the manager writes the KernelStatus
    kernel_log: str  # the kernel's stdout and stderr
    files: dict[str, str]  # the assignment's support files: relative path -> source path
    limits: Limits
    guard: GuardSettings = field(default_factory=GuardSettings)
    last: bool = False  # no submission is left for the slot: no next kernel is warmed for it


@dataclass
class Hello(Message):
    """The first line of every connection to the manager's socket: what the caller wants."""

    command: str  # "launch": a kernel; "release": empty a slot; "warm": is its next kernel ready?
    slot: int | None = None  # release, warm
    connection_file: str = ""  # launch: the kernel's connection file (jupyter_client wrote it)
    request_file: str = ""  # launch: the grader's KernelRequest

    def __post_init__(self):
        if self.command not in ("launch", "release", "warm"):
            raise MessageError(f"unknown command {self.command!r} (launch, release or warm)")
        if self.command == "launch" and not (self.connection_file and self.request_file):
            raise MessageError("a launch needs its connection_file and request_file")
        if self.command != "launch" and self.slot is None:
            raise MessageError(f"{self.command} needs a slot")


@dataclass
class Event(Message):
    """What the manager answers on a connection."""

    event: str  # "started", "exit" (the kernel ended), "released" (the slot is empty), "warm"
    code: int = 1  # exit: the kernel's exit status, which the launcher exits with
    ready: bool = False  # warm: the slot's next kernel has imported its libraries


@dataclass
class WarmSetup(Message):
    """What a bubblewrap kernel is told first: who to become and what to import."""

    uid: int | None
    preload: list[str]
    guard_file: str
    memory_by_cgroup: bool
    processes_by_cgroup: bool
    font_list: dict[str, str] = field(default_factory=dict)  # ManagerConfig.font_list


@dataclass
class WarmReady(Message):
    """A warm kernel has imported its libraries and the guard's snapshot is taken."""

    preloaded: list[str]
    preload_failed: list[str]
    cpu_s: float  # what the preloading cost (the learner's CPU budget starts after it)


@dataclass
class KernelAssignment(Message):
    """What a kernel receives for one submission: it becomes that submission's IPython kernel."""

    connection_file: str
    limits: Limits
    guard: GuardSettings
    files: dict[str, str]  # support files: relative path -> base64 of the content


@dataclass
class KernelStatus(Message):
    """How a kernel ended, or why it never started (the manager writes it; execute.py reads it)."""

    exit_code: int
    ending: str  # in words: "killed: it used more than its memory limit of 3072 MB", ...
    profile: str  # the sandbox profile's name
    memory: str  # how memory was limited
    oom_kills: int = 0
    wall_s: float | None = None
    cpu_s: float | None = None
    peak_memory_mb: float | None = None
    processes_left: bool = False  # something of the kernel survived it
    start_s: float | None = None  # from the kernel's start to its assignment (warm: near zero)


@dataclass
class ProbeSecrets(Message):
    """What a probe sandbox looks for (probes.py): it must find none of it."""

    hidden: dict[str, list[str]]  # hidden folder -> the names that may show in it
    private: list[str]  # files of the grader's /tmp
    manager_pid: int
    uid: int | None


@dataclass
class ProbeAnswer(Message):
    problems: list[str]


# ------------------------------------------------------------------------------------------------
# The grader's worker: the kernel guard's replies, the execution report, nbgrader's result.
# ------------------------------------------------------------------------------------------------
@dataclass
class GuardReply(Message):
    """The kernel guard's answer to GUARD_REQUEST {"command": "restore", "verify" or "report", "nonce"}, or
    {"command": "judge", "verb", "request", "nonce"} (a question of the judge, kernel_calls.respond)."""

    nonce: str | None = None
    error: str = ""  # the guard could not do it
    undone: list[str] = field(default_factory=list)  # restore: what learner code had replaced (the first 40)
    undone_count: int = 0
    not_undone: list[str] = field(default_factory=list)  # restore, verify: what could not be put back
    changed: list[str] = field(default_factory=list)  # verify: what changed while the test ran (the first 40)
    changed_count: int = 0
    problems: list[str] = field(default_factory=list)  # report: everything the guard saw
    checked: int = 0  # report: references in the snapshot
    answer: str = ""  # judge: the kernel's answer, JSON text (judge.py reads it as data)


@dataclass
class CellReport(Message):
    """What the grader saw while one cell ran (only what happened is set)."""

    seconds: float = 0.0
    not_run: bool = False  # the kernel was dead before this cell
    kernel_died: bool = False
    canary: bool | None = None  # test cells: the canary line came back
    canary_missing_without_error: bool = False
    timeout: bool = False
    restore_failed: bool = False
    not_undone: list[str] = field(default_factory=list)
    verify_failed: bool = False
    changed_during_test: list[str] = field(default_factory=list)
    output_cut: bool = False
    for_review: str = ""  # the judge could not decide for certain: the test scored 0, the instructor decides


@dataclass
class Integrity(Message):
    ok: bool
    problems: list[str]


@dataclass
class ExecutionReport(Message):
    """One notebook's execution as the grader saw it (execute.py writes it, publish.py reads it)."""

    cells: dict[str, CellReport] = field(default_factory=dict)  # grade id (or "cell N") -> its report
    kernel_ending: KernelStatus | None = None
    integrity: Integrity | None = None  # the guard's report at the end (None when the kernel died)
    seconds: float = 0.0
    kernel_start_s: float | None = None  # from asking for the kernel to its first reply


@dataclass
class WorkerResult(Message):
    """nbgrader's `capture_log` result of one Autograde run."""

    strict = False  # nbgrader's own dict: other keys are ignored
    success: bool
    log: str = ""
    error: str = ""


# ------------------------------------------------------------------------------------------------
# Between two commands of the grader.
# ------------------------------------------------------------------------------------------------
@dataclass
class CollectRefusals(Message):
    """What `course collect` left in the exchange (untrusted.copy_tree), written next to what it copied;
    the preflight turns each entry into a finding."""

    refused: list[dict]  # {"path", "kind", "reason"} per entry that was not copied
    collected_from: str = ""  # the exchange folder's name


_MESSAGES = {klass.__name__: klass for klass in Message.__subclasses__()}
