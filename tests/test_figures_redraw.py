"""`make figures` (workflows/figures.py) on a copy of the committed tables: every figure and claims
table of the plan redrawn by the real Snakefile and plotting scripts, every _paper table redrawn
from its committed _values.csv identical to the committed one, and no run planned or trained.
And a full-scale-only figure asked at the embedded scale: one line naming the command that makes it."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_workflow import ROOT, dry_run

sys.path.insert(0, str(ROOT / "workflows"))
import figures  # noqa: E402
from experiments import load_plan  # noqa: E402

COMMITTED = ROOT / "results" / "embedded"


@pytest.mark.slow   # 34 Snakemake jobs, each a Python process drawing one figure (~30 s of CPU)
def test_figures_are_redrawn_from_the_committed_tables_without_a_run(tmp_path):
    out = tmp_path / "results" / "embedded"
    # (runs/ and configs/ are git-ignored: a checkout that trained has them, the committed results do not)
    shutil.copytree(COMMITTED, out, ignore=shutil.ignore_patterns("*.png", "claims.csv", "claims.md", "*.ipynb",
                                                                  "*_paper.csv", "*_paper.md", "runs", "configs"))
    proc = subprocess.run(figures.command("results", 2, tmp_path), capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    stats = log.split("Job stats:", 1)[1].split("total", 1)[0]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", stats, re.M))
    assert set(jobs) <= set(figures.REDRAW_RULES) and "train" not in jobs, jobs
    assert not (out / "runs").exists() and not (out / "configs").exists()
    plan = load_plan(ROOT / "replications", "embedded")
    for paper, fig in plan.figures:
        assert (out / paper / f"{fig}.png").stat().st_size > 0, (paper, fig)
    for paper in {p for p, _ in plan.figures}:
        assert (out / paper / "claims.csv").exists() and (out / paper / "claims.md").exists()
    assert (out / "claims.md").exists()
    # every table figure's _paper tables, redrawn from its committed _values.csv, as committed
    tables = [(p, f) for p, f in plan.figures if plan.figure(p, f).kind == "table"]
    assert tables and int(jobs["paper_table_redraw"]) == len(tables), jobs
    for paper, fig in tables:
        for ext in ("_paper.csv", "_paper.md"):
            redrawn, committed = out / paper / f"{fig}{ext}", COMMITTED / paper / f"{fig}{ext}"
            assert redrawn.read_bytes() == committed.read_bytes(), (paper, fig, ext)
    assert (out / "frontier" / "image.png").exists() and (out / "frontier" / "lm.png").exists()


@pytest.mark.parametrize("paper, fig", [("anil2018", "fig2b"), ("sodhani2020", "fig6")])
def test_a_full_scale_only_figure_at_embedded_scale_names_its_command(tmp_path, paper, fig):
    rc, out, counts = dry_run(tmp_path, f"results/embedded/{paper}/{fig}.png")
    assert rc != 0 and not counts, out
    assert (f"results/embedded/{paper}/{fig}.png: {paper} {fig} is a full-scale figure only (no embedded runs); "
            f"it is made by `snakemake --profile env/profiles/slurm results/full/{paper}/{fig}.png --config scale=full`"
            in out), out
    assert "MissingRule" not in out


@pytest.mark.parametrize("target, message", [
    ("anil2018/fig2c.png", "anil2018 has no figure 'fig2c'; did you mean fig2b or fig2a or fig4?"),
    ("anil2018/tabel1_paper.csv", "anil2018 has no figure 'tabel1'; did you mean table1?"),
    ("anil2019/fig2a.csv", "no paper 'anil2019'; did you mean anil2018?"),
])
def test_a_mistyped_figure_or_paper_names_the_closest_known_ones(tmp_path, target, message):
    rc, out, counts = dry_run(tmp_path, f"results/embedded/{target}")
    assert rc != 0 and not counts, out
    assert f"results/embedded/{target}: {message}" in out, out
    assert "MissingRule" not in out
