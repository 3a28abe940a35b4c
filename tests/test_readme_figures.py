"""The top README's list of figure ids per scale is what workflows/paper_readme.py writes from the
experiments files (so it cannot go stale), and it matches the committed embedded figures."""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflows"))
from paper_readme import BEGIN, END, figures_list, load, papers  # noqa: E402


def test_the_readme_figure_list_is_written_from_the_experiments_files():
    text = (ROOT / "README.md").read_text()
    block = BEGIN + text.split(BEGIN, 1)[1].split(END, 1)[0] + END
    assert block == figures_list([load(e) for e in papers()]), \
        "README.md's figure list is stale: run `python workflows/paper_readme.py`"


def test_the_embedded_figures_listed_are_the_committed_ones():
    block = (ROOT / "README.md").read_text().split(BEGIN, 1)[1].split(END, 1)[0]
    built = block.split("The embedded scale builds", 1)[1].split(".\n", 1)[0]
    listed = {(paper, fig) for part in built.split(":", 1)[1].split(";")
              for paper, figs in [part.strip().split(" ", 1)] for fig in re.findall(r"`(\w+)`", figs)}
    committed = {(p.parent.name, p.stem) for p in (ROOT / "results" / "embedded").glob("*/*.png")
                 if p.parent.name != "frontier"}
    assert listed == committed
    assert ("anil2018", "fig2b") not in listed and ("sun2016", "imagenet_speed") in listed
