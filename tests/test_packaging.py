"""Packaging conventions: every third-party module the code imports is declared; the lock's platform
is checked before pip starts (env/check_platform.sh, run for real, with stand-in interpreters that
report another platform); LICENSE, CITATION.cff and replications/papers.bib agree with pyproject
and with the papers each replications/<paper>/experiments.yaml names."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# import name -> distribution, where they differ
DIST = {"yaml": "pyyaml", "sklearn": "scikit-learn", "PIL": "pillow"}
# imported but not declared by pyproject, and why that is right
NOT_DECLARED = {
    "fairseq": "env/requirements-fairseq.txt (built without build isolation after torch)",
    "fairseq_cli": "part of fairseq-fixed",
    "sacrebleu": "the translation workload's, with fairseq in env/requirements-fairseq.txt",
    "IPython": "ipykernel's (the notebooks' kernel, extra workflow)",
}
PAPERS = ("anil2018", "sodhani2020", "sun2016")


def third_party_imports(folders: list[Path]) -> dict[str, str]:
    """top-level module -> one file importing it, for modules that are neither stdlib nor local."""
    local = {p.stem for f in (*folders, ROOT / "workflows", ROOT / "benchmarks") for p in f.rglob("*.py")} | \
        {"codist", "analysis", "workflows", "benchmarks"}
    found = {}
    for folder in folders:
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in local and top != "__future__":
                        found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_declared():
    declared = {canonicalize_name(Requirement(r).name) for r in PYPROJECT["dependencies"]}
    declared |= {canonicalize_name(Requirement(r).name) for extra in PYPROJECT["optional-dependencies"].values()
                 for r in extra}
    imports = third_party_imports([ROOT / "src" / "codist", ROOT / "analysis"])
    assert "scipy" in imports   # analysis/stats.py: the case this test was written for
    missing = {m: f for m, f in imports.items()
               if m not in NOT_DECLARED and canonicalize_name(DIST.get(m, m)) not in declared}
    assert missing == {}, f"imported but not declared in pyproject.toml: {missing}"


def test_requires_python_is_the_locks_python():
    assert PYPROJECT["requires-python"] == ">=3.11,<3.12"
    assert "Programming Language :: Python :: 3.11" in PYPROJECT["classifiers"]
    assert "Operating System :: POSIX :: Linux" in PYPROJECT["classifiers"]


def fake_python(tmp_path: Path, reports: str) -> Path:
    """An interpreter stand-in that answers check_platform.sh's question with `reports`."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\nprintf '%s' '{reports}'\n")
    path.chmod(0o755)
    return path


def check_platform(python) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "env/check_platform.sh", str(python)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_the_platform_check_passes_this_python():
    assert check_platform(sys.executable).returncode == 0   # the tests run on the lock's platform


@pytest.mark.parametrize("reports", ["Darwin arm64 3.11", "Linux aarch64 3.11", "Linux x86_64 3.12",
                                     "Linux x86_64 3.10", "Windows AMD64 3.11"])
def test_another_platform_or_python_is_one_line_naming_it(tmp_path, reports):
    done = check_platform(fake_python(tmp_path, reports))
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and f"is {reports} " in lines[0] and "Linux x86_64 with Python 3.11" in lines[0], lines


def test_a_missing_python_is_one_line(tmp_path):
    done = check_platform(tmp_path / "no-such-python")
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1 and "cannot run" in done.stderr


def test_make_stops_before_creating_the_venv_or_running_pip(tmp_path):
    """The real Makefile with a Python of another version: one line, no venv, no pip."""
    venv = tmp_path / "venv"
    done = subprocess.run(["make", "-s", f"PYTHON={fake_python(tmp_path, 'Linux x86_64 3.12')}", f"VENV={venv}",
                           "install"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and not venv.exists(), done.stderr
    assert "codist: env/requirements.lock installs only on Linux x86_64 with Python 3.11" in done.stderr
    assert "pip" not in done.stdout
    script = (ROOT / "env" / "install.sh").read_text()
    assert script.index('sh env/check_platform.sh "$PY"') < script.index("pip install")


def test_license_is_the_mit_text_pyproject_names():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 codist maintainers" in text
    assert "Permission is hereby granted, free of charge" in text
    assert PYPROJECT["license"] == "MIT" and PYPROJECT["license-files"] == ["LICENSE"]


def bib_entries() -> dict[str, dict[str, str]]:
    text = (ROOT / "replications" / "papers.bib").read_text()
    entries = {}
    for kind, key, body in re.findall(r"^@(\w+)\{(\w+),\n(.*?)^\}", text, re.M | re.S):
        fields = dict(re.findall(r"^\s+(\w+)\s*=\s*\{(.*?)\},?$", body, re.M | re.S))
        entries[key] = {"type": kind, **{k: " ".join(v.split()) for k, v in fields.items()}}
    return entries


def test_the_bibtex_has_each_replicated_paper_as_its_experiments_file_names_it():
    entries = bib_entries()
    assert sorted(entries) == sorted(PAPERS)
    for paper in PAPERS:
        spec = yaml.safe_load((ROOT / "replications" / paper / "experiments.yaml").read_text())
        e = entries[paper]
        assert spec["paper"] == paper
        assert e["title"] in spec["source"] and f"arXiv {e['eprint']}" in spec["source"], (e, spec["source"])
        assert e["year"] == paper[-4:] and e["archiveprefix"] == "arXiv"
        assert e["author"].split(",")[0].lower() == paper[:-4]   # first author's family name
        assert "pages" not in e and "volume" not in e             # none that a source gives


def test_citation_cff_is_valid_and_cites_the_same_papers():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert {"message", "title", "authors"} <= set(cff) and cff["authors"] == [{"name": "codist maintainers"}]
    assert cff["version"] == PYPROJECT["version"] and cff["license"] == PYPROJECT["license"]
    entries = bib_entries()
    cited = {r["identifiers"][0]["value"]: r for r in cff["references"]}
    assert sorted(cited) == sorted(f"arXiv:{e['eprint']}" for e in entries.values())
    for e in entries.values():
        ref = cited[f"arXiv:{e['eprint']}"]
        assert ref["title"] == e["title"] and str(ref["year"]) == e["year"]
        bib_authors = [a.split(",")[0].strip() for a in e["author"].split(" and ")]
        assert [a["family-names"] for a in ref["authors"]] == bib_authors


def test_analysis_workflows_and_benchmarks_are_installed_packages():
    """pyproject's package list installs the checkout's three folders beside codist (the editable
    install maps them here), so they import what they share as packages (docs/architecture.md)."""
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert {"analysis", "workflows", "benchmarks"} <= set(find["include"]) and "." in find["where"]
    out = subprocess.run([sys.executable, "-c", "import analysis.stats, workflows.experiments, "
                          "benchmarks.projected_walltime as b; print(b.__file__)"],
                         capture_output=True, text=True, cwd="/", timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(ROOT / "benchmarks" / "projected_walltime.py")
