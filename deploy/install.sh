#!/usr/bin/env bash
# The course's shared environment for a class on one JupyterHub server (Debian/Ubuntu, run as root):
# one Python environment that every account runs and nobody but root can change, holding the course
# (the course's packages, torch, JupyterLab, nbgrader), JupyterHub and configurable-http-proxy.
#
#   sudo deploy/install.sh [PREFIX]            PREFIX defaults to /opt/transformers-course
#
# Environment:
#   COURSE_PYTHON  the interpreter the environment is made from (default /usr/bin/python3, Debian's own).
#                  It must be runnable by every account: a Python installed in root's home (pyenv, conda
#                  under /root) is not, and every learner's server would fail with "Permission denied".
#   COURSE_TORCH   a torch requirement installed first, e.g. "torch==2.13.0" (the CPU wheel; without it
#                  pip picks the default build, several GB with CUDA).
#   JUPYTERHUB_SPEC  the JupyterHub requirement (default "jupyterhub>=5,<7").
#   CHP_SPEC       the configurable-http-proxy package for npm (default "configurable-http-proxy@^5").
# Re-running it upgrades the course in place (learners' servers pick it up when they restart).
set -euo pipefail

PREFIX="${1:-/opt/transformers-course}"
PYTHON="${COURSE_PYTHON:-/usr/bin/python3}"
JUPYTERHUB_SPEC="${JUPYTERHUB_SPEC:-jupyterhub>=5,<7}"
CHP_SPEC="${CHP_SPEC:-configurable-http-proxy@^5}"
SOURCE="$(cd "$(dirname "$0")/.." && pwd)"
umask 022

say() { echo "[install] $*"; }
fail() { echo "[install] error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "run as root (it creates $PREFIX and checks it as an unprivileged account)"
case "$PREFIX" in /root/*|/root) fail "$PREFIX is inside root's home: other accounts cannot read it";; esac

missing=()
[ -x "$PYTHON" ] || missing+=(python3)
"$PYTHON" -c "import ensurepip, venv" 2>/dev/null || missing+=(python3-venv python3-pip)
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
# `course grade` confines every learner's kernel with bubblewrap (its fallback is weaker: see the README).
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if [ ${#missing[@]} -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
# The interpreter itself must be runnable by an account that is not root (the trap this guards against).
runuser -u nobody -- "$PYTHON" -c "pass" 2>/dev/null \
    || fail "$PYTHON cannot be run by other accounts (is it inside a home folder?); set COURSE_PYTHON=/usr/bin/python3"

if [ ! -x "$PREFIX/bin/python" ] || [ "$(readlink -f "$PREFIX/bin/python")" != "$(readlink -f "$PYTHON")" ]; then
    say "creating $PREFIX from $PYTHON ($("$PYTHON" --version))"
    rm -rf "$PREFIX"
    "$PYTHON" -m venv "$PREFIX"
fi
pip=("$PREFIX/bin/python" -m pip --quiet)
"${pip[@]}" install --upgrade pip
if [ -n "${COURSE_TORCH:-}" ]; then
    say "installing $COURSE_TORCH"
    "${pip[@]}" install "$COURSE_TORCH"
fi
# A regular (not editable) install: the environment must not point back into a checkout that learners
# cannot read. It is built from a copy, so that the checkout gets no build/ or egg-info folders.
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
cp -r "$SOURCE/pyproject.toml" "$SOURCE/README.md" "$SOURCE/LICENSE" \
    "$SOURCE/course_utils" "$SOURCE/course_grader" "$SOURCE/course_tools" "$build/"
say "installing the course and $JUPYTERHUB_SPEC"
"${pip[@]}" install "$build" "$JUPYTERHUB_SPEC"

say "installing $CHP_SPEC (npm)"
npm install --silent --no-fund --no-audit --prefix "$PREFIX/share/configurable-http-proxy" "$CHP_SPEC" >/dev/null
ln -sf "../share/configurable-http-proxy/node_modules/.bin/configurable-http-proxy" "$PREFIX/bin/configurable-http-proxy"

# nbgrader's global configuration for every account: the course id and the exchange, taken from the
# environment that JupyterHub gives each server (deploy/jupyterhub_config.py sets both).
install -D -m 0644 "$SOURCE/deploy/nbgrader_config.py" "$PREFIX/etc/jupyter/nbgrader_config.py"
# JupyterLab's extension manager would offer installs from PyPI that nobody but root could make here.
# nbgrader's instructor tools (formgrader, assignment creation) are off for every account: only the
# grader account turns them on, in its own configuration (deploy/setup_course.sh).
install -d -m 0755 "$PREFIX/etc/jupyter/jupyter_server_config.d" "$PREFIX/etc/jupyter/labconfig"
cat > "$PREFIX/etc/jupyter/jupyter_server_config.d/transformers-course.json" <<'JSON'
{"LabApp": {"extension_manager": "readonly"},
 "ServerApp": {"jpserver_extensions": {"nbgrader.server_extensions.formgrader": false,
                                        "course_grader.exchange.validate_extension": true}}}
JSON
cat > "$PREFIX/etc/jupyter/labconfig/page_config.json" <<'JSON'
{"disabledExtensions": {"@jupyter/nbgrader:formgrader": true, "@jupyter/nbgrader:create-assignment": true}}
JSON

chown -R root:root "$PREFIX"
chmod -R u+w,go-w,a+rX "$PREFIX"

say "checking the environment as an unprivileged account"
runuser -u nobody -- env HOME=/tmp "$PREFIX/bin/python" -c "import course_utils, course_grader, course_tools, jupyterhub, nbgrader, torch" \
    || fail "an unprivileged account cannot import the course from $PREFIX"
runuser -u nobody -- env HOME=/tmp "$PREFIX/bin/jupyterhub-singleuser" --version >/dev/null \
    || fail "an unprivileged account cannot run $PREFIX/bin/jupyterhub-singleuser"
runuser -u nobody -- "$PREFIX/bin/configurable-http-proxy" --version >/dev/null \
    || fail "an unprivileged account cannot run configurable-http-proxy"
say "done: $PREFIX ($("$PREFIX/bin/jupyterhub" --version | tail -1), torch $("$PREFIX/bin/python" -c 'import torch; print(torch.__version__)'), nbgrader $("$PREFIX/bin/python" -c 'import nbgrader; print(nbgrader.__version__)'))"
