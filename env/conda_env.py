"""Writes env/environment.yml from env/requirements.lock (`make lock` runs it).

The conda environment carries the lock's pins inline, not `-r requirements.lock`: Snakemake's
`--software-deployment-method conda` creates environments from a copy of this file elsewhere,
where a relative path would not resolve. env/environment.post-deploy.sh (which Snakemake runs
after creating it) then builds fairseq-fixed, as env/install.sh does.
"""
from __future__ import annotations

import sys
from pathlib import Path

ENV = Path(__file__).resolve().parent

HEADER = """\
# conda environment for machines other than the reference one (CUDA or CPU), written by
# `make lock` (env/conda_env.py) from env/requirements.lock: do not edit by hand.
#   conda env create -f env/environment.yml && conda activate codist && sh env/install.sh python
# The pip section is the lock (every package but fairseq-fixed); env/install.sh then builds
# fairseq-fixed without build isolation (it needs the installed torch) and installs codist. Every
# Snakemake rule names this file (`conda:`); with --software-deployment-method conda, Snakemake
# runs env/environment.post-deploy.sh (the fairseq step) after creating it.
name: codist
channels:
  - conda-forge
dependencies:
  - python=3.11
  - pip
  - pip:
"""


def pins(lock: Path) -> list[str]:
    return [line.strip() for line in lock.read_text().splitlines()
            if line.strip() and not line.startswith(("#", "-"))]


def environment_yml(lock: Path = ENV / "requirements.lock") -> str:
    return HEADER + "".join(f"      - {p}\n" for p in pins(lock))


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ENV / "environment.yml"
    out.write_text(environment_yml())
