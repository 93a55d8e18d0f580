"""Fast checks of deploy/ and of what the hub test relies on in the grader (part of `make test`).

They need nothing but the course's own environment: the JupyterHub configuration is read with
traitlets (as JupyterHub reads it), the shell scripts are parsed by bash, and the grader's staging of a
submission is run on a temporary folder. The end-to-end run of all of it is `make e2e-hub`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


@pytest.fixture
def hub_config(monkeypatch):
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.setenv("COURSE_GRADER", "root")  # an account every machine has
    monkeypatch.setenv("COURSE_PREFIX", "/opt/example-course")
    monkeypatch.setenv("COURSE_ID", "example-course")
    return PyFileConfigLoader("jupyterhub_config.py", path=str(DEPLOY)).load_config()


def test_hub_config_runs_everyone_from_the_shared_environment(hub_config):
    assert hub_config.JupyterHub.authenticator_class == "pam"
    assert hub_config.Spawner.cmd == ["/opt/example-course/bin/jupyterhub-singleuser"]
    assert hub_config.ConfigurableHTTPProxy.command == ["/opt/example-course/bin/configurable-http-proxy"]
    assert hub_config.Spawner.environment["COURSE_ID"] == "example-course"
    assert hub_config.Spawner.environment["PATH"].startswith("/opt/example-course/bin:")
    assert hub_config.LocalAuthenticator.allowed_groups == {"transformers-learners", "transformers-instructors"}


def test_hub_config_formgrader_is_a_service_named_after_the_course(hub_config):
    (service,) = hub_config.JupyterHub.services
    assert service["name"] == "example-course" and service["user"] == "root"
    assert service["cwd"] == os.path.join(os.path.expanduser("~root"), "example-course")
    assert service["url"].startswith("http://127.0.0.1:")
    roles = {role["name"]: role for role in hub_config.JupyterHub.load_roles}
    graders = roles["formgrade-example-course"]
    assert graders["groups"] == ["formgrade-example-course"]
    assert "access:services!service=example-course" in graders["scopes"]
    assert not any(scope.startswith("access:servers") for role in roles.values() for scope in role.get("scopes", [])), (
        "no role of the class may open other people's servers"
    )


@pytest.mark.parametrize("script", ["install.sh", "setup_course.sh", "add_learners.sh"])
def test_deploy_scripts_parse(script):
    result = subprocess.run(["bash", "-n", str(DEPLOY / script)], capture_output=True, text=True)
    assert result.returncode == 0, f"deploy/{script} does not parse: {result.stderr}"


@pytest.mark.parametrize("secret, kept", [("ab" * 64, True), ("../../etc/passwd", False), ("", False)])
def test_stage_keeps_only_a_valid_submission_secret(tmp_path, secret, kept):
    """nbgrader's release_feedback reads feedback/<learner>/<assignment>/submission_secret.txt."""
    from course_grader.judging.preflight import Preflight, stage

    submitted, staged = tmp_path / "submitted", tmp_path / "staged"
    submitted.mkdir()
    (submitted / "submission_secret.txt").write_text(secret)
    preflight = Preflight(
        notebooks={"ex": {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}}, findings=[], unreadable=[]
    )
    stage(preflight, submitted, staged)
    assert json.loads((staged / "ex.ipynb").read_text())["cells"] == []
    if kept:
        assert (staged / "submission_secret.txt").read_text() == secret
    else:
        assert not (staged / "submission_secret.txt").exists()
        assert [f.code for f in preflight.findings] == ["bad-submission-secret"]
