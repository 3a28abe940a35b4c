#!/bin/sh
# Before pip starts: can env/requirements.lock install into this Python? The lock is resolved for
# CPython 3.11 on Linux x86_64 only (its torch, CUDA and compiled wheels), so anything else gets
# one line saying what it found and what to do, instead of a resolver error deep into pip.
#   sh env/check_platform.sh [PYTHON]     (env/install.sh and the Makefile run it first)
PY=${1:-python3}
found=$("$PY" -c 'import platform, sys; sys.stdout.write("%s %s %d.%d" % (platform.system(), platform.machine(), sys.version_info[0], sys.version_info[1]))' 2>/dev/null) || {
    echo "codist: cannot run '$PY': give a Python 3.11 (make PYTHON=python3.11, or sh env/install.sh python3.11)" >&2
    exit 1
}
[ "$found" = "Linux x86_64 3.11" ] && exit 0
echo "codist: env/requirements.lock installs only on Linux x86_64 with Python 3.11; '$PY' is $found (on Linux x86_64: make PYTHON=python3.11; elsewhere: the unpinned route of README 'Quick start', untested)" >&2
exit 1
