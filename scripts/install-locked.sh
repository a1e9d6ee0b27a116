#!/bin/sh
# Installs the pinned environment into the virtual environment whose interpreter is $1: pip, then requirements.lock
# (what a pipeline needs). With --dev also the development tools: requirements-dev.lock, in the same pip call as
# requirements.lock so that one resolution holds both (a second call would resolve the tools' dependencies alone and
# could move a runtime pin instead of failing), then requirements-dev-nodeps.lock (see there).
# The Dockerfile calls it without --dev (the image the Kubeflow steps run in), `make setup` with --dev (the .venv the
# tests run in): the .venv holds every package of the image at the image's version, and the tools beside them.
# tfx 1.16 declares Python <3.11 but runs on 3.11, hence --ignore-requires-python.
set -eu
usage="usage: $0 PYTHON [--dev]"
python=${1:?$usage}
case "${2-}" in
  "") dev=0 ;;
  --dev) dev=1 ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
here=$(dirname "$0")/..
quiet="--quiet --disable-pip-version-check"
"$python" -m pip install $quiet --upgrade pip==24.3.1
if [ "$dev" = 1 ]; then
  "$python" -m pip install $quiet --ignore-requires-python -r "$here/requirements.lock" -r "$here/requirements-dev.lock"
  "$python" -m pip install $quiet --no-deps -r "$here/requirements-dev-nodeps.lock"
else
  "$python" -m pip install $quiet --ignore-requires-python -r "$here/requirements.lock"
fi
