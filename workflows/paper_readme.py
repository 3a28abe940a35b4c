"""replications/<paper>/README.md from replications/<paper>/experiments.yaml: every figure (what it
mirrors, its runs per scale, the command that makes it) and every claim (what the paper says, on
which basis, and whether this scale tests it). The experiments file is the source; the README is
written from it, never by hand, so it cannot go stale (tests/test_paper_readmes.py). The same
files give the top README's list of figure ids per scale (between its FIGURES markers):

    python workflows/paper_readme.py            # rewrites every paper's README and that list
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from analysis import regime
from analysis.schema import TIERS, Paper, parse, tier_command

ROOT = Path(__file__).resolve().parents[1]

SCALE_COMMAND = {
    "embedded": "snakemake -c2 results/embedded/{paper}/{name}",
    "full": "snakemake --profile env/profiles/slurm results/full/{paper}/{name} --config scale=full",
}


def _one_line(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def figure_section(spec: Paper, fig_id: str) -> list[str]:
    fig = spec.figures[fig_id]
    out = [f"### `{fig_id}`: {_one_line(fig.title)}", "",
           f"Mirrors: {_one_line(fig.source) or 'the paper'} ({fig.kind})." + (f" {_one_line(fig.notes)}" if fig.notes else ""),
           ""]
    for scale, runs in fig.scales.items():
        series = ", ".join(f"`{s}`" for s in runs.series)
        base = f"preset `{runs.preset}`" if runs.preset else "its base config"
        out.append(f"- **{scale}**: {len(runs.series)} series x {len(runs.seeds)} seed(s) from {base}: {series}."
                   + (f" {_one_line(runs.notes)}" if runs.notes else ""))
    out += ["", "```bash"]
    for scale in fig.scales:
        # a figure of another tier is planned at the embedded scale only with its tier (workflows/experiments.py in_tier)
        tier = f" --config tier={fig.tier}" if scale == "embedded" and fig.tier != "default" else ""
        out.append(SCALE_COMMAND[scale].format(paper=spec.paper, name=f"{fig_id}.png") + tier)
    out += ["```", ""]
    return out


def claims_table(spec: Paper) -> list[str]:
    out = ["| id | claim | source | figure | basis | paper | at the embedded scale |",
           "|---|---|---|---|---|---|---|"]
    for c in spec.claims:
        if c.full_scale_only:
            tested = f"not tested: {_one_line(c.full_scale_only)}"
        elif "embedded" not in spec.figures[c.figure].scales:
            tested = f"not tested: `{c.figure}` has no embedded runs"
        else:
            checks = c.at("embedded").regime
            measured = [r for r in checks if not regime.is_design(r)]
            design = [r for r in checks if regime.is_design(r)]
            tested = ("tested" + (f", when the regime checks {', '.join(f'`{r.check}`' for r in measured)} are shown"
                                  if measured else "")
                      + (f"; design: {', '.join(f'`{r.check}`' for r in design)}" if design else ""))
        out.append(f"| `{c.id}` | {_one_line(c.claim)} | {_one_line(c.source)} | `{c.figure}` | {c.basis} "
                   f"| {_one_line(c.paper)} | {tested} |")
    return out


def readme(spec: Paper) -> str:
    p = spec.paper
    lines = [f"# {p}: {_one_line(spec.source)}", "",
             "<!-- Written by `python workflows/paper_readme.py` from experiments.yaml: edit that file, then rerun. -->",
             "",
             "What we run for each figure, at each scale, the paper's numbers with their sources, and the claims",
             "with their regime checks: [`experiments.yaml`](experiments.yaml). Outputs go to",
             f"`results/<scale>/{p}/` ([naming](../../docs/usage.md#naming)): `<figure>.png`, `.csv`, `.md`, `_curves.csv`, and for",
             "tables `_paper.csv` (the paper's numbers beside ours); the claims with their verdicts are",
             f"`results/<scale>/{p}/claims.md` ([embedded](../../results/embedded/{p}/claims.md)).",
             "",
             "Every figure of the paper at one scale, its claims table and its notebook:",
             "",
             "```bash",
             f"snakemake -c2 results/embedded/{p}/claims.md results/embedded/{p}/notebook.ipynb",
             "```", "",
             f"## Figures ({len(spec.figures)})", ""]
    for fig_id in spec.figures:
        lines += figure_section(spec, fig_id)
    lines += [f"## Claims ({len(spec.claims)})", "",
              "Each compares two series of one figure on the paper's basis ([comparison bases](../../docs/claims.md#comparison-bases));",
              "the verdict rule and the regime checks: [claims](../../docs/claims.md#claims-regime-checks-then-the-verdict-rule).", ""]
    lines += claims_table(spec)
    return "\n".join(lines) + "\n"


def load(experiments: Path) -> Paper:
    return parse(yaml.safe_load(experiments.read_text()), experiments)


BEGIN, END = "<!-- FIGURES: written by `python workflows/paper_readme.py` -->", "<!-- /FIGURES -->"


def figures_list(specs: list[Paper]) -> str:
    """The top README's figure ids: all of them (each at scale=full), then what the embedded scale
    builds, in the default tier and in each other tier (schema.TIERS: `make replicate TIER=<tier>`),
    one sentence each."""
    def ids(spec, scale=None, tier=None):
        return ", ".join(f"`{f}`" for f, fig in spec.figures.items()
                         if (scale is None or scale in fig.scales) and (tier is None or fig.tier == tier))

    def per_paper(tier):
        return "; ".join(f"{s.paper} {ids(s, 'embedded', tier)}" for s in specs if ids(s, "embedded", tier))

    def count(tier):
        return sum(1 for s in specs for fig in s.figures.values() if "embedded" in fig.scales and fig.tier == tier)
    every = "; ".join(f"{s.paper} {ids(s)}" for s in specs)
    full_only = "; ".join(f"{s.paper} " + ", ".join(f"`{f}`" for f, fig in s.figures.items()
                                                   if "embedded" not in fig.scales)
                          for s in specs if any("embedded" not in fig.scales for fig in s.figures.values()))
    at_full = ("all at `scale=full`" if all("full" in fig.scales for s in specs for fig in s.figures.values())
               else "at `scale=full`: " + "; ".join(f"{s.paper} {ids(s, 'full')}" for s in specs))
    return "\n".join([
        BEGIN,
        f"Figure ids: {every} ({at_full}). The embedded scale builds the {count('default')} of the "
        f"default tier: {per_paper('default')}.",
        *(f"The {tier} tier (`{tier_command(tier)}`) adds "
          + (f"{count(tier)}: {per_paper(tier)} (its time on 2 cores: [Tiers](docs/claims.md#tiers-and-fresh-seeds))."
             if count(tier) else "no figure yet.") for tier in TIERS[1:]),
        f"The others are full-scale only ({full_only}): their claims read \"not tested at this scale\" with the",
        "reason and what their regime would cost ([docs/claims.md](docs/claims.md#what-an-untested-regime-would-cost)),",
        "and asking for one at the embedded scale says so and names the command that makes it (a mistyped",
        "figure or paper: the closest known names).",
        END])


def readme_with_figures(text: str, specs: list[Paper]) -> str:
    """`text` (the top README) with its FIGURES block rewritten."""
    head, sep, rest = text.partition(BEGIN)
    if not sep or END not in rest:
        raise SystemExit(f"README.md: no {BEGIN} ... {END} block to write the figure list into")
    return head + figures_list(specs) + rest.split(END, 1)[1]


def papers() -> list[Path]:
    return sorted((ROOT / "replications").glob("*/experiments.yaml"))


def main() -> int:
    for experiments in papers():
        (experiments.parent / "README.md").write_text(readme(load(experiments)))
        print(f"wrote {experiments.parent / 'README.md'}")
    top = ROOT / "README.md"
    top.write_text(readme_with_figures(top.read_text(), [load(e) for e in papers()]))
    print(f"wrote the figure list of {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
