"""The top README's list of figure ids per scale is what workflows/paper_readme.py writes from the
experiments files (so it cannot go stale), and it matches the committed embedded figures."""
from __future__ import annotations

import re
from pathlib import Path

from analysis.schema import TIERS
from workflows.paper_readme import BEGIN, END, figures_list, load, papers

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_figure_list_is_written_from_the_experiments_files():
    text = (ROOT / "README.md").read_text()
    block = BEGIN + text.split(BEGIN, 1)[1].split(END, 1)[0] + END
    assert block == figures_list([load(e) for e in papers()]), \
        "README.md's figure list is stale: run `python workflows/paper_readme.py`"


def listed(block: str, opening: str) -> set[tuple[str, str]]:
    """{(paper, figure)} of the sentence of the FIGURES block that starts with `opening` (none when it
    lists none: a tier that holds no figure yet)."""
    sentence = block.split(opening, 1)[1].split(".\n", 1)[0]
    return {(paper, fig) for part in sentence.partition(":")[2].split(";") if part.strip()
            for paper, figs in [part.strip().split(" ", 1)] for fig in re.findall(r"`(\w+)`", figs)}


def test_the_embedded_figures_listed_are_the_committed_ones():
    """Every default-tier figure is committed; a committed figure is of the default tier or of another
    (paper, decisive: their figures are committed as far as they have been run); no figure is listed in
    two tiers."""
    block = (ROOT / "README.md").read_text().split(BEGIN, 1)[1].split(END, 1)[0]
    default = listed(block, "The embedded scale builds")
    others = {tier: listed(block, f"The {tier} tier") for tier in TIERS[1:]}
    tiered = default.union(*others.values())
    committed = {(p.parent.name, p.stem) for p in (ROOT / "results" / "embedded").glob("*/*.png")
                 if p.parent.name != "frontier"}
    assert default <= committed, f"default-tier figures not committed: {sorted(default - committed)}"
    assert committed <= tiered, f"committed figures of no tier: {sorted(committed - tiered)}"
    assert len(tiered) == len(default) + sum(map(len, others.values()))
    assert ("anil2018", "fig2b") not in tiered and ("sun2016", "cifar10_k4") in others["paper"]
