"""The analysis notebooks run from their own folder (as Jupyter runs them): one is executed for real
by nbclient (a real kernel), its claims recomputed and checked against the committed claims.csv,
its figure links resolving from the notebook's folder. They import the checkout's analysis/ as a
package (installed with codist), from any folder."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "analysis" / "notebooks"


def test_a_notebook_executes_from_its_own_folder(monkeypatch):
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


def test_the_notebooks_import_the_analysis_package_from_any_folder(tmp_path):
    """The notebooks' import (`from analysis.notebook_support import ...`) finds this checkout's
    analysis/ from a folder outside it: the editable install maps the package (pyproject)."""
    import subprocess
    out = subprocess.run([sys.executable, "-c", "import analysis.notebook_support as m; print(m.__file__)"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(ROOT / "analysis" / "notebook_support.py")
    for notebook in NOTEBOOKS.glob("*.py"):
        assert "from analysis.notebook_support import PaperResults" in notebook.read_text(), notebook


def test_jupyter_opens_the_notebook_sources_as_notebooks(tmp_path):
    """A real Jupyter server of this environment (JupyterLab's) serves analysis/notebooks/<paper>.py
    as a notebook through jupytext's contents manager: what opening it in JupyterLab asks for."""
    import json
    import os
    import subprocess
    import time
    import urllib.request

    from codist.launching.launch import free_port
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
    assert any("from analysis.notebook_support import" in c for c in code)
