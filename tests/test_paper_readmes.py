"""replications/<paper>/README.md is what workflows/paper_readme.py writes from that paper's
experiments.yaml (so it lists every figure, with its command, and every claim, and cannot go stale)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflows"))
from paper_readme import load, readme  # noqa: E402

PAPERS = sorted(p.parent for p in (ROOT / "replications").glob("*/experiments.yaml"))


@pytest.mark.parametrize("paper", PAPERS, ids=lambda p: p.name)
def test_the_readme_is_written_from_the_experiments_file(paper):
    spec = load(paper / "experiments.yaml")
    text = (paper / "README.md").read_text()
    assert text == readme(spec), f"{paper.name}/README.md is stale: run `python workflows/paper_readme.py`"
    for fig_id, fig in spec.figures.items():   # what the generator promises, checked on the file itself
        for scale in fig.scales:
            assert f"results/{scale}/{paper.name}/{fig_id}.png" in text
    for claim in spec.claims:
        assert f"| `{claim.id}` |" in text


def test_every_paper_has_one():
    assert {p.name for p in PAPERS} >= {"anil2018", "sodhani2020", "sun2016"}
