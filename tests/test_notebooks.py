"""The analysis notebooks run from their own folder without CODIST_ROOT (as Jupyter runs them):
one is executed for real by nbclient (a real kernel), its claims recomputed and checked against
the committed claims.csv, its figure links resolving from the notebook's folder. And how a
notebook finds the checkout (codist.checkout): from any folder at or below it, from elsewhere
through the installed package, or $CODIST_ROOT; a wrong CODIST_ROOT is one line."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from codist import checkout

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "analysis" / "notebooks"


def test_a_notebook_executes_from_its_own_folder_without_codist_root(monkeypatch):
    import jupytext
    from nbclient import NotebookClient
    for var in ("CODIST_ROOT", "CODIST_RESULTS", "CODIST_SCALE"):
        monkeypatch.delenv(var, raising=False)   # the kernel inherits this environment
    nb = jupytext.read(NOTEBOOKS / "sodhani2020.py")
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()   # raises on a cell's error
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/markdown", ""))
                   for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", []))
    assert re.search(r"claims\.csv matches the recomputation \(\d+ claims\)", text), text[-2000:]
    links = re.findall(r"!\[\w+\]\(([^)]+\.png)\)", text)
    assert links and all((NOTEBOOKS / link).is_file() for link in links), links


def test_the_checkout_is_found_from_any_folder_below_it(monkeypatch):
    monkeypatch.delenv("CODIST_ROOT", raising=False)
    assert checkout.project_root(NOTEBOOKS) == ROOT
    assert checkout.project_root(ROOT / "results" / "embedded" / "sun2016") == ROOT   # Snakemake's output folder


def test_elsewhere_the_checkout_codist_is_installed_from(monkeypatch, tmp_path):
    monkeypatch.delenv("CODIST_ROOT", raising=False)
    assert Path(checkout.__file__).resolve().is_relative_to(ROOT)   # the editable install env/install.sh makes
    assert checkout.project_root(tmp_path) == ROOT


def test_codist_root_wins_and_a_wrong_one_is_one_line(monkeypatch, tmp_path):
    other = tmp_path / "other"
    for marker in checkout.MARKERS:
        (other / marker).parent.mkdir(parents=True, exist_ok=True)
        (other / marker).write_text("")
    monkeypatch.setenv("CODIST_ROOT", str(other))
    assert checkout.project_root(NOTEBOOKS) == other.resolve()
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert checkout.use_analysis() == other.resolve() and sys.path[0] == str(other.resolve() / "analysis")
    monkeypatch.setenv("CODIST_ROOT", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"^\$CODIST_ROOT=.*: not a codist checkout \(expected pyproject"):
        checkout.project_root()


def test_jupyter_opens_the_notebook_sources_as_notebooks(tmp_path):
    """A real Jupyter server of this environment (JupyterLab's) serves analysis/notebooks/<paper>.py
    as a notebook through jupytext's contents manager: what opening it in JupyterLab asks for."""
    import json
    import os
    import subprocess
    import time
    import urllib.request

    from codist.launch import free_port
    port, token = free_port(), "codist-test"
    server = subprocess.Popen([sys.executable, "-m", "jupyter", "server", "--no-browser", "--allow-root",
                               f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}"],
                              env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/api/contents/analysis/notebooks/sun2016.py?type=notebook&content=1"
        request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
        for _ in range(120):
            try:
                with urllib.request.urlopen(request, timeout=5) as answer:
                    model = json.load(answer)
                break
            except OSError:
                assert server.poll() is None, "jupyter server exited"
                time.sleep(0.25)
        else:
            pytest.fail("jupyter server did not answer in 30 s")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert model["type"] == "notebook" and model["content"]["metadata"]["kernelspec"]["name"] == "python3"
    code = [c["source"] for c in model["content"]["cells"] if c["cell_type"] == "code"]
    assert any("use_analysis()" in c for c in code)
