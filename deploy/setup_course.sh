#!/usr/bin/env bash
# Accounts, folders and permissions for one class on one server (run as root, once; safe to re-run):
#   - the Unix groups of learners and instructors (JupyterHub lets both log in, deploy/jupyterhub_config.py);
#   - the grader account that owns the course directory and runs the formgrader (nbgrader's set-up with
#     several graders: instructors reach it through JupyterHub, nobody logs in as it);
#   - the course directory (solutions with hidden tests, gradebook, submissions): only the grader can read it;
#   - nbgrader's exchange, with the permissions nbgrader asks for (the root world-writable, 777, plus the
#     sticky bit so that nobody removes what others put there; the course's inbound folder writable but
#     not listable by learners, so that no learner finds another's submission).
#
#   sudo deploy/setup_course.sh
#
# Settings (environment; the same names as deploy/jupyterhub_config.py reads):
#   COURSE_ID (transformers-ground-up), COURSE_GRADER (grader-$COURSE_ID), COURSE_DIR (~grader/$COURSE_ID),
#   COURSE_EXCHANGE (/srv/nbgrader/exchange), COURSE_LEARNERS_GROUP (transformers-learners),
#   COURSE_INSTRUCTORS_GROUP (transformers-instructors), COURSE_HOME_BASE (where homes are made, default /home),
#   COURSE_ACCOUNT_COMMENT (the accounts' comment field).
set -euo pipefail

COURSE_ID="${COURSE_ID:-transformers-ground-up}"
COURSE_GRADER="${COURSE_GRADER:-grader-$COURSE_ID}"
COURSE_EXCHANGE="${COURSE_EXCHANGE:-/srv/nbgrader/exchange}"
LEARNERS="${COURSE_LEARNERS_GROUP:-transformers-learners}"
INSTRUCTORS="${COURSE_INSTRUCTORS_GROUP:-transformers-instructors}"
HOME_BASE="${COURSE_HOME_BASE:-/home}"
COMMENT="${COURSE_ACCOUNT_COMMENT:-$COURSE_ID}"
SOURCE="$(cd "$(dirname "$0")/.." && pwd)"
umask 022

[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
for group in "$LEARNERS" "$INSTRUCTORS"; do
    getent group "$group" >/dev/null || groupadd "$group"
done
if ! id "$COURSE_GRADER" >/dev/null 2>&1; then
    # No password: the account cannot log in; JupyterHub starts its server as a service.
    useradd --create-home --base-dir "$HOME_BASE" --shell /bin/bash --comment "$COMMENT" \
        -K HOME_MODE=0700 "$COURSE_GRADER"
fi
grader_home="$(getent passwd "$COURSE_GRADER" | cut -d: -f6)"
chmod 0700 "$grader_home"
COURSE_DIR="${COURSE_DIR:-$grader_home/$COURSE_ID}"

# The course directory: nbgrader's source folder (solutions/), the course's nbgrader_config.py.
install -d -m 0700 -o "$COURSE_GRADER" -g "$COURSE_GRADER" "$COURSE_DIR"
if [ ! -d "$COURSE_DIR/solutions" ]; then
    cp -r "$SOURCE/solutions" "$COURSE_DIR/solutions"
    cp "$SOURCE/nbgrader_config.py" "$COURSE_DIR/nbgrader_config.py"
fi
chown -R "$COURSE_GRADER:$COURSE_GRADER" "$COURSE_DIR"

# The grader's JupyterLab (the formgrader service) turns on nbgrader's instructor tools, which the
# shared environment keeps off for everyone else (deploy/install.sh).
install -d -m 0700 -o "$COURSE_GRADER" -g "$COURSE_GRADER" "$grader_home/.jupyter" "$grader_home/.jupyter/labconfig"
# The formgrader's Autograde button runs `course grade` (confined) through the course's server extension.
echo '{"ServerApp": {"jpserver_extensions": {"nbgrader.server_extensions.formgrader": true, "course_grader.exchange.server_extension": true}}}' \
    > "$grader_home/.jupyter/jupyter_server_config.json"
echo '{"disabledExtensions": {"@jupyter/nbgrader:formgrader": false, "@jupyter/nbgrader:create-assignment": false}}' \
    > "$grader_home/.jupyter/labconfig/page_config.json"
chown "$COURSE_GRADER:$COURSE_GRADER" "$grader_home/.jupyter/jupyter_server_config.json" \
    "$grader_home/.jupyter/labconfig/page_config.json"

# The exchange. nbgrader checks that its root is world-writable (it compares the 777 bits only); the
# sticky bit keeps anyone from renaming or removing the course folder in it. The course folder belongs
# to the grader (nbgrader refuses to release into a folder it does not own), made here before any
# learner could make one of that name. Inside it, nbgrader's own modes: outbound 755 (released
# assignments, readable by all), inbound 2733 (learners write, cannot list) plus the sticky bit, so that
# no learner removes or renames another's submission, feedback 711 (files named by a hash that only the
# submitting learner can compute).
install -d -m 0755 "$(dirname "$COURSE_EXCHANGE")"
install -d -m 1777 "$COURSE_EXCHANGE"
chmod 1777 "$COURSE_EXCHANGE"
course_exchange="$COURSE_EXCHANGE/$COURSE_ID"
install -d -m 0755 -o "$COURSE_GRADER" -g "$COURSE_GRADER" "$course_exchange" "$course_exchange/outbound"
install -d -m 3733 -o "$COURSE_GRADER" -g "$COURSE_GRADER" "$course_exchange/inbound"
install -d -m 0711 -o "$COURSE_GRADER" -g "$COURSE_GRADER" "$course_exchange/feedback"
chmod 3733 "$course_exchange/inbound"

echo "grader account:   $COURSE_GRADER"
echo "course directory: $COURSE_DIR"
echo "exchange:         $COURSE_EXCHANGE"
echo "groups:           $LEARNERS (learners), $INSTRUCTORS (instructors)"
