#!/bin/sh
# Snakemake runs this inside a conda env it created from env/environment.yml
# (--software-deployment-method conda): fairseq-fixed, built against the env's torch, numpy and
# Cython (no build isolation; its dependencies are in the env already), as env/install.sh does.
set -eu
python -m pip install --no-build-isolation --no-deps fairseq-fixed==0.12.3.1
