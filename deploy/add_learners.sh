#!/usr/bin/env bash
# Add accounts to the class (run as root): a Unix account per person, its home readable by its owner
# only, in the learners' group (or, with --instructor, the instructors' group), with a random password.
# Prints one "name password" line per new account: hand each person theirs (they can change it with
# `passwd` in a JupyterLab terminal). An existing account is only added to the group.
#
#   sudo deploy/add_learners.sh alice bob carol
#   sudo deploy/add_learners.sh --instructor dana
#   sudo deploy/add_learners.sh $(cat class-list.txt)
#
# Settings (environment): COURSE_LEARNERS_GROUP (transformers-learners), COURSE_INSTRUCTORS_GROUP
# (transformers-instructors), COURSE_HOME_BASE (default /home), COURSE_ACCOUNT_COMMENT.
# Instructors become formgrader users when JupyterHub (re)starts: it reads the group then.
set -euo pipefail

group="${COURSE_LEARNERS_GROUP:-transformers-learners}"
if [ "${1:-}" = "--instructor" ]; then
    group="${COURSE_INSTRUCTORS_GROUP:-transformers-instructors}"
    shift
fi
HOME_BASE="${COURSE_HOME_BASE:-/home}"
COMMENT="${COURSE_ACCOUNT_COMMENT:-transformers-ground-up}"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
[ $# -gt 0 ] || { echo "usage: $0 [--instructor] NAME..." >&2; exit 2; }
getent group "$group" >/dev/null || { echo "no group $group: run deploy/setup_course.sh first" >&2; exit 1; }

for name in "$@"; do
    if ! [[ "$name" =~ ^[a-z][a-z0-9_-]{0,31}$ ]]; then
        echo "skipped '$name': an account name is a lower-case letter, then letters, digits, - or _ (32 at most)" >&2
        continue
    fi
    if id "$name" >/dev/null 2>&1; then
        usermod --append --groups "$group" "$name"
        echo "$name (existing account, added to $group, password unchanged)"
        continue
    fi
    # HOME_MODE 0700: Debian's default (umask 022) would let every learner read every other's work.
    useradd --create-home --base-dir "$HOME_BASE" --shell /bin/bash --groups "$group" \
        --comment "$COMMENT" -K HOME_MODE=0700 "$name"
    password="$(head -c 15 /dev/urandom | base64 | tr -d '/+=')"
    echo "$name:$password" | chpasswd
    echo "$name $password"
done
