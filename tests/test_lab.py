"""`course lab` starts JupyterLab on the course with nbgrader's extensions enabled."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nbgrader_lab_extension_is_enabled():
    out = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"],
                         capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    line = next((l for l in text.splitlines() if "@jupyter/nbgrader" in l), "")
    assert "enabled" in line and "OK" in line, f"nbgrader lab extension not enabled:\n{text}"


def test_course_lab_serves_the_course(tmp_path):
    port, token = _free_port(), "course-test-token"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "course_utils.cli", "lab", "--no-browser", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline, last_error = time.time() + 90, None
        while time.time() < deadline:
            try:
                url = f"http://127.0.0.1:{port}/api/contents/notebooks?token={token}"
                listing = json.load(urllib.request.urlopen(url, timeout=5))
                break
            except OSError as exc:  # not up yet
                last_error = exc
                assert proc.poll() is None, f"course lab exited early:\n{proc.stdout.read()}"
                time.sleep(1)
        else:
            raise AssertionError(f"JupyterLab did not answer on port {port}: {last_error}")
        names = {item["name"] for item in listing["content"]}
        assert any(name.endswith(".ipynb") for name in names), f"no chapter notebooks served: {names}"
        lab = urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=10).read().decode()
        assert "@jupyter/nbgrader" in lab, "the nbgrader extension is not loaded into the lab page"
        # The Assignments panel starts by asking this server extension for the courses:
        courses = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/courses?token={token}", timeout=30))
        assert "success" in courses, f"nbgrader's course_list extension did not answer: {courses}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
