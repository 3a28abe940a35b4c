#!/bin/sh
# The pinned environment, into the Python given (a venv's, a conda env's; default python3):
#   sh env/install.sh [PYTHON]
# The one install script of every documented route: `make` (into .venv), the conda route
# (after `conda env create -f env/environment.yml`) and plain pip into any Python 3.11.
# fairseq-fixed cannot be installed in one pip call with the rest: its build imports the
# installed torch, numpy and Cython, so it is built without build isolation, after them.
# Last, where apt is, Debian's dataset-fashion-mnist (env/install_data.sh: soft, one line if not).
#
# CUDA=12 (`make install CUDA=12`): torch's CUDA 12 build for drivers older than 580 and Volta GPUs
# (env/requirements-cu12.txt) in place of the lock's CUDA 13 torch; default CUDA=13, the lock.
set -eu
cd "$(dirname "$0")/.."
PY=${1:-python3}
# the lock's packages that belong to its CUDA 13 torch (the CUDA 12 route takes torch's own instead)
CUDA13_PINS='^(torch|torchvision|triton|nvidia-[a-z0-9-]+|cuda-[a-z0-9-]+)=='
# 0. the lock's platform (Linux x86_64, Python 3.11), or one line saying why not
sh env/check_platform.sh "$PY"
# 1. every package but fairseq-fixed, at the exact versions of the lock (`make lock` writes it
#    from env/requirements*.txt); the build tools fairseq needs are among them
case "${CUDA:-13}" in
13)
    "$PY" -m pip install -r env/requirements.lock ;;
12)
    rest=$(mktemp)
    trap 'rm -f "$rest"' EXIT
    grep -v -E "$CUDA13_PINS" env/requirements.lock > "$rest"
    # the rest of the lock first, without resolving (it is complete): nothing pulls the CUDA 13 torch
    "$PY" -m pip install --no-deps -r "$rest"
    "$PY" -m pip install -r env/requirements-cu12.txt ;;
*)
    echo "env/install.sh: CUDA=$CUDA: expected 13 (the lock: NVIDIA driver >= 580, Turing or newer GPUs)" \
         "or 12 (env/requirements-cu12.txt: older drivers, Volta)" >&2
    exit 2 ;;
esac
# 2. fairseq-fixed, built against what step 1 installed (its dependencies are in the lock)
"$PY" -m pip install --no-build-isolation --no-deps -r env/requirements-fairseq.txt
# 3. codist itself, editable
"$PY" -m pip install --no-deps -e .
# 4. where apt is: Debian's dataset-fashion-mnist, the real data of `workload.dataset: fashion_mnist`
#    (one line and on, if it cannot be installed: the default tier needs no package)
sh env/install_data.sh
