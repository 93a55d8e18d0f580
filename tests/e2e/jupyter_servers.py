"""Temporary course, learner folder and JupyterLab servers for the browser test.

Everything lives under one work folder: the course copy (instructor), the exchange, the learner's
folder, and a private HOME and Jupyter configuration for each server, so that nothing reads or
writes the real home directory or the repository's own nbgrader files.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
COURSE_ID = "transformers-ground-up"
# JupyterLab starts in 5-10 s on an idle laptop; on a shared 2-core CI runner it can take a minute.
SERVER_START_TIMEOUT_S = float(os.environ.get("E2E_SERVER_TIMEOUT", "180"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_checked(command: list[str], cwd: Path, env: dict, what: str, timeout_s: float = 600) -> str:
    """Run a command; on failure raise with its whole output, so the test report says what broke."""
    print(f"+ ({cwd}) {' '.join(command)}", flush=True)
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise AssertionError(f"{what} failed with exit status {result.returncode}:\n{output}")
    return output


def private_environment(home: Path) -> dict:
    """os.environ with HOME and every Jupyter/IPython/matplotlib folder moved into `home`."""
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # The inline backend must draw the figures into the page; an inherited MPLBACKEND=Agg would not.
    env.pop("MPLBACKEND", None)
    env.pop("JUPYTER_PATH", None)
    env.update(
        {
            "HOME": str(home),
            "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
            "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),
            "JUPYTER_RUNTIME_DIR": str(home / ".local" / "share" / "jupyter" / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / ".jupyter" / "lab" / "user-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / ".jupyter" / "lab" / "workspaces"),
            "IPYTHONDIR": str(home / ".ipython"),
            "MPLCONFIGDIR": str(home / ".matplotlib"),
            "COURSE_THREADS": os.environ.get("COURSE_THREADS", "1"),
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            # The venv's bin/ first: nbgrader and the course tools call `nbgrader`, `alembic`, `jupyter`.
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        }
    )
    write_lab_settings(Path(env["JUPYTERLAB_SETTINGS_DIR"]))
    return env


def write_lab_settings(settings_dir: Path) -> list[Path]:
    """User settings that keep the page deterministic for a test (a learner's own lab is untouched).

    - every cell of a notebook stays in the page (no virtual scrolling), so the test can read all
      outputs, not only those on screen;
    - no news or update pop-ups over the page (they would need the network anyway).
    """
    files = {
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
    }
    for relative, content in files.items():
        path = settings_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))
    return [settings_dir / relative for relative in files]


def enable_course_validate(env: dict) -> Path:
    """The course's Validate (course_grader/exchange/validate_extension.py) in this lab, as `course lab` and the
    hub's install (deploy/install.sh) enable it: a syntax error is named by its cell and line."""
    path = Path(env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.d" / "transformers-course.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"course_grader.exchange.validate_extension": True}}})
    )
    return path


def write_nbgrader_config(folder: Path, exchange: Path) -> Path:
    """The learner's nbgrader_config.py: which course to list, and where the exchange is."""
    path = folder / "nbgrader_config.py"
    path.write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(exchange)!r}\n"
    )
    return path


def make_course(work: Path, assignment_id: str) -> tuple[Path, Path]:
    """A copy of the course (one assignment) under `work`, released to a fresh exchange.

    Returns (course_dir, exchange_dir). The copy keeps the repository's own release/, submitted/,
    gradebook.db and exchange untouched.
    """
    course = work / "course"
    exchange = work / "exchange"
    source = REPOSITORY / "solutions" / assignment_id
    if not source.is_dir():
        raise AssertionError(f"assignment source folder missing: {source}")
    (course / "solutions").mkdir(parents=True)
    shutil.copytree(source, course / "solutions" / assignment_id)
    shutil.copy(REPOSITORY / "nbgrader_config.py", course / "nbgrader_config.py")
    exchange.mkdir()
    return course, exchange


class JupyterLab:
    """One JupyterLab server on a free localhost port with a random token; logs to a file."""

    def __init__(self, name: str, root_dir: Path, env: dict, log_dir: Path):
        self.name, self.root_dir, self.env = name, Path(root_dir), env
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.log_path = Path(log_dir) / f"jupyterlab-{name}.log"
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "lab") -> str:
        separator = "&" if "?" in path else "?"
        return f"{self.base_url}/{path.lstrip('/')}{separator}token={self.token}"

    def start(self) -> "JupyterLab":
        command = [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
            # No extension manager (it would ask PyPI) and no terminals: neither is part of the path tested.
            "--LabApp.extension_manager=readonly",
            "--ServerApp.terminals_enabled=False",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")  # containers and CI often run as root
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "w")
        print(f"+ ({self.root_dir}) jupyter lab on port {self.port}, log {self.log_path}", flush=True)
        self.process = subprocess.Popen(
            command, cwd=self.root_dir, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline, last_error = time.monotonic() + SERVER_START_TIMEOUT_S, None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"JupyterLab ({self.name}) exited with status {self.process.returncode} "
                    f"before answering:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=10) as response:
                    json.load(response)
                return
            except (OSError, ValueError) as error:
                last_error = error
                time.sleep(1)
        raise AssertionError(
            f"JupyterLab ({self.name}) did not answer on port {self.port} within "
            f"{SERVER_START_TIMEOUT_S:.0f} s ({last_error}):\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        # Only this server's own process group: the server and the kernels it started.
        try:
            os.killpg(self.process.pid, 15)
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait(timeout=10)
        except ProcessLookupError:
            pass
