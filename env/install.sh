#!/bin/sh
# The pinned environment, into the Python given (a venv's, a conda env's; default python3):
#   sh env/install.sh [PYTHON]
# The one install script of every documented route: `make` (into .venv), the conda route
# (after `conda env create -f env/environment.yml`) and plain pip into any Python 3.11.
# fairseq-fixed cannot be installed in one pip call with the rest: its build imports the
# installed torch, numpy and Cython, so it is built without build isolation, after them.
set -eu
cd "$(dirname "$0")/.."
PY=${1:-python3}
# 0. the lock's platform (Linux x86_64, Python 3.11), or one line saying why not
sh env/check_platform.sh "$PY"
# 1. every package but fairseq-fixed, at the exact versions of the lock (`make lock` writes it
#    from env/requirements*.txt); the build tools fairseq needs are among them
"$PY" -m pip install -r env/requirements.lock
# 2. fairseq-fixed, built against what step 1 installed (its dependencies are in the lock)
"$PY" -m pip install --no-build-isolation --no-deps -r env/requirements-fairseq.txt
# 3. codist itself, editable
"$PY" -m pip install --no-deps -e .
