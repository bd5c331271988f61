#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image: setup, not
# grading. It installs what grading needs so that nothing is fetched while a submission is
# graded: bubblewrap (the sandbox; util-linux brings setpriv), a Python of at least 3.11 (the
# image's python3 where it is new enough, Ubuntu 24.04; else the python3.11 package, Ubuntu
# 22.04) and, in a virtual environment, the grader's dependencies at the exact versions of
# requirements.txt (pinned by `grader gradescope` to the versions it was built with). Last,
# it grades the reference solution once: an image that cannot give it full marks fails its
# build here, not on a student's submission. The build log shows the isolation in force.
set -euo pipefail
source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${GRADER_VENV:-/opt/serving-grader}"
export DEBIAN_FRONTEND=noninteractive

apt-get update
apt-get install -y --no-install-recommends bubblewrap util-linux ca-certificates
if python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python=python3
    apt-get install -y --no-install-recommends python3-venv
else
    python=python3.11
    apt-get install -y --no-install-recommends python3.11 python3.11-venv
fi
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --no-cache-dir --disable-pip-version-check -r "$source_dir/requirements.txt"

AUTOGRADER_ROOT="$(dirname "$source_dir")" GRADER_PYTHON="$venv/bin/python" \
    bash "$source_dir/run_autograder" --self-test
