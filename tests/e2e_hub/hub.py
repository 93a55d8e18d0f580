"""A real class on a real JupyterHub, on loopback, for the hub test and the load check.

`HubClass` does, as root, what deploy/README.md tells an instructor to do: deploy/setup_course.sh (the
grader account, the course directory, the exchange), deploy/add_learners.sh (accounts with passwords),
`course release --publish` as the grader, then JupyterHub with deploy/jupyterhub_config.py, started
on free loopback ports. Everything it makes lives under one folder and a run tag in every account and
group name; `close()` stops the Hub (which stops every server and the proxy), ends what is left of the
test accounts' processes (by pid), removes the accounts, groups and folders. A run that was killed
outright leaves accounts whose comment names its pid: the next run removes them.

Environment:
    COURSE_PREFIX   the shared environment built by deploy/install.sh (make e2e-hub: /opt/transformers-course-hubtest)
    HUB_TIMEOUT     seconds a Hub, a server or a command may take to start or finish (default 240)
"""

from __future__ import annotations

import atexit
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_servers import write_lab_settings  # tests/e2e, on the path (conftest.py)

REPOSITORY = Path(__file__).resolve().parents[2]
DEPLOY = REPOSITORY / "deploy"
PREFIX = Path(os.environ.get("COURSE_PREFIX", "/opt/transformers-course-hubtest"))
COURSE_ID = "transformers-ground-up"
TIMEOUT_S = float(os.environ.get("HUB_TIMEOUT", "240"))
ACCOUNT_COMMENT = "course e2e-hub test account, pid "
DRIVER = "course-e2e-driver"
_OPEN: list["HubClass"] = []  # closed at exit too, should a run be stopped before its own clean-up


def _close_all_at_exit() -> None:
    for hub_class in list(_OPEN):
        try:
            hub_class.close()
        except Exception as error:
            print(f"[hub] clean-up at exit: {error}", flush=True)


atexit.register(_close_all_at_exit)


def stop_on_sigterm() -> None:
    """`timeout` (or CI) ends a run with SIGTERM: turn it into KeyboardInterrupt, so that clean-up runs."""

    def interrupt(number, frame):
        raise KeyboardInterrupt(f"signal {number}")

    signal.signal(signal.SIGTERM, interrupt)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def log(message: str) -> None:
    print(f"[hub] {message}", flush=True)


def run(command: list[str], what: str, env: dict | None = None, timeout_s: float = TIMEOUT_S, **kwargs) -> str:
    """Run a command; on failure raise with its whole output."""
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout_s, **kwargs)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise AssertionError(f"{what} failed with exit status {result.returncode}:\n{output}")
    return output


def check_environment() -> None:
    """The shared environment must exist and run for an account that is not root (the known trap)."""
    missing = [
        name
        for name in ("python", "jupyterhub", "jupyterhub-singleuser", "configurable-http-proxy")
        if not os.access(PREFIX / "bin" / name, os.X_OK)
    ]
    if missing:
        raise AssertionError(
            f"{PREFIX} lacks {missing}: build it with `deploy/install.sh {PREFIX}` (make e2e-hub does)"
        )
    run(
        [
            "runuser",
            "-u",
            "nobody",
            "--",
            "env",
            "HOME=/tmp",
            str(PREFIX / "bin" / "jupyterhub-singleuser"),
            "--version",
        ],
        f"running {PREFIX}/bin/jupyterhub-singleuser as an unprivileged account",
    )


