#!/bin/sh
# Installs the pinned environment into the virtual environment whose interpreter is $1: pip, requirements.lock, then
# requirements-nodeps.lock (see there). `make setup` (the .venv the tests run in) and the Dockerfile (the image the
# Kubeflow steps run in) both call it, so the two environments hold the same packages.
# tfx 1.16 declares Python <3.11 but runs on 3.11, hence --ignore-requires-python.
set -eu
python=$1
here=$(dirname "$0")/..
quiet="--quiet --disable-pip-version-check"
"$python" -m pip install $quiet --upgrade pip==24.3.1
"$python" -m pip install $quiet --ignore-requires-python -r "$here/requirements.lock"
"$python" -m pip install $quiet --no-deps -r "$here/requirements-nodeps.lock"
