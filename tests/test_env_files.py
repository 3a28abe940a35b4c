"""The documented install routes' files agree: one set of pins everywhere.

Routes (README "Quick start"): `make` (a venv + env/install.sh), conda (env/environment.yml,
then env/install.sh), plain pip (env/install.sh into any Python 3.11). env/install.sh installs
env/requirements.lock, then fairseq-fixed without build isolation, then codist. These tests read
the real files: the lock, the requirement files, pyproject.toml, environment.yml, the Makefile,
the README, and the metadata of the environment running the tests.
"""
from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "env"
FAIRSEQ = "fairseq-fixed"


def requirement_lines(path: Path) -> list[Requirement]:
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            out.append(Requirement(line))
    return out


def lock() -> dict[str, str]:
    """name -> exact version of env/requirements.lock (every line must be name==version)."""
    pins = {}
    for req in requirement_lines(ENV / "requirements.lock"):
        spec = list(req.specifier)
        assert len(spec) == 1 and spec[0].operator == "==", f"env/requirements.lock: {req} is not an exact pin"
        pins[canonicalize_name(req.name)] = spec[0].version
    return pins


def pyproject_requirements() -> dict[str, list[Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {"dependencies": [Requirement(r) for r in project["dependencies"]],
            **{f"extra {k}": [Requirement(r) for r in v] for k, v in project["optional-dependencies"].items()}}


@pytest.mark.parametrize("name", ["requirements.txt", "requirements-build.txt", "requirements-fairseq.txt"])
def test_every_requirement_file_agrees_with_the_lock(name):
    pins = lock()
    for req in requirement_lines(ENV / name):
        key = canonicalize_name(req.name)
        if key == FAIRSEQ:
            continue   # built by env/install.sh after the lock, never in it
        assert key in pins, f"env/{name}: {req.name} is not in env/requirements.lock (run `make lock`)"
        assert req.specifier.contains(pins[key], prereleases=True), \
            f"env/{name}: {req} but env/requirements.lock pins {req.name}=={pins[key]} (run `make lock`)"


def test_the_lock_leaves_fairseq_to_its_no_build_isolation_step():
    assert FAIRSEQ not in lock()
    fairseq = {canonicalize_name(r.name): r for r in requirement_lines(ENV / "requirements-fairseq.txt")}
    assert str(fairseq[FAIRSEQ].specifier) == "==0.12.3.1"


def test_pyproject_declares_what_the_requirements_list_and_the_lock_satisfies_it():
    pins = lock()
    declared = {canonicalize_name(r.name) for reqs in pyproject_requirements().values() for r in reqs}
    for where, reqs in pyproject_requirements().items():
        for req in reqs:
            key = canonicalize_name(req.name)
            assert key in pins, f"pyproject.toml {where}: {req.name} is not in env/requirements.lock"
            assert req.specifier.contains(pins[key], prereleases=True), \
                f"pyproject.toml {where}: {req} but env/requirements.lock pins {pins[key]}"
    listed = {canonicalize_name(r.name) for r in requirement_lines(ENV / "requirements.txt")}
    assert listed - declared == set(), f"env/requirements.txt lists {sorted(listed - declared)}, pyproject.toml does not"
    assert declared - listed == set(), f"pyproject.toml declares {sorted(declared - listed)}, env/requirements.txt does not"
    extras = {r.name: r for r in pyproject_requirements()["extra workflow"]}
    assert "tabulate" in extras and "reports" in extras["snakemake"].extras   # to_markdown; --report


def test_the_environment_running_the_tests_is_the_lock():
    """make installs the lock; a package installed or upgraded by hand shows here (re-lock it)."""
    differ = {}
    for name, version in lock().items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have != version:
            differ[name] = (version, have)
    assert differ == {}, f"env/requirements.lock vs installed (locked, installed): {differ}"


def test_every_route_runs_the_install_script_with_the_fairseq_step():
    script = (ENV / "install.sh").read_text()
    steps = [line.strip().removesuffix(" ;;") for line in script.splitlines()
             if "pip install" in line and not line.strip().startswith("#")]
    assert steps == ['"$PY" -m pip install -r env/requirements.lock',   # CUDA=13, the default
                     '"$PY" -m pip install --no-deps -r "$rest"',        # CUDA=12 (tests/test_cuda_fit.py)
                     '"$PY" -m pip install -r env/requirements-cu12.txt',
                     '"$PY" -m pip install --no-build-isolation --no-deps -r env/requirements-fairseq.txt',
                     '"$PY" -m pip install --no-deps -e .'], steps
    assert re.search(r"^\t.*sh env/install\.sh \$\(BIN\)/python$", (ROOT / "Makefile").read_text(), re.M)
    readme = (ROOT / "README.md").read_text()
    assert "conda env create -f env/environment.yml && conda activate codist && sh env/install.sh python" in readme
    # every README line that installs the requirement files also runs the fairseq step
    for line in readme.splitlines():
        if "pip install -r env/requirements" in line:
            assert "--no-build-isolation -r env/requirements-fairseq.txt" in line, line


def test_the_conda_environment_is_the_lock_and_its_post_deploy_builds_fairseq():
    """env/environment.yml carries the lock inline (Snakemake copies it elsewhere, so no -r path);
    env/environment.post-deploy.sh, which Snakemake runs in an env it created, builds fairseq."""
    sys.path.insert(0, str(ENV))
    from conda_env import environment_yml
    text = (ENV / "environment.yml").read_text()
    assert text == environment_yml(), "env/environment.yml is not what `make lock` writes from the lock"
    conda = yaml.safe_load(text)
    pip_section = next(d["pip"] for d in conda["dependencies"] if isinstance(d, dict))
    assert {canonicalize_name(p.split("==")[0]): p.split("==")[1] for p in pip_section} == lock()
    assert "python=3.11" in conda["dependencies"]
    fairseq = next(r for r in requirement_lines(ENV / "requirements-fairseq.txt") if r.name == FAIRSEQ)
    post = (ENV / "environment.post-deploy.sh").read_text()
    assert f"python -m pip install --no-build-isolation --no-deps {fairseq}\n" in post
