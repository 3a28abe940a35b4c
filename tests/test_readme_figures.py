"""The top README's list of figure ids per scale is what workflows/paper_readme.py writes from the
experiments files (so it cannot go stale), and it matches the committed embedded figures."""
from __future__ import annotations

import re
from pathlib import Path

from workflows.paper_readme import BEGIN, END, figures_list, load, papers

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_figure_list_is_written_from_the_experiments_files():
    text = (ROOT / "README.md").read_text()
    block = BEGIN + text.split(BEGIN, 1)[1].split(END, 1)[0] + END
    assert block == figures_list([load(e) for e in papers()]), \
        "README.md's figure list is stale: run `python workflows/paper_readme.py`"


def listed(block: str, opening: str) -> set[tuple[str, str]]:
    """{(paper, figure)} of the sentence of the FIGURES block that starts with `opening`."""
    sentence = block.split(opening, 1)[1].split(".\n", 1)[0]
    return {(paper, fig) for part in sentence.split(":", 1)[1].split(";")
            for paper, figs in [part.strip().split(" ", 1)] for fig in re.findall(r"`(\w+)`", figs)}


def test_the_embedded_figures_listed_are_the_committed_ones():
    """Every default-tier figure is committed; a committed figure is of the default or the paper tier
    (the paper tier's are committed as far as they have been run)."""
    block = (ROOT / "README.md").read_text().split(BEGIN, 1)[1].split(END, 1)[0]
    default, paper = listed(block, "The embedded scale builds"), listed(block, "The paper tier")
    committed = {(p.parent.name, p.stem) for p in (ROOT / "results" / "embedded").glob("*/*.png")
                 if p.parent.name != "frontier"}
    assert default <= committed, f"default-tier figures not committed: {sorted(default - committed)}"
    assert committed <= default | paper, f"committed figures of no tier: {sorted(committed - default - paper)}"
    assert not default & paper
    assert ("anil2018", "fig2b") not in default | paper and ("sun2016", "cifar10_k4") in paper
