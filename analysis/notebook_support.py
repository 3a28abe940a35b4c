"""What the per-paper notebooks (analysis/notebooks/<paper>.py) share: find a paper's figures
under results/<scale>/<paper>/, recompute their tables and claims from the per-run tables and
curves the pipeline wrote, and check the recomputation against the committed claims table.

The notebooks import this module as `analysis.notebook_support` (the checkout's analysis/ package,
installed with codist), so they open in Jupyter and run headless (`jupytext --execute`, nbclient)
from any folder. Snakemake (rule
notebook) sets CODIST_RESULTS and CODIST_SCALE and writes the executed notebook beside the
figures; opened by hand they read this checkout's results/ at the embedded scale.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import yaml

from analysis.aggregate import series_means
from analysis.claims import evaluate
from analysis.paper_table import side_by_side


class PaperResults:
    def __init__(self, paper: str):
        self.root = Path(__file__).resolve().parents[1]   # the checkout this module is in
        self.scale = os.environ.get("CODIST_SCALE", "embedded")
        results = Path(os.environ.get("CODIST_RESULTS", self.root / "results"))
        self.paper = paper
        self.dir = results / self.scale / paper
        self.spec_file = self.root / "replications" / paper / "experiments.yaml"
        self.spec = yaml.safe_load(self.spec_file.read_text())

    def figures(self) -> list[str]:
        """The paper's figure ids that have results at this scale, in the spec's order."""
        return [f for f in self.spec["figures"] if (self.dir / f"{f}_runs.json").exists()]

    def manifest(self, figure: str) -> dict:
        return json.loads((self.dir / f"{figure}_runs.json").read_text())

    def series_table(self, figure: str) -> pd.DataFrame:
        """Mean over seeds per series of the headline metric, recomputed from the per-run table."""
        return series_means(pd.read_csv(self.dir / f"{figure}.csv"), self.manifest(figure)["series"])

    def paper_table(self, figure: str) -> pd.DataFrame:
        """A table figure's paper-vs-ours lines, recomputed from its per-seed values."""
        return side_by_side(self.manifest(figure), pd.read_csv(self.dir / f"{figure}_values.csv",
                                                              dtype={"seed": str}))

    def claims(self) -> pd.DataFrame:
        """The claims recomputed from the figures' tables (analysis/claims.py)."""
        return evaluate(self.spec_file, self.dir, self.scale)

    def check_claims(self, claims: pd.DataFrame) -> str:
        """Compare with the pipeline's claims.csv: the same verdicts and effects (to 1e-9)."""
        saved = pd.read_csv(self.dir / "claims.csv")
        if list(saved["id"]) != list(claims["id"]) or list(saved["verdict"]) != list(claims["verdict"]):
            raise AssertionError(f"{self.dir}/claims.csv differs from the recomputation: rerun snakemake")
        both = saved["effect_mean"].notna() & claims["effect_mean"].notna()
        if (saved["effect_mean"].notna() != claims["effect_mean"].notna()).any():
            raise AssertionError(f"{self.dir}/claims.csv has effects where the recomputation has none: rerun snakemake")
        diff = (saved["effect_mean"][both] - claims["effect_mean"][both]).abs().max() if both.any() else 0.0
        if diff > 1e-9:
            raise AssertionError(f"{self.dir}/claims.csv effects differ by {diff}: rerun snakemake")
        return f"claims.csv matches the recomputation ({len(claims)} claims)"

    # ------------------------------------------------------------ notebook cells
    def show_figures(self) -> None:
        """Each figure: title, its PNG (linked, not embedded) and its recomputed table."""
        from IPython.display import Markdown, display
        display(Markdown(f"Scale: **{self.scale}**; results: `{self.dir}`"))
        for fig in self.figures():
            m = self.manifest(fig)
            display(Markdown(f"### {fig}: {m['title']}\n\nMirrors {m.get('source', '')}. "
                             f"![{fig}]({self.link(self.dir / f'{fig}.png')})"))
            display(self.paper_table(fig) if m["kind"] == "table" else self.series_table(fig))

    @staticmethod
    def link(path: Path) -> str:
        """`path` relative to the working directory, which is the notebook's folder: Jupyter runs
        a notebook there, `jupytext --execute` in its output's (Snakemake's: beside the figures)."""
        return Path(os.path.relpath(path, Path.cwd())).as_posix()

    def show_claims(self) -> pd.DataFrame:
        """The recomputed claims, checked against the pipeline's claims.csv."""
        from IPython.display import display
        claims = self.claims()
        display(claims[["id", "claim", "basis", "measure", "n", "effect_mean", "interval_low", "interval_high",
                        "method", "rule", "regime", "reached", "verdict", "paper_value"]])
        print(self.check_claims(claims))
        return claims
