"""A fresh clone of the course, set up as the README says, for the tests of the learner's path.

`fresh_clone` copies what git would commit from this working tree (tracked and new files, nothing
that .gitignore names: no exercises/, release/, build/ ...) into an "upstream" repository, commits it,
and `git clone`s that: the clone is what a learner gets, and the upstream can take new commits for
`git pull`. `make` runs in the clone with this test run's Python environment (VENV=..., and `-o` so
that make does not reinstall it), and PYTHONPATH makes the clone's own `course_utils` the one imported.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(sys.prefix)
GIT_USER = ["-c", "user.name=Course Tests", "-c", "user.email=tests@course.invalid", "-c", "commit.gpgsign=false"]
LAB_START_TIMEOUT_S = 180  # JupyterLab starts in 5-10 s on an idle laptop, up to a minute on a busy 2-core runner


def run(
    command: list[str], cwd: Path, env: dict, timeout: float = 600, check: bool = True
) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(
            f"`{' '.join(map(str, command))}` in {cwd} failed with status {result.returncode}:\n"
            f"{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
        )
    return result


def git(repository: Path, *arguments: str, env: dict | None = None) -> str:
    return run(["git", *GIT_USER, *arguments], cwd=repository, env=env or dict(os.environ)).stdout


def fresh_clone(work: Path) -> tuple[Path, Path]:
    """(upstream, clone): the working tree as it would be committed, and a `git clone` of it."""
    upstream, clone = work / "upstream", work / "clone"
    listed = run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, env=dict(os.environ)
    ).stdout.split("\0")
    for relative in filter(None, listed):
        source = ROOT / relative
        if source.is_file():  # a tracked file deleted in the working tree is left out, as a commit would
            target = upstream / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    git(upstream, "init", "-q", "-b", "main")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "the course as committed")
    run(["git", "clone", "-q", str(upstream), str(clone)], cwd=work, env=dict(os.environ))
    return upstream, clone


def learner_env(clone: Path, home: Path, exchange: Path | None = None) -> dict:
    """A learner's environment: own HOME and Jupyter folders; COURSE_EXCHANGE only for a class."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("COURSE_EXCHANGE", "JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "MPLBACKEND")
    }
    env.update(
        {
            "HOME": str(home),
            "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
            "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),
            "JUPYTER_RUNTIME_DIR": str(home / ".local" / "share" / "jupyter" / "runtime"),
            "IPYTHONDIR": str(home / ".ipython"),
            "MPLCONFIGDIR": str(home / ".matplotlib"),
            "PYTHONPATH": str(clone),
            # This run's environment is not the clone's own .venv, so `course setup` writes the learner's
            # nbgrader settings only to the clone's build/learner/jupyter: put it where nbgrader looks.
            "JUPYTER_CONFIG_PATH": str(clone / "build" / "learner" / "jupyter"),
            "PATH": str(VENV / "bin") + os.pathsep + os.environ.get("PATH", ""),
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        }
    )
    if exchange is not None:
        env["COURSE_EXCHANGE"] = str(exchange)
    return env


def make_command(clone: Path, target: str, *variables: str) -> list[str]:
    return [
        "make",
        "--no-print-directory",
        "-C",
        str(clone),
        "-o",
        str(VENV / ".course-installed"),
        f"VENV={VENV}",
        target,
        *variables,
    ]


def make(clone: Path, target: str, env: dict, *variables: str, timeout: float = 900) -> str:
    result = run(make_command(clone, target, *variables), cwd=clone, env=env, timeout=timeout)
    return result.stdout + result.stderr


def nbgrader(arguments: list[str], cwd: Path, env: dict, check: bool = True, timeout: float = 600):
    return run([str(VENV / "bin" / "nbgrader"), *arguments], cwd=cwd, env=env, check=check, timeout=timeout)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Lab:
    """`make lab` in the clone, on a free loopback port with a random token; stopped on exit."""

    def __init__(self, clone: Path, env: dict, log: Path, *options: str):
        self.clone, self.env, self.log, self.options = clone, env, log, options
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.process: subprocess.Popen | None = None

    def url(self, path: str) -> str:
        separator = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}{separator}token={self.token}"

    def __enter__(self) -> "Lab":
        arguments = " ".join(
            [
                *self.options,
                "--no-browser",
                f"--port={self.port}",
                "--ip=127.0.0.1",
                f"--IdentityProvider.token={self.token}",
            ]
        )
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                make_command(self.clone, "lab", f"LAB_ARGS={arguments}"),
                cwd=self.clone,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + LAB_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"`make lab` exited with status {self.process.returncode}:\n{self.log_text()}")
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=10):
                    return self
            except OSError:
                time.sleep(1)
        self.__exit__()
        raise AssertionError(f"`make lab` did not answer within {LAB_START_TIMEOUT_S} s:\n{self.log_text()}")

    def __exit__(self, *exc) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        # Only this lab's own process group: make, the server and its kernels.
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")[-8000:] if self.log.exists() else "(no log)"

    def get(self, path: str, timeout: float = 120):
        import json

        with urllib.request.urlopen(self.url(path), timeout=timeout) as response:
            body = response.read().decode()
        return json.loads(body) if body.lstrip().startswith(("{", "[")) else body

    def post(self, path: str, fields: dict, timeout: float = 300):
        import json
        import urllib.parse

        request = urllib.request.Request(self.url(path), data=urllib.parse.urlencode(fields).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode())

    def status(self, path: str) -> int:
        try:
            with urllib.request.urlopen(self.url(path), timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code


def tree_digest(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes (checkpoints left out): what a learner would lose."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".ipynb_checkpoints" not in path.parts
    }
