"""The real Snakefile run end to end on a toy paper (one 10-update run, a curves figure and a
table figure), then its HTML report: the train job's benchmark file, and a caption for every
figure and table in the report. Real snakemake, real training, real report."""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from test_workflow import BASE, ROOT, SNAKEMAKE, figure, toy_paper

pytestmark = pytest.mark.slow


def snakemake(workdir: Path, reps: Path, *args: str) -> str:
    proc = subprocess.run([str(SNAKEMAKE), "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
                           "--config", f"replications={reps}", *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def toy_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy_workflow")
    base = {**BASE, "workload": {"name": "cifar", "train_size": 256, "val_size": 64}}
    table = {**figure({"one": {}}, base=base), "kind": "table", "columns": ["error_pct"],
             "rows": [{"label": "ours", "series": "one", "model": "0", "error_pct": 10.0, "source": "Table 0"}]}
    reps = toy_paper(root / "reps", {"figA": figure({"one": {}}, base=base), "figT": table})
    snakemake(root, reps, "-c2")
    return root, reps


def test_the_train_job_is_benchmarked(toy_results):
    root, _ = toy_results
    [bench] = (root / "results/embedded/logs/train").glob("*.benchmark.tsv")
    [row] = list(csv.DictReader(bench.open(), delimiter="\t"))
    assert float(row["s"]) > 0 and float(row["max_rss"]) > 0, row


def test_every_figure_and_table_in_the_report_has_its_caption(toy_results):
    root, reps = toy_results
    out = snakemake(root, reps, "--report", "report.html")
    html = (root / "report.html").read_text()
    added = sorted(line.split()[1] for line in out.splitlines() if line.startswith("Adding "))
    assert added == ["claims.csv", "claims.csv", "claims.png", "figA.png", "figT.png", "figT_paper.csv"], out
    captions = {  # one per report item: workflows/report/*.rst rendered with the job's wildcards and params
        "figA.png": "<strong>toy figA</strong>: t.\\nMirrors: Fig. 0 (curves)",
        "figT.png": "<strong>toy figT</strong>: t.\\nMirrors: Fig. 0 (table)",
        "figT_paper.csv": "<strong>toy figT, the paper's numbers beside ours</strong>",
        "toy/claims.csv": "<strong>toy: the paper's claims</strong> at the embedded scale",
        "claims.csv": "<strong>Every paper's claims</strong> at the embedded scale",
        "claims.png": "<strong>Every claim at a glance</strong> at the embedded scale",
    }
    for item, caption in captions.items():
        assert caption in html, f"no caption for {item}: {caption!r}"
    assert "re-run at the <strong>embedded</strong> scale" in html   # the report's front page


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