def _pids_of_uid(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(int(entry))
            except FileNotFoundError:
                pass
    return pids


def end_processes_of(uid: int, grace_s: float = 10) -> list[int]:
    """SIGTERM, then SIGKILL, every process of a test account (listed by pid); returns those found."""
    found = _pids_of_uid(uid)
    for number in (signal.SIGTERM, signal.SIGKILL):
        for pid in _pids_of_uid(uid):
            try:
                os.kill(pid, number)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while _pids_of_uid(uid) and time.monotonic() < deadline:
            time.sleep(0.2)
    return found


def remove_account(name: str) -> None:
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    left = end_processes_of(uid)
    if left:
        log(f"ended {len(left)} process(es) left by {name}: {left}")
    subprocess.run(["userdel", "--remove", name], capture_output=True, text=True)
    subprocess.run(["groupdel", name], capture_output=True, text=True)  # its own group, if userdel left it


def remove_stale_accounts() -> None:
    """Accounts of an earlier run that was killed before it could clean up (its pid is gone)."""
    for entry in pwd.getpwall():
        if not entry.pw_gecos.startswith(ACCOUNT_COMMENT):
            continue
        pid = entry.pw_gecos[len(ACCOUNT_COMMENT) :].split()[0]
        if pid.isdigit() and Path(f"/proc/{pid}").exists():
            continue  # a run still going on (another test process)
        tag = entry.pw_name.split("-")[0]
        log(f"removing {entry.pw_name}, left by a run that no longer exists (pid {pid})")
        remove_account(entry.pw_name)
        for group in (f"{tag}-learners", f"{tag}-instructors"):
            subprocess.run(["groupdel", group], capture_output=True, text=True)
        home = Path(entry.pw_dir)
        if home.parent.parent.name.startswith("course-hub-") and home.parent.parent.parent == Path(
            tempfile.gettempdir()
        ):
            shutil.rmtree(home.parent.parent, ignore_errors=True)


@dataclass
class Account:
    name: str
    password: str | None
    home: Path

    @property
    def uid(self) -> int:
        return pwd.getpwnam(self.name).pw_uid

    @property
    def gid(self) -> int:
        return pwd.getpwnam(self.name).pw_gid


@dataclass(eq=False)
class HubClass:
    """One class: a grader, an instructor, learners, the exchange, the Hub. Use as a context manager."""

    learner_names: list[str]
    instructor_names: list[str] = field(default_factory=lambda: ["ines"])
    tag: str = field(default_factory=lambda: "hx" + secrets.token_hex(2))
    hub: subprocess.Popen | None = None
    accounts: dict[str, Account] = field(default_factory=dict)

    def __post_init__(self):
        self.root = Path(tempfile.mkdtemp(prefix=f"course-hub-{self.tag}-"))
        os.chmod(self.root, 0o755)  # homes and the exchange are below it; each keeps its own mode
        self.homes = self.root / "homes"
        self.homes.mkdir(mode=0o755)
        self.hub_dir = self.root / "hub"  # the Hub's database, cookie secret, logs: root only
        self.hub_dir.mkdir(mode=0o700)
        self.exchange = self.root / "srv" / "nbgrader" / "exchange"
        self.grader = f"{self.tag}-grader"
        self.learners_group, self.instructors_group = f"{self.tag}-learners", f"{self.tag}-instructors"
        self.port, self.api_port, self.proxy_port, self.formgrader_port = (free_port() for _ in range(4))
        self.driver_token = secrets.token_hex(32)
        self.log_path = self.hub_dir / "jupyterhub.log"

    # -- names ------------------------------------------------------------------------------------
    def user(self, short: str) -> Account:
        return self.accounts[f"{self.tag}-{short}"]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def course_dir(self) -> Path:
        return self.accounts[self.grader].home / COURSE_ID

    def settings(self) -> dict:
        """The deployment's settings (deploy/*.sh and deploy/jupyterhub_config.py read the same names)."""
        return {
            "COURSE_PREFIX": str(PREFIX),
            "COURSE_ID": COURSE_ID,
            "COURSE_EXCHANGE": str(self.exchange),
            "COURSE_GRADER": self.grader,
            "COURSE_LEARNERS_GROUP": self.learners_group,
            "COURSE_INSTRUCTORS_GROUP": self.instructors_group,
            "COURSE_HOME_BASE": str(self.homes),
            "COURSE_ACCOUNT_COMMENT": f"{ACCOUNT_COMMENT}{os.getpid()}",
            "COURSE_HUB_URL": self.url,
            "COURSE_HUB_API_URL": f"http://127.0.0.1:{self.api_port}",
            "COURSE_PROXY_API_URL": f"http://127.0.0.1:{self.proxy_port}",
            "COURSE_FORMGRADER_PORT": str(self.formgrader_port),
        }

    def deploy_env(self) -> dict:
        env = {key: value for key, value in os.environ.items() if not key.startswith(("COURSE_", "JUPYTER"))}
        env.update(self.settings())
        env["PATH"] = f"{PREFIX}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        return env

    # -- setting up ---------------------------------------------------------------------------------
    def __enter__(self) -> "HubClass":
        try:
            self.set_up()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def set_up(self) -> None:
        _OPEN.append(self)
        check_environment()
        remove_stale_accounts()
        log(f"class {self.tag} in {self.root}")
        env = self.deploy_env()
        # Recorded before they exist, so that close() removes whatever part of them was made.
        self._planned = [self.grader] + [f"{self.tag}-{n}" for n in self.instructor_names + self.learner_names]
        run(["bash", str(DEPLOY / "setup_course.sh")], "deploy/setup_course.sh", env=env)
        grader_home = Path(pwd.getpwnam(self.grader).pw_dir)
        self.accounts[self.grader] = Account(self.grader, None, grader_home)
        for names, flag in ((self.instructor_names, ["--instructor"]), (self.learner_names, [])):
            if not names:
                continue
            output = run(
                ["bash", str(DEPLOY / "add_learners.sh"), *flag, *(f"{self.tag}-{n}" for n in names)],
                "deploy/add_learners.sh",
                env=env,
            )
            for line in output.splitlines():
                name, password = line.split()
                self.accounts[name] = Account(name, password, Path(pwd.getpwnam(name).pw_dir))
        for account in self.accounts.values():
            write_lab_test_settings(account)
        # The course: only the assignment under test is released (the guide releases each in turn).
        self.as_user(
            self.grader,
            [
                "course",
                "release",
                "--assignment",
                "ex1_manual_attention",
                "--publish",
                "--course-dir",
                str(self.course_dir),
            ],
            "course release --publish (as the grader)",
        )
        self.start_hub()

    def start_hub(self) -> None:
        overlay = self.hub_dir / "jupyterhub_config.py"
        overlay.write_text(
            "# The deployment's configuration, plus what only the test needs.\n"
            f"load_subconfig({str(DEPLOY / 'jupyterhub_config.py')!r})\n"
            "c = get_config()  # noqa: F821\n"
            "# The test drives the Hub's REST API with a token of its own.\n"
            f"c.JupyterHub.services.append({{'name': {DRIVER!r}, 'api_token': {self.driver_token!r}}})\n"
            f"c.JupyterHub.load_roles.append({{'name': {DRIVER!r}, 'services': [{DRIVER!r}], 'scopes': [\n"
            "    'admin:users', 'admin:servers', 'access:servers', 'list:users', 'read:users', 'list:services']})\n"
            "# One thread per kernel: several engineers' tests share the machine's cores.\n"
            "c.Spawner.environment.update({'COURSE_THREADS': '1', 'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'})\n"
            "c.JupyterHub.log_level = 'INFO'\n"
        )
        log_file = open(self.log_path, "w")
        log(f"starting JupyterHub on {self.url} (log {self.log_path})")
        self.hub = subprocess.Popen(
            [str(PREFIX / "bin" / "jupyterhub"), "-f", str(overlay)],
            cwd=self.hub_dir,
            env=self.deploy_env(),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log_file.close()
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            if self.hub.poll() is not None:
                raise AssertionError(f"JupyterHub exited with status {self.hub.returncode}:\n{self.log_tail()}")
            try:
                self.api("GET", "/")
                if self.api("GET", f"/services/{COURSE_ID}").get("name") == COURSE_ID:
                    return
            except (OSError, ValueError):
                pass
            time.sleep(1)
        raise AssertionError(f"JupyterHub did not answer on {self.url} within {TIMEOUT_S:.0f} s:\n{self.log_tail()}")

    # -- using it ------------------------------------------------------------------------------------
    def api(self, method: str, path: str, body: dict | None = None, timeout_s: float = 60) -> dict:
        """The Hub's REST API (through the proxy, as a person's browser would reach it)."""
        return self.request(method, f"/hub/api{path}", body, timeout_s)

    def request(self, method: str, path: str, body=None, timeout_s: float = 60, raw: bytes | None = None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {self.driver_token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            text = response.read().decode()
        return json.loads(text) if text.strip() else {}

    def user_env(self, name: str) -> dict:
        account = self.accounts[name]
        env = {
            "HOME": str(account.home),
            "USER": name,
            "LOGNAME": name,
            "SHELL": "/bin/bash",
            "PATH": f"{PREFIX}/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "COURSE_ID": COURSE_ID,
            "COURSE_EXCHANGE": str(self.exchange),
            "COURSE_THREADS": "1",
            "OMP_NUM_THREADS": "1",
        }
        return env

    def as_user(
        self, name: str, command: list[str], what: str, timeout_s: float = TIMEOUT_S, check: bool = True
    ) -> subprocess.CompletedProcess:
        """Run a command as one of the class's accounts, with its own groups, in its home."""
        account = self.accounts[name]
        command = (
            [str(PREFIX / "bin" / command[0])] + command[1:] if (PREFIX / "bin" / command[0]).exists() else command
        )
        result = subprocess.run(
            ["runuser", "-u", name, "--", "env", "-i", *(f"{k}={v}" for k, v in self.user_env(name).items()), *command],
            cwd=account.home,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"{what} failed with exit status {result.returncode}:\n{result.stdout}{result.stderr}")
        return result

    def server_pids(self, name: str) -> list[int]:
        return _pids_of_uid(self.accounts[name].uid)

    def log_tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- cleaning up -----------------------------------------------------------------------------------
    def stop_hub(self) -> None:
        if self.hub is None or self.hub.poll() is not None:
            return
        # JupyterHub stops every server it started, its services and the proxy when it gets SIGTERM.
        self.hub.send_signal(signal.SIGTERM)
        try:
            self.hub.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.hub.pid, signal.SIGKILL)
            self.hub.wait(timeout=10)

    def close(self, keep_log_in: Path | None = None) -> None:
        if self not in _OPEN:
            return  # closed already
        _OPEN.remove(self)
        errors = []
        try:
            self.stop_hub()
        except Exception as error:  # cleaning up goes on whatever happened
            errors.append(f"stopping the Hub: {error}")
        if self.hub is not None:
            # The proxy runs in the Hub's session; anything of it still there is ended by its group.
            try:
                os.killpg(self.hub.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if keep_log_in is not None and self.log_path.exists():
            keep_log_in.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.log_path, keep_log_in / "jupyterhub.log")
        for name in getattr(self, "_planned", []):
            try:
                remove_account(name)
            except Exception as error:
                errors.append(f"removing {name}: {error}")
        for group in (self.learners_group, self.instructors_group):
            subprocess.run(["groupdel", group], capture_output=True, text=True)
        shutil.rmtree(self.root, ignore_errors=True)
        left = [name for name in getattr(self, "_planned", []) if _exists(name)]
        if left or self.root.exists():
            errors.append(f"left behind: accounts {left}, folder {self.root if self.root.exists() else '-'}")
        log(f"class {self.tag} removed" + (f" with problems: {errors}" if errors else ""))
        if errors:
            raise AssertionError("cleaning up the class failed: " + "; ".join(errors))


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def write_lab_test_settings(account: Account) -> None:
    """JupyterLab settings that keep the page deterministic for the browser (tests/e2e's own), written
    as the account's own files."""
    write_lab_settings(account.home / ".jupyter" / "lab" / "user-settings")
    for path in [account.home / ".jupyter", *(account.home / ".jupyter").rglob("*")]:
        os.chown(path, account.uid, account.gid)
