"""JupyterHub for one class of "Transformers from the Ground Up" on one server (JupyterHub 5 or 6).

    sudo /opt/transformers-course/bin/jupyterhub -f deploy/jupyterhub_config.py

What it sets up (the guide is deploy/README.md):
- local Unix accounts, logged in with PAM: the members of the learners' and the instructors' Unix
  groups (deploy/add_learners.sh makes the accounts);
- each person's JupyterLab runs as their own account, from the one shared environment that
  deploy/install.sh built (every account can run it, only root can change it);
- nbgrader: every server is told the course id and the exchange (read by the environment's global
  nbgrader_config.py, deploy/nbgrader_config.py);
- the formgrader as nbgrader documents it for several graders: a JupyterHub service named after the
  course runs JupyterLab as the grader account in the course directory; the instructors' group
  (`formgrade-<course id>`, filled from the instructors' Unix group when the Hub starts) has a role
  that lets its members open that service, and a role that lets them see and stop learners' servers
  (not read their files).

Every path and name can be set in the environment of the Hub (the systemd unit in the guide reads
them from /etc/jupyterhub/course.env); the defaults are those of the guide.
"""

import grp
import os
import pwd

c = get_config()  # noqa: F821  (injected by traitlets)


def setting(name: str, default: str) -> str:
    return os.environ.get(name) or default


PREFIX = setting("COURSE_PREFIX", "/opt/transformers-course")  # deploy/install.sh's PREFIX
COURSE_ID = setting("COURSE_ID", "transformers-ground-up")  # as in the course's nbgrader_config.py
EXCHANGE = setting("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
GRADER = setting("COURSE_GRADER", f"grader-{COURSE_ID}")
LEARNERS_GROUP = setting("COURSE_LEARNERS_GROUP", "transformers-learners")
INSTRUCTORS_GROUP = setting("COURSE_INSTRUCTORS_GROUP", "transformers-instructors")
FORMGRADER_PORT = int(setting("COURSE_FORMGRADER_PORT", "9999"))  # loopback only, behind the proxy


def group_members(name: str) -> list[str]:
    try:
        return sorted(grp.getgrnam(name).gr_mem)
    except KeyError:
        return []


def home_of(user: str) -> str:
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        raise SystemExit(
            f"no account {user!r} for the formgrader: run deploy/setup_course.sh first (or set COURSE_GRADER)"
        ) from None


COURSE_DIR = setting("COURSE_DIR", os.path.join(home_of(GRADER), COURSE_ID))
INSTRUCTORS = group_members(INSTRUCTORS_GROUP)
# What every server of the class needs to know: the course, the exchange, and the shared environment
# first on PATH (nbgrader calls `jupyter` and `alembic` by name).
COURSE_ENVIRONMENT = {
    "COURSE_ID": COURSE_ID,
    "COURSE_EXCHANGE": EXCHANGE,
    "PATH": f"{PREFIX}/bin:/usr/local/bin:/usr/bin:/bin",
}

# --- Network -----------------------------------------------------------------------------------------
# The public address (put TLS in front: a reverse proxy such as nginx or Caddy, or
# c.JupyterHub.ssl_cert / ssl_key). The Hub's own API and the proxy's API stay on loopback.
c.JupyterHub.bind_url = setting("COURSE_HUB_URL", "http://:8000")
c.JupyterHub.hub_bind_url = setting("COURSE_HUB_API_URL", "http://127.0.0.1:8081")
c.ConfigurableHTTPProxy.api_url = setting("COURSE_PROXY_API_URL", "http://127.0.0.1:8001")
c.ConfigurableHTTPProxy.command = [f"{PREFIX}/bin/configurable-http-proxy"]  # from npm, by install.sh

# --- Who may log in ----------------------------------------------------------------------------------
# PAM checks the account's own Unix password; only members of the two groups get in.
c.JupyterHub.authenticator_class = "pam"
c.LocalAuthenticator.allowed_groups = {LEARNERS_GROUP, INSTRUCTORS_GROUP}
c.LocalAuthenticator.create_system_users = False  # accounts are made by deploy/add_learners.sh

# --- Each person's server ----------------------------------------------------------------------------
c.JupyterHub.spawner_class = "localprocess"  # a process as the person's own Unix account
c.Spawner.cmd = [f"{PREFIX}/bin/jupyterhub-singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.environment = dict(COURSE_ENVIRONMENT)
# A busy server (a whole class logging in at the start of a lesson) starts a JupyterLab in more than
# the default 60 s.
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180

# --- The formgrader: nbgrader's set-up for several graders --------------------------------------------
# A shared grader account owns the course directory; its JupyterLab runs as a Hub-managed service
# whose name is the course id (nbgrader's course list looks for exactly that), and the instructors
# reach it at /services/<course id>/ through the Hub's OAuth.
FORMGRADERS = f"formgrade-{COURSE_ID}"
c.JupyterHub.load_groups = {FORMGRADERS: {"users": INSTRUCTORS}}
c.JupyterHub.load_roles = [
    {
        "name": FORMGRADERS,
        "groups": [FORMGRADERS],
        "scopes": [f"access:services!service={COURSE_ID}", "list:services", f"read:services!service={COURSE_ID}"],
    },
    {
        # Instructors see who is logged in and can stop (restart) a learner's server; they cannot
        # open it (that would be access:servers) nor change accounts.
        "name": "course-instructor",
        "groups": [FORMGRADERS],
        "scopes": ["admin-ui", "list:users", "read:users", "admin:servers"],
    },
    {
        # nbgrader's course list asks the Hub which courses a server's owner may grade; JupyterHub's
        # default server token cannot list services ('inherit' = what the owner may do, no more).
        "name": "server",
        "scopes": ["inherit"],
    },
]
c.JupyterHub.services = [
    {
        "name": COURSE_ID,
        "url": f"http://127.0.0.1:{FORMGRADER_PORT}",
        "command": [f"{PREFIX}/bin/jupyterhub-singleuser"],
        "user": GRADER,
        "cwd": COURSE_DIR,  # the course directory is the server's root: its nbgrader_config.py applies
        "environment": {**COURSE_ENVIRONMENT, "JUPYTERHUB_DEFAULT_URL": "/lab"},
        "oauth_no_confirm": True,
        "display": True,
    },
]
